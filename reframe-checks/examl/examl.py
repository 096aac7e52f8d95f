"""ExaML 3.0.22 (RAxML family): tree search per kernel build and flag ladder, verified.

Everything specific lives in data: build-recipes/examl.yaml (source, kernel axis,
the per-file -O1 rule for models.c, tiers, figures), inputs/examl/<tier>/,
reference/examl/<tier>.yaml (log-likelihood tolerance, RF distance) and
reference/examl/<tier>.tree (the stored best tree).

    reframe -C site-config/settings.py -c reframe-checks/examl --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("examl")


class ExaMLSource(SourceFetch):
    """Fetch examl_3.0.22.orig.tar.gz once per session and check its sha256."""

    app = "examl"


class ExaMLBuild(AppBuild):
    """Build ExaML (and parse-examl) once per (environment, variant)."""

    app = "examl"
    source = fixture(ExaMLSource, scope="session")

    #: Build variant: a flag ladder plus the kernel build, e.g. ``tuned+kernel=sse3``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class ExaMLCheck(AppRun):
    """Parse the alignment, search the tree; verify log-likelihood and topology."""

    app = "examl"

    #: Input tier: ``ci`` (testData/49) or ``nightly`` (testData/140).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(ExaMLBuild, scope="environment")
