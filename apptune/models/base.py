"""The shared pieces of every schema: name and figure patterns, and :class:`Strict` (unknown
fields are errors)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"


#: Figure names and units reach reports, pages and plots: letters, digits and a few marks.
FIGURE_NAME_RE = r"^[A-Za-z][A-Za-z0-9_.-]*$"


FIGURE_UNIT_RE = r"^[A-Za-z0-9 %/._()*^µ·-]*$"


SHA256_RE = r"^[0-9a-f]{64}$"


def _valid_regex(v: str) -> str:
    try:
        re.compile(v)
    except re.error as e:
        raise ValueError(f"not a valid regular expression: {e}") from None
    return v


#: What a process environment's variable is named (POSIX: letters, digits, underscores).
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_names(env: dict) -> dict:
    bad = [k for k in env if not ENV_NAME_RE.match(k)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is not an environment variable name (letters, digits and "
            "underscores, not starting with a digit)"
        )
    return env


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
