"""OpenFOAM v1912 interFoam on the damBreak tutorial: the distribution's build and builds of
the orig tarball, serial and on MPI ranks, verified by the physics' invariants and a blessed
reference.

Everything specific lives in data: build-recipes/openfoam.yaml (the install of Debian's
packages, the wmake build, tiers, figures), inputs/openfoam/<tier>/ (the case) and
reference/openfoam/<tier>.yaml (invariants and blessed quantities with their tolerances).

    reframe -C site-config/settings.py -c reframe-checks/openfoam --mode ci -r

The tiers name only the distribution's build so far. A tier that names a build of the
tarball (``gnu: [tuned]``) needs the source, build and test classes every other check has
(``SourceFetch``, ``AppBuild`` with ``built_variants(RECIPE)``, ``AppRun``) beside these.
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.recipes import installed_variants
from apptune.rfm import AppRun, InstalledBuild, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("openfoam")


class OpenFOAMInstalled(InstalledBuild):
    """The distribution's build (Debian's packages) or a site's module: nothing compiled."""

    app = "openfoam"

    #: Install of the recipe (``installs``), e.g. ``debian``.
    #: :type: str
    variant = parameter(installed_variants(RECIPE), loggable=True)


@rfm.simple_test
class OpenFOAMInstalledCheck(AppRun):
    """damBreak with the distribution's build: serial, then on the tier's ranks."""

    app = "openfoam"

    #: Input tier: ``ci`` (damBreak), ``planted`` (a planted fault), ``nightly`` (damBreakFine).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(OpenFOAMInstalled, scope="environment")
