"""Exclusive locks between processes (and machines sharing a filesystem with working
``flock``): one holder at a time of a lock file, released when the block ends or the
holder dies.

    with locked(cache / "sources" / ".hpcc.tar.gz.lock"):
        ...  # fetch, check and store the file once
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (created with its directory if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
