"""NetPIPE 3.7.2: MPI latency and throughput curves per build, MPI library and placement.

Everything specific lives in data: build-recipes/netpipe.yaml (source, build,
placements, the curve and its derived figures), inputs/netpipe/<tier>/ and
reference/netpipe/<tier>.yaml. The MPI axis is the environment (gnu: Open MPI,
gnu-mpich: MPICH), as a site's modules would provide it.

    reframe -C site-config/settings.py -c reframe-checks/netpipe --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app, placements

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("netpipe")


class NetPIPESource(SourceFetch):
    """Fetch netpipe_3.7.2.orig.tar.gz once per session and check its sha256."""

    app = "netpipe"


class NetPIPEBuild(AppBuild):
    """Build NPmpi once per (environment, variant)."""

    app = "netpipe"
    source = fixture(NetPIPESource, scope="session")

    #: Build variant (flag ladder).
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class NetPIPECheck(AppRun):
    """Integrity pass, then the latency/throughput curve; figures derived from it."""

    app = "netpipe"

    #: Input tier: ``ci`` (1 B - 1 MiB) or ``nightly`` (1 B - 8 MiB, perturbed sizes).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    #: Rank placement: a named placement of the recipe's ``run.placements`` (bound, unbound),
    #: spelled for the partition's launcher.
    #: :type: str
    placement = parameter(placements(RECIPE), loggable=True)

    build = fixture(NetPIPEBuild, scope="environment")
