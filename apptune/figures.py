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
