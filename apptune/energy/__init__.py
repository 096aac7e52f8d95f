"""Energy and power of every run, with an honest trust grade.

Meters (one small module each, one interface) are chosen per partition from the
site config (``extras.energy_meters``, in order of preference, e.g.
``['pm_counters', 'rapl', 'ipmi', 'model']``).  A :class:`Sampler` thread reads
the first usable meter beside the job (default 10 Hz, ``extras.energy_sample_hz``),
writes a power trace (``power-trace.csv``) into the stage directory and
produces an :class:`EnergyRecord`.  Cumulative counters (RAPL, pm_counters,
NVML) are preferred over integrating samples; where both exist both are
recorded with their disagreement.

A meter that fails never fails the check: the sampler degrades to the next
meter in the list, or to grade ``none``, and says why in the record.

Grades: ``measured`` (a meter of the node(s), exclusive use), ``measured-shared``
(a meter, but other jobs may share the node: no verdict is given),
``modelled`` (idle/load power from the site config scaled by measured CPU
utilisation), ``none`` (nothing to go on; the reason is recorded).
"""

from __future__ import annotations

import csv
import itertools
import threading
import time
from pathlib import Path

from .meter import METERS, EnergyRecord, Meter, MeterError, Reading, register, run_command

TRACE_FILE = "power-trace.csv"
GRADES = ("measured", "measured-shared", "modelled", "none")


__all__ = [
    "AGENT_SCHEDULERS",
    "GRADES",
    "METERS",
    "TRACE_FILE",
    "EnergyRecord",
    "Meter",
    "MeterError",
    "Reading",
    "Sampler",
    "candidates",
    "prefer",
    "read_trace",
    "register",
    "run_command",
    "split_node_local",
]


def _load_meters() -> None:
    from . import ipmi, model, nvml, pm_counters, rapl, slurm  # noqa: F401  (registration)


#: Schedulers under which node-local meters run as per-node agents (apptune/energy/agent.py).
AGENT_SCHEDULERS = ("slurm", "squeue")


def split_node_local(names: list[str]) -> tuple[list[str], list[str]]:
    """(meters read from where ReFrame runs, meters that must run on the job's nodes)."""
    _load_meters()
    central = [n for n in names if n not in METERS or not METERS[n].node_local]
    return central, [n for n in names if n in METERS and METERS[n].node_local]


def candidates(
    names: list[str], options: dict | None = None, context: dict | None = None
) -> tuple[list[Meter], list[str]]:
    """Usable meters in order, and the reasons of those that are not."""
    _load_meters()
    usable, reasons = [], []
    for n in names:
        cls = METERS.get(n)
        if cls is None:
            reasons.append(f"{n}: unknown meter (known: {', '.join(sorted(METERS))})")
            continue
        m = cls((options or {}).get(n, {}), context)
        sched = (context or {}).get("scheduler")
        if m.node_local and sched not in (None, "local"):
            how = (
                "sampled on the job's nodes by per-node agents instead"
                if sched in AGENT_SCHEDULERS
                else "per-node agents exist for Slurm only"
            )
            reasons.append(
                f"{n}: reads the node the sampler runs on, but jobs of scheduler "
                f"'{sched}' run elsewhere ({how})"
            )
            continue
        try:
            why = m.available()
        except Exception as e:  # a broken meter must not break the check
            why = f"{type(e).__name__}: {e}"
        if why is None:
            usable.append(m)
        else:
            reasons.append(f"{n}: {why}")
    return usable, reasons


