"""Strong scaling in the report: for each variant run on more than one core count in the
session (``-P num_ranks=1,2``, threads per rank with ``-S threads_per_rank``), the runs side
by side in the order of their cores (ranks × threads per rank), each with its speed-up over
the fewest cores and its parallel efficiency (the speed-up over the ideal one, the ratio of
the cores), the studies' figure of how an application scales on a machine.

Only verified runs get a speed-up: a wrong answer computed faster scales nothing. The
speed-up is of the primary figure (ns/day, GFLOP/s: higher is better; a time: lower is
better), and of the wall time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..placement import without_labels
from .values import number_or_none, variant_key

if TYPE_CHECKING:
    from .row import Row

#: The runtime labels that make the steps of a series (apptune/placement.py label).
SERIES_LABELS = ("ranks=", "tpr=")


def _threads(row: Row) -> int:
    lay = row.placement_layout
    return (lay.threads_per_rank if lay is not None else None) or 1


def _speedup(x: float | None, x0: float | None, better: str) -> float | None:
    if not x or not x0:
        return None
    return x / x0 if better == "higher" else x0 / x


def scaling_tables(apps: list[dict]) -> list[dict]:
    """One table per application, tier, environment and variant whose verified or failed
    runs used more than one core count; its steps in the order of their cores."""
    out = []
    for a in apps:
        series: dict[tuple[str, str], list[dict]] = {}
        for r in a["rows"]:
            if r.ranks:
                base = without_labels(r.variant, SERIES_LABELS)
                series.setdefault((r.environment, base), []).append(r)
        for (env, base), rows in sorted(series.items()):
            cores = {r.ranks * _threads(r) for r in rows}
            if len(cores) > 1:
                out.append(_table(a, env, base, rows))
    return out


def _table(a: dict, env: str, base: str, rows: list[Row]) -> dict:
    primary = a.get("primary") or "wall_time"
    better = (a.get("better") or {}).get(primary, "higher")
    rows = sorted(rows, key=lambda r: (r.ranks * _threads(r), r.ranks))
    ref = next((r for r in rows if r.verified), None)
    c0 = ref.ranks * _threads(ref) if ref else None
    steps = []
    for r in rows:
        cores = r.ranks * _threads(r)
        x, wall = (
            number_or_none(r.figures.get(primary)),
            number_or_none(r.figures.get("wall_time")),
        )
        step = {
            "variant": variant_key(r),
            "ranks": r.ranks,
            "threads_per_rank": _threads(r),
            "cores": cores,
            "verified": r.verified,
            "value": x,
            "wall_time": wall,
            "speedup": None,
            "efficiency": None,
            "wall_speedup": None,
            "disturbed": bool(r.quality and r.quality.grade != "clean"),
        }
        if r.verified and ref is not None:
            s = _speedup(x, number_or_none(ref.figures.get(primary)), better)
            step["speedup"] = s
            step["efficiency"] = s * c0 / cores if s is not None else None
            step["wall_speedup"] = _speedup(
                wall, number_or_none(ref.figures.get("wall_time")), "lower"
            )
        steps.append(step)
    return {
        "app": a["app"],
        "tier": a["tier"],
        "environment": env,
        "variant": base,
        "primary": primary,
        "unit": (a.get("units") or {}).get(primary, ""),
        "better": better,
        "reference": f"{ref.ranks * _threads(ref)} core(s)" if ref else None,
        #: the wall time has columns of its own unless it is the primary figure
        "wall_columns": primary != "wall_time",
        "steps": steps,
    }
