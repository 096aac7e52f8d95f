"""Run ReFrame as a child that stops cleanly and leaves no process behind.

``timeout``, a CI cancellation and the end of a Slurm job send SIGTERM (a terminal
SIGINT or SIGHUP) to ``apptune run``.  The child runs in a process group of its own;
the first such signal is passed on to that group, so ReFrame aborts its tests, cancels
their jobs and writes its run report; later signals are held back, so that what
completed is still stored and reported.  If the child has not ended ``GRACE_S``
seconds after the signal, its group is killed.  A signal this process ignores (e.g.
SIGHUP under ``nohup``) stays ignored.

While the child runs, this process is the "child subreaper" of every process the
child starts (Linux ``PR_SET_CHILD_SUBREAPER``): a job script or MPI rank left behind,
even in a session of its own, becomes a child of this process and is stopped (SIGTERM,
then SIGKILL) once the child has ended.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time

#: The signals that stop a run.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Seconds ReFrame has, after the signal, to abort its tests and write its report.
GRACE_S = 60.0
#: Seconds processes left behind have between SIGTERM and SIGKILL.
LEFTOVER_GRACE_S = 5.0
#: Seconds between two looks for orphans that ended (zombies to reap) while the child runs.
REAP_EVERY_S = 5.0

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def _children() -> list[tuple[int, str, str]]:
    """This process's children: (pid, command name, state; ``Z`` for a zombie)."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == me:
            out.append((int(d), stat[stat.index("(") + 1 : stat.rindex(")")], state))
    return out


def _reap_zombies(keep: set[int]) -> None:
    for pid, _, state in _children():
        if state == "Z" and pid not in keep:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _kill(pid: int, sig: int) -> None:
    """``sig`` to the process group of ``pid`` (to ``pid`` alone if that group is ours)."""
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    """Signal handling and process cleanup around one child::

    with Supervisor() as s:
        rc = s.run(argv, cwd=..., env=...)
        ...                    # store what completed; signals are held back here
    if s.signum: ...           # the first stop signal received (None when none came)
    """

    def __init__(self, grace: float = GRACE_S):
        self.grace = grace
        self.signum: int | None = None
        #: Names of the processes the child left behind (stopped by ``run``).
        self.leftovers: list[str] = []
        self._proc: subprocess.Popen | None = None
        self._forwarded = False
        self._signalled_at: float | None = None
        self._old_handlers: dict = {}
        self._old_subreaper: int | None = None
        self._others: set[int] = set()  # children this process had before (not ours to stop)

    def __enter__(self):
        for s in STOP_SIGNALS:
            if signal.getsignal(s) is not signal.SIG_IGN:
                self._old_handlers[s] = signal.signal(s, self._on_signal)
        flag = ctypes.c_int(0)
        if _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) and _prctl(
            _PR_SET_CHILD_SUBREAPER, 1
        ):
            self._old_subreaper = flag.value
        self._others = {pid for pid, _, _ in _children()}
        return self

    def __exit__(self, *exc):
        if self._proc is not None and self._proc.returncode is None:  # left by an exception
            _kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._stop_leftovers()
        if self._old_subreaper is not None:
            _prctl(_PR_SET_CHILD_SUBREAPER, self._old_subreaper)
        for s, h in self._old_handlers.items():
            signal.signal(s, h)

    def _on_signal(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            self._signalled_at = time.monotonic()
        self._forward()

    def _forward(self):
        """The first stop signal, once, to the child's process group."""
        if (
            self._forwarded
            or self._proc is None
            or self.signum is None
            or self._proc.returncode is not None
        ):
            return
        self._forwarded = True
        _kill(self._proc.pid, self.signum)

    def run(self, argv: list[str], follow=None, **popen) -> int:
        """Run ``argv`` (in a new session) to its end; its exit status, 128+N when signal N
        ended it.  Then nothing it started is left running.  ``follow(proc)``, if given,
        reads its output (standard output and error, as text lines) in a thread."""
        if self.signum is not None:  # stopped before it started
            return 128 + self.signum
        reader = None
        if follow is not None:
            popen.update(
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                errors="replace",
            )
        self._proc = p = subprocess.Popen(argv, start_new_session=True, **popen)
        if follow is not None:
            reader = threading.Thread(target=follow, args=(p,), name="apptune-output", daemon=True)
            reader.start()
        self._forward()
        killed, reaped = False, time.monotonic()
        # wait without reaping: the group id cannot be reused while the child is a zombie
        while os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.2)
            if time.monotonic() - reaped > REAP_EVERY_S:  # orphans that ended meanwhile
                _reap_zombies(keep=self._others | {p.pid})
                reaped = time.monotonic()
            if (
                not killed
                and self._signalled_at is not None
                and time.monotonic() - self._signalled_at > self.grace
            ):
                _kill(p.pid, signal.SIGKILL)
                killed = True
        _kill(p.pid, signal.SIGKILL)  # whatever is left in its process group
        rc = p.wait()
        self._stop_leftovers()
        if reader is not None:
            reader.join(timeout=10)
        return 128 - rc if rc < 0 else rc

    def _stop_leftovers(self):
        """Stop the processes the child left behind: SIGTERM, then SIGKILL."""
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        termed: set[int] = set()
        while True:
            _reap_zombies(keep=self._others)
            alive = [
                (pid, name)
                for pid, name, state in _children()
                if state != "Z" and pid not in self._others
            ]
            if not alive:
                return
            late = time.monotonic() > deadline
            for pid, name in alive:
                if name not in self.leftovers:
                    self.leftovers.append(name)
                if late or pid not in termed:
                    _kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                    termed.add(pid)
            time.sleep(0.1)
