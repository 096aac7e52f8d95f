"""``curve``: whitespace-separated columns (NetPIPE, the micro-benchmarks, OpenFOAM's
function objects): the curve is kept as data (``curves/NAME.csv``) and the fields are
figures derived from it (``derived``: first, last, max, min, count, half-peak x, y at an
x, relative range)."""

from __future__ import annotations

import math
from pathlib import Path

from ....errors import ApptuneError
from ....models import OutputSpec, Recipe

NAMES = ("curve",)


def fields(spec: OutputSpec, recipe: Recipe) -> set[str]:
    return set(spec.derived)


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
    """The derived fields, and the curve itself under ``__curve__``."""
    rows = []
    for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) < len(spec.columns):
            raise ApptuneError(
                path,
                f"line {i}",
                f"expected {len(spec.columns)} columns "
                f"({', '.join(spec.columns)}), got {len(words)}",
            )
        try:
            rows.append([float(w) for w in words[: len(spec.columns)]])
        except ValueError:
            raise ApptuneError(path, f"line {i}", f"not a number in {line.strip()!r}") from None
    if not rows:
        raise ApptuneError(path, None, "the curve has no data rows (run incomplete?)")
    col = {c: [r[k] for r in rows] for k, c in enumerate(spec.columns)}
    out = {
        "__curve__": {
            "columns": list(spec.columns),
            "rows": rows,
            "plot": spec.plot.model_dump() if spec.plot else None,
        }
    }
    for name, d in spec.derived.items():
        ys, xs = col[d.y], col[d.x] if d.x else None
        if d.until is not None:
            kept = [k for k, x in enumerate(xs) if x <= d.until]
            if not kept:
                raise ApptuneError(
                    path, name, f"no row with {d.x} at most {d.until} (rows from {xs[0]})"
                )
            ys, xs = [ys[k] for k in kept], [xs[k] for k in kept]
        if d.op == "first":
            out[name] = ys[0]
        elif d.op == "last":
            out[name] = ys[-1]
        elif d.op == "max":
            out[name] = max(ys)
        elif d.op == "min":
            out[name] = min(ys)
        elif d.op == "count":
            out[name] = len(ys)
        elif d.op == "relative_range":
            out[name] = (max(ys) - min(ys)) / abs(ys[0]) if ys[0] else math.inf
        elif d.op == "at":
            out[name] = _y_at(xs, ys, d.at, path, name)
        else:
            target = d.fraction * max(ys)
            out[name] = next(x for x, y in zip(xs, ys, strict=True) if y >= target)
    return out


def _y_at(xs: list[float], ys: list[float], at: float, path: Path, name: str) -> float:
    """``y`` of the row whose ``x`` is ``at`` (to 1e-9 relative: a time printed with fewer
    digits); an error naming the field when the curve has no such row."""
    for x, y in zip(xs, ys, strict=True):
        if math.isclose(x, at, rel_tol=1e-9, abs_tol=1e-12):
            return y
    raise ApptuneError(path, name, f"no row at {at} (rows from {xs[0]} to {xs[-1]})")
