"""Two machines compared from the history: the same application, tier, variant and figure
side by side, with their ratio and noise, next to the ratios of the micro-benchmarks
(STREAM, DGEMM, MPI latency and bandwidth of HPCC and mpi-micro) measured on both, which
say what part of the machine an application's ratio follows.

A machine is chosen by its fingerprint's id (``m-4d23c915ae``, or a prefix of it) or by a
ReFrame system (``local``, ``cluster:compute``).  Each side's value of a figure is the
median over its clean verified runs (each run the median of its repeats, as
check-regressions counts them); its noise is the run-to-run spread of those runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from .. import machine
from ..errors import ApptuneError
from . import changepoint, regressions

#: The figures that measure one part of a machine, by what they measure.
MICRO: dict[tuple[str, str], str] = {
    ("hpcc", "SingleSTREAM_Triad"): "STREAM",
    ("hpcc", "StarSTREAM_Triad"): "STREAM",
    ("hpcc", "SingleDGEMM"): "DGEMM",
    ("hpcc", "StarDGEMM"): "DGEMM",
    ("hpcc", "PingPongLatency"): "latency",
    ("hpcc", "RingLatency"): "latency",
    ("hpcc", "PingPongBandwidth"): "bandwidth",
    ("hpcc", "RingBandwidth"): "bandwidth",
    ("mpi-micro", "pingpong_latency"): "latency",
    ("mpi-micro", "pingping_latency"): "latency",
    ("mpi-micro", "sendrecv_latency"): "latency",
    ("mpi-micro", "pingpong_bandwidth"): "bandwidth",
    ("mpi-micro", "pingping_bandwidth"): "bandwidth",
    ("mpi-micro", "sendrecv_bandwidth"): "bandwidth",
}
KINDS = ("STREAM", "DGEMM", "latency", "bandwidth")
#: A ratio is called a difference when it is this many of its standard errors from 1.
SIGMAS = 2.0


@dataclass
class Machine:
    selector: str
    ids: list[str]
    systems: list[str]
    fingerprint: dict | None = None

    @property
    def label(self) -> str:
        what = machine.describe(self.fingerprint) if self.fingerprint else "fingerprint not stored"
        return f"{', '.join(self.ids)}: {what}"


@dataclass
class Side:
    value: float  # median of the runs' medians
    noise: float | None  # relative run-to-run noise (None: one run, no repeats)
    runs: int


@dataclass
class Row:
    app: str
    tier: str
    environment: str
    variant: str
    figure: str
    unit: str | None
    better: str
    a: Side
    b: Side
    kind: str | None = None  # the micro-benchmark's kind, None for an application figure
    nearest: str | None = None  # the micro-benchmark kind whose speed-up is nearest

    @property
    def ratio(self) -> float | None:
        """B's value over A's."""
        return self.b.value / self.a.value if self.a.value else None

    @property
    def speedup(self) -> float | None:
        """How much faster B is than A at this figure (above 1: B is better)."""
        r = self.ratio
        if not r or r <= 0:
            return None
        return r if self.better == "higher" else 1 / r

    @property
    def uncertainty(self) -> float | None:
        """Relative standard error of the ratio, from both sides' noise and runs."""
        if self.a.noise is None or self.b.noise is None:
            return None
        return math.sqrt(self.a.noise**2 / self.a.runs + self.b.noise**2 / self.b.runs)

    @property
    def verdict(self) -> str:
        s, u = self.speedup, self.uncertainty
        if s is None:
            return "no ratio"
        if u is None:
            return "noise unknown"
        if abs(math.log(s)) <= SIGMAS * u:
            return "within noise"
        return "B faster" if s > 1 else "A faster"

    def to_dict(self) -> dict:
        return asdict(self) | {
            "ratio": self.ratio,
            "speedup": self.speedup,
            "uncertainty": self.uncertainty,
            "verdict": self.verdict,
        }


@dataclass
class Comparison:
    a: Machine
    b: Machine
    mode: str | None
    rows: list[Row] = field(default_factory=list)  # application figures on both
    micro: list[Row] = field(default_factory=list)  # micro-benchmark figures on both
    kinds: dict[str, float] = field(default_factory=dict)  # kind -> geometric mean speed-up
    only: dict[str, int] = field(default_factory=dict)  # figures measured on one side only

    def to_dict(self) -> dict:
        return {
            "a": asdict(self.a) | {"label": self.a.label},
            "b": asdict(self.b) | {"label": self.b.label},
            "mode": self.mode,
            "kinds": self.kinds,
            "only": self.only,
            "rows": [r.to_dict() for r in self.rows],
            "micro": [r.to_dict() for r in self.micro],
        }


def _matches(selector: str, system: str, mid: str) -> bool:
    if selector.startswith("m-"):
        return mid.startswith(selector)
    return system == selector or system.startswith(selector + ":")


def _side(points: list[regressions.Point]) -> Side:
    x = [p.value for p in points]
    med = statistics.median(x)
    if len(x) >= 2 and med:
        noise = changepoint.robust_sigma(x) / abs(med)
        # two runs agreeing by chance do not make a figure noiseless: the repeats say more
        within = regressions.repeat_noise(points)
        noise = max(noise, within) if within is not None else noise
    else:
        noise = regressions.repeat_noise(points)
    return Side(med, noise, len(x))


