"""Extract fields from application outputs.

Formats (``run.output`` in a recipe, one spec or a list):

* ``keyvalue``  ``key=value`` lines, optionally between begin/end markers (HPCC);
* ``regex``     one field per anchored pattern, first/last match or a match count;
* ``newick_rf`` Robinson-Foulds distance of a result tree to the stored reference tree;
* ``curve``     whitespace-separated columns (NetPIPE, micro-benchmarks): the curve is
                kept as data and figures are derived from it (first, max, half-peak x);
* ``gmx_check_energy``, ``gmx_check_forces``, ``gmx_mdlog``: GROMACS's ``gmx check``
                reports, read as its regression-test driver does, and mdrun's md.log
                (:mod:`apptune.gmx`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .. import paths
from ..errors import ApptuneError
from ..models import OutputSpec

#: ``file: stdout`` in a recipe means the job's standard output.
STDOUT = "stdout"


def _number(s: str):
    """int, else float (nan/inf included: verification reports them), else the text."""
    for convert in (int, float):
        try:
            return convert(s)
        except ValueError:
            continue
    return s


def output_path(spec_file: str, stagedir: str | Path, stdout: str = "rfm_job.out") -> Path:
    return Path(stagedir) / (stdout if spec_file == STDOUT else spec_file)


def own_check_texts(run, stagedir: str | Path, stdout: str = "rfm_job.out") -> dict[str, str]:
    """The text of every file the recipe's own checks read ('' for a file not written)."""
    texts: dict[str, str] = {}
    for c in run.own_checks:
        f = c.file or run.outputs[0].file
        if f not in texts:
            p = output_path(f, stagedir, stdout)
            texts[f] = p.read_text(errors="replace") if p.is_file() else ""
    return texts


def parse(
    spec: OutputSpec, stagedir: str | Path, stdout: str = "rfm_job.out", tier: str = ""
) -> dict:
    """Fields of one output spec (curves under the key ``__curve__``)."""
    path = output_path(spec.file, stagedir, stdout)
    if not path.is_file():
        raise ApptuneError(path, None, "output file was not written (did the run crash?)")
    if spec.format == "regex":
        return _parse_regex(spec, path)
    if spec.format == "newick_rf":
        return _parse_newick_rf(spec, path, tier)
    if spec.format == "curve":
        return _parse_curve(spec, path)
    if spec.format.startswith("gmx_"):
        from . import gmx

        if spec.format == "gmx_check_energy":
            return gmx.energy_errors(path, spec.field)
        if spec.format == "gmx_check_forces":
            return gmx.force_direction_error(path, spec.field)
        return gmx.mdlog(path)
    lines = path.read_text(errors="replace").splitlines()
    if spec.begin:
        try:
            start = next(i for i, ln in enumerate(lines) if ln.strip() == spec.begin)
        except StopIteration:
            raise ApptuneError(
                path, spec.begin, "block start not found (run incomplete?)"
            ) from None
        lines = lines[start + 1 :]
    if spec.end:
        try:
            stop = next(i for i, ln in enumerate(lines) if ln.strip() == spec.end)
        except StopIteration:
            raise ApptuneError(path, spec.end, "block end not found (run incomplete?)") from None
        lines = lines[:stop]
    out = {}
    for line in lines:
        k, sep, v = line.partition("=")
        if sep and k.strip():
            out[k.strip()] = _number(v.strip())
    return out


def is_bad_number(v) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def parse_all(
    specs: list[OutputSpec], stagedir: str | Path, stdout: str = "rfm_job.out", tier: str = ""
) -> tuple[dict, dict]:
    """Fields of every output spec, and the curves ``{name: {columns, rows}}``."""
    fields, curves = {}, {}
    for spec in specs:
        got = parse(spec, stagedir, stdout, tier)
        curve = got.pop("__curve__", None)
        if curve is not None:
            curves[spec.name] = curve
        fields.update(got)
    return fields, curves


def _parse_regex(spec: OutputSpec, path: Path) -> dict:
    text = path.read_text(errors="replace")
    out = {}
    for name, rf in spec.patterns.items():
        found = re.findall(rf.pattern, text, flags=re.M)
        if rf.occurrence == "count":
            out[name] = len(found)
        elif found and rf.occurrence in ("min", "max"):
            values = [_number((m[0] if isinstance(m, tuple) else m).strip()) for m in found]
            bad = next((v for v in values if isinstance(v, str)), None)
            if bad is not None:
                raise ApptuneError(path, name, f"{bad!r} is not a number ({rf.occurrence})")
            out[name] = min(values) if rf.occurrence == "min" else max(values)
        elif found:
            m = found[0] if rf.occurrence == "first" else found[-1]
            out[name] = _number((m[0] if isinstance(m, tuple) else m).strip())
    return out


def reference_tree(spec: OutputSpec, tier: str) -> Path:
    """The stored tree a ``newick_rf`` output is compared with, for one tier."""
    return paths.root() / "reference" / spec.reference.format(tier=tier)


def _parse_newick_rf(spec: OutputSpec, path: Path, tier: str) -> dict:
    from .phylo import parse_newick, robinson_foulds

    ref = reference_tree(spec, tier)
    if not ref.is_file():
        raise ApptuneError(ref, None, f"reference tree for '{spec.field}' is missing")
    got = parse_newick(path.read_text(errors="replace"), path)
    want = parse_newick(ref.read_text(), ref)
    return {spec.field: robinson_foulds(got, want, path)}


def _parse_curve(spec: OutputSpec, path: Path) -> dict:
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


def write_curves(curves: dict, directory: Path) -> dict:
    """Each curve as ``DIR/NAME.csv`` (header row = column names); returns name -> file."""
    from ..yamlio import atomic_write_text

    out = {}
    for name, c in curves.items():
        lines = [",".join(c["columns"])] + [",".join(f"{v:.10g}" for v in row) for row in c["rows"]]
        f = Path(directory) / f"{name}.csv"
        f.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(f, "\n".join(lines) + "\n")
        out[name] = {
            "file": f"{directory.name}/{f.name}",
            "columns": c["columns"],
            "plot": c["plot"],
        }
    return out
