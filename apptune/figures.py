"""Figures measured by repeated runs: their median, and how a report prints one."""

from __future__ import annotations

import math
import statistics


def finite_median(values) -> float | None:
    """The median of the finite numbers among ``values``; None when there is none."""
    xs = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def fmt_figure(value, missing: str = "n/a") -> str:
    """A figure in a report table: 4 significant digits, ``missing`` for None."""
    if value is None:
        return missing
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def fmt_seconds(s: float | None, missing: str = "-", *, approx: bool = False) -> str:
    """A duration as a person reads it: ``0.53 s``, ``40 s``, ``3 min 05 s``, ``1 h 31 min``
    (a unit that is zero left out: ``5 min``, ``2 h``); ``approx`` (an estimate) to whole
    minutes from a minute on, marked ``~``; ``missing`` for None."""
    if s is None or not math.isfinite(s):
        return missing
    if approx and s >= 60:
        s = round(s / 60) * 60
    if round(s) < 60:
        text = f"{s:.3g} s" if s < 10 and not approx else f"{round(s)} s"
    elif round(s) < 3600:
        m, sec = divmod(round(s), 60)
        text = f"{m} min {sec:02d} s" if sec else f"{m} min"
    else:
        h, m = divmod(round(s / 60), 60)
        text = f"{h} h {m:02d} min" if m else f"{h} h"
    return f"~{text}" if approx else text


def fmt_pct(value: float | None, missing: str = "–", *, signed: bool = True) -> str:
    """A ratio as a percentage to one decimal: a relative change signed (``+12.5%``), a share
    or a spread not (``signed=False``: ``3.2%``); ``missing`` for None."""
    if value is None:
        return missing
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def worse_better(value: float, base: float, direction: str) -> tuple[float, float]:
    """(worse, better) than the baseline as ratios minus one in the figure's direction (a
    doubled time, a halved rate: +100 % worse); not positive: the relative change."""
    pos = base > 0 and value >= 0
    up = value / base - 1 if pos else (value - base) / abs(base) if base else 0.0
    down = (math.inf if value == 0 else base / value - 1) if pos else -up
    return (down, up) if direction == "higher" else (up, down)
