"""A linear idle/load power model of a node, driven by measured CPU utilisation.

Per node ``P = p_idle + u * (p_load - p_idle)`` where ``u`` is the measured CPU
utilisation (0..1) of the job's processes (the process tree under the job's
pid, when the scheduler runs it locally) or of the whole node otherwise. Summed
over ``n`` nodes of which ``x`` are fully loaded and the rest idle, it is the
cluster form ``(n - x) * p_idle + x * p_load``.
``p_idle`` and ``p_load`` come from the partition's site config
(``extras.power_model: {idle_W, load_W}``).  Every figure it gives is graded
``modelled``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .meter import Meter, MeterError, Reading, register

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def node_busy_jiffies(proc: Path = Path("/proc")) -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs from /proc/stat."""
    first = (proc / "stat").read_text().splitlines()[0].split()
    vals = [int(x) for x in first[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


def _stat(proc: Path, pid: int) -> tuple[int, float] | None:
    """(ppid, cpu seconds) of a process, None if it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / CLK_TCK


def process_tree(root_pid: int, proc: Path = Path("/proc")) -> set[int]:
    """The pid and all its descendants (one scan of /proc)."""
    children: dict[int, list[int]] = {}
    for d in proc.iterdir():
        if d.name.isdigit():
            st = _stat(proc, int(d.name))
            if st is not None:
                children.setdefault(st[0], []).append(int(d.name))
    tree, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    return tree


def tree_cpu_seconds(pids: set[int], proc: Path = Path("/proc")) -> float:
    """CPU seconds (user+system) of the given processes that are still alive."""
    return sum(st[1] for st in (_stat(proc, p) for p in pids) if st is not None)


@register
class ModelMeter(Meter):
    name = "model"
    grade = "modelled"
    cumulative = False

    def __init__(self, options=None, context=None):
        super().__init__(options, context)
        self.proc = Path(self.options.get("proc", "/proc"))
        self._prev = None
        self.ncpus = int(self.context.get("ncpus") or os.cpu_count() or 1)
        self._tree: set[int] = set()
        self._tree_root = None
        self._tree_scanned = 0.0
        #: Full /proc scans for new descendants at most this often (reading only the
        #: known processes in between keeps the sampler's overhead low).
        self.rescan_s = float(self.options.get("rescan_s", 1.0))
        self.nodes = int(self.context.get("nodes") or 1)

    def available(self) -> str | None:
        pm = self.context.get("power_model")
        if not pm or "idle_W" not in pm or "load_W" not in pm:
            return "no power_model {idle_W, load_W} in the partition's extras"
        if not (self.proc / "stat").exists():
            return f"{self.proc}/stat not readable"
        self.idle, self.load = float(pm["idle_W"]), float(pm["load_W"])
        return None

    def _pid(self):
        pid = self.context.get("pid")
        pid = pid() if callable(pid) else pid
        try:
            pid = int(pid)
        except (TypeError, ValueError):
            return None
        return pid if (self.proc / str(pid)).exists() else None

    def utilisation(self) -> float | None:
        import time

        pid = self._pid()
        now = time.monotonic()
        try:
            if pid is not None:
                if pid != self._tree_root or now - self._tree_scanned >= self.rescan_s:
                    self._tree, self._tree_root, self._tree_scanned = (
                        process_tree(pid, self.proc),
                        pid,
                        now,
                    )
                sample = ("tree", pid, tree_cpu_seconds(self._tree, self.proc), now)
            else:
                busy, total = node_busy_jiffies(self.proc)
                sample = ("node", None, busy, total)
        except (OSError, ValueError, IndexError) as e:
            raise MeterError(f"/proc: {e}") from None
        prev, self._prev = self._prev, sample
        if prev is None or prev[0] != sample[0] or prev[1] != sample[1]:
            return None
        if sample[0] == "tree":
            dt = sample[3] - prev[3]
            return max(0.0, min(1.0, (sample[2] - prev[2]) / (dt * self.ncpus))) if dt > 0 else None
        dt = sample[3] - prev[3]
        return max(0.0, min(1.0, (sample[2] - prev[2]) / dt)) if dt > 0 else None

    def read(self) -> Reading:
        u = self.utilisation()
        if u is None:
            u = self.utilisation_hint()
        return Reading(power_W=self.nodes * (self.idle + u * (self.load - self.idle)))

    def utilisation_hint(self) -> float:
        # First sample of a segment: no interval yet; take the node's state over a short window.
        import time

        a = node_busy_jiffies(self.proc)
        time.sleep(0.02)
        b = node_busy_jiffies(self.proc)
        return max(0.0, min(1.0, (b[0] - a[0]) / (b[1] - a[1]))) if b[1] > a[1] else 0.0
