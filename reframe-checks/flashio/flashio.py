"""flashio 1.12.3: built per variant, verified and timed.

Everything specific lives in data: build-recipes/flashio.yaml (source, build, run,
figures, variants, tiers), inputs/flashio/<tier>/ and reference/flashio/<tier>.yaml
(verified fields and tolerances).

    reframe -C site-config/settings.py -c reframe-checks/flashio --mode ci -r
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("flashio")


class FlashioSource(SourceFetch):
    """Fetch flashio's source once per session and check it against its pin."""

    app = "flashio"


class FlashioBuild(AppBuild):
    """Build flashio once per (environment, variant); every tier reuses it."""

    app = "flashio"
    source = fixture(FlashioSource, scope="session")

    #: Build variant: a flag ladder plus library choices, e.g. ``tuned``.
    #: Values: every variant named in build-recipes/flashio.yaml ``tiers``.
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class FlashioCheck(AppRun):
    """Run flashio on a tier's input; verify against reference/flashio/<tier>.yaml."""

    app = "flashio"

    #: Input tier: the tiers of build-recipes/flashio.yaml (``ci``: the reduced input).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(FlashioBuild, scope="environment")
