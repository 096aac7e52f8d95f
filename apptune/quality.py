"""Run quality: how much other work disturbed a timed run, measured while it ran.

A timing is only worth a verdict when the machine was the job's. During every
timed run (:mod:`apptune.runner`) the node the job script runs on is watched:

* **CPU steal** (``/proc/stat``): time the hypervisor gave to other guests;
* **CPU used outside the job**: all CPU time of the node (``/proc/stat``) minus the
  job's own (its reaped process tree, and its tasks found by their tag when a
  scheduler starts them), the runner's and the harness's (ReFrame, which polls the
  job and samples energy); the heaviest other processes are named;
* **frequency** where readable (cpufreq, else ``/proc/cpuinfo``): its spread;
* **load**: runnable processes (``procs_running``) and the 1-minute load average,
  recorded, not graded (the job's own processes are part of them).

The grade is ``clean`` when every limit holds, ``disturbed`` (with each reason)
when one does not, ``unmeasured`` when the node could not be read. Disturbed and
unmeasured runs give no performance verdict, never enter a baseline and never
enter the history's change-point series. Limits (partition ``extras.run_quality``,
overridable per run): ``max_steal`` 2 %, ``max_outside_cpu`` 5 % of the node's
CPUs, ``max_freq_spread`` 10 %.

:func:`wait_for_quiet` waits (bounded) until a one-second window meets the same
limits before the timed region starts.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
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
            if not 0 < v < 1:
                raise ValueError(f"run-quality limit {k}={v}: must be between 0 and 1")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- /proc
def cpu_times(proc: Path) -> dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat (jiffies), plus ``cpus`` and ``procs_running``."""
    out: dict[str, int] = {"cpus": 0}
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    for line in (proc / "stat").read_text().splitlines():
        parts = line.split()
        if parts[0] == "cpu":
            out.update(
                {n: int(v) for n, v in zip(names, parts[1:], strict=False)}
            )  # guest columns follow
        elif parts[0].startswith("cpu"):
            out["cpus"] += 1
        elif parts[0] == "procs_running":
            out["procs_running"] = int(parts[1])
    out["busy"] = sum(out.get(n, 0) for n in ("user", "nice", "system", "irq", "softirq"))
    out["total"] = out["busy"] + sum(out.get(n, 0) for n in ("idle", "iowait", "steal"))
    return out


def _proc_stat(proc: Path, pid: int) -> tuple[str, int, float] | None:
    """(comm, ppid, user+system CPU seconds) of a live process."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    return (
        text[text.find("(") + 1 : text.rfind(")")],
        int(rest[1]),
        (int(rest[11]) + int(rest[12])) / CLK_TCK,
    )


def processes(proc: Path) -> dict[int, tuple[str, int, float]]:
    out = {}
    for d in proc.iterdir():
        if d.name.isdigit():
            st = _proc_stat(proc, int(d.name))
            if st is not None:
                out[int(d.name)] = st
    return out


def tagged(proc: Path, tag: str) -> set[int]:
    """Processes whose environment holds ``APPTUNE_RUN_TAG=tag`` (the job's tasks that a
    scheduler started outside the runner's process tree); unreadable ones are skipped."""
    needle = f"APPTUNE_RUN_TAG={tag}".encode()
    out = set()
    for d in proc.iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "environ").read_bytes().split(b"\0"):
                    out.add(int(d.name))
            except OSError:
                continue
    return out


