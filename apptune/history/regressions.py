"""Verdicts over the history: regression, improvement, unchanged or insufficient data.

Per series (system, application, tier, environment, variant, figure):

* each run is one point: the **median** of its repeats, with their **spread**;
* change points come from E-divisive means with a permutation test
  (apptune/history/changepoint.py): the threshold is the series' own noise, nothing
  is guessed per figure;
* the latest change point decides: a shift in the figure's bad direction is a
  regression, in the good one an improvement; the first run after it is the
  first bad run, and the provenance of the runs on either side says what
  changed (compiler, flags, patches, source, libraries);
* a change is *accepted* once the baseline (``apptune bless``) sits at the new
  level; without a change point, the latest runs are judged against the baseline by
  the rule ``apptune run`` uses (:func:`apptune.core.judge.baselines.judge`: the baseline's
  noise per run and between sessions): a regression when the latest run is beyond the
  threshold and its provenance differs from the run before it (a change that names its
  cause), or when the last ``baselines.CONFIRM`` runs are each beyond it in the same
  direction; one run beyond it with nothing changed is ``unexplained``.
"""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import dataclass, field

from ..core.judge import baselines, causes, changes
from ..errors import ApptuneError
from ..models import BaselineFigure, Figure
from . import changepoint


#: Provenance keys that change with every build without meaning a different build.
@dataclass
class Point:
    run: str  # ReFrame session uuid
    started: str | None
    run_dir: str | None
    value: float  # median of the repeats
    spread: float | None  # (max - min) / median of the repeats
    repeats: int
    provenance: dict | None
    #: The node's state during the run, the median of its repeats' (apptune/core/judge/causes.py).
    quality: dict | None = None

    def label(self) -> str:
        return f"{self.started or '?'} ({self.run[:8]}, {self.run_dir or '?'})"


@dataclass
class Verdict:
    system: str
    app: str
    tier: str
    environment: str
    variant: str
    figure: str
    unit: str | None
    better: str
    points: list[Point]
    verdict: str = "unchanged"  # regression | improvement | unchanged | insufficient data
    reason: str = ""
    change: float | None = None
    change_points: list[dict] = field(default_factory=list)
    first_bad: Point | None = None
    last_good: Point | None = None
    provenance_diff: list[str] = field(default_factory=list)
    noise: float | None = None  # relative run-to-run noise (robust sigma / median)
    baseline: dict | None = None
    machine_id: str | None = None
    #: The input parameters of the series (None: not recorded), and, where the same variant
    #: and figure has series of other inputs, what tells this one apart (``xfer=1048575``).
    input: dict | None = None
    input_label: str = ""

    @property
    def label(self) -> str:
        """The series' variant as a page names it: ``environment/variant [its input]``."""
        return f"{self.environment}/{self.variant}" + (
            f" [{self.input_label}]" if self.input_label else ""
        )

    @property
    def name(self) -> str:
        return f"{self.system} {self.app}/{self.tier} {self.label} {self.figure}"

    def to_dict(self) -> dict:
        d = {
            k: getattr(self, k)
            for k in (
                "system",
                "machine_id",
                "app",
                "tier",
                "environment",
                "variant",
                "figure",
                "unit",
                "better",
                "verdict",
                "reason",
                "change",
                "change_points",
                "provenance_diff",
                "noise",
                "baseline",
                "input",
                "input_label",
            )
        }
        d["first_bad"] = self.first_bad.__dict__ if self.first_bad else None
        d["last_good"] = self.last_good.__dict__ if self.last_good else None
        d["points"] = [
            {
                "run": p.run,
                "started": p.started,
                "value": p.value,
                "spread": p.spread,
                "repeats": p.repeats,
            }
            for p in self.points
        ]
        for k in ("first_bad", "last_good"):
            if d[k]:
                d[k] = {kk: vv for kk, vv in d[k].items() if kk != "provenance"}
        return d


