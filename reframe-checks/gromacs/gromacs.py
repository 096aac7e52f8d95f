"""GROMACS 2022.5: MD with PME per build variant, verified by GROMACS's own regression tests.

Everything specific lives in data: build-recipes/gromacs.yaml (source and its regression-test
component, the install of Debian's packages, CMake build, SIMD and FFT axes, the regression
tests' steps, figures), inputs/gromacs/<tier>/, reference/gromacs/<tier>.yaml (one field per
test and quantity, with gmxtest.pl's tolerance).

    reframe -C site-config/settings.py -c reframe-checks/gromacs --mode ci -r

Two kinds of build, two test classes: ``GromacsInstalledCheck`` runs the distribution's build
(``InstalledBuild``: Debian's gmx_mpi, nothing compiled, the regression tests from the
source's component) on the tiers that name it, the ci tier's among them; ``GromacsCheck`` runs
the builds of the orig tarball (``AppBuild``) on the tiers that name one, the nightly's.

    apptune run --mode nightly --app gromacs
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
RECIPE = load_app("gromacs")


class GromacsInstalled(InstalledBuild):
    """The distribution's build (Debian's gmx_mpi) with the regression tests' data unpacked
    from the source's regressiontests component: nothing compiled."""

    app = "gromacs"

    #: Install of the recipe (``installs``), e.g. ``debian``.
    #: :type: str
    variant = parameter(installed_variants(RECIPE), loggable=True)


@rfm.simple_test
class GromacsInstalledCheck(AppRun):
    """Run GROMACS's regression tests of a tier and the benchmark mdrun with the
    distribution's build; verify against reference/gromacs/<tier>.yaml."""

    app = "gromacs"

    #: Input tier: the tiers that name an install (``ci``: three regression tests with PME,
    #: constraints and virtual sites, seconds each, and a short mdrun of nbnxn_pme).
    #: :type: str
    tier = parameter(tiers_naming(RECIPE, installed_variants(RECIPE)), loggable=True)

    build = fixture(GromacsInstalled, scope="environment")


class GromacsSource(SourceFetch):
    """Fetch the GROMACS orig tarball and its regressiontests component once per session."""

    app = "gromacs"


class GromacsBuild(AppBuild):
    """Build gmx_mpi once per (environment, variant); every tier reuses it."""

    app = "gromacs"
    source = fixture(GromacsSource, scope="session")

    #: Build variant: a flag ladder plus the SIMD level and FFT library, e.g.
    #: ``tuned+simd=None``. Values: every variant built from the tarball that
    #: build-recipes/gromacs.yaml ``tiers`` names.
    #: :type: str
    variant = parameter(built_variants(RECIPE), loggable=True)


@rfm.simple_test
class GromacsCheck(AppRun):
    """Run GROMACS's regression tests of a tier and the benchmark mdrun with a build of the
    orig tarball; verify against reference/gromacs/<tier>.yaml."""

    app = "gromacs"

    #: Input tier: the tiers that name a build of the tarball (``nightly``: the same
    #: regression tests, the measured mdrun on a 28 800-atom box).
    #: :type: str
    tier = parameter(tiers_naming(RECIPE, built_variants(RECIPE)), loggable=True)

    build = fixture(GromacsBuild, scope="environment")
