"""Run quality: how much other work disturbed a timed run, measured while it ran.

A timing is only worth a verdict when the machine was the job's. During every
timed run (:mod:`apptune.core.run.runner`) the node the job script runs on is watched:

* **CPU steal** (``/proc/stat``): time the hypervisor gave to other guests;
* **CPU used outside the job**: all CPU time of the node (``/proc/stat``) minus the
  job's own (its reaped process tree, and its tasks found by their tag when a
  scheduler starts them), the runner's and the harness's: the processes that started
  the run (job script, ``slurmstepd``, ReFrame and apptune where they run on this
  node) and the rest of the run's Slurm job (its step daemons, the energy agents).
  Every process is sampled once a second, and a short-lived one's CPU time is found in
  its parent's reaped children's time (``cutime``/``cstime``), so the heaviest other
  processes are named, compilers that lived between two samples included;
* **frequency** where readable (cpufreq, else ``/proc/cpuinfo``): its spread;
* **load**: runnable processes (``procs_running``) and the 1-minute load average,
  recorded, not graded (the job's own processes are part of them).

The CPUs each rank of the measured program may run on are recorded too, with the launch
(the runner's step) that started it (:func:`apptune.core.run.procfs.observe_binding`): the mask
a rank holds last, read often while it is young, since MPI_Init moves a rank to one CPU for
a while (:mod:`apptune.core.run.ranks`); :func:`apptune.core.run.ranks.binding_problem` judges each
launch's ranks.

The grade is ``clean`` when every limit holds, ``disturbed`` (with each reason)
when one does not, ``unmeasured`` when the node could not be read. Disturbed and
unmeasured runs give no performance verdict, never enter a baseline and never
enter the history's change-point series. Limits (a cluster partition's
``run_quality``, a settings.py partition's ``extras.run_quality``): ``max_steal`` 2 %,
``max_outside_cpu`` 5 % of the node's CPUs, ``max_freq_spread`` 10 %.

:func:`wait_for_quiet` waits (bounded) until a one-second window meets the same
limits before the timed region starts.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import loaded
from .procfs import (
    CLK_TCK,
    Stat,
    ancestors,
    boot_id,
    cpu_times,
    frequency_by_cpu,
    load1,
    process_cmdline,
    process_environ,
    processes,
    rusage_cpu,
)
from .ranks import NEW_RANKS_S, RECHECK_S, Ranks

if TYPE_CHECKING:
    from ...models import RunQuality

GRADES = ("clean", "disturbed", "unmeasured")
#: How many of the heaviest other processes a disturbed record names.
TOP_OTHERS = 3


@dataclass(frozen=True)
class Limits:
    #: Largest share of CPU time the hypervisor may steal.
    max_steal: float = 0.02
    #: Largest share of the node's CPU capacity (wall x CPUs) other processes may use.
    max_outside_cpu: float = 0.05
    #: Largest (max - min) / max of the CPU frequency seen during the run.
    max_freq_spread: float = 0.10

    @classmethod
    def from_dict(cls, d: dict | None) -> Limits:
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown run-quality limit(s) {', '.join(sorted(unknown))} "
                f"(known: {', '.join(cls.__dataclass_fields__)})"
            )
        out = cls(**{k: float(v) for k, v in d.items()})
        for k, v in asdict(out).items():
            if not 0 < v <= 1:
                raise ValueError(
                    f"run-quality limit {k}={v}: must be more than 0 and at most 1 "
                    "(a fraction; 1 turns the limit off)"
                )
        return out

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- monitor
#: What a process seen during a run is to the accounting (:class:`Monitor`):
RUNNER = "runner"  # the runner: its own CPU time (getrusage)
CHILD = "child"  # started by the runner (launcher, ranks under mpirun): its reaped children's time
JOB = "job"  # the job's tasks a scheduler started outside the runner (srun): tagged
HARNESS = "harness"  # started the run: the runner's parents (job script, slurmstepd, ReFrame,
#                      apptune) and the harness's process with its parents
OWN_JOB = "own-job"  # the rest of the run's own Slurm job: energy agents, their srun, its
#                      slurmstepd processes
OTHER = "other"


@dataclass
class SeenProcess:
    """One process as the samples saw it: CPU seconds when first seen (0 when it started
    during the run) and when last seen."""

    pid: int
    comm: str
    ppid: int
    own0: float
    kids0: float
    own: float
    kids: float
    #: The samples it was first and last seen in.
    first: int
    last: int
    kind: str = OTHER


class Monitor:
    """Watches the node from :meth:`start` to :meth:`stop`: a thread samples frequency,
    runnable processes and every process once a second (``watch=False``: only at start
    and stop).

    CPU time is accounted per process, short-lived ones included: a process that ends is
    reaped by its parent, whose children's time (``cutime``/``cstime`` in /proc/PID/stat)
    then holds all of its CPU time. So a process's share of the run is its own CPU time
    plus the growth of its children's time, less the time of the children the samples saw
    (counted by themselves): compilers that lived between two samples are the CPU time of
    their ``make``. The harness's processes (:data:`HARNESS`, :data:`OWN_JOB`) never count
    as other work; the job's are the job's."""

    def __init__(
        self,
        proc: str | os.PathLike = "/proc",
        sysfs: str | os.PathLike = "/sys",
        *,
        harness_pid: int | None = None,
        harness_boot_id: str | None = None,
        tag: str | None = None,
        job_id: str | None = None,
        program: str | None = None,
        hz: float = 1.0,
        probe: Callable[[], dict] | None = None,
    ):
        self.proc, self.sysfs = Path(proc), Path(sysfs)
        self.harness_pid = harness_pid
        self.harness_boot_id = harness_boot_id
        self.tag = f"APPTUNE_RUN_TAG={tag}".encode() if tag else None
        self.job_id = job_id
        self.job = f"SLURM_JOB_ID={job_id}".encode() if job_id else None
        self.program = program
        self.period = 1.0 / hz
        self.me = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.samples = 0
        self.seen: dict[tuple[int, int], SeenProcess] = {}
        self.current: dict[int, tuple[int, int]] = {}
        self.harness: set[int] = set()
        self.freq: list[float] = []
        #: Each CPU's frequency samples (MHz), for the frequency a run asked for.
        self.freq_cpu: dict[int, list[float]] = {}
        #: ``probe()`` (the machine knobs' state) at each sample, the last one kept.
        self.probe, self.probed = probe, None
        self.running: list[int] = []
        #: The program's ranks and their CPUs (None without a program to watch).
        self.ranks = Ranks(program, self.proc, self.sysfs) if program else None
        self.error: str | None = None

    def begin_launch(self, label: str) -> None:
        """The runner starts its step ``label``: the ranks seen from now on are its (set
        without the sampler's lock, which a sample holds while it reads every process)."""
        if self.ranks is not None:
            self.ranks.begin_launch(label)

    # ------------------------------------------------------------------ sampling
    def _sample(self) -> None:
        # before the listing: a rank listed is of this launch or a later one
        launch = self.ranks.launch if self.ranks is not None else None
        procs = processes(self.proc)
        with self._lock:
            idx = self.samples
            self.samples += 1
            new = []
            for pid, st in procs.items():
                key = (pid, st.start)
                s = self.seen.get(key)
                if s is None:
                    born = idx > 0
                    self.seen[key] = SeenProcess(
                        pid,
                        st.comm,
                        st.ppid,
                        0.0 if born else st.own,
                        0.0 if born else st.kids,
                        st.own,
                        st.kids,
                        idx,
                        idx,
                    )
                    new.append(key)
                else:
                    if s.comm != st.comm:  # a new program (exec): its environment is new too
                        new.append(key)
                    s.comm, s.ppid, s.own, s.kids, s.last = st.comm, st.ppid, st.own, st.kids, idx
            self.current = {pid: (pid, st.start) for pid, st in procs.items()}
            if idx == 0:
                self.harness = self._harness_pids(procs)
                if self.ranks is not None:
                    self.ranks.before(procs)
            # a slurmstepd names its job only once it has set its title ("slurmstepd:
            # [JOB.STEP]"): every one is looked at again at each sample
            new += [
                k
                for k in self.current.values()
                if k not in new and self.seen[k].comm == "slurmstepd"
            ]
            kinds: dict = {}
            pending = set(new)
            for key in new:
                self.seen[key].kind = self._kind(key, kinds, pending)
            if self.ranks is not None:
                self._watch_ranks(launch)

    def _harness_pids(self, procs: dict[int, Stat]) -> set[int]:
        """The processes that started this run: the runner's parents, and the harness's
        process (ReFrame, apptune) with its parents when it runs on this machine."""
        me = procs.get(self.me)
        out = set(ancestors(procs, me.ppid if me else os.getppid()))
        if self.harness_pid and (
            self.harness_boot_id is None or self.harness_boot_id == boot_id(self.proc)
        ):
            out |= set(ancestors(procs, self.harness_pid))
        return out - {self.me}

    def _kind(self, key: tuple[int, int], kinds: dict, pending: set) -> str:
        """What the process ``key`` is (:data:`RUNNER` ... :data:`OTHER`); those not in
        ``pending`` keep the kind they were given."""
        if key not in pending:
            return self.seen[key].kind
        if key in kinds:
            return kinds[key]
        kinds[key] = OTHER  # a loop in the parents ends here
        pid = key[0]
        s = self.seen[key]
        if pid == self.me:
            kind = RUNNER
        elif pid in self.harness:
            kind = HARNESS
        else:
            parent = self.current.get(s.ppid)
            pk = self._kind(parent, kinds, pending) if parent in self.seen and s.ppid > 1 else None
            env = process_environ(self.proc, pid)
            if pk in (RUNNER, CHILD):
                kind = CHILD
            elif self.tag and self.tag in env:
                kind = JOB
            elif self.job and self.job in env:
                kind = OWN_JOB
            elif (
                self.job_id
                and s.comm == "slurmstepd"
                and (
                    process_cmdline(self.proc, pid).startswith(f"slurmstepd: [{self.job_id}.")
                    # not titled yet: a step being started, most likely this job's own
                    # (the harness starts its energy agents' steps while the job runs); a
                    # step of another job names it once titled, at the next sample
                    or not process_cmdline(self.proc, pid).startswith("slurmstepd: [")
                )
            ):
                kind = OWN_JOB
            elif not env and pk in (JOB, OWN_JOB):  # gone before its environment was read
                kind = pk
            else:
                kind = OTHER
        kinds[key] = kind
        return kind

    def _watch_ranks(self, launch: str | None) -> None:
        """The ranks of the program among the job's processes (:class:`Ranks`)."""
        name = self.ranks.name
        for key in self.current.values():
            s = self.seen[key]
            if s.last != self.samples - 1 or s.kind not in (JOB, CHILD, OWN_JOB) or s.comm != name:
                continue
            if self.ranks.is_rank(s.pid):
                self.ranks.seen(s.pid, key, launch, sample=self.samples)

    def _recheck_young(self, look: bool = True) -> None:
        """Between two samples: the young ranks' masks and the young launch's new ranks."""
        if self.ranks is not None:
            with self._lock:
                self.ranks.recheck(look)

    def start(self, watch: bool = True) -> None:
        try:
            self.t0 = time.monotonic()
            self.cpu0 = cpu_times(self.proc)
            self._sample()
            self.load0 = load1(self.proc)
            self._frequency()
        except (OSError, ValueError, KeyError, IndexError) as e:
            self.error = f"cannot read {self.proc}: {e}"
            return
        self.children0 = rusage_cpu(resource.RUSAGE_CHILDREN)
        self.self0 = rusage_cpu(resource.RUSAGE_SELF)
        if watch:
            self._thread = threading.Thread(target=self._run, name="apptune-quality", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        # a sample every period; between two, the young ranks' masks every RECHECK_S and the
        # young launch's new ranks every NEW_RANKS_S
        tick = min(RECHECK_S, self.period) if self.program else self.period
        due = time.monotonic() + self.period
        look = 0.0
        while not self._stop.wait(tick):
            try:
                if self.program:
                    now = time.monotonic()
                    self._recheck_young(look=now >= look)
                    look = look if now < look else now + NEW_RANKS_S
                if time.monotonic() < due:
                    continue
                self._frequency()
                self.running.append(cpu_times(self.proc).get("procs_running", 0))
                self._sample()
                due = time.monotonic() + self.period
            except (OSError, ValueError, IndexError, KeyError):
                pass

    def _frequency(self) -> None:
        for cpu, mhz in frequency_by_cpu(self.proc, self.sysfs).items():
            self.freq.append(mhz)
            self.freq_cpu.setdefault(cpu, []).append(mhz)
        if self.probe is not None:
            self.probed = self.probe()

    # ------------------------------------------------------------------ accounting
    def account(self) -> dict:
        """CPU seconds of the job's tasks (outside the runner's tree), of the harness and of
        each other process, from the samples (:class:`SeenProcess`)."""
        last = self.samples - 1
        kids = {key: s.kids - s.kids0 for key, s in self.seen.items()}
        by_pid: dict[int, list[tuple[int, int]]] = {}
        for key in self.seen:
            by_pid.setdefault(key[0], []).append(key)

        def parent(s: SeenProcess, at: int) -> tuple[int, int] | None:
            for key in by_pid.get(s.ppid, ()):
                if self.seen[key].first <= at <= self.seen[key].last:
                    return key
            return None

        names: dict[tuple[int, int], set[str]] = {}
        reaped_job: set[tuple[int, int]] = set()  # reaped the job's tasks: the rest is theirs
        for s in self.seen.values():
            if s.last == last:
                continue
            # it ended after sample s.last, and all its CPU time went into the children's
            # time of the first of its parents seen after that
            up = parent(s, s.last)
            for _ in range(64):
                if up is None or self.seen[up].last > s.last:
                    break
                up = parent(self.seen[up], s.last)
            if up is not None:
                kids[up] -= s.own + s.kids
                names.setdefault(up, set()).add(s.comm)
                if s.kind == JOB:
                    reaped_job.add(up)
        job = harness = 0.0
        others: dict[str, dict] = {}

        def other(name: str, pid: int, cpu: float):
            if cpu > 0:
                o = others.setdefault(name, {"name": name, "pid": pid, "cpu_s": 0.0, "n": 0})
                o["cpu_s"] += cpu
                o["n"] += 1

        for key, s in self.seen.items():
            own = max(0.0, s.own - s.own0)
            reaped = max(0.0, kids[key])
            if s.kind in (RUNNER, CHILD):  # getrusage counts them
                continue
            if s.kind == JOB:
                job += own + reaped
            elif s.kind in (HARNESS, OWN_JOB):
                harness += own
                if key in reaped_job:  # the tasks' last moments, after the last sample
                    job += reaped
                else:
                    harness += reaped
            else:
                other(s.comm, s.pid, own)
                seen = sorted(names.get(key, ()))
                label = f"{s.comm}'s children" + (f" ({', '.join(seen[:3])})" if seen else "")
                other(label, s.pid, reaped)
        return {"job": job, "harness": harness, "others": list(others.values())}

    def stop(self, limits: Limits = Limits()) -> dict:
        """The run-quality record (measurements, grade and reasons)."""
        if self.error:
            return {"grade": "unmeasured", "reasons": [self.error], "limits": limits.to_dict()}
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        try:
            cpu1 = cpu_times(self.proc)
            self._sample()
        except (OSError, ValueError, KeyError, IndexError) as e:
            return {
                "grade": "unmeasured",
                "reasons": [f"cannot read {self.proc}: {e}"],
                "limits": limits.to_dict(),
            }
        wall = time.monotonic() - self.t0
        acc = self.account()
        d = {k: cpu1.get(k, 0) - self.cpu0.get(k, 0) for k in ("busy", "total", "steal")}
        ncpus = cpu1.get("cpus") or os.cpu_count() or 1
        busy_s = d["busy"] / CLK_TCK
        job_s = rusage_cpu(resource.RUSAGE_CHILDREN) - self.children0 + acc["job"]
        runner_s = rusage_cpu(resource.RUSAGE_SELF) - self.self0
        outside_s = max(0.0, busy_s - job_s - runner_s - acc["harness"])
        capacity = wall * ncpus
        others = sorted(acc["others"], key=lambda o: -o["cpu_s"])
        m = {
            "wall_s": round(wall, 3),
            "cpus": ncpus,
            "steal_fraction": round(d["steal"] / d["total"], 4) if d["total"] > 0 else 0.0,
            "outside_cpu_s": round(outside_s, 3),
            "outside_cpu_fraction": round(outside_s / capacity, 4) if capacity > 0 else 0.0,
            "job_cpu_s": round(job_s, 3),
            "runner_cpu_s": round(runner_s, 3),
            "harness_cpu_s": round(acc["harness"], 3),
            # the part of the outside CPU time the named processes account for
            "others_cpu_s": round(sum(o["cpu_s"] for o in others), 3),
            "load1": [self.load0, load1(self.proc)],
            "procs_running_max": max(self.running) if self.running else None,
            "freq_mhz": [min(self.freq), max(self.freq)] if self.freq else None,
            "others": [
                {"pid": o["pid"], "name": o["name"], "cpu_s": round(o["cpu_s"], 2)}
                | ({"processes": o["n"]} if o["n"] > 1 else {})
                for o in others[:TOP_OTHERS]
            ],
        }
        grade, reasons = judge(m, limits)
        return {"grade": grade, "reasons": reasons, "limits": limits.to_dict(), **m}

    def libraries(self) -> list[dict]:
        """The libraries of interest the program's ranks on this node loaded, with the
        sha256 of each (:func:`apptune.core.run.loaded.record`); empty when no rank was seen."""
        return loaded.record(self.ranks.libraries() if self.ranks is not None else set())

    def binding(self) -> dict | None:
        """The CPUs the program's ranks on this node could run on
        (:func:`apptune.core.run.procfs.observe_binding`); None without a program to watch."""
        return self.ranks.record() if self.ranks is not None else None


def exceeds(value: float, limit: float) -> bool:
    """Whether a measured fraction is over its limit; a limit of 1 is no limit (a fraction
    measured a little over 1 is sampling's skew, not more than all of the node)."""
    return limit < 1 and value > limit


def judge(m: dict, limits: Limits) -> tuple[str, list[str]]:
    """Grade and reasons of a run's measurements."""
    reasons = []
    if exceeds(m["steal_fraction"], limits.max_steal):
        reasons.append(
            f"CPU steal {m['steal_fraction']:.1%} (limit {limits.max_steal:.0%}): "
            "the hypervisor ran other work on these CPUs"
        )
    if exceeds(m["outside_cpu_fraction"], limits.max_outside_cpu):
        who = ", ".join(
            f"{o['name']} ({o['cpu_s']:g} s"
            + (f", {o['processes']} processes)" if o.get("processes", 1) > 1 else ")")
            for o in m.get("others") or []
        )
        reasons.append(
            f"other processes used {m['outside_cpu_fraction']:.1%} of the {m['cpus']} CPUs "
            f"(limit {limits.max_outside_cpu:.0%})" + (f": {who}" if who else "")
        )
    f = m.get("freq_mhz")
    if f and f[1] > 0 and exceeds((f[1] - f[0]) / f[1], limits.max_freq_spread):
        reasons.append(
            f"CPU frequency varied {(f[1] - f[0]) / f[1]:.0%} ({f[0]:.0f}-{f[1]:.0f} MHz, "
            f"limit {limits.max_freq_spread:.0%})"
        )
    return ("disturbed" if reasons else "clean"), reasons


def summary(q: RunQuality | None) -> str:
    """One phrase for a report: ``clean`` or ``disturbed: <reasons>``."""
    if q is None:
        return "unmeasured: no run-quality record"
    if q.grade == "clean":
        return "clean"
    return f"{q.grade or 'unmeasured'}: {'; '.join(q.reasons or ['no reason recorded'])}"


def at_time_limit(q: RunQuality | None) -> str:
    """What the monitor saw of a run stopped at its time limit (``q``: the runner record's
    quality), one phrase: a busy node makes a run slow; on a quiet one the limit is too
    short for the run, or the run hung."""
    if q is None or not q.grade:
        return "no run-quality record (the run was stopped before its runner wrote one)"
    if q.grade == "clean":
        return (
            "the run-quality monitor saw the node quiet (clean): the limit is too short for "
            "this run on this machine, or the run hung"
        )
    reasons = "; ".join(q.reasons or ["no reason recorded"])
    return f"the node was busy: the run-quality monitor graded the run {q.grade} ({reasons})"


def quiet_wait_s(extras: dict, environ=None) -> float:
    """How long a run waits for a quiet node: ``apptune run --wait-for-quiet``
    (``$APPTUNE_QUIET_WAIT``), else the partition's ``quiet_wait_s``, else
    ``$APPTUNE_QUIET_WAIT_DEFAULT`` (``ci/nightly.sh``'s 120 s for a partition without its
    own), else 0."""
    env = os.environ if environ is None else environ
    return float(
        env.get("APPTUNE_QUIET_WAIT")
        or extras.get("quiet_wait_s")
        or env.get("APPTUNE_QUIET_WAIT_DEFAULT")
        or 0
    )


def wait_for_quiet(
    max_wait_s: float,
    limits: Limits = Limits(),
    harness_pid: int | None = None,
    proc: str | os.PathLike = "/proc",
    window_s: float = 1.0,
    **who,
) -> dict:
    """Wait until a ``window_s`` window meets ``limits`` (at most ``max_wait_s``); the
    windows are measured as a run is (:class:`Monitor`, given ``who``: the harness's boot
    id, the job's tag and Slurm job id), so the harness's own processes do not count.

    Returns ``{waited_s, quiet, outside_cpu_fraction, steal_fraction, others}`` of the last
    window: ``quiet`` False means the wait gave up and the run starts anyway (it is graded
    as usual)."""
    t_start = time.monotonic()
    while True:
        mon = Monitor(proc, harness_pid=harness_pid, **who)
        mon.start(watch=False)
        time.sleep(window_s)
        q = mon.stop(limits)
        waited = time.monotonic() - t_start
        outside = q.get("outside_cpu_fraction", 1.0)
        steal = q.get("steal_fraction", 0.0)
        quiet = q["grade"] != "unmeasured" and (
            not exceeds(outside, limits.max_outside_cpu) and not exceeds(steal, limits.max_steal)
        )
        if quiet or waited >= max_wait_s:
            return {
                "waited_s": round(waited, 1),
                "quiet": quiet,
                "outside_cpu_fraction": outside,
                "steal_fraction": steal,
                "others": q.get("others", []),
            }
