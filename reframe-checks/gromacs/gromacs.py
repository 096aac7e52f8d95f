"""GROMACS 2022.5: MD with PME per build variant, verified by GROMACS's own regression tests.

Everything specific lives in data: build-recipes/gromacs.yaml (source and its regression-test
component, CMake build, SIMD and FFT axes, the regression tests' steps, figures),
inputs/gromacs/<tier>/, reference/gromacs/<tier>.yaml (one field per test and quantity, with
gmxtest.pl's tolerance).

    reframe -C site-config/settings.py -c reframe-checks/gromacs --mode dev -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.core.recipes import all_variants
from apptune.rfm import AppBuild, AppRun, SourceFetch, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("gromacs")


class GromacsSource(SourceFetch):
    """Fetch the GROMACS orig tarball and its regressiontests component once per session."""

    app = "gromacs"


class GromacsBuild(AppBuild):
    """Build gmx_mpi once per (environment, variant); every tier reuses it."""

    app = "gromacs"
    source = fixture(GromacsSource, scope="session")

    #: Build variant: a flag ladder plus the SIMD level and FFT library, e.g.
    #: ``tuned+simd=None``. Values: every variant named in build-recipes/gromacs.yaml ``tiers``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class GromacsCheck(AppRun):
    """Run GROMACS's regression tests of a tier and the benchmark mdrun; verify against
    reference/gromacs/<tier>.yaml."""

    app = "gromacs"

    #: Input tier: ``ci`` (three regression tests with PME, constraints and virtual sites,
    #: seconds each, and a short mdrun of nbnxn_pme).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(GromacsBuild, scope="environment")
