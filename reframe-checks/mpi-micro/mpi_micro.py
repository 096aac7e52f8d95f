"""mpi-micro: the project's own MPI micro-benchmarks per build, MPI library and binding.

Everything specific lives in data: src/mpi-micro/ (the benchmarks), build-recipes/
mpi-micro.yaml (build, noise-kernel axis, placements, the summary and the curves with
their figures), inputs/mpi-micro/<tier>/ and reference/mpi-micro/<tier>.yaml (the data
checks and checksums). The MPI axis is the environment (gnu: Open MPI, gnu-mpich: MPICH).

    reframe -C site-config/settings.py -c reframe-checks/mpi-micro --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app, placements

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("mpi-micro")


class MPIMicroSource(SourceFetch):
    """Pack src/mpi-micro into its content-addressed tarball once per session."""

    app = "mpi-micro"


class MPIMicroBuild(AppBuild):
    """Build mpi-micro once per (environment, variant)."""

    app = "mpi-micro"
    source = fixture(MPIMicroSource, scope="session")

    #: Build variant: flag ladder, optionally ``+noise=c`` (the C noise kernel instead of
    #: the Fortran 2008 one).
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class MPIMicroCheck(AppRun):
    """All six benchmarks in one run; each checks its received data, figures and curves."""

    app = "mpi-micro"

    #: Input tier: ``ci`` (short timed loops, ~20-40 s on 2 ranks) or ``nightly``.
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    #: Rank binding: a named placement of the recipe's ``run.placements`` (bound, unbound),
    #: spelled for the partition's launcher.
    #: :type: str
    placement = parameter(placements(RECIPE), loggable=True)

    build = fixture(MPIMicroBuild, scope="environment")
