"""Quantum ESPRESSO 6.7 pw.x: SCF energy, forces and stress per build variant, verified and timed.

Everything specific lives in data: build-recipes/qe.yaml (source, make.inc template,
staged build, variants, expected failures, figures), inputs/qe/<tier>/,
reference/qe/<tier>.yaml (QE's own test-suite tolerances) and
reference/baselines/<system>/qe.yaml (performance baselines).

    reframe -C site-config/settings.py -c reframe-checks/qe --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("qe")


class QESource(SourceFetch):
    """Fetch espresso_6.7.orig.tar.gz (103 MB) once per session and check its sha256."""

    app = "qe"


class QEBuild(AppBuild):
    """Build pw.x once per (environment, variant); every tier reuses it."""

    app = "qe"
    source = fixture(QESource, scope="session")

    #: Build variant: a flag ladder plus library choices, e.g. ``tuned+fft=internal``.
    #: Values: every variant named in build-recipes/qe.yaml ``tiers``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class QECheck(AppRun):
    """Run pw.x on a tier's input; verify against reference/qe/<tier>.yaml."""

    app = "qe"

    #: Input tier: ``ci`` (QE test-suite pw_scf, < 1 s) or ``nightly`` (64-atom Si cell).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(QEBuild, scope="environment")