def series(samples) -> dict[tuple, dict]:
    """History samples (rows of History.samples) grouped per series, one point per run.

    A series belongs to one machine (its fingerprint's id), so a change of node type is
    never a change point, and to one input (its parameters, the last part of its key: a
    changed input starts a series of its own; runs stored before inputs were kept join the
    series of the first input recorded); energy figures enter only when measured (a
    modelled figure is a function of the wall time and adds nothing)."""
    from ..core.data.recipes import is_energy_figure

    out: dict[tuple, dict] = {}
    inputs: dict[str | None, str | None] = {None: None}
    for s in samples:
        if is_energy_figure(s["figure"]) and s["energy_trust"] != "measured":
            continue
        if s["provenance"] not in inputs:
            given = json.loads(s["provenance"]).get("input")
            inputs[s["provenance"]] = json.dumps(given, sort_keys=True) if given else None
        key = (
            s["system"],
            s["machine_id"] or "?",
            s["app"] or "?",
            s["tier"] or "?",
            s["environment"] or "?",
            s["variant"] or s["test"],
            s["figure"],
            inputs[s["provenance"]],
        )
        ser = out.setdefault(
            key, {"unit": s["unit"], "better": s["better"] or "higher", "runs": {}}
        )
        run = ser["runs"].setdefault(
            s["session_uuid"],
            {
                "started": s["started"],
                "run_dir": s["run_dir"],
                "values": [],
                "provenance": s["provenance"],
                "quality": {},
            },
        )
        run["values"].append(s["value"])
        if "quality" in s.keys() and s["quality"]:  # one per repeat (its result)
            run["quality"][(s["test"], s["repeat"])] = json.loads(s["quality"])
    _join_unknown_inputs(out)
    for ser in out.values():
        pts = []
        for uuid, r in ser["runs"].items():
            med = statistics.median(r["values"])
            spread = (
                (max(r["values"]) - min(r["values"])) / abs(med)
                if len(r["values"]) > 1 and med
                else None
            )
            pts.append(
                Point(
                    uuid,
                    r["started"],
                    r["run_dir"],
                    med,
                    spread,
                    len(r["values"]),
                    json.loads(r["provenance"]) if r["provenance"] else None,
                    causes.typical([causes.condition(q) for q in r["quality"].values()]),
                )
            )
        ser["points"] = pts
        del ser["runs"]
    return out


def _join_unknown_inputs(out: dict[tuple, dict]) -> None:
    """Runs whose input is not recorded join the series of the same figure whose input was
    recorded first (the input of those runs is most likely the first one recorded)."""
    for key in [k for k in out if k[-1] is None]:
        known = [k for k in out if k[:-1] == key[:-1] and k[-1] is not None]
        if known:
            first = min(
                known, key=lambda k: min(r["started"] or "" for r in out[k]["runs"].values())
            )
            out[first]["runs"] = out.pop(key)["runs"] | out[first]["runs"]


def provenance_diff(before: dict | None, after: dict | None) -> list[str]:
    """What changed between two runs' build provenance
    (:func:`apptune.core.judge.changes.describe`)."""
    if before is None or after is None:
        return []
    return changes.describe(changes.provenance_facts(before), changes.provenance_facts(after))


def _bad(change: float, better: str) -> bool:
    return change < 0 if better == "higher" else change > 0


