"""Per-node energy sampling beside a batch job: one agent per node of the job.

Node-local meters (RAPL, pm_counters, IPMI, NVML, the model) read the node they
run on, so under Slurm the job script starts this agent on every node of the
allocation, in the background::

    srun --overlap --ntasks-per-node=1 --nodes=$SLURM_JOB_NUM_NODES \\
         python -m apptune.energy.agent --out energy-nodes --meters rapl,model ...

Each agent samples the first usable meter of the list on its node with the usual
:class:`~apptune.energy.Sampler` (the model then uses the node's whole CPU
utilisation), marks itself ready, and on ``energy-nodes/stop`` (or SIGTERM, or
``--max-seconds``) writes ``energy-nodes/<node>/energy.json`` and its power trace.
:func:`merge` sums the nodes into the job's record (apptune.rfm does this after
the run). The stage directory is on a filesystem the nodes share, as it must be
for the job's own output.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

from . import GRADES, TRACE_FILE, EnergyRecord, Sampler, read_trace

RECORD = "energy.json"
READY = "ready"
STOP = "stop"
NODES_DIR = "energy-nodes"


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def run_agent(
    out: Path,
    meters: list[str],
    hz: float,
    options: dict,
    context: dict,
    exclusive: bool,
    max_seconds: float,
    node: str | None = None,
    stop: threading.Event | None = None,
) -> Path:
    node = node or node_name()
    d = out / node
    d.mkdir(parents=True, exist_ok=True)
    ctx = dict(context, scheduler="local", pid=None, nodes=1)  # this node, all of it
    stop = stop or threading.Event()
    sampler = Sampler(
        meters, f"node {node}", d, hz=hz, options=options, context=ctx, exclusive=exclusive
    )
    t0 = time.time()
    sampler.start()
    (d / READY).write_text(f"{t0}\n")
    deadline = time.monotonic() + max_seconds
    while not stop.is_set() and not (out / STOP).exists() and time.monotonic() < deadline:
        stop.wait(0.1)
    rec = sampler.stop()
    data = dict(rec.to_dict(), node=node, t0_epoch=t0)
    tmp = d / (RECORD + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(d / RECORD)
    return d / RECORD


def _worst(grades: list[str]) -> str:
    return max(grades, key=GRADES.index) if grades else "none"


def merge(out: Path, stagedir: Path, expected_nodes: int | None = None) -> EnergyRecord | None:
    """The job's record from its nodes' records: energies summed, traces summed on a
    common clock, the least trusted grade. None when no agent wrote a record."""
    recs = []
    for f in sorted(Path(out).glob(f"*/{RECORD}")):
        try:
            recs.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    if not recs:
        return None
    nodes = [r["node"] for r in recs]
    notes = [
        f"{r['node']}: "
        + (
            f"{r['energy_J']:.1f} J ({r['source']}, {r['trust']})"
            if r.get("energy_J") is not None
            else f"no energy ({r.get('reason')})"
        )
        for r in recs
    ]
    for r in recs:
        notes += [f"{r['node']}: {n}" for n in r.get("notes", [])]
    if expected_nodes and len(recs) < expected_nodes:
        notes.append(f"only {len(recs)} of {expected_nodes} nodes wrote a record")
    missing = [r["node"] for r in recs if r.get("energy_J") is None]
    rec = EnergyRecord(
        trust=_worst([r["trust"] for r in recs]),
        source=f"{'/'.join(sorted({r['source'] for r in recs if r.get('source')}))} "
        f"(per-node agents on {len(recs)} node(s): {', '.join(nodes)})",
        duration_s=max((r.get("duration_s") or 0) for r in recs) or None,
        sample_hz=recs[0].get("sample_hz"),
        samples=sum(r.get("samples") or 0 for r in recs),
        exclusive=all(r.get("exclusive") for r in recs),
        sampler_cpu_s=sum(r.get("sampler_cpu_s") or 0 for r in recs),
        notes=notes,
    )
    if missing or (expected_nodes and len(recs) < expected_nodes):
        rec.trust = "none"
        rec.reason = ("no energy from " + ", ".join(missing)) if missing else notes[-1]
        return rec
    rec.energy_J = sum(r["energy_J"] for r in recs)
    integ = [r.get("energy_integrated_J") for r in recs]
    if all(v is not None for v in integ):
        rec.energy_integrated_J = sum(integ)
    if rec.duration_s:
        rec.avg_power_W = rec.energy_J / rec.duration_s
    trace = _sum_traces(out, recs)
    if trace:
        rec.peak_power_W = max(p for _, p in trace)
        with open(Path(stagedir) / TRACE_FILE, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "power_W"])
            for t, p in trace:
                w.writerow([f"{t:.3f}", f"{p:.3f}"])
        rec.trace = TRACE_FILE
    return rec


def _sum_traces(out: Path, recs: list[dict]) -> list[tuple[float, float]]:
    """Node traces on the clock of the earliest agent, summed where every node has a value."""
    series = []
    for r in recs:
        f = Path(out) / r["node"] / TRACE_FILE
        if not f.is_file():
            return []
        pts = read_trace(f)
        if not pts:
            return []
        series.append(([r["t0_epoch"] + t for t, _ in pts], [p for _, p in pts]))
    t0 = min(ts[0] for ts, _ in series)
    start, end = max(ts[0] for ts, _ in series), min(ts[-1] for ts, _ in series)
    step = min((ts[-1] - ts[0]) / max(1, len(ts) - 1) for ts, _ in series) or 0.1
    out_pts, i = [], 0
    while start + i * step <= end + 1e-9:
        t = start + i * step
        out_pts.append((t - t0, sum(_at(ts, ps, t) for ts, ps in series)))
        i += 1
    return out_pts


def _at(ts: list[float], ps: list[float], t: float) -> float:
    """Linear interpolation of a power series at time t."""
    k = bisect.bisect_right(ts, t)
    if k == 0:
        return ps[0]
    if k >= len(ts):
        return ps[-1]
    t0, t1 = ts[k - 1], ts[k]
    return ps[k - 1] + (ps[k] - ps[k - 1]) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m apptune.energy.agent", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--out", required=True, help="directory shared by the job's nodes")
    ap.add_argument("--meters", required=True, help="comma-separated node-local meters, in order")
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--options", default="{}", help="JSON: meter -> options")
    ap.add_argument("--context", default="{}", help="JSON: power_model, ncpus")
    ap.add_argument("--exclusive", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=86400.0)
    a = ap.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # srun forwards these when the step is cancelled
        signal.signal(sig, lambda *_: stop.set())
    run_agent(
        Path(a.out),
        [m for m in a.meters.split(",") if m],
        a.hz,
        json.loads(a.options),
        json.loads(a.context),
        bool(a.exclusive),
        a.max_seconds,
        stop=stop,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
