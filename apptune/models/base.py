"""The shared pieces of every schema: name and figure patterns, and :class:`Strict` (unknown
fields are errors)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from ..errors import LINE_BREAKING, escape_line_breaks

NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"


#: Figure names and units reach reports, pages and plots: letters, digits and a few marks.
FIGURE_NAME_RE = r"^[A-Za-z][A-Za-z0-9_.-]*$"


FIGURE_UNIT_RE = r"^[A-Za-z0-9 %/._()*^µ·-]*$"


SHA256_RE = r"^[0-9a-f]{64}$"


def _one_line(v: str) -> str:
    m = LINE_BREAKING.search(v)
    if m:
        raise ValueError(
            f"holds the control character {escape_line_breaks(m.group())} (a line break "
            "in a generated Makefile or script): a flag or template value is one line"
        )
    return v


#: A compiler flag or a value the build's templates write (a Makefile variable): one line.
OneLine = Annotated[str, AfterValidator(_one_line)]


def valid_regex(v: str) -> str:
    try:
        re.compile(v)
    except re.error as e:
        raise ValueError(f"not a valid regular expression: {e}") from None
    return v


#: What a process environment's variable is named (POSIX: letters, digits, underscores).
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_names(env: dict) -> dict:
    bad = [k for k in env if not ENV_NAME_RE.match(k)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is not an environment variable name (letters, digits and "
            "underscores, not starting with a digit)"
        )
    return env


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
