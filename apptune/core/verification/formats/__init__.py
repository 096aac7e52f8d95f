"""The output formats a recipe's ``run.output`` reads, one module each: the format names
it reads (``NAMES``), the fields a spec of it gives, known before a run (``fields(spec,
recipe)``: names or shell patterns; None when not known), how it reads a run's file
(``parse(spec, path, tier)``) and, where a spec can be incomplete beyond its schema, the
problem (``spec_problem(spec, recipe)``: the spec's field and one line).
:mod:`apptune.core.verification.outputs` parses with them and ``apptune validate`` checks the
figures' and the references' fields against them, so that a misspelled one is one line before the
build, not a missing field after the run. A new format is a new module here, listed in
:data:`MODULES` (and its name in the schema's ``OutputSpec.format``)."""

from __future__ import annotations

import difflib
from fnmatch import fnmatchcase
from pathlib import Path
from types import ModuleType

from ....errors import ApptuneError
from ....models import OutputSpec, Recipe
from . import curve, gmx, keyvalue, newick_rf, regex

MODULES: tuple[ModuleType, ...] = (keyvalue, regex, newick_rf, curve, gmx)

#: format name -> the module that reads it.
FORMATS: dict[str, ModuleType] = {name: m for m in MODULES for name in m.NAMES}


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
    """The fields of one output file, read by its format's module."""
    return FORMATS[spec.format].parse(spec, path, tier)


def recipe_fields(recipe: Recipe) -> set[str] | None:
    """The field names the recipe's outputs can produce, some as shell patterns (a
    ``keyvalue`` output's ``keys``, the scratch checksums' ``NAME.*.KEY``); None when that
    is not known before a run (a problem of :func:`recipe_problems`)."""
    names: set[str] = set()
    for o in recipe.run.outputs:
        got = FORMATS[o.format].fields(o, recipe)
        if got is None:
            return None
        names |= got
    return names


def produces(produced: set[str], field: str) -> bool:
    """Whether ``field`` is one of the fields :func:`recipe_fields` gives (a name or a
    match of one of its patterns)."""
    return field in produced or any(fnmatchcase(field, p) for p in produced)


def gives(produced: set[str], field: str) -> str:
    """What the outputs give, said to someone who wrote ``field``: every name when they are
    few, else their number and the names closest to it."""
    if len(produced) <= 12:
        return f"run.output gives: {', '.join(sorted(produced)) or 'nothing'}"
    close = difflib.get_close_matches(field, sorted(produced), n=3, cutoff=0.6)
    return f"run.output gives {len(produced)} fields" + (
        f"; the closest: {', '.join(close)}" if close else ""
    )


def recipe_problems(r: Recipe, rfile: Path) -> list[ApptuneError]:
    """Each output spec's own problem (a ``keyvalue`` output listing no keys); each
    figure's ``field``, ``per`` and ``timed_over`` is a field an output produces."""
    found = []
    for i, o in enumerate(r.run.outputs):
        check = getattr(FORMATS[o.format], "spec_problem", None)
        problem = check(o, r) if check else None
        if problem:
            where = "run.output" if len(r.run.outputs) == 1 else f"run.output[{i}]"
            found.append(ApptuneError(rfile, f"{where}.{problem[0]}", problem[1]))
    produced = recipe_fields(r)
    for name, fig in r.run.figures.items() if produced is not None else ():
        for key in ("field", "per", "timed_over"):
            v = getattr(fig, key)
            if v is not None and not produces(produced, v):
                found.append(
                    ApptuneError(
                        rfile,
                        f"run.figures.{name}.{key}",
                        f"'{v}': no output produces this field ({gives(produced, v)})",
                    )
                )
    return found
