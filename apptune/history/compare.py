"""Two machines, or two environments or variants of the same machines, compared from the
history: the same application, tier, variant (or environment) and figure side by side,
with their ratio and noise, next to the ratios of the micro-benchmarks (STREAM, DGEMM, MPI
latency and bandwidth of HPCC and mpi-micro) measured on both, which say what part of the
machine an application's ratio follows.

A machine is chosen by its fingerprint's id (``m-4d23c915ae``, or a prefix of it) or by a
ReFrame system (``local``, ``cluster:compute``); an environment (``gnu``, ``gnu-mpich``) or
a variant (``tuned``) by its name, compared on each machine that ran both, with the same
input.  Each side's value of a figure is the median over its clean verified runs (each run
the median of its repeats, as check-regressions counts them); its noise is the run-to-run
spread of those runs.  A side with no clean run is its runs of another grade, shown with
that grade and never judged.
"""

from __future__ import annotations

import json
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


#: What two sides of a comparison may be: machines (or systems), or two environments or
#: two variants of the same machines (every other part of a figure's name held).
AXES = ("machine", "environment", "variant")


@dataclass
class ComparedMachine:
    """One side of a comparison: a machine (or system), or an environment or a variant
    (``axis``) with the machines and systems it ran on."""

    selector: str
    ids: list[str]
    systems: list[str]
    fingerprint: dict | None = None
    axis: str = "machine"

    @property
    def label(self) -> str:
        if self.axis != "machine":
            return f"{self.axis} {self.selector} on {', '.join(self.ids)}"
        what = machine.describe(self.fingerprint) if self.fingerprint else "fingerprint not stored"
        return f"{', '.join(self.ids)}: {what}"


@dataclass
class Side:
    value: float  # median of the runs' medians
    noise: float | None  # relative run-to-run noise (None: one run, no repeats)
    runs: int
    #: the run-quality grade of the runs: ``clean``, or what the others were (disturbed,
    #: unmeasured): shown as such, never judged
    grade: str = "clean"


