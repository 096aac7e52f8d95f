"""Extract fields from application outputs (``run.output`` in a recipe, one spec or a
list), each read by its format's module (:mod:`apptune.core.verification.formats`: keyvalue, regex,
newick_rf, curve, GROMACS's gmx_check_energy, gmx_check_forces and gmx_mdlog)."""

from __future__ import annotations

import math
from pathlib import Path

from ...errors import ApptuneError
from ...models import OutputSpec
from . import formats

#: ``file: stdout`` in a recipe means the job's standard output.
STDOUT = "stdout"


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
    return formats.parse(spec, path, tier)


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


def write_curves(curves: dict, directory: Path) -> dict:
    """Each curve as ``DIR/NAME.csv`` (header row = column names); returns name -> file."""
    from ...yamlio import atomic_write_text

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