def analyse(
    v: Verdict,
    baseline: BaselineFigure | None = None,
    min_size: int = changepoint.MIN_SIZE,
    alpha: float = changepoint.ALPHA,
    min_change: float = 0.0,
    spec: Figure | None = None,
) -> Verdict:
    """Fill in the verdict of one series from its points (``baseline``: this machine's
    baseline of the figure, ``spec``: the recipe's figure)."""
    x = [p.value for p in v.points]
    n = len(x)
    med = statistics.median(x) if x else None
    baseline_value = baseline.value if baseline is not None else None
    if baseline is not None and x:
        v.baseline = against_baseline(v, baseline, spec)
    if n < 2 * min_size:
        v.verdict = "insufficient data"
        v.reason = (
            f"{n} run(s) in the history; a change needs at least {min_size} runs on each side"
        )
        if v.baseline and v.baseline["verdict"] in ("regression", "improvement", "unexplained"):
            v.verdict, v.change, v.reason = _baseline_words(v)
        return v
    cps = changepoint.detect(x, alpha=alpha, min_size=min_size)
    # relative noise: residuals about each segment's median
    bounds = [0] + [c.index for c in cps] + [n]
    resid = []
    for lo, hi in itertools.pairwise(bounds):
        m = statistics.median(x[lo:hi])
        resid += [xi - m for xi in x[lo:hi]]
    mad = statistics.median([abs(r) for r in resid])
    v.noise = 1.4826 * mad / abs(med) if med else None
    within = repeat_noise(v.points)
    if v.noise is not None and within is not None and within > v.noise:
        # a short or lucky history does not make the threshold tighter than the repeats allow
        v.noise = within
    v.change_points = [
        {
            "index": c.index,
            "run": v.points[c.index].run,
            "started": v.points[c.index].started,
            "before": c.before,
            "after": c.after,
            "change": c.change,
            "p_value": c.p_value,
            "direction": (
                "regression" if c.change is not None and _bad(c.change, v.better) else "improvement"
            ),
            # what changed there (empty: the same build on a node in the same state), each
            # change weighed against the step (apptune/core/judge/causes.py)
            "cause": _weighed_cause(v, c, bounds[j], bounds[j + 2]),
        }
        for j, c in enumerate(cps)
    ]
    if cps:
        last = cps[-1]
        v.change = last.change
        v.first_bad = v.points[last.index]
        v.last_good = v.points[last.index - 1]
        v.provenance_diff = v.change_points[-1]["cause"]
        direction = v.change_points[-1]["direction"]
        accepted = baseline_value is not None and abs(baseline_value - last.after) < abs(
            baseline_value - last.before
        )
        if last.change is not None and abs(last.change) < min_change:
            v.verdict = "unchanged"
            v.reason = f"change of {last.change:+.1%} is below --min-change {min_change:.1%}"
        elif accepted and direction == "regression":
            v.verdict = "unchanged"
            v.reason = (
                f"{last.change:+.1%} change at {v.first_bad.label()} accepted: the baseline "
                f"({baseline_value:.4g}) is at the new level"
            )
        else:
            v.verdict = direction
            v.reason = (
                f"{last.before:.4g} → {last.after:.4g} {v.unit or ''} ({last.change:+.1%}, "
                f"p={last.p_value:.3f}; {last.n_before} runs before, {last.n_after} after)"
            )
        return v
    if v.baseline and v.baseline["verdict"] in ("regression", "improvement", "unexplained"):
        v.verdict, v.change, v.reason = _baseline_words(v)
        v.reason = f"no change point in {n} runs; {v.reason}"
        return v
    v.verdict = "unchanged"
    v.reason = (
        f"no change point in {n} runs (noise {v.noise:.1%})"
        if v.noise is not None
        else f"no change point in {n} runs"
    )
    return v


def _weighed_cause(v: Verdict, c: changepoint.ChangePoint, lo: int, hi: int) -> list[str]:
    """What changed at a change point (the provenance, and the node's state of the segments
    on either side), each change weighed against the step
    (:func:`apptune.core.judge.causes.weigh`)."""
    pts = v.points
    move = causes.factor(c.after, c.before, v.better)
    before = causes.typical([p.quality for p in pts[lo : c.index]])
    after = causes.typical([p.quality for p in pts[c.index : hi]])
    return causes.said(causes.weigh(_nearby_diff(pts, c.index), [move], before, after))