def frequency_mhz(proc: Path, sysfs: Path) -> list[float]:
    """Current frequency of every CPU (cpufreq in kHz, else /proc/cpuinfo's MHz); [] if unknown."""
    f = []
    for p in sorted((sysfs / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        try:
            f.append(int(p.read_text()) / 1000)
        except (OSError, ValueError):
            continue
    if f:
        return f
    try:
        return [
            float(line.split(":")[1])
            for line in (proc / "cpuinfo").read_text().splitlines()
            if line.startswith("cpu MHz")
        ]
    except (OSError, ValueError, IndexError):
        return []


def load1(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _rusage_cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


# ----------------------------------------------------------------------------- monitor
class Monitor:
    """Watches the node from :meth:`start` to :meth:`stop` (a thread samples frequency,
    runnable processes and the job's tagged tasks once a second)."""

    def __init__(
        self,
        proc: str | os.PathLike = "/proc",
        sysfs: str | os.PathLike = "/sys",
        harness_pid: int | None = None,
        tag: str | None = None,
        hz: float = 1.0,
    ):
        self.proc, self.sysfs = Path(proc), Path(sysfs)
        self.harness_pid = harness_pid
        self.tag = tag
        self.period = 1.0 / hz
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.freq: list[float] = []
        self.running: list[int] = []
        self.task_cpu: dict[int, float] = {}
        self.error: str | None = None

    def _harness_cpu(self) -> float | None:
        if not self.harness_pid:
            return None
        st = _proc_stat(self.proc, self.harness_pid)
        return st[2] if st else None

    def start(self) -> None:
        try:
            self.t0 = time.monotonic()
            self.cpu0 = cpu_times(self.proc)
            self.procs0 = processes(self.proc)
            self.harness0 = self._harness_cpu()
            self.load0 = load1(self.proc)
        except (OSError, ValueError, KeyError, IndexError) as e:
            self.error = f"cannot read {self.proc}: {e}"
            return
        self.children0 = _rusage_cpu(resource.RUSAGE_CHILDREN)
        self.self0 = _rusage_cpu(resource.RUSAGE_SELF)
        self._thread = threading.Thread(target=self._run, name="apptune-quality", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.freq += frequency_mhz(self.proc, self.sysfs)
                self.running.append(cpu_times(self.proc).get("procs_running", 0))
                if self.tag:
                    for pid in tagged(self.proc, self.tag):
                        st = _proc_stat(self.proc, pid)
                        if st is not None and pid != os.getpid():
                            self.task_cpu[pid] = max(self.task_cpu.get(pid, 0.0), st[2])
            except (OSError, ValueError, IndexError):
                pass
            if self._stop.wait(self.period):
                return

    def stop(self, limits: Limits = Limits()) -> dict:
        """The run-quality record (measurements, grade and reasons)."""
        if self.error:
            return {"grade": "unmeasured", "reasons": [self.error], "limits": limits.to_dict()}
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        try:
            cpu1 = cpu_times(self.proc)
            procs1 = processes(self.proc)
        except (OSError, ValueError, KeyError, IndexError) as e:
            return {
                "grade": "unmeasured",
                "reasons": [f"cannot read {self.proc}: {e}"],
                "limits": limits.to_dict(),
            }
        wall = time.monotonic() - self.t0
        harness1 = self._harness_cpu()
        d = {k: cpu1.get(k, 0) - self.cpu0.get(k, 0) for k in ("busy", "total", "steal")}
        ncpus = cpu1.get("cpus") or os.cpu_count() or 1
        busy_s = d["busy"] / CLK_TCK
        job_s = _rusage_cpu(resource.RUSAGE_CHILDREN) - self.children0 + sum(self.task_cpu.values())
        runner_s = _rusage_cpu(resource.RUSAGE_SELF) - self.self0
        harness_s = (
            (harness1 - self.harness0)
            if harness1 is not None and self.harness0 is not None
            else 0.0
        )
        outside_s = max(0.0, busy_s - job_s - runner_s - harness_s)
        capacity = wall * ncpus
        m = {
            "wall_s": round(wall, 3),
            "cpus": ncpus,
            "steal_fraction": round(d["steal"] / d["total"], 4) if d["total"] > 0 else 0.0,
            "outside_cpu_s": round(outside_s, 3),
            "outside_cpu_fraction": round(outside_s / capacity, 4) if capacity > 0 else 0.0,
            "job_cpu_s": round(job_s, 3),
            "runner_cpu_s": round(runner_s, 3),
            "harness_cpu_s": round(harness_s, 3),
            "load1": [self.load0, load1(self.proc)],
            "procs_running_max": max(self.running) if self.running else None,
            "freq_mhz": [min(self.freq), max(self.freq)] if self.freq else None,
            "others": self._others(procs1, wall),
        }
        grade, reasons = judge(m, limits)
        return {"grade": grade, "reasons": reasons, "limits": limits.to_dict(), **m}

    def _others(self, procs1: dict, wall: float) -> list[dict]:
        """The processes (other than the runner, its children and the harness) that used the
        most CPU during the run."""
        me = os.getpid()
        skip = {me, self.harness_pid, *self.task_cpu}
        used = []
        for pid, (comm, ppid, cpu) in procs1.items():
            if pid in skip or ppid == me:
                continue
            before = self.procs0.get(pid)
            start = before[2] if before and before[0] == comm else 0.0
            if cpu - start > 0:
                used.append({"pid": pid, "name": comm, "cpu_s": round(cpu - start, 2)})
        used.sort(key=lambda x: -x["cpu_s"])
        return used[:TOP_OTHERS]


def judge(m: dict, limits: Limits) -> tuple[str, list[str]]:
    """Grade and reasons of a run's measurements."""
    reasons = []
    if m["steal_fraction"] > limits.max_steal:
        reasons.append(
            f"CPU steal {m['steal_fraction']:.1%} (limit {limits.max_steal:.0%}): "
            "the hypervisor ran other work on these CPUs"
        )
    if m["outside_cpu_fraction"] > limits.max_outside_cpu:
        who = ", ".join(f"{o['name']} ({o['cpu_s']:g} s)" for o in m.get("others") or [])
        reasons.append(
            f"other processes used {m['outside_cpu_fraction']:.1%} of the {m['cpus']} CPUs "
            f"(limit {limits.max_outside_cpu:.0%})" + (f": {who}" if who else "")
        )
    f = m.get("freq_mhz")
    if f and f[1] > 0 and (f[1] - f[0]) / f[1] > limits.max_freq_spread:
        reasons.append(
            f"CPU frequency varied {(f[1] - f[0]) / f[1]:.0%} ({f[0]:.0f}-{f[1]:.0f} MHz, "
            f"limit {limits.max_freq_spread:.0%})"
        )
    return ("disturbed" if reasons else "clean"), reasons


def summary(q: dict | None) -> str:
    """One phrase for a report: ``clean`` or ``disturbed: <reasons>``."""
    if not q:
        return "unmeasured: no run-quality record"
    if q.get("grade") == "clean":
        return "clean"
    return (
        f"{q.get('grade', 'unmeasured')}: {'; '.join(q.get('reasons') or ['no reason recorded'])}"
    )


def wait_for_quiet(
    max_wait_s: float,
    limits: Limits = Limits(),
    harness_pid: int | None = None,
    proc: str | os.PathLike = "/proc",
    window_s: float = 1.0,
) -> dict:
    """Wait until a ``window_s`` window meets ``limits`` (at most ``max_wait_s``).

    Returns ``{waited_s, quiet, outside_cpu_fraction, steal_fraction}`` of the last window:
    ``quiet`` False means the wait gave up and the run starts anyway (it is graded as usual)."""
    proc = Path(proc)
    t_start = time.monotonic()
    mon_harness = Monitor(proc, harness_pid=harness_pid)
    while True:
        a = cpu_times(proc)
        h0 = mon_harness._harness_cpu() or 0.0
        s0 = _rusage_cpu(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        time.sleep(window_s)
        b = cpu_times(proc)
        dt = time.monotonic() - t0
        own = _rusage_cpu(resource.RUSAGE_SELF) - s0 + ((mon_harness._harness_cpu() or 0.0) - h0)
        busy = (b["busy"] - a["busy"]) / CLK_TCK
        total = b["total"] - a["total"]
        outside = max(0.0, busy - own) / (dt * (b.get("cpus") or 1))
        steal = (b["steal"] - a["steal"]) / total if total > 0 else 0.0
        waited = time.monotonic() - t_start
        quiet = outside <= limits.max_outside_cpu and steal <= limits.max_steal
        if quiet or waited >= max_wait_s:
            return {
                "waited_s": round(waited, 1),
                "quiet": quiet,
                "outside_cpu_fraction": round(outside, 4),
                "steal_fraction": round(steal, 4),
            }