class Sampler:
    """Samples the first usable meter in a thread; degrades on failure."""

    def __init__(
        self,
        names: list[str],
        partition: str,
        stagedir: str | Path,
        hz: float = 10.0,
        options: dict | None = None,
        context: dict | None = None,
        exclusive: bool = True,
    ):
        self.partition = partition
        self.stagedir = Path(stagedir)
        self.hz = hz
        self.exclusive = exclusive
        self.meters, self.reasons = candidates(names, options, context)
        self.notes: list[str] = []
        self.samples: list[tuple[float, float]] = []  # (t, power W)
        self.energy_counter_J = 0.0
        self.counter_meter: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu = 0.0
        self.t_start = self.t_stop = None
        self.covered = 0.0
        self.names = names

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        self.t_start = time.monotonic()
        if not any(m.samples for m in self.meters):
            return
        self._thread = threading.Thread(target=self._run, name="apptune-energy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c0 = time.thread_time()
        meters = [m for m in self.meters if m.samples]
        while meters:
            m = meters[0]
            period = 1.0 / min(self.hz, getattr(m, "max_hz", self.hz))
            try:
                self._sample(m, period)
                break
            except (
                Exception
            ) as e:  # MeterError, or any bug in a meter: degrade, never fail the check
                self.notes.append(
                    f"{m.name} failed during the run ({e}); "
                    + (f"continuing with {meters[1].name}" if len(meters) > 1 else "no meter left")
                )
                meters.pop(0)
                self.meters = [x for x in self.meters if x is not m]
        self._cpu = time.thread_time() - c0

    def _sample(self, m: Meter, period: float) -> None:
        prev = m.read()
        t_prev = time.monotonic()
        self.current = m
        seg_start = t_prev
        first = True
        while not self._stop.wait(period):
            cur = m.read()
            t = time.monotonic()
            dt = t - t_prev
            p = cur.power_W
            if m.cumulative and cur.energy_J is not None and prev.energy_J is not None:
                de = cur.energy_J - prev.energy_J
                if de < 0:
                    raise MeterError("energy counter went backwards")
                self.energy_counter_J += de
                self.counter_meter = m.name
                if p is None and dt > 0:
                    p = de / dt
            if p is not None:
                if first and m.cumulative is False and prev.power_W is not None:
                    self.samples.append((t_prev - self.t_start, prev.power_W))
                self.samples.append((t - self.t_start, p))
            first = False
            prev, t_prev = cur, t
            self.covered = t - seg_start
        self.sampling_meter = m.name

    def stop(self) -> EnergyRecord:
        self.t_stop = time.monotonic()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self._record()

    # ------------------------------------------------------------------ record
    def _record(self) -> EnergyRecord:
        duration = (self.t_stop - self.t_start) if self.t_start is not None else None
        if not self.meters and self.notes:
            return EnergyRecord(
                trust="none", reason=self.notes[-1], duration_s=duration, notes=self.notes
            )
        if not self.meters:
            why = (
                (
                    "no energy meter configured for "
                    + self.partition
                    + " (site-config: partition extras 'energy_meters' is empty)"
                )
                if not self.names
                else f"no usable energy meter on {self.partition}: " + "; ".join(self.reasons)
            )
            rec = EnergyRecord(trust="none", reason=why, duration_s=duration, notes=self.notes)
            return rec
        m = self.meters[0]
        rec = EnergyRecord(
            trust=m.grade,
            source=m.name,
            duration_s=duration,
            sample_hz=self.hz,
            samples=len(self.samples),
            exclusive=self.exclusive,
            sampler_cpu_s=round(self._cpu, 4),
            notes=list(self.notes),
        )
        if self.reasons:
            rec.notes.append("not used: " + "; ".join(self.reasons))
        if self.samples:
            integ = _trapezoid(self.samples)
            rec.energy_integrated_J = integ
            powers = [p for _, p in self.samples]
            rec.peak_power_W = max(powers)
            rec.trace = TRACE_FILE
            self._write_trace()
        if self.counter_meter == m.name:
            rec.energy_J = self.energy_counter_J
            if rec.energy_integrated_J:
                rec.disagreement = (
                    (rec.energy_integrated_J - rec.energy_J) / rec.energy_J
                    if rec.energy_J
                    else None
                )
        else:
            rec.energy_J = rec.energy_integrated_J
        if duration:
            rec.coverage = round(min(1.0, self.covered / duration), 4) if m.samples else None
        m.after(rec)
        if rec.energy_J is not None and duration:
            rec.avg_power_W = rec.energy_J / duration
        if not self.exclusive and rec.trust == "measured":
            rec.trust = "measured-shared"
            rec.notes.append(
                "node not allocated exclusively: figures are kept, no verdict is given"
            )
        if rec.energy_J is None:
            rec.trust, rec.reason = "none", rec.reason or f"{m.name} produced no energy figure"
        return rec

    def _write_trace(self) -> None:
        path = self.stagedir / TRACE_FILE
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "power_W"])
            for t, p in self.samples:
                w.writerow([f"{t:.3f}", f"{p:.3f}"])


def prefer(
    names: list[str], central: EnergyRecord, nodes: EnergyRecord | None, node_meters: list[str]
) -> EnergyRecord:
    """The record of the sampler beside ReFrame (e.g. Slurm accounting) or of the per-node
    agents, whichever comes first in the partition's meter list and has an energy figure;
    the other is summarised in the notes."""
    if nodes is None:
        nodes = EnergyRecord(
            trust="none",
            reason="the per-node agents wrote no record "
            "(see energy-agents.log in the stage directory)",
        )
    central_names = [n for n in names if n not in node_meters]
    first_node = min(names.index(n) for n in node_meters)
    first_central = min((names.index(n) for n in central_names), default=len(names))
    order = [nodes, central] if first_node < first_central else [central, nodes]
    if not central_names:
        order = [nodes]
    chosen = next((r for r in order if r.energy_J is not None and r.trust != "none"), order[0])
    for other in order:
        if other is not chosen:
            chosen.notes.append(
                f"not used: {other.source or 'sampler'}: "
                + (
                    f"{other.energy_J:.1f} J ({other.trust})"
                    if other.energy_J is not None
                    else other.reason or other.trust
                )
            )
    return chosen


def _trapezoid(samples: list[tuple[float, float]]) -> float:
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(samples))


def read_trace(path: str | Path) -> list[tuple[float, float]]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [(float(r["t_s"]), float(r["power_W"])) for r in rows]