def machines_in(history, mode: str | None = None) -> list[str]:
    """The machine ids of the history's clean verified results, most results first."""
    counts: dict[str, int] = {}
    for s in history.samples(mode=mode):
        counts[s["machine_id"] or "?"] = counts.get(s["machine_id"] or "?", 0) + 1
    return sorted(counts, key=lambda m: (-counts[m], m))


def compare(
    history, a: str | None = None, b: str | None = None, mode: str | None = None
) -> Comparison:
    """The comparison of machine (or system) ``a`` with ``b``; without them, of the
    history's two machines."""
    if a is None or b is None:
        ids = machines_in(history, mode)
        if len(ids) != 2 or (a or b):
            raise ApptuneError(
                history.path,
                None,
                f"name the two machines to compare: the history has {len(ids)} "
                f"({', '.join(ids) or 'none'}) with clean verified results",
            )
        a, b = ids
    ser = regressions.series(history.samples(mode=mode))
    sides: dict[str, dict[tuple, list]] = {a: {}, b: {}}
    meta: dict[tuple, tuple] = {}
    seen: dict[str, tuple[set, set]] = {a: (set(), set()), b: (set(), set())}
    for (system, mid, app, tier, env, variant, figure), s in ser.items():
        for sel in (a, b):
            if _matches(sel, system, mid):
                key = (app, tier, env, variant, figure)
                sides[sel].setdefault(key, []).extend(s["points"])
                meta[key] = (s["unit"], s["better"])
                seen[sel][0].add(mid)
                seen[sel][1].add(system)
    for sel in (a, b):
        if not sides[sel]:
            raise ApptuneError(
                history.path,
                None,
                f"no clean verified results of '{sel}' in the history "
                f"(machines: {', '.join(machines_in(history, mode)) or 'none'})",
            )
    if seen[a][0] & seen[b][0] and seen[a][0] == seen[b][0]:
        raise ApptuneError(None, "compare", f"'{a}' and '{b}' are the same machine")
    fps = history.machines()
    ma, mb = (
        Machine(
            sel,
            sorted(seen[sel][0]),
            sorted(seen[sel][1]),
            fps.get(next(iter(seen[sel][0]))) if len(seen[sel][0]) == 1 else None,
        )
        for sel in (a, b)
    )
    out = Comparison(ma, mb, mode)
    for key in sorted(set(sides[a]) & set(sides[b])):
        unit, better = meta[key]
        row = Row(*key, unit, better or "higher", _side(sides[a][key]), _side(sides[b][key]))
        row.kind = MICRO.get((key[0], key[4]))
        (out.micro if row.kind else out.rows).append(row)
    out.only = {
        "a": len(set(sides[a]) - set(sides[b])),
        "b": len(set(sides[b]) - set(sides[a])),
    }
    for kind in KINDS:
        sp = [r.speedup for r in out.micro if r.kind == kind and r.speedup]
        if sp:
            out.kinds[kind] = math.exp(statistics.fmean(math.log(s) for s in sp))
    for r in out.rows:
        if r.speedup and out.kinds:
            r.nearest = min(out.kinds, key=lambda k: abs(math.log(out.kinds[k] / r.speedup)))
    return out


def _fmt(x: float | None, spec: str, missing: str = "–") -> str:
    return missing if x is None else format(x, spec)


def format_text(c: Comparison) -> str:
    """The comparison as a terminal shows it."""
    lines = [
        f"A: {c.a.label} ({', '.join(c.a.systems)})",
        f"B: {c.b.label} ({', '.join(c.b.systems)})",
        f"runs: {c.mode or 'every mode'}; speed-up: how much faster B is (above 1: B better)",
        "",
        "micro-benchmarks (B's speed-up over A, geometric mean of their figures): "
        + (", ".join(f"{k} x{v:.2f}" for k, v in c.kinds.items()) or "none measured on both"),
    ]
    for title, rows in (("application figures", c.rows), ("micro-benchmark figures", c.micro)):
        lines += ["", f"{title}:"]
        if not rows:
            lines.append("  none measured on both machines")
        for r in rows:
            lines.append(
                f"  {r.app}/{r.tier} {r.environment}/{r.variant} {r.figure} ({r.unit or ''}): "
                f"A {r.a.value:.4g} ±{_fmt(r.a.noise, '.1%')} ({r.a.runs} runs)  "
                f"B {r.b.value:.4g} ±{_fmt(r.b.noise, '.1%')} ({r.b.runs} runs)  "
                f"B/A {_fmt(r.ratio, '.3f')}  speed-up x{_fmt(r.speedup, '.2f')} "
                f"±{_fmt(r.uncertainty, '.1%')}  {r.verdict}"
                + (f"  nearest: {r.nearest} x{c.kinds[r.nearest]:.2f}" if r.nearest else "")
                + (f"  [{r.kind}]" if r.kind else "")
            )
    if c.only["a"] or c.only["b"]:
        lines += [
            "",
            f"measured on one machine only: {c.only['a']} figures on A, {c.only['b']} on B",
        ]
    return "\n".join(lines)
