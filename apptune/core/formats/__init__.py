"""What a recipe's outputs can give, known before a run: the fields of every output spec
(``run.output``), against which ``apptune validate`` checks the figures' and the
references' fields, so that a misspelled one is one line before the build, not a missing
field after the run."""

from __future__ import annotations

import difflib
from fnmatch import fnmatchcase
from pathlib import Path

from ...errors import ApptuneError
from ...models import Recipe
from .. import scratch


def _sums_file(recipe: Recipe) -> str | None:
    """The ``keyvalue`` file the scratch checksums are written to (``run.scratch``)."""
    return recipe.run.scratch.sums_file if recipe.run.scratch is not None else None


def recipe_fields(recipe: Recipe) -> set[str] | None:
    """The field names the recipe's outputs can produce, some as shell patterns (a
    ``keyvalue`` output's ``keys``, the scratch checksums' ``NAME.*.KEY``); None when that
    is not known before a run (a ``keyvalue`` output listing no keys, a problem of
    :func:`recipe_problems`)."""
    names: set[str] = set()
    sums = _sums_file(recipe)
    for o in recipe.run.outputs:
        if o.format == "keyvalue" and o.file == sums and not o.keys:
            names |= set(scratch.sum_fields(recipe.run.scratch.files))
        elif o.format == "keyvalue":
            if not o.keys:
                return None
            names |= set(o.keys)
        elif o.format == "regex":
            names |= set(o.patterns)
        elif o.format == "newick_rf":
            names.add(o.field)
        elif o.format == "curve":
            names |= set(o.derived)
        elif o.format == "gmx_mdlog":
            from ..gmx import MDLOG_FIELDS

            names |= set(MDLOG_FIELDS)
        elif o.format.startswith("gmx_check"):
            names.add(o.field)
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
    """A ``keyvalue`` output lists the keys figures and references read (but the scratch
    checksums, whose keys the scratch files give); each figure's ``field``, ``per`` and
    ``timed_over`` is a field an output produces."""
    found = []
    sums = _sums_file(r)
    for i, o in enumerate(r.run.outputs):
        if o.format == "keyvalue" and not o.keys and o.file != sums:
            where = "run.output.keys" if len(r.run.outputs) == 1 else f"run.output[{i}].keys"
            found.append(
                ApptuneError(
                    rfile,
                    where,
                    f"the keys of {o.file} that figures and references read are not listed "
                    "(names or shell patterns such as '*_errors')",
                )
            )
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
