"""Selecting part of a run by name: applications, environments, variants, placements.

``apptune run --app hpcc --env gnu --variant tuned --placement bound`` becomes ReFrame's own
options (``-c`` per application, ``-p`` for the environments, one ``-n`` whose look-aheads
require every other choice: several values of one option are alternatives, different
options must all hold). Every name is checked against what exists first: a selection that
could match nothing is refused with one line listing the names there are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import ApptuneError
from . import recipes


@dataclass
class Selection:
    apps: list[str] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    placements: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.apps or self.envs or self.variants or self.placements)


def _known(option: str, given: list[str], known: list[str], what: str) -> None:
    bad = [g for g in given if g not in known]
    if bad:
        raise ApptuneError(
            None,
            option,
            f"{', '.join(repr(b) for b in bad)}: no such {what} "
            f"(there are: {', '.join(known) or 'none'})",
        )


def _alternatives(values: list[str]) -> str:
    return "(?:" + "|".join(re.escape(v) for v in values) + ")"


def reframe_options(sel: Selection, environments: list[str] | None) -> tuple[list[str], list[str]]:
    """(check paths, ReFrame options) for a selection; ``environments``: the site config's
    environment names (None: not checked)."""
    names = recipes.list_recipes()
    _known("--app", sel.apps, names, "application (a recipe in build-recipes/)")
    apps = sel.apps or names
    if environments is not None:
        _known("--env", sel.envs, sorted(environments), "environment in the site config")
    loaded = [recipes.load_recipe(a) for a in apps]
    variants = sorted({v for r in loaded for v in recipes.all_variants(r)})
    _known("--variant", sel.variants, variants, f"variant of {', '.join(apps)}")
    placements = sorted({p for r in loaded for p in r.run.placements})
    _known("--placement", sel.placements, placements, f"placement of {', '.join(apps)}")
    checks = [f"reframe-checks/{a}" for a in sel.apps]
    opts: list[str] = []
    if sel.envs:
        opts += ["-p", f"^{_alternatives(sel.envs)}$"]
    ahead = []
    if sel.variants:
        ahead.append(f"(?=.*%build\\.variant={_alternatives(sel.variants)}(?:%|$))")
    if sel.placements:
        ahead.append(f"(?=.*%placement={_alternatives(sel.placements)}(?:%|$))")
    if ahead:
        opts += ["-n", "^" + "".join(ahead)]
    return checks, opts
