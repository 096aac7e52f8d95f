"""npb: the NAS Parallel Benchmarks kernels EP, CG, MG, FT and IS, written from the NAS
specification, per build variant and input tier (class S on ci, class A nightly).

Everything specific lives in data: src/npb/ (the kernels), build-recipes/npb.yaml (build,
the planted-bug axis, the summary and its figures), inputs/npb/<tier>/ and
reference/npb/<tier>.yaml (the specification's published values and tolerances).

    reframe -C site-config/settings.py -c reframe-checks/npb --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("npb")


class NPBSource(SourceFetch):
    """Pack src/npb into its content-addressed tarball once per session."""

    app = "npb"


class NPBBuild(AppBuild):
    """Build npb once per (environment, variant)."""

    app = "npb"
    source = fixture(NPBSource, scope="session")

    #: Build variant: flag ladder, optionally ``+seed=planted`` (the planted wrong seed).
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class NPBCheck(AppRun):
    """The five kernels in one run, each verified against the specification's values."""

    app = "npb"

    #: Input tier: ``ci`` (class S, about a second on 2 ranks) or ``nightly`` (class A).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(NPBBuild, scope="environment")