def against_baseline(v: Verdict, base: BaselineFigure, spec: Figure | None) -> dict:
    """The latest runs of a series against its baseline, by
    :func:`apptune.core.judge.baselines.judge` (each run: the median of its repeats). The latest
    run's verdict stands when its provenance differs from the run before it (the cause is named) or
    when the last ``CONFIRM`` runs all have it; beyond the threshold otherwise: ``unexplained``."""
    fig = spec or Figure.model_construct(better=v.better, discrete=False)
    last = v.points[-baselines.CONFIRM :]
    js = [
        baselines.judge(
            fig, v.figure, p.value, base, blocked=None, energy_trust="measured", repeats=p.repeats
        )
        for p in last
    ]
    j = js[-1]
    out = {
        "value": base.value,
        "current": last[-1].value,
        "change": j.change,
        "threshold": j.threshold,
        "verdict": j.verdict,
        "why": j.why,
        "held": sum(x.verdict == j.verdict for x in js),
        "cause": [],
    }
    if j.verdict in ("regression", "improvement") and len(v.points) > 1:
        a, b = v.points[-2:]
        weighed = causes.weigh(
            provenance_diff(a.provenance, b.provenance),
            [causes.factor(b.value, base.value, v.better)],
            a.quality,
            b.quality,
        )
        out["cause"] = causes.said(weighed)
        if not causes.build_explains(weighed) and out["held"] < baselines.CONFIRM:
            out["direction"], out["verdict"] = j.verdict, "unexplained"
    elif j.verdict in ("regression", "improvement") and out["held"] < baselines.CONFIRM:
        out["direction"], out["verdict"] = j.verdict, "unexplained"
    return out


def _baseline_words(v: Verdict) -> tuple[str, float | None, str]:
    """(verdict, change, reason) of a series judged by its baseline comparison."""
    b = v.baseline
    said = (
        f"the latest run {b['current']:.4g} is {b['change']:+.1%} from the baseline "
        f"{b['value']:.4g} (threshold {b['threshold']:.1%}, the rule of apptune run)"
    )
    if b["verdict"] == "unexplained":
        what = (
            "nothing that changed since the run before it explains it: " + changes.short(b["cause"])
            if b["cause"]
            else "with nothing changed since the run before it"
        )
        return "unexplained", b["change"], f"{said}, {what}; {causes.confirmed(b['direction'])}"
    if b["cause"]:
        v.provenance_diff = b["cause"]
        v.first_bad, v.last_good = v.points[-1], v.points[-2]
        return (
            b["verdict"],
            b["change"],
            f"{said}; changed since the run before: " + (changes.short(b["cause"])),
        )
    return b["verdict"], b["change"], f"{said}; so were the {b['held'] - 1} run(s) before it"


#: Expected range of n normal values in standard deviations (d2, for n = 2..10).
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


def repeat_noise(points: list[Point]) -> float | None:
    """Relative noise of a run's median, from the spread of its repeats: the repeats'
    sigma is range / d2(n), the median's 1.2533 sigma / sqrt(n); the median over runs."""
    est = [
        1.2533 * p.spread / _D2[min(p.repeats, 10)] / p.repeats**0.5
        for p in points
        if p.spread is not None and p.repeats > 1
    ]
    return statistics.median(est) if est else None


def _nearby_diff(points: list[Point], i: int, reach: int = 2) -> list[str]:
    """The provenance change at the change point; if none, the nearest one within
    ``reach`` runs (the detected location can be off by a run in noisy series)."""
    d = provenance_diff(points[i - 1].provenance, points[i].provenance)
    if d:
        return d
    for off in range(1, reach + 1):
        for j in (i - off, i + off):
            if 1 <= j < len(points):
                d = provenance_diff(points[j - 1].provenance, points[j].provenance)
                if d:
                    where = (
                        f"{abs(j - i)} run(s) {'before' if j < i else 'after'} the detected change"
                    )
                    return [f"(at {points[j].label()}, {where}) {line}" for line in d]
    return []


