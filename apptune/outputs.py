"""Extract fields from application outputs (parseable blocks, not scraped prose)."""
from __future__ import annotations

import math
from pathlib import Path

from .errors import ApptuneError
from .models import OutputSpec


def _number(s: str):
    """int, else float (nan/inf included: verification reports them), else the text."""
    for convert in (int, float):
        try:
            return convert(s)
        except ValueError:
            continue
    return s


def parse(spec: OutputSpec, stagedir: str | Path) -> dict:
    path = Path(stagedir) / spec.file
    if not path.is_file():
        raise ApptuneError(path, None, "output file was not written (did the run crash?)")
    lines = path.read_text(errors="replace").splitlines()
    if spec.begin:
        try:
            start = next(i for i, l in enumerate(lines) if l.strip() == spec.begin)
        except StopIteration:
            raise ApptuneError(path, spec.begin, "block start not found (run incomplete?)") from None
        lines = lines[start + 1:]
    if spec.end:
        try:
            stop = next(i for i, l in enumerate(lines) if l.strip() == spec.end)
        except StopIteration:
            raise ApptuneError(path, spec.end, "block end not found (run incomplete?)") from None
        lines = lines[:stop]
    out = {}
    for l in lines:
        k, sep, v = l.partition("=")
        if sep and k.strip():
            out[k.strip()] = _number(v.strip())
    return out


def is_bad_number(v) -> bool:
    return isinstance(v, float) and not math.isfinite(v)
