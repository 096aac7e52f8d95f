"""Exclusive locks between processes (and machines sharing a filesystem with working
``flock``): one holder at a time of a lock file, released when the block ends or the
holder dies (the kernel drops a dead process's ``flock``: a lock file left behind by a
run that was killed never blocks the next one).

    with locked(cache / "sources" / ".hpcc.tar.gz.lock"):
        ...  # fetch, check and store the file once

A holder that says what it does (``what``) leaves it in the lock file with its process id,
host and start time; a process that finds the lock taken is told who holds it
(``waiting``, :class:`Holder`) before it waits, so it can say what it is waiting for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the holder wrote it into the lock file; the fields are None
    where it wrote nothing (a holder that did not say, or not yet)."""

    pid: int | None = None
    host: str | None = None
    since: float | None = None
    what: str | None = None

    @classmethod
    def read(cls, f) -> Holder:
        try:
            f.seek(0)
            d = json.loads(f.read() or "{}")
            return cls(d.get("pid"), d.get("host"), d.get("since"), d.get("what"))
        except (OSError, ValueError, AttributeError):
            return cls()

    def describe(self) -> str:
        """``pid 1234 on node7, since 11:52:03``; ``another process`` when unknown."""
        if self.pid is None:
            return "another process"
        where = f" on {self.host}" if self.host and self.host != socket.gethostname() else ""
        when = f", since {time.strftime('%H:%M:%S', time.localtime(self.since))}"
        return f"pid {self.pid}{where}" + (when if self.since else "")


@contextlib.contextmanager
def locked(
    path: str | os.PathLike,
    what: str | None = None,
    waiting: Callable[[Holder], None] | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (created with its directory if missing).

    ``what``: what the holder does, written into the lock file with its process id, for
    those that wait; ``waiting(holder)``: called once, before waiting, when the lock is
    taken."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(Holder.read(f))
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if what is not None:
                _say(f, what)
            yield
        finally:
            if what is not None:
                _say(f, None)
            fcntl.flock(f, fcntl.LOCK_UN)


def _say(f, what: str | None) -> None:
    """Write the holder's record into the lock file (``what`` None: empty it, the lock
    being given up); best effort: the lock holds whether or not this is written."""
    text = (
        json.dumps(
            {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "what": what}
        )
        if what is not None
        else ""
    )
    try:
        f.seek(0)
        f.truncate()
        f.write(text)
        f.flush()
    except OSError:
        pass
