"""Where the project's data lives: recipes, patches, inputs, references, site config."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import ApptuneError

_MARKER = "build-recipes"
#: The ReFrame site configuration every command uses unless told another (-C).
DEFAULT_CONFIG = "site-config/settings.py"


def root(start: str | os.PathLike | None = None) -> Path:
    """The apptune tree: $APPTUNE_ROOT, else the nearest parent holding build-recipes/."""
    env = os.environ.get("APPTUNE_ROOT")
    if env:
        p = Path(env).resolve()
        if not (p / _MARKER).is_dir():
            raise ApptuneError(None, "APPTUNE_ROOT", f"{p} has no {_MARKER}/ directory")
        return p
    candidates = []
    if start is not None:
        candidates.append(Path(start).resolve())
    candidates.append(Path.cwd().resolve())
    candidates.append(Path(__file__).resolve().parent.parent)
    for c in candidates:
        for d in [c, *c.parents]:
            if (d / _MARKER).is_dir():
                return d
    raise ApptuneError(
        None, "APPTUNE_ROOT", f"no {_MARKER}/ found above {Path.cwd()}; set APPTUNE_ROOT"
    )


def rel(p: str | os.PathLike | None, base: str | os.PathLike | None = None, *, up=False) -> str:
    """``p`` as a message or a link names it: relative to ``base`` (the apptune tree by
    default) when it is under it, else as given ("" for no path). With ``up`` (a link from
    one folder to a file of another) a path outside ``base`` is reached through ``..``."""
    if not p:
        return ""
    if up:
        try:
            return os.path.relpath(p, base)
        except ValueError:  # another drive
            return str(p)
    try:
        return str(Path(p).resolve().relative_to(Path(base or root()).resolve()))
    except ValueError:
        return str(p)


def slug(text: str, length: int = 10) -> str:
    """A short file name for any text (a label, an object's path): a prefix of its sha256."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def recipes_dir(r: Path | None = None) -> Path:
    return (r or root()) / "build-recipes"


def patches_dir(app: str, r: Path | None = None) -> Path:
    return (r or root()) / "patches" / app


def inputs_dir(app: str, tier: str, r: Path | None = None) -> Path:
    return (r or root()) / "inputs" / app / tier


def reference_file(app: str, tier: str, r: Path | None = None) -> Path:
    return (r or root()) / "reference" / app / f"{tier}.yaml"


def baselines_file(system: str, app: str, r: Path | None = None) -> Path:
    return (r or root()) / "reference" / "baselines" / system / f"{app}.yaml"


def site_dir(r: Path | None = None) -> Path:
    return (r or root()) / "site-config"


def cache_dir() -> Path:
    """Download cache for source tarballs ($APPTUNE_CACHE, else ~/.cache/apptune)."""
    env = os.environ.get("APPTUNE_CACHE")
    base = (
        Path(env)
        if env
        else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "apptune"
    )
    return base


def history_dir() -> Path:
    """The history directory: $APPTUNE_HISTORY, else
    ``${XDG_DATA_HOME:-~/.local/share}/apptune/history`` (outside ``runs/``: ``make clean``
    keeps it)."""
    env = os.environ.get("APPTUNE_HISTORY")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "apptune" / "history"


def mirror_dir() -> Path | None:
    env = os.environ.get("APPTUNE_SOURCE_MIRROR")
    return Path(env) if env else None


# --------------------------------------------------------------------------- free space
#: Exit status of a command whose results could not be written for want of space.
NO_SPACE_STATUS = 3
#: Free space a run needs on its run directory's file system before it starts: every
#: build's and run's stage and output directories go there.
MIN_FREE_MIB = 256


def free_mib(path: str | os.PathLike) -> float | None:
    """Free space (MiB) on the file system of ``path`` or of its nearest existing parent."""
    import shutil

    p = Path(path).absolute()
    for d in (p, *p.parents):
        try:
            return shutil.disk_usage(d).free / 2**20
        except OSError:
            continue
    return None


def out_of_space(e: BaseException, path: str | os.PathLike | None = None) -> bool:
    """Whether ``e`` is a write that failed for want of space: ENOSPC, EDQUOT, SQLite's
    "database or disk is full", or any I/O error while ``path``'s file system has less
    than 1 MiB free (SQLite says "disk I/O error" when its journal cannot grow)."""
    import errno
    import sqlite3

    for x in (e, e.__cause__, e.__context__):
        if isinstance(x, OSError) and x.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(x, sqlite3.Error) and "disk is full" in str(x):
            return True
    if path is None:
        return False
    free = free_mib(path)
    return free is not None and free < 1


def no_space(path: str | os.PathLike) -> str:
    """``no space left on the file system of PATH (N MiB free)``."""
    free = free_mib(path)
    return f"no space left on the file system of {path}" + (
        f" ({free:.0f} MiB free)" if free is not None else ""
    )
