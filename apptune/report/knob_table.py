"""The machine knobs of a run side by side: for each knob (CPU frequency, SMT, turbo) that a
run asked for, each variant's time, energy and primary figure at every setting, with their
ratio to the node's own setting (the same variant run without the knob), and each setting
that was asked for and not measured, with the node's reason (:mod:`apptune.core.run.knobs`).

Only what ran is shown as measured: a setting the node could not set, or that was not in
effect, is "not measured" with its one line; energy keeps its grade, so a ratio of
modelled joules is labelled modelled (it follows time and load, not the power the
setting drew).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..core.run import knobs
from ..models import KnobsObserved
from .values import number_or_none, variant_key

if TYPE_CHECKING:
    from .row import Row

#: A knob's line in a skip reason (apptune.core.run.knobs.unavailable and problems), up to the next.
_LINE = re.compile(
    r"(?P<knob>cpu_freq|smt|turbo)=(?P<value>\S+): not (?:set|in effect): .*?"
    r"(?=; (?:cpu_freq|smt|turbo)=\S+: not |$)"
)
#: The order of the settings of a knob, after the node's own: fastest clock first.
_ORDER = {"high": 0, "highm1": 1, "medium": 2, "low": 3, "on": 0, "off": 1}
DEFAULT = "node's own setting"


def knob_lines(reason: str) -> dict[tuple[str, str], str]:
    """{(knob, value): its line} of the knobs a skip reason says were not set or not in effect."""
    return {(m["knob"], m["value"]): m.group(0) for m in _LINE.finditer(reason or "")}


def _setting_order(knob: str, value: str) -> tuple:
    if knob == "cpu_freq" and value.isdigit():
        return (0, -int(value), value)
    return (1, _ORDER.get(value, 9), value)


def _label(knob: str, value: str | None) -> str:
    return DEFAULT if value is None else f"{knobs.LABELS[knob]}={value}"


def _in_effect(knob: str, row: Row, value: str | None) -> str:
    """What was in effect, as measured: the frequency of the ranks' CPUs (of the node for
    the node's own setting), the turbo switch; a run with a knob asked ran only where it was
    in effect (the check skips it otherwise)."""
    k = row.knobs  # the run record's typed part (RunKnobs), None without knobs
    seen = (k.observed if k else None) or KnobsObserved()
    if knob == "cpu_freq":
        f = seen.frequency
        if f and f.median_mhz is not None:
            return f"{f.median_mhz:g} MHz measured (median on CPUs {f.cpus})"
        span = row.quality.freq_mhz if row.quality else None
        if span:
            lo, hi = span
            return f"{lo:g}–{hi:g} MHz measured on the node" if lo != hi else f"{lo:g} MHz measured"
        return "frequency not measured"
    if knob == "turbo" and seen.boost:
        return f"turbo {'on' if seen.boost.on else 'off'} ({seen.boost.path})"
    return "the node's own" if value is None else "in effect (checked after the run)"


def _asked(row: Row) -> dict:
    k = row.knobs
    return k.asked.given() if k else {}


def knob_tables(apps: list[dict], skipped: list[dict]) -> list[dict]:
    """One table per application, tier, knob and variant that asked for the knob: its
    columns (the node's own setting first where it ran, then each setting asked for) with
    the figures, their ratios to the reference column and the energy's grade, or why the
    setting was not measured."""
    groups: dict[tuple, dict] = {}

    def group(app, tier, knob, env, variant, asked):
        other = tuple(sorted((k, v) for k, v in asked.items() if k != knob))
        base = f"{env}/{knobs.without(variant)}"
        key = (app, tier, knob, base, other)
        return groups.setdefault(key, {"runs": {}, "not_measured": {}, "figures": {}})

    matrices = {(a["app"], a["tier"]): a for a in apps}
    for a in apps:
        for r in a["rows"]:
            asked = _asked(r)
            for knob in knobs.KNOBS:
                g = group(a["app"], a["tier"], knob, r.environment, r.variant, asked)
                g["runs"][asked.get(knob)] = r
    for s in skipped:
        asked = {k: str(v) for k, v in (s.get("knobs") or {}).items()}
        if not asked or not s.get("app") or not s.get("variant"):
            continue
        lines = knob_lines(s.get("reason") or "")
        for knob, value in asked.items():
            line = lines.get((knob, value))
            why = (
                f"not measured: the node cannot set it ({line})"
                if line
                else f"not measured: {s.get('reason') or 'skipped'}"
            )
            g = group(s["app"], s["tier"], knob, s.get("environment"), s["variant"], asked)
            g["not_measured"][value] = why
    out = []
    for (app, tier, knob, base, other), g in sorted(groups.items(), key=str):
        values = (set(g["runs"]) | set(g["not_measured"])) - {None}
        if not values:
            continue  # the knob was not asked for in this group
        out.append(_table(app, tier, knob, base, other, g, values, matrices.get((app, tier))))
    return out


def _table(app, tier, knob, base, other, g, values, matrix) -> dict:
    settings = ([None] if None in g["runs"] else []) + sorted(
        values, key=lambda v: _setting_order(knob, v)
    )
    primary = (matrix or {}).get("primary") or "wall_time"
    figures = list(dict.fromkeys(["wall_time", "energy_J", primary]))
    units = dict((matrix or {}).get("units") or {})
    units.setdefault("wall_time", "s")
    units.setdefault("energy_J", "J")
    better = (matrix or {}).get("better") or {}
    ref_value = next(
        (v for v in settings if v in g["runs"] and g["runs"][v].verified), "no reference"
    )
    ref = g["runs"].get(ref_value)
    columns = []
    for v in settings:
        r = g["runs"].get(v)
        col = {"setting": _label(knob, v)}
        if r is None:
            col["not_measured"] = g["not_measured"][v]
            columns.append(col)
            continue
        grade = r.energy.trust if r.energy else "none"
        col.update(
            variant=variant_key(r),
            verified=r.verified,
            in_effect=_in_effect(knob, r, v),
            grade=grade,
            figures={n: number_or_none(r.figures.get(n)) for n in figures},
            ratios={},
        )
        for n in figures:
            x = col["figures"][n]
            b = number_or_none(ref.figures.get(n)) if ref else None
            if r.verified and x is not None and b:
                col["ratios"][n] = x / b
        if grade not in ("measured", "measured-shared"):
            col["energy_note"] = grade  # modelled (or none): never shown as measured
        columns.append(col)
    shown = [n for n in figures if any(c.get("figures", {}).get(n) is not None for c in columns)]
    return {
        "app": app,
        "tier": tier,
        "knob": knob,
        "variant": base + "".join(f" {knobs.LABELS[k]}={v}" for k, v in other),
        "reference": _label(knob, ref_value) if ref is not None else None,
        "figures": shown,
        "units": units,
        "better": {n: better.get(n, "lower" if n in figures[:2] else "higher") for n in shown},
        "columns": columns,
    }
