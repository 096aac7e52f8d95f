"""NWChem 7.0.2: SCF and DFT energies and gradients, per build variant, verified and timed.

Everything specific lives in data: build-recipes/nwchem.yaml (source, patch, template,
variants, tiers, figures), patches/nwchem/, inputs/nwchem/<tier>/,
reference/nwchem/<tier>.yaml (verified fields and tolerances from NWChem's QA rules).

    reframe -C site-config/settings.py -c reframe-checks/nwchem --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("nwchem")


class NWChemSource(SourceFetch):
    """Fetch nwchem_7.0.2.orig.tar.gz once per session and check its sha256."""

    app = "nwchem"


class NWChemBuild(AppBuild):
    """Build NWChem once per (environment, variant); every tier reuses it."""

    app = "nwchem"
    source = fixture(NWChemSource, scope="session")

    #: Build variant: a flag ladder plus library choices, e.g. ``tuned+blas=mkl``.
    #: Values: every variant named in build-recipes/nwchem.yaml ``tiers``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class NWChemCheck(AppRun):
    """Run NWChem on a tier's input; verify against reference/nwchem/<tier>.yaml."""

    app = "nwchem"

    #: Input tier: ``ci`` (QA h2o + dft_ozone, seconds on 2 ranks) or ``nightly``
    #: (33-atom siloxane cluster, RHF and B3LYP gradients).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(NWChemBuild, scope="environment")
