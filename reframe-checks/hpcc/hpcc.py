"""HPC Challenge 1.5.0: every HPCC figure, per build variant, verified and timed.

Everything specific lives in data: build-recipes/hpcc.yaml (source, patches,
variants, tiers, figures), patches/hpcc/, inputs/hpcc/<tier>/,
reference/hpcc/<tier>.yaml (verified fields and tolerances) and
reference/baselines/<system>/hpcc.yaml (performance baselines).

    reframe -C site-config/settings.py -c reframe-checks/hpcc --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("hpcc")


class HPCCSource(SourceFetch):
    """Fetch hpcc_1.5.0.orig.tar.gz once per session and check its sha256."""

    app = "hpcc"


class HPCCBuild(AppBuild):
    """Build HPCC once per (environment, variant); every tier reuses it."""

    app = "hpcc"
    source = fixture(HPCCSource, scope="session")

    #: Build variant: a flag ladder plus library choices, e.g. ``tuned+fft=fftw3``.
    #: Values: every variant named in build-recipes/hpcc.yaml ``tiers``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class HPCCCheck(AppRun):
    """Run HPCC on a tier's input; verify against reference/hpcc/<tier>.yaml."""

    app = "hpcc"

    #: Input tier: ``ci`` (reduced, < 30 s on 2 ranks) or ``nightly`` (N from node memory).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(HPCCBuild, scope="environment")
