"""What a Linux node says of itself, read from ``/proc`` and ``/sys`` (roots given, so a
test can fake them): CPU times, processes with their parents, environment and command
line, the boot id, the CPUs a process may run on and the cores they belong to, the
frequency and the load. :mod:`apptune.core.run.quality` grades a run with them."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


@dataclass(frozen=True)
class Stat:
    """What /proc/PID/stat says of a process: its name, parent, start time (clock ticks
    after boot: with the pid, which process it is) and CPU seconds, its own (user + system)
    and its reaped children's (cutime + cstime: every child it waited for, with theirs)."""

    comm: str
    ppid: int
    start: int
    own: float
    kids: float


def read_stat(proc: Path, pid: int) -> Stat | None:
    """The :class:`Stat` of a process; None when it is gone or unreadable."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return Stat(
            comm=text[text.find("(") + 1 : text.rfind(")")],
            ppid=int(rest[1]),
            start=int(rest[19]),
            own=(int(rest[11]) + int(rest[12])) / CLK_TCK,
            kids=(int(rest[13]) + int(rest[14])) / CLK_TCK,
        )
    except (IndexError, ValueError):
        return None


def processes(proc: Path) -> dict[int, Stat]:
    """Every process of ``proc`` that could be read."""
    out = {}
    for d in proc.iterdir():
        if d.name.isdigit():
            st = read_stat(proc, int(d.name))
            if st is not None:
                out[int(d.name)] = st
    return out


def process_environ(proc: Path, pid: int) -> list[bytes]:
    try:
        return (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return []


def process_cmdline(proc: Path, pid: int) -> str:
    try:
        return (
            (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def mapped_libraries(proc: Path, pid: int) -> set[str]:
    """The shared objects a process has mapped (``/proc/PID/maps``: the files whose name
    holds ``.so``, as the kernel names them: symbolic links resolved); empty when it is
    gone or unreadable."""
    try:
        text = (proc / str(pid) / "maps").read_text(errors="replace")
    except OSError:
        return set()
    out = set()
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5].rsplit("/", 1)[-1]:
            out.add(parts[5].removesuffix(" (deleted)"))
    return out


def boot_id(proc: str | os.PathLike = "/proc") -> str | None:
    """This boot of this machine's kernel: a process id means the same process only where
    the boot id is the same (the harness may run on another node than the job)."""
    try:
        return Path(proc, "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def ancestors(procs: dict[int, Stat], pid: int) -> list[int]:
    """``pid`` and its parents up to (not including) init, as ``procs`` knows them."""
    out, seen = [], set()
    while pid > 1 and pid not in seen and pid in procs:
        out.append(pid)
        seen.add(pid)
        pid = procs[pid].ppid
    return out


# ----------------------------------------------------------------------------- binding
def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` (Linux's CPU list format) as a set."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def format_cpulist(cpus) -> str:
    """A set of CPUs in Linux's list format, e.g. ``0-3,8``."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def allowed_cpus(proc: Path, pid: int) -> set[int] | None:
    """The CPUs a process may run on (``Cpus_allowed_list``); None when it is gone."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpulist(line.split(":", 1)[1])
    except (OSError, ValueError):
        return None
    return None


def cpu_topology(sysfs: Path) -> dict[int, tuple[int, int]]:
    """CPU -> (socket, core) from sysfs; {} where the topology is not readable (each CPU
    then counts as a core of its own, on one socket)."""
    out = {}
    for d in (sysfs / "devices/system/cpu").glob("cpu[0-9]*"):
        try:
            pkg = int((d / "topology/physical_package_id").read_text())
            core = int((d / "topology/core_id").read_text())
        except (OSError, ValueError):
            continue
        out[int(d.name[3:])] = (pkg, core)
    return out


def observe_binding(
    affinities: dict[int, set[int]],
    node_cpus: set[int],
    topology: dict,
    program: str,
    launches: dict[int, str] | None = None,
) -> dict:
    """The binding record of a run: per rank of ``program`` seen on this node (pid ->
    allowed CPUs), its CPUs, how many cores and sockets they span and the launch that started
    it (``launches``: pid -> the runner's step); ``node_cpus``: the CPUs the job may use here
    (the runner's own affinity)."""
    ranks = []
    for pid, cpus in sorted(affinities.items()):
        where = [topology.get(c, (0, c)) for c in cpus]
        rank = {
            "pid": pid,
            "cpus": format_cpulist(cpus),
            "cores": len(set(where)),
            "sockets": len({w[0] for w in where}),
        }
        if launches and pid in launches:
            rank["launch"] = launches[pid]
        ranks.append(rank)
    return {"program": program, "node_cpus": format_cpulist(node_cpus), "ranks": ranks}


def frequency_by_cpu(proc: Path, sysfs: Path) -> dict[int, float]:
    """CPU -> current frequency in MHz: cpufreq's ``scaling_cur_freq`` (kHz) where the CPUs
    have it, else each processor's ``cpu MHz`` in /proc/cpuinfo; {} if unknown."""
    f = {}
    for p in sorted((sysfs / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        try:
            f[int(p.parent.parent.name[3:])] = int(p.read_text()) / 1000
        except (OSError, ValueError):
            continue
    if f:
        return dict(sorted(f.items()))
    cpu = None
    try:
        for line in (proc / "cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "processor":
                cpu = int(value)
            elif key.strip() == "cpu MHz" and cpu is not None:
                f[cpu] = float(value)
    except (OSError, ValueError):
        return {}
    return f


def load1(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def rusage_cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
