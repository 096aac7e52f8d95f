"""One error type for every bad input, rendered as one line naming file and field."""
from __future__ import annotations

import os


class ApptuneError(Exception):
    """A bad input or failed step, reported as ``FILE: FIELD: what is wrong``.

    ``file`` is shown relative to the current directory when that is shorter, so
    messages stay one readable line in ReFrame logs and terminals.
    """

    def __init__(self, file: str | os.PathLike | None, field: str | None, message: str):
        self.file = str(file) if file is not None else None
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __reduce__(self):
        # picklable, so an error raised in a worker process reaches the parent intact
        return (type(self), (self.file, self.field, self.message))

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(_short(self.file))
        if self.field:
            parts.append(self.field)
        parts.append(" ".join(self.message.split()))
        return ": ".join(parts)


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) and not rel.startswith("../..") else path


def format_validation_error(file, exc) -> ApptuneError:
    """Turn a pydantic ValidationError into an ApptuneError for its first problem."""
    errs = exc.errors()
    first = errs[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    msg = first.get("msg", "invalid value")
    if first.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif first.get("type") == "missing":
        msg = "required field is missing"
    more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
    return ApptuneError(file, field, msg + more)


PREFIX = "apptune: error: "


def last_error_line(path) -> str | None:
    """The last ``apptune: error: ...`` line a step wrote to a log file, without the prefix."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith(PREFIX):
            return line[len(PREFIX):]
    return None
