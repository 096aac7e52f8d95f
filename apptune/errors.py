"""One error type for every bad input, rendered as one line naming file and field."""

from __future__ import annotations

import os
import re


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
            parts.append(escape_line_breaks(self.field))
        parts.append(escape_line_breaks(" ".join(self.message.split())))
        return ": ".join(parts)


#: Characters that end a line for some reader or a C string: every control character but
#: tab (newline, carriage return, vertical tab, form feed, NUL, U+0085, escape) and the
#: Unicode line and paragraph separators.
LINE_BREAKING = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def escape_line_breaks(text: str) -> str:
    """``text`` with each character of :data:`LINE_BREAKING` written as its Python escape
    (``\\n``, ``\\x00``): one line whatever it holds."""
    return LINE_BREAKING.sub(lambda m: repr(m.group())[1:-1], text)


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    # a path outside the current directory stays as given: "../x" would name it only from here
    return rel if len(rel) < len(path) and not rel.startswith("..") else path


VALIDATE_HINT = "apptune validate lists them"


def format_validation_error(
    file, exc, data=None, model=None, hint: str | None = VALIDATE_HINT
) -> ApptuneError:
    """Turn a pydantic ValidationError into an ApptuneError for its first problem; the
    error's ``problems`` holds every one (:func:`validation_problems`)."""
    return first_of(validation_problems(file, exc, data, model), hint)


def first_of(problems: list[ApptuneError], hint: str | None = VALIDATE_HINT) -> ApptuneError:
    """One error standing for several: the first, saying how many more there are (and
    ``hint``: where they are all listed), with every one in ``problems``."""
    first = problems[0]
    if len(problems) == 1:
        return first
    more = f"and {len(problems) - 1} more problem(s)" + (f": {hint}" if hint else "")
    e = ApptuneError(first.file, first.field, f"{first.message} ({more})")
    e.problems = list(problems)
    return e


def expand(e: ApptuneError) -> list[ApptuneError]:
    """Every problem an error stands for (see :func:`first_of`)."""
    return list(getattr(e, "problems", None) or [e])


def validation_problems(file, exc, data=None, model=None) -> list[ApptuneError]:
    """Every problem of a pydantic ValidationError as ``FILE: FIELD: message``, in words.

    ``data`` (the validated input) tells the data's keys from the tags pydantic puts in
    an error's location for the members of a union (``function-after[...]``, ``list[...]``,
    ``int``, a model's name): tags are dropped, and of a union's members only the one the
    value was meant for is reported (or, when the value fits none, one line naming the
    kinds allowed). ``model`` (the pydantic model validated) lets an unknown field's
    message list the fields allowed there.
    """
    errs = [_Err(e, data) for e in exc.errors()]
    # union members: group by where the union is, keep the members that matched in shape
    sites: dict[tuple, list[_Err]] = {}
    for e in errs:
        if e.tags:
            sites.setdefault(e.site, []).append(e)
    drop: set[int] = set()
    combined: dict[int, ApptuneError] = {}
    for site, es in sites.items():
        members: dict[str, list[_Err]] = {}
        for e in es:
            members.setdefault(e.tags[0][1], []).append(e)
        deep = {m: v for m, v in members.items() if any(not e.shape_mismatch for e in v)}
        if deep:
            keep = min(deep, key=lambda m: len(deep[m]))
            drop |= {id(e) for m, v in members.items() if m != keep for e in v}
        else:
            kinds: list[str] = []
            for m, v in members.items():
                for k in _kinds(m, v):
                    if k not in kinds:
                        kinds.append(k)
            first = es[0]
            drop |= {id(e) for e in es}
            got = _got(first.raw.get("input"))
            combined[id(first)] = ApptuneError(
                file, field_path(list(site)) or "(top level)", f"must be {_words(kinds)}{got}"
            )
    out: list[ApptuneError] = []
    for e in errs:
        if id(e) in combined:
            out.append(combined[id(e)])
        elif id(e) not in drop:
            out.append(e.to_error(file, model))
    return out or [ApptuneError(file, None, str(exc).splitlines()[0])]


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _got(value) -> str:
    if isinstance(value, (str, int, float, bool)) and len(repr(value)) <= 60:
        return f" (got {value!r})"
    if isinstance(value, (list, dict)):
        return f" (got a {'list' if isinstance(value, list) else 'mapping'})"
    return ""


_TAG = re.compile(r"^(function-\w+\[.*\]|\w+\[.*\]|int|float|str|bool|none|[A-Z]\w*)$")
_SCALAR_KINDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "none": "null",
}


def _kinds(member: str, errs) -> list[str]:
    """What a union member accepts, in words."""
    if member in _SCALAR_KINDS:
        return [_SCALAR_KINDS[member]]
    if member.startswith("list["):
        return ["a list"]
    if member.startswith("literal["):
        e = next((e for e in errs if e.raw.get("type") == "literal_error"), None)
        vals = _literal_values(e.raw) if e else []
        return [f"one of: {', '.join(vals)}"] if vals else ["a fixed word"]
    return ["a mapping"]