@dataclass
class ComparedFigure:
    app: str
    tier: str
    environment: str | None  # None where environments are compared
    variant: str | None  # None where variants are compared
    figure: str
    unit: str | None
    better: str
    a: Side
    b: Side
    kind: str | None = None  # the micro-benchmark's kind, None for an application figure
    nearest: str | None = None  # the micro-benchmark kind whose speed-up is nearest
    machine_id: str | None = None  # the machine held, where environments or variants differ
    input: dict | None = None  # the input parameters both sides ran (None: not recorded)

    @property
    def held(self) -> str:
        """What both sides share besides the application, tier and figure."""
        parts = [self.machine_id] if self.machine_id else []
        parts.append("/".join(x for x in (self.environment, self.variant) if x))
        return " ".join(parts)

    @property
    def comparable(self) -> bool:
        """Whether a ratio of the two sides means anything: both clean, or both disturbed
        (then shown, never judged); never a clean side against a disturbed one."""
        return (self.a.grade == "clean") == (self.b.grade == "clean")

    @property
    def ratio(self) -> float | None:
        """B's value over A's."""
        return self.b.value / self.a.value if self.a.value and self.comparable else None

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
        if not self.comparable:
            bad = " and ".join(f"{n} {s.grade}" for n, s in (("A", self.a), ("B", self.b)))
            return f"not comparable: {bad}"
        if self.a.grade != "clean":
            return f"not judged: both {self.a.grade}"
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
    a: ComparedMachine
    b: ComparedMachine
    mode: str | None
    rows: list[ComparedFigure] = field(default_factory=list)  # application figures on both
    micro: list[ComparedFigure] = field(default_factory=list)  # micro-benchmark figures on both
    kinds: dict[str, float] = field(default_factory=dict)  # kind -> geometric mean speed-up
    only: dict[str, int] = field(default_factory=dict)  # figures measured on one side only
    by: str = "machine"

    def to_dict(self) -> dict:
        return {
            "by": self.by,
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


def _side(points: list[regressions.Point], grade: str = "clean") -> Side:
    x = [p.value for p in points]
    med = statistics.median(x)
    if len(x) >= 2 and med:
        noise = changepoint.robust_sigma(x) / abs(med)
        # two runs agreeing by chance do not make a figure noiseless: the repeats say more
        within = regressions.repeat_noise(points)
        noise = max(noise, within) if within is not None else noise
    else:
        noise = regressions.repeat_noise(points)
    return Side(med, noise, len(x), grade)


def _names(samples) -> dict[str, list[str]]:
    """The machines, environments and variants of ``samples``, most samples first, and the
    systems (``system``)."""
    counts: dict[str, dict[str, int]] = {k: {} for k in (*AXES, "system")}
    for s in samples:
        for k, v in (
            ("machine", s["machine_id"] or "?"),
            ("environment", s["environment"] or "?"),
            ("variant", s["variant"] or s["test"]),
            ("system", s["system"]),
        ):
            counts[k][v] = counts[k].get(v, 0) + 1
    return {k: sorted(c, key=lambda m: (-c[m], m)) for k, c in counts.items()}


def _axis(names: dict[str, list[str]], a: str, b: str) -> str:
    """The axis two names given without ``--by`` are on: machines (an id, a prefix of one,
    or a system) before environments before variants."""
    if any(x.startswith("m-") for x in (a, b)) or all(
        any(_matches(x, s, m) for s in names["system"] for m in names["machine"]) for x in (a, b)
    ):
        return "machine"
    for axis in ("environment", "variant"):
        if a in names[axis] and b in names[axis]:
            return axis
    raise ApptuneError(
        None,
        "compare",
        f"'{a}' and '{b}' are not two machines ({_listing(names, 'machine')}; systems "
        f"{', '.join(names['system']) or 'none'}), two environments "
        f"({_listing(names, 'environment')}) nor two variants ({_listing(names, 'variant')}) "
        "of the history's verified results",
    )


def _listing(names: dict, axis: str) -> str:
    return ", ".join(names[axis]) or "none"


def _pick(history, names: dict, by: str, a: str | None, b: str | None) -> tuple[str, str]:
    if a is not None and b is not None:
        return a, b
    if len(names[by]) != 2 or (a or b):
        g = history.grades()
        raise ApptuneError(
            history.path,
            None,
            f"name the two {by}s to compare: the verified results of the selection are of "
            f"{len(names[by])} ({_listing(names, by)}); the history holds {g['results']} "
            f"result(s): {g['clean']} clean verified, {g['disturbed']} verified in a run not "
            f"graded clean, {g['unverified']} not verified"
            + (
                "; the environments or variants of one machine: --by environment, --by variant"
                if by == "machine" and len(names[by]) == 1
                else ""
            ),
        )
    return names[by][0], names[by][1]


def _same_machines(samples, a: str, b: str) -> bool:
    ids = [
        {s["machine_id"] for s in samples if _matches(x, s["system"], s["machine_id"] or "")}
        for x in (a, b)
    ]
    return bool(ids[0]) and ids[0] == ids[1]


def _key(by: str, sel_of, ser_key: tuple) -> tuple[str | None, tuple | None]:
    """(the side a series belongs to, its key with the compared part left out)."""
    system, mid, app, tier, env, variant, figure, inp = ser_key  # inp: only the same input
    if by == "machine":
        return sel_of(lambda x: _matches(x, system, mid)), (
            None,
            app,
            tier,
            env,
            variant,
            figure,
            inp,
        )
    if by == "environment":
        return sel_of(lambda x: x == env), (mid, app, tier, None, variant, figure, inp)
    return sel_of(lambda x: x == variant), (mid, app, tier, env, None, figure, inp)


def compare(
    history,
    a: str | None = None,
    b: str | None = None,
    mode: str | None = None,
    by: str | None = None,
    app: str | None = None,
    machine_sel: str | None = None,
) -> Comparison:
    """The comparison of ``a`` with ``b``: machines (or systems), environments or variants
    (``by``; without it, what the two names are); without them, the history's two.
    ``app`` and ``machine_sel`` (an id, a prefix or a system) narrow the runs read.

    Each side of a figure is its clean verified runs; a side with none is its runs of
    other grades, shown with their grade, whose ratio is never judged."""
    samples = history.samples(mode=mode, app=app, clean=False)
    if machine_sel:
        samples = [s for s in samples if _matches(machine_sel, s["system"], s["machine_id"] or "")]
    names = _names(samples)
    if by is None:
        by = _axis(names, a, b) if a is not None and b is not None else "machine"
    if by == "machine" and machine_sel:
        raise ApptuneError(
            None,
            "--machine",
            "names the machine whose environments or variants are compared: not with two machines",
        )
    a, b = _pick(history, names, by, a, b)
    if a == b or (by == "machine" and _same_machines(samples, a, b)):
        raise ApptuneError(None, "compare", f"'{a}' and '{b}' are the same {by}")
    by_grade: dict[str, list] = {}
    for x in samples:
        by_grade.setdefault(x["quality_grade"] or "unmeasured", []).append(x)
    sides: dict[str, dict[tuple, dict[str, list]]] = {a: {}, b: {}}
    meta: dict[tuple, tuple] = {}
    seen: dict[str, tuple[set, set]] = {a: (set(), set()), b: (set(), set())}
    for grade, rows in by_grade.items():
        for ser_key, ser in regressions.series(rows).items():
            sel, key = _key(by, lambda f: next((x for x in (a, b) if f(x)), None), ser_key)
            if sel is None:
                continue
            sides[sel].setdefault(key, {}).setdefault(grade, []).extend(ser["points"])
            meta[key] = (ser["unit"], ser["better"])
            seen[sel][0].add(ser_key[1])
            seen[sel][1].add(ser_key[0])
    for sel in (a, b):
        if not sides[sel]:
            raise ApptuneError(
                history.path,
                None,
                f"no verified results of {by} '{sel}' in the history "
                f"({by}s: {_listing(names, by)})",
            )
    fps = history.machines()
    ma, mb = (
        ComparedMachine(
            sel,
            sorted(seen[sel][0]),
            sorted(seen[sel][1]),
            fps.get(next(iter(seen[sel][0]))) if len(seen[sel][0]) == 1 else None,
            by,
        )
        for sel in (a, b)
    )
    out = Comparison(ma, mb, mode, by=by)
    for key in sorted(set(sides[a]) & set(sides[b]), key=lambda k: tuple(x or "" for x in k)):
        unit, better = meta[key]
        mid, app_, tier, env, variant, figure, inp = key
        row = ComparedFigure(
            app_,
            tier,
            env,
            variant,
            figure,
            unit,
            better or "higher",
            _best(sides[a][key]),
            _best(sides[b][key]),
            machine_id=mid,
            input=json.loads(inp) if inp else None,
        )
        row.kind = MICRO.get((app_, figure))
        (out.micro if row.kind else out.rows).append(row)
    out.only = {
        "a": len(set(sides[a]) - set(sides[b])),
        "b": len(set(sides[b]) - set(sides[a])),
    }
    for kind in KINDS:
        sp = [r.speedup for r in out.micro if r.kind == kind and r.speedup and r.a.grade == "clean"]
        if sp:
            out.kinds[kind] = math.exp(statistics.fmean(math.log(s) for s in sp))
    for r in out.rows:
        if r.speedup and out.kinds and r.a.grade == "clean":
            r.nearest = min(out.kinds, key=lambda k: abs(math.log(out.kinds[k] / r.speedup)))
    return out


def _best(by_grade: dict[str, list]) -> Side:
    """A side from its clean runs, or from its other runs where it has none."""
    if "clean" in by_grade:
        return _side(by_grade["clean"])
    grade = "/".join(sorted(by_grade))
    return _side([p for pts in by_grade.values() for p in pts], grade)


def _fmt(x: float | None, spec: str, missing: str = "–") -> str:
    return missing if x is None else format(x, spec)


def _side_text(s: Side) -> str:
    runs = f"{s.runs} runs" if s.grade == "clean" else f"{s.runs} {s.grade} runs"
    return f"{s.value:.4g} ±{_fmt(s.noise, '.1%')} ({runs})"


#: What the rows of a comparison hold the same, by what it compares.
HELD = {
    "machine": "the same application, tier, environment/variant and figure",
    "environment": "the same machine, application, tier, variant and figure",
    "variant": "the same machine, application, tier, environment and figure",
}


def format_text(c: Comparison) -> str:
    """The comparison as a terminal shows it."""
    lines = [
        f"A: {c.a.label} ({', '.join(c.a.systems)})",
        f"B: {c.b.label} ({', '.join(c.b.systems)})",
        f"each row: {HELD[c.by]} on both sides",
        f"runs: {c.mode or 'every mode'}; speed-up: how much faster B is (above 1: B better)",
        "",
        "micro-benchmarks (B's speed-up over A, geometric mean of their figures): "
        + (", ".join(f"{k} x{v:.2f}" for k, v in c.kinds.items()) or "none measured on both"),
    ]
    for title, rows in (("application figures", c.rows), ("micro-benchmark figures", c.micro)):
        lines += ["", f"{title}:"]
        if not rows:
            lines.append(f"  none measured on both {c.by}s")
        for r in rows:
            lines.append(
                f"  {r.app}/{r.tier} {r.held} {r.figure} ({r.unit or ''}): "
                f"A {_side_text(r.a)}  B {_side_text(r.b)}  "
                f"B/A {_fmt(r.ratio, '.3f')}  speed-up x{_fmt(r.speedup, '.2f')} "
                f"±{_fmt(r.uncertainty, '.1%')}  {r.verdict}"
                + (f"  nearest: {r.nearest} x{c.kinds[r.nearest]:.2f}" if r.nearest else "")
                + (f"  [{r.kind}]" if r.kind else "")
            )
    unjudged = sum(r.a.grade != "clean" or r.b.grade != "clean" for r in c.rows + c.micro)
    if unjudged:
        lines += [
            "",
            f"{unjudged} figure(s) with a side from runs not graded clean (other work on the "
            "machine while they ran, or no run-quality record): their values are shown, no "
            "ratio is judged, none against a clean side",
        ]
    if c.only["a"] or c.only["b"]:
        lines += [
            "",
            f"measured on one {c.by} only: {c.only['a']} figures on A, {c.only['b']} on B",
        ]
    return "\n".join(lines)
