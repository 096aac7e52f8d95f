"""``keyvalue``: ``key=value`` lines, optionally between ``begin``/``end`` lines (HPCC's
summary, NPB's and mpi-micro's summaries, the scratch checksums). The run keeps every key;
before it, the keys known are those the spec lists (``keys``: names or shell patterns) or,
for the scratch checksums (``run.scratch.sums_file``), ``NAME.*.KEY`` of each scratch
file."""

from __future__ import annotations

from pathlib import Path

from ....errors import ApptuneError
from ....models import OutputSpec, Recipe
from .. import netcdf

NAMES = ("keyvalue",)


def number(s: str):
    """int, else float (nan/inf included: verification reports them), else the text."""
    for convert in (int, float):
        try:
            return convert(s)
        except ValueError:
            continue
    return s


def _is_sums(spec: OutputSpec, recipe: Recipe) -> bool:
    """Whether ``spec`` reads the checksums of the recipe's scratch files."""
    sc = recipe.run.scratch
    return sc is not None and spec.file == sc.sums_file and not spec.keys


def fields(spec: OutputSpec, recipe: Recipe) -> set[str] | None:
    """The listed keys, the scratch checksums' patterns, or None (not known: no list)."""
    if _is_sums(spec, recipe):
        return set(netcdf.sum_fields(recipe.run.scratch.files))
    return set(spec.keys) or None


def spec_problem(spec: OutputSpec, recipe: Recipe) -> tuple[str, str] | None:
    """A keyvalue output lists the keys figures and references read (but the scratch
    checksums, whose keys the scratch files give)."""
    if spec.keys or _is_sums(spec, recipe):
        return None
    return (
        "keys",
        f"the keys of {spec.file} that figures and references read are not listed "
        "(names or shell patterns such as '*_errors')",
    )


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
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
            out[k.strip()] = number(v.strip())
    return out
