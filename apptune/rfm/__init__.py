"""ReFrame base classes every application check derives from.

An application check is three short classes (see ``reframe-checks/hpcc/hpcc.py``):

* ``<App>Source(SourceFetch)``   session-scoped fixture: fetch + verify the tarball once;
* ``<App>Build(AppBuild)``       environment-scoped fixture, ``variant`` parameter:
                                 one build per (environment, variant), reused by every input;
* ``<App>Installed(InstalledBuild)`` for a recipe's ``installs`` (a distribution's build,
                                 a site's module): nothing compiled, its programs found;
* ``<App>Check(AppRun)``         the test: ``tier`` parameter selects the input,
                                 reference outputs and baselines.

All decisions (flags, libraries, patches, inputs, tolerances, thresholds) come
from the data folders; these classes only wire them into ReFrame's pipeline. A check file
imports from ReFrame and from this module only (the recipe's parameter values too:
``all_variants``, ``placements``, ...), so the package's insides can move without touching
a check written by ``apptune new``.

Two modules: :mod:`~apptune.rfm.fixtures` (the source, the build, the recipe loaded for
a check file) and :mod:`~apptune.rfm.check` (the test).
"""

from __future__ import annotations

from ..core.data.recipes import (
    all_variants,
    built_variants,
    installed_variants,
    placements,
    tiers_naming,
)
from .check import AppRun
from .fixtures import (
    AppBuild,
    DataProblems,
    SourceFetch,
    expected_build_failure,
    expected_wrong_result,
    load_app,
    missing_in_environment,
    selected_environment_patterns,
)
from .installed import InstalledBuild

__all__ = [
    "AppBuild",
    "AppRun",
    "DataProblems",
    "InstalledBuild",
    "SourceFetch",
    "all_variants",
    "built_variants",
    "expected_build_failure",
    "expected_wrong_result",
    "installed_variants",
    "load_app",
    "missing_in_environment",
    "placements",
    "selected_environment_patterns",
    "tiers_naming",
]
