"""``regex``: one field per pattern (``patterns``), multiline over the whole file: the
pattern's first group at the first or last match, the least or greatest of all matches, or
the number of matches."""

from __future__ import annotations

import re
from pathlib import Path

from ....errors import ApptuneError
from ....models import OutputSpec, Recipe
from .keyvalue import number

NAMES = ("regex",)


def fields(spec: OutputSpec, recipe: Recipe) -> set[str]:
    return set(spec.patterns)


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
    text = path.read_text(errors="replace")
    out = {}
    for name, rf in spec.patterns.items():
        found = re.findall(rf.pattern, text, flags=re.M)
        if rf.occurrence == "count":
            out[name] = len(found)
        elif found and rf.occurrence in ("min", "max"):
            values = [number((m[0] if isinstance(m, tuple) else m).strip()) for m in found]
            bad = next((v for v in values if isinstance(v, str)), None)
            if bad is not None:
                raise ApptuneError(path, name, f"{bad!r} is not a number ({rf.occurrence})")
            out[name] = min(values) if rf.occurrence == "min" else max(values)
        elif found:
            m = found[0] if rf.occurrence == "first" else found[-1]
            out[name] = number((m[0] if isinstance(m, tuple) else m).strip())
    return out
