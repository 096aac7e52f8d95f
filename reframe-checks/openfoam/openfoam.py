"""OpenFOAM v1912 interFoam on the damBreak tutorial: the distribution's build and builds of
the orig tarball, serial and on MPI ranks, verified by the physics' invariants and a blessed
reference.

Everything specific lives in data: build-recipes/openfoam.yaml (the install of Debian's
packages, the wmake build, tiers, figures), inputs/openfoam/<tier>/ (the case) and
reference/openfoam/<tier>.yaml (invariants and blessed quantities with their tolerances).

    reframe -C site-config/settings.py -c reframe-checks/openfoam --mode ci -r

Two kinds of build, two test classes: ``OpenFOAMInstalledCheck`` runs the distribution's
build (``InstalledBuild``: nothing compiled) on every tier; ``OpenFOAMCheck`` runs the
builds of the orig tarball (``AppBuild``: wmake, hours on 2 cores, then the build cache) on
the tiers that name one, the nightly's. Each class's ``tier`` lists only the tiers that
name a variant of its own kind, so that neither has a test case without an environment.

    apptune run --mode nightly -c reframe-checks/openfoam
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import (
    AppBuild,
    AppRun,
    InstalledBuild,
    SourceFetch,
    built_variants,
    installed_variants,
    load_app,
    tiers_naming,
)

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
    tier = parameter(tiers_naming(RECIPE, installed_variants(RECIPE)), loggable=True)

    build = fixture(OpenFOAMInstalled, scope="environment")


class OpenFOAMSource(SourceFetch):
    """Fetch openfoam_1912.200626.orig.tar.bz2 once per session and check its sha256."""

    app = "openfoam"


class OpenFOAMBuild(AppBuild):
    """Build the libraries and applications damBreak needs with wmake, once per (environment,
    variant); its install tree (libraries, ``etc/``) is kept beside the programs."""

    app = "openfoam"
    source = fixture(OpenFOAMSource, scope="session")

    #: Build variant: a flag ladder (``tuned``), ``+exceptions=none`` for the
    #: ``-fno-exceptions`` patch.
    #: :type: str
    variant = parameter(built_variants(RECIPE), loggable=True)


@rfm.simple_test
class OpenFOAMCheck(AppRun):
    """damBreakFine with a build of the orig tarball: serial, then on the tier's ranks."""

    app = "openfoam"

    #: Input tier: the tiers that name a build of the tarball (``nightly``: damBreakFine).
    #: :type: str
    tier = parameter(tiers_naming(RECIPE, built_variants(RECIPE)), loggable=True)

    build = fixture(OpenFOAMBuild, scope="environment")