def _literal_values(err: dict) -> list[str]:
    expected = (err.get("ctx") or {}).get("expected", "")
    return re.findall(r"'((?:[^'\\]|\\.)*)'", expected) or [expected]


class _Err:
    """One pydantic error with its location split into the data's path and union tags."""

    def __init__(self, raw: dict, data):
        self.raw = raw
        loc = list(raw.get("loc", ()))
        self.path: list = []
        self.tags: list[tuple[int, str]] = []
        node, known = data, data is not None
        for i, part in enumerate(loc):
            last = i == len(loc) - 1
            if known and isinstance(node, dict) and part in node:
                self.path.append(part)
                node = node[part]
            elif (
                known and isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            ):
                self.path.append(part)
                node = node[part]
            elif (
                isinstance(part, str)
                and not (last and raw.get("type") == "missing")
                and (known or _TAG.match(part))
            ):
                self.tags.append((len(self.path), part))
            else:
                self.path.append(part)
                known = False
        self.site = tuple(self.path[: self.tags[0][0]]) if self.tags else ()
        #: the value is not of the union member's kind at all (not a list, not a mapping, ...)
        t = raw.get("type", "")
        self.shape_mismatch = (
            bool(self.tags)
            and len(self.path) == self.tags[0][0]
            and (t.endswith(("_type", "_parsing")) or t == "literal_error")
        )

    def to_error(self, file, model=None) -> ApptuneError:
        t = self.raw.get("type", "")
        msg = self.raw.get("msg", "invalid value")
        path = list(self.path)
        if t == "extra_forbidden":
            allowed = _fields_at(model, path[:-1]) if model is not None else []
            msg = f"unknown field (allowed: {', '.join(allowed)})" if allowed else "unknown field"
        elif t == "missing":
            msg = "required field is missing"
        elif t == "literal_error":
            allowed = ", ".join(_literal_values(self.raw))
            msg = f"must be one of: {allowed}{_got(self.raw.get('input'))}"
        elif t in ("value_error", "assertion_error"):
            msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
            # a model's own check names the field it is about: 'run.primary: ...'
            m = re.match(r"^([A-Za-z_][\w-]*(?:\.[\w.-]+|\[\d+\])*): (.+)$", msg, re.S)
            if m:
                path += [m.group(1)]
                msg = m.group(2)
        else:
            msg = re.sub(
                r"^(Input|String|List|Dictionary|Value|Tuple|Set|Decimal) should (be )?",
                lambda m: "must " + (m.group(2) or ""),
                msg,
            )
            msg = re.sub(r"a valid dictionary or instance of \w+", "a mapping", msg)
            msg = re.sub(r"a valid dictionary", "a mapping", msg)
            msg = re.sub(r" after validation, not \d+", "", msg)
            msg = msg.replace("match pattern ", "match the pattern ")
            if not isinstance(self.raw.get("input"), (list, dict)):
                msg += _got(self.raw.get("input"))
        return ApptuneError(file, field_path(path) or "(top level)", msg)


def _fields_at(model, path: list) -> list[str]:
    """The field names of the model found at ``path`` inside ``model`` ([] if unknown)."""
    import types
    import typing

    from pydantic import BaseModel

    def members(tp) -> list:
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            return [m for a in typing.get_args(tp) for m in members(a)]
        return [tp]

    def step(tp, part) -> list:
        out = []
        for m in members(tp):
            origin, args = typing.get_origin(m), typing.get_args(m)
            if isinstance(m, type) and issubclass(m, BaseModel) and isinstance(part, str):
                f = m.model_fields.get(part)
                out += [f.annotation] if f else []
            elif origin is dict and args and isinstance(part, str):
                out.append(args[1])
            elif origin is list and args and isinstance(part, int):
                out.append(args[0])
        return out

    types_ = [model]
    for part in path:
        types_ = [t for tp in types_ for t in step(tp, part)]
    for tp in types_:
        for m in members(tp):
            if isinstance(m, type) and issubclass(m, BaseModel):
                return list(m.model_fields)
    return []


def field_path(path: list) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


PREFIX = "apptune: error: "


def last_error_line(path) -> str | None:
    """The last ``apptune: error: ...`` line a step wrote to a log file, without the prefix."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith(PREFIX):
            return line[len(PREFIX) :]
    return None


#: Control characters a terminal acts on (ESC starts its escape sequences; CR, BS and the
#: others move the cursor or rewrite a line): all of C0 but tab and newline, DEL, and C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text that may come from a program's output, as a terminal or a file shows it: each
    control character written as its escape (``\\x1b``), so a line that held a terminal
    escape sequence prints that sequence instead of running it."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
