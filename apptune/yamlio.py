"""YAML loading with one-line errors, and atomic writes for everything stored."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ApptuneError, field_path, first_of, format_validation_error

M = TypeVar("M", bound=BaseModel)


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader, refusing a key given twice in one mapping (plain
    ``yaml.safe_load`` keeps the last one silently, so half of a file could be ignored).
    It parses with libyaml where PyYAML has it (six times faster: every ``apptune run``
    reads every data file first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the constructor below reports it
                    continue
                if first is not None:
                    raise _DuplicateKey(
                        None,
                        None,
                        f"duplicate key {key!r} (first given at line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load_yaml(path: str | os.PathLike) -> Any:
    """A YAML file's data; a malformed file or a duplicate key is one line naming the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ApptuneError(path, None, "file not found") from None
    except OSError as e:
        raise ApptuneError(path, None, f"cannot read: {e.strerror}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(unknown position)"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if not isinstance(e, _DuplicateKey):
            problem = f"malformed YAML: {problem}"
        raise ApptuneError(path, where, problem) from None


#: A value left for a person to write (``apptune new`` writes e.g. ``args: "FILL IN: ..."``):
#: an error naming its field until it is replaced, never a value that silently passes.
PLACEHOLDER = "FILL IN"


def placeholders(data, where: tuple = ()) -> list[tuple[str, str]]:
    """(field, what to write there) of every ``FILL IN: ...`` value in ``data``."""
    if isinstance(data, str):
        if data.startswith(PLACEHOLDER):
            return [
                (field_path(list(where)) or "(top level)", data[len(PLACEHOLDER) :].lstrip(" :"))
            ]
        return []
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    return [h for k, v in items for h in placeholders(v, (*where, k))]


def load_model(path: str | os.PathLike, model: type[M], **context) -> M:
    """Load a YAML file and validate it against a pydantic model."""
    data = load_yaml(path)
    if data is None:
        raise ApptuneError(path, None, "file is empty")
    if not isinstance(data, dict):
        raise ApptuneError(path, "(top level)", f"expected a mapping, found {type(data).__name__}")
    holes = placeholders(data)
    if holes:
        raise first_of([ApptuneError(path, f, f"not filled in yet: {what}") for f, what in holes])
    try:
        return model.model_validate(data, context=context or None)
    except ValidationError as e:
        raise format_validation_error(path, e, data, model) from None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a file so that readers see the old or the new content, never half.

    A symbolic link at ``path`` is replaced by the file, never written through."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_of(path))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_copy(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Copy a file as :func:`atomic_write_text` writes one: whole or not at all, and a
    symbolic link at ``dest`` replaced, never written through."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _mode_of(path: Path) -> int:
    """The permissions of the regular file at ``path`` (not of what a link points to)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return 0o644
    return st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else 0o644


def inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` is a name inside the directory ``root``: no absolute path, no
    ``..`` and no symbolic link on the way leads out of it (the last component may be a
    link: :func:`atomic_write_text` replaces it)."""
    top = os.path.realpath(root)
    p = Path(path)
    if p.name in ("", ".", ".."):
        return False
    parent = os.path.realpath(p.parent)
    return parent == top or parent.startswith(top.rstrip(os.sep) + os.sep)


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _roundtrip():
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096  # never re-wrap a long line
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def dump_yaml_roundtrip(data: Any) -> str:
    """``data`` as YAML in the style :func:`edit_yaml_text` keeps (block style, its
    indentation), so that a file written here and edited later differs only where edited."""
    out = io.StringIO()
    _roundtrip().dump(data, out)
    return out.getvalue()


def edit_yaml_text(text: str, change: Callable[[Any], None]) -> str:
    """``text`` (a YAML document) after ``change(data)`` has edited its data in place:
    comments, key order, quoting and flow style are kept (ruamel.yaml round trip); only
    what was changed differs."""
    y = _roundtrip()
    data = y.load(text)
    change(data)
    out = io.StringIO()
    y.dump(data, out)
    lead = text[: len(text) - len(text.lstrip("\n"))]  # blank lines before the document
    return lead + out.getvalue().lstrip("\n")


# --------------------------------------------------------------------------- rendering
def yaml_word(w: str) -> str:
    """``w`` as a YAML scalar: plain where YAML reads it back as the same string, else quoted."""
    if re.fullmatch(r"[A-Za-z0-9_./=+-]+", w):
        try:
            if yaml.safe_load(w) == w:
                return w
        except yaml.YAMLError:
            pass
    return json.dumps(w)


def flow_list(words) -> str:
    """A YAML flow list of words on one line (the templates' ``flow`` filter), however long:
    a round-trip edit of the file (:func:`edit_yaml_text`: ``apptune tune``, ``bless``)
    joins a flow list continued over several lines into one, and its reviewed diff would
    then show lines nobody changed."""
    return "[" + ", ".join(map(yaml_word, words)) + "]"
