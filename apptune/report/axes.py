"""The build axes side by side: for each axis of a recipe (the SIMD level, the FFT library, a
kernel, ...) the variants of a run that differ in that axis alone, each option's figures
with their ratio to the recipe's default option, the effect of one choice measured with
everything else held (the studies' FFTE -> FFTW lesson, one table per axis).

A variant names only the axes it changes (``tuned+fft=fftpack``); the others take the
recipe's ``defaults``, so ``tuned`` is the default option of every axis. Only verified runs
get a ratio (a wrong answer computed faster is no speed-up), and only against a verified
run of the default option (else the first option that verified); an option that was skipped
(a SIMD level the CPU cannot run) is listed as not measured, with the reason.
"""

from __future__ import annotations

import re

from ..core.data import recipes
from ..errors import ApptuneError
from .values import number_or_none, variant_key

#: The build variant of a skipped test case, from its display name.
_VARIANT = re.compile(r"%(?:build\.)?variant=(\S+)")


def _split(variant: str, recipe) -> tuple[str, dict[str, str], str] | None:
    """(ladder, every axis's option, runtime labels) of a run's variant; None for an install
    (it has no axes) or a name the recipe cannot parse."""
    build, sep, labels = variant.partition("@")
    try:
        v = recipes.Variant.parse(build, recipe)
    except ApptuneError:
        return None
    if v.ladder in recipe.installs:
        return None
    chosen = {a: recipe.defaults.get(a, "environment") for a in recipe.axes}
    chosen.update(dict(v.choices))
    return v.ladder, chosen, sep + labels


def _context(recipe, env: str, ladder: str, chosen: dict, axis: str, labels: str) -> str:
    """The variant with the axis left out, in the recipe's words (the other axes' options
    where they are not the default): what the options of one table share."""
    others = "".join(
        f"+{a}={o}"
        for a, o in sorted(chosen.items())
        if a != axis and o != recipe.defaults.get(a, "environment")
    )
    return f"{env}/{ladder}{others}{labels}"


def _ratio(x, x0, better: str) -> float | None:
    x, x0 = number_or_none(x), number_or_none(x0)
    if not x or not x0:
        return None
    return x / x0 if better == "higher" else x0 / x


def axis_tables(apps: list[dict], skipped: list[dict] = ()) -> list[dict]:
    """One table per application, tier, axis and context (environment, ladder, the other
    axes' options, placement) in which runs of more than one option of the axis ran or were
    skipped: its columns the options (the default first), with the matrix's figures and their
    ratios to the reference column."""
    out = []
    for a in apps:
        try:
            recipe = recipes.load_recipe(a["app"])
        except ApptuneError:
            continue
        if not recipe.axes:
            continue
        groups: dict[tuple[str, str], dict] = {}
        for r in a["rows"]:
            parts = _split(r.variant, recipe)
            if parts is None:
                continue
            ladder, chosen, labels = parts
            for axis in recipe.axes:
                g = groups.setdefault(
                    (axis, _context(recipe, r.environment, ladder, chosen, axis, labels)),
                    {"runs": {}, "not_measured": {}},
                )
                g["runs"][chosen[axis]] = r
        for s in skipped:
            m = _VARIANT.search(s.get("test") or "")
            if s.get("app") != a["app"] or s.get("tier") != a["tier"] or not m:
                continue
            parts = _split(m[1], recipe)
            if parts is None:
                continue
            ladder, chosen, labels = parts
            for axis in recipe.axes:
                key = (
                    axis,
                    _context(recipe, s.get("environment") or "", ladder, chosen, axis, labels),
                )
                if key in groups:
                    groups[key]["not_measured"].setdefault(chosen[axis], s.get("reason") or "")
        for (axis, context), g in sorted(groups.items()):
            options = set(g["runs"]) | set(g["not_measured"])
            if len(options) > 1:
                out.append(_table(a, recipe, axis, context, g))
    return out


def _table(a: dict, recipe, axis: str, context: str, g: dict) -> dict:
    default = recipe.defaults.get(axis, "environment")
    order = [default, *recipe.axes[axis], "environment"]
    options = sorted(
        set(g["runs"]) | set(g["not_measured"]),
        key=lambda o: order.index(o) if o in order else len(order),
    )
    verified = [o for o in options if o in g["runs"] and g["runs"][o].verified]
    ref = default if default in verified else next(iter(verified), None)
    better = a.get("better") or {}
    columns = []
    for o in options:
        r = g["runs"].get(o)
        if r is None:
            columns.append({"option": o, "not_measured": g["not_measured"][o]})
            continue
        col = {
            "option": o,
            "variant": variant_key(r),
            "verified": r.verified,
            "disturbed": bool(r.quality and r.quality.grade != "clean"),
            "figures": {n: r.figures.get(n) for n in a["figures"]},
            "ratios": {},
        }
        if r.verified and ref is not None:
            base = g["runs"][ref].figures
            for n in a["figures"]:
                x = _ratio(r.figures.get(n), base.get(n), better.get(n, "higher"))
                if x is not None:
                    col["ratios"][n] = x
        columns.append(col)
    return {
        "app": a["app"],
        "tier": a["tier"],
        "axis": axis,
        "context": context,
        "default": default,
        "reference": ref,
        "primary": a.get("primary"),
        "figures": list(a["figures"]),
        "units": a.get("units") or {},
        "better": better,
        "modelled": list(a.get("modelled") or []),
        "columns": columns,
    }
