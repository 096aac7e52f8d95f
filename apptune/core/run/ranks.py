"""The ranks of the measured program on a run's node and the CPUs each may run on (its
binding), with the launch that started it, for :class:`apptune.core.run.quality.Monitor`.

A rank's binding is the last CPU mask read of it: MPI_Init moves a rank for a while (Open
MPI's hwloc binds it to each CPU in turn for microseconds, UCX to the first CPU for
2 x 100 ms while it times its clock: strace of NetPIPE's ranks), then gives it back the mask
its launcher gave. So while a rank is young its mask is read often, and the last read comes
after MPI_Init, shortly before the rank ends; while a launch is young its new ranks are
looked for often too, so that a launch shorter than the second between two of the monitor's
samples (MPICH's NetPIPE run, 0.6 s) has its ranks seen. Each launch of a job (an integrity
pass before the timed run) keeps its own ranks: :func:`binding_problem` judges each
on its own.

A rank's mapped shared libraries (what :mod:`apptune.core.run.loaded` records) are read when it
is first seen, again as it reaches each age of :data:`MAPS_AGES` (so a short program's are
seen, and a library it loads after starting), and then at every :data:`MAPS_EVERY`-th
sample: a read of a rank's maps takes about 1 ms, and the last read leaves out what
MPI_Init opened and closed again (the transports it did not choose).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from ...models import RankBinding, RunBinding
from .procfs import (
    Stat,
    allowed_cpus,
    cpu_topology,
    mapped_libraries,
    observe_binding,
    read_stat,
)

#: A young rank's mask is read this often (seconds) ...
RECHECK_S = 0.05
#: ... while it is younger than this.
YOUNG_S = 5.0
#: A young launch's new ranks are looked for this often.
NEW_RANKS_S = 0.1
#: A new process is looked at again for this long: forked by the launcher, it runs the
#: launcher's program until it execs the rank's.
EXEC_S = 0.5
#: A rank's maps are read when it is first seen, at these ages (seconds) ...
MAPS_AGES = (0.1, 0.3, 0.6, 1.2, 2.5)
#: ... and then at every so many of the monitor's samples.
MAPS_EVERY = 10


class Ranks:
    """The ranks of ``program`` seen on this node (``proc``: its /proc; ``sysfs`` its /sys)."""

    def __init__(self, program: str, proc: Path, sysfs: Path):
        self.program, self.proc, self.sysfs = program, Path(proc), Path(sysfs)
        self.name = os.path.basename(program)[:15]  # as /proc/PID/stat names it
        self.exe = os.path.realpath(program)
        #: Each rank's CPUs (pid -> the last mask read) and launch (pid -> the runner's step).
        self.affinity: dict[int, set[int]] = {}
        self.launches: dict[int, str] = {}
        #: The shared objects each rank had mapped at the last read (pid -> paths) and how
        #: often they were read.
        self.maps: dict[int, set[str]] = {}
        self._maps_reads: dict[int, int] = {}
        self._ages_read: dict[int, int] = {}
        #: The launch running now (:meth:`begin_launch`) and when it began.
        self.launch: str | None = None
        self._launched: float | None = None
        #: Each rank: pid -> (its process: pid and start time, when it was first seen).
        self._ranks: dict[int, tuple[tuple[int, int], float]] = {}
        #: The processes looked at: pid -> (the program it ran, when first seen).
        self._looked: dict[int, tuple[str, float]] = {}

    def before(self, procs: dict[int, Stat]) -> None:
        """The processes older than the run (the monitor's first sample): never ranks."""
        self._looked = {pid: (st.comm, -math.inf) for pid, st in procs.items()}

    def begin_launch(self, label: str) -> None:
        """The runner starts its step ``label``: the ranks seen from now on are its."""
        self.launch = label
        self._launched = time.monotonic()

    def is_rank(self, pid: int) -> bool:
        """Whether process ``pid`` runs the program: its executable is the program's, in the
        run's own build."""
        try:
            return os.path.realpath(os.readlink(self.proc / str(pid) / "exe")) == self.exe
        except OSError:
            return False

    def seen(
        self, pid: int, key: tuple[int, int], launch: str | None, sample: int | None = None
    ) -> None:
        """A rank seen (``key``: its pid and start time) while ``launch`` ran, at the
        monitor's sample number ``sample`` (None: between two samples): its mask and maps."""
        if self._ranks.get(pid, (None,))[0] != key:  # a new rank (or its pid reused)
            self._ranks[pid] = (key, time.monotonic())
            self.affinity.pop(pid, None)
            self._maps_reads[pid] = self._ages_read[pid] = 0
            if launch is not None:
                self.launches[pid] = launch
        cpus = allowed_cpus(self.proc, pid)
        if cpus:  # a rank gone keeps the mask read before
            self.affinity[pid] = cpus
        if self._maps_reads[pid] == 0 or (sample is not None and sample % MAPS_EVERY == 0):
            self._read_maps(pid)

    def _read_maps(self, pid: int) -> None:
        self._maps_reads[pid] = self._maps_reads.get(pid, 0) + 1
        self.maps[pid] = mapped_libraries(self.proc, pid) or self.maps.get(pid, set())

    def libraries(self) -> set[str]:
        """The shared objects any rank had mapped at its last read."""
        return set().union(*self.maps.values())

    def recheck(self, look: bool = True) -> None:
        """While the launch is young, its new ranks (``look``), and the masks of the ranks
        seen less than YOUNG_S ago that still run (the same process: its start time)."""
        now = time.monotonic()
        launch = self.launch
        if look and self._launched is not None and now - self._launched <= YOUNG_S:
            self._new(launch, now)
        for pid, (key, first) in list(self._ranks.items()):
            age = now - first
            if age > YOUNG_S:
                continue
            ages = self._ages_read.get(pid, 0)
            maps_due = ages < len(MAPS_AGES) and age >= MAPS_AGES[ages]
            cpus = allowed_cpus(self.proc, pid)
            new_mask = bool(cpus) and cpus != self.affinity.get(pid)
            if not (maps_due or new_mask):
                continue
            st = read_stat(self.proc, pid)  # another process's mask or maps are no news
            if st is None or (pid, st.start) != key:
                continue
            if new_mask:
                self.affinity[pid] = cpus
            if maps_due:
                self._ages_read[pid] = ages + 1
                self._read_maps(pid)

    def _new(self, launch: str | None, now: float) -> None:
        """The processes not looked at before that run the program: ranks of ``launch``."""
        try:
            pids = [int(d) for d in os.listdir(self.proc) if d.isdigit()]
        except OSError:
            return
        for pid in pids:
            comm, first = self._looked.get(pid, (None, now))
            if comm is not None and comm != self.name and now - first > EXEC_S:
                continue  # another program for good
            st = read_stat(self.proc, pid)
            if st is None:
                continue
            self._looked[pid] = (st.comm, first)
            if st.comm != self.name or self._ranks.get(pid, (None,))[0] == (pid, st.start):
                continue  # not the program, or a rank known (its mask is read by recheck)
            if self.is_rank(pid):
                self.seen(pid, (pid, st.start), launch)

    def record(self) -> dict:
        """The binding record (:func:`apptune.core.run.procfs.observe_binding`)."""
        try:
            node = os.sched_getaffinity(0)
        except OSError:
            node = set()
        return observe_binding(
            self.affinity, node, cpu_topology(self.sysfs), self.name, self.launches
        )


def binding_problem(
    observed: RunBinding | None, binding: str | None, threads_per_rank: int = 1
) -> str | None:
    """Why the CPUs the program's ranks could run on (the runner's record of
    :meth:`Ranks.record`) are not the binding asked for (:data:`apptune.placement.BINDINGS`);
    None when they are, when no binding was asked for or when no rank was seen.

    Each launch of the program in the job (an integrity pass before the timed run, say) is
    judged on its own ranks: a rank count or a CPU of one launch never counts for another."""
    ranks = observed.ranks if observed else []
    if not binding or not ranks:
        return None
    launches: dict[str | None, list[RankBinding]] = {}
    for r in ranks:
        launches.setdefault(r.launch, []).append(r)
    said = [
        why
        for launch, rs in launches.items()
        if (why := _launch_problem(rs, launch, observed.node_cpus, binding, threads_per_rank))
    ]
    if not said:
        return None
    return "; ".join(said) + ": the launcher did not place them as asked"


def _launch_problem(
    ranks: list[RankBinding], launch, node, binding, threads_per_rank
) -> str | None:
    """:func:`binding_problem` of the ranks of one launch (``launch``: its step, or None)."""
    of = f" of {launch}" if launch else ""
    where = f"of the {len(ranks)} rank(s){of} seen on the job's first node"
    if binding == "core":
        bad = [r for r in ranks if r.cores > threads_per_rank]
        asked = f"bound to {threads_per_rank} core(s) each"
    elif binding == "socket":
        bad = [r for r in ranks if r.sockets > 1]
        asked = "bound to one socket each"
    else:
        bad = [r for r in ranks if r.cpus != node]
        asked = f"unbound (each on all CPUs the job has there, {node})"
    if not bad:
        return None
    got = ", ".join(sorted({r.cpus for r in bad}))
    return f"the placement asked for ranks {asked}, but {len(bad)} {where} could run on CPUs {got}"