def _baseline_figure(
    system: str,
    machine_id: str,
    app: str,
    env: str,
    variant: str,
    tier: str,
    figure: str,
    cache: dict,
) -> BaselineFigure | None:
    """The committed baseline of the series' machine (None for another machine's)."""
    sysname = system.split(":")[0]
    if (sysname, app) not in cache:
        try:
            cache[(sysname, app)] = baselines.load(sysname, app)[1]
        except ApptuneError:
            cache[(sysname, app)] = None
    entry = baselines.lookup(cache[(sysname, app)], machine_id, env, variant, tier)
    return entry.figures.get(figure) if entry else None


def _spec(app: str, figure: str, cache: dict) -> Figure | None:
    from ..core.data import recipes

    if ("specs", app) not in cache:
        try:
            cache[("specs", app)] = recipes.figure_specs(recipes.load_recipe(app))
        except ApptuneError:
            cache[("specs", app)] = {}
    return cache[("specs", app)].get(figure)


def check(
    history,
    system: str | None = None,
    mode: str | None = None,
    app: str | None = None,
    baseline_system: str | None = None,
    **kw,
) -> list[Verdict]:
    """Verdicts for every series in the history (optionally one system, mode or app)."""
    cache: dict = {}
    out = []
    for key, ser in series(history.samples(system=system, mode=mode, app=app)).items():
        sysname, mid, app_, tier, env, variant, figure, inp = key
        v = Verdict(
            sysname,
            app_,
            tier,
            env,
            variant,
            figure,
            ser["unit"],
            ser["better"],
            ser["points"],
            machine_id=mid,
            input=json.loads(inp) if inp else None,
        )
        spec = _spec(app_, figure, cache)
        # a discrete figure (values on a grid) flips between grid points on unchanged
        # nights: only its change points judge it, never its distance from the baseline
        base = (
            None
            if spec is not None and spec.discrete
            else _baseline_figure(
                baseline_system or sysname, mid, app_, env, variant, tier, figure, cache
            )
        )
        out.append(analyse(v, base, spec=spec, **kw))
    _label_inputs(out)
    return out


def _label_inputs(verdicts: list[Verdict]) -> None:
    """Where one variant's figure has series of several inputs, each is labelled with the
    parameters that tell them apart."""
    by: dict[tuple, list[Verdict]] = {}
    for v in verdicts:
        key = (v.system, v.machine_id, v.app, v.tier, v.environment, v.variant, v.figure)
        by.setdefault(key, []).append(v)
    for vs in (vs for vs in by.values() if len(vs) > 1):
        keys = sorted({k for v in vs for k in (v.input or {})})
        differ = [k for k in keys if len({json.dumps((v.input or {}).get(k)) for v in vs}) > 1]
        for v in vs:
            given = v.input or {}
            v.input_label = ", ".join(f"{k}={given.get(k, '?')}" for k in differ) or "input ?"


ORDER = {
    "regression": 0,
    "improvement": 1,
    "unexplained": 2,
    "insufficient data": 3,
    "unchanged": 4,
}


def format_verdict(v: Verdict) -> str:
    head = f"{v.verdict.upper()}: {v.name} ({v.better} is better): {v.reason}"
    lines = [head]
    if v.verdict in ("regression", "improvement") and v.first_bad:
        lines.append(
            f"  first {'bad' if v.verdict == 'regression' else 'changed'} run: "
            f"{v.first_bad.label()}"
        )
        lines.append(f"  last run before it: {v.last_good.label()}")
        if v.provenance_diff:
            lines.append("  what changed (provenance and the node's state):")
            lines += [f"    {d}" for d in v.provenance_diff]
        else:
            lines.append(
                "  nothing recorded changed between the two runs (the same build, launched "
                "alike, on a node in the same state: look at the machine or the input)"
            )
    return "\n".join(lines)
