"""Performance baselines: bound to a machine, judged against their own noise.

``reference/baselines/<system>/APP.yaml`` holds, per machine fingerprint
(:mod:`apptune.machine`) and (environment, variant, tier), each figure's median over
clean runs, its relative noise and the number of runs. A run is compared only when

* the run's machine has the baseline's fingerprint (the ReFrame system name
  ``local`` matches any host; the fingerprint does not);
* the run was graded ``clean`` (:mod:`apptune.core.run.quality`);
* the figure is measured: energy, power, EDP and rates per watt from the model
  meter (or a shared node, or no meter) are shown, never judged;
* the noise lets a 10 % change be seen, or the change is beyond the threshold (below).

**The noise** of a figure is the standard deviation of its clean runs over their median,
raised to its upper 80 % confidence bound (``run_noise``). **The threshold rule**: with
``s`` that noise, ``n`` the baseline's runs and ``r`` the repeats compared, the noise of
the difference is ``sd = s * sqrt(f(r) + f(n))`` (``f(k)``: the variance of a median of
k runs) and the threshold ``t = max(5 %, 4 sd)``. "Within noise" is said only when a
change of ``DETECT`` (10 %) would exceed ``t`` nine times in ten (``t`` at most ``CAP``,
7.6 %); a noisier figure is "not judged here" unless its change is beyond ``t`` anyway.
Baselines need at least ``MIN_RUNS`` (3) clean runs to have a noise at all. A change is
weighed as a ratio in the figure's direction: a doubled time and a halved rate are both
100 % worse, so a noisy rate's threshold beyond 100 % still catches its collapse.

**Sessions.** Repeats within one session do not average out the level a session (a
night) runs at. A baseline recorded from at least 3 sessions holds the noise *between*
them, ``b``, and ``sd = sqrt(b^2 * (1 + 1/S) + s^2 * (f(r) + f(n)))`` for ``S``
sessions; a baseline recorded from stored nights (``--from-history``) holds it.

**Nothing changed.** A change beyond the threshold while nothing recorded differs from
the baseline's runs (build, inputs, launch, environment) is ``unexplained``: said, and
a regression only once ``CONFIRM`` runs in a row hold it (``apptune check-regressions``).
"""

from __future__ import annotations

import datetime
import math
import statistics
from pathlib import Path

import yaml

from ... import machine, paths
from ...errors import ApptuneError
from ...figures import worse_better
from ...models import BaselineFile, BaselineVerdicts, Figure, FigureVerdict, RunRecord
from ...yamlio import atomic_write_text, dump_yaml_roundtrip, edit_yaml_text, load_model, load_yaml
from ..run import quality
from . import causes, changes

HEADER = (
    "# Performance baselines per machine fingerprint and (environment, variant, tier):\n"
    "# the median of clean runs, the relative noise of one run, the number of runs.\n"
    "# Recorded with `apptune baseline record` (several sessions, clean runs only), which\n"
    "# shows the diff before it writes. Thresholds are derived\n"
    "# from the noise (apptune/core/judge/baselines.py, docs/regressions.md).\n"
)

#: A threshold is this many standard deviations of the difference ...
SIGMAS = 4.0
#: ... and at least this: the level of a 2-core VM drifts by 3-4 % between sessions
#: minutes apart (docs/measurements.md), which no run-to-run noise of one session shows.
FLOOR = 0.05
#: The change a judged figure must reveal nine times in ten.
DETECT = 0.10
#: One-sided normal quantile of 90 %.
POWER_Z = 1.2816
#: The largest threshold the rule allows: SIGMAS * DETECT / (SIGMAS + POWER_Z).
CAP = SIGMAS * DETECT / (SIGMAS + POWER_Z)
#: Clean runs a baseline needs before its noise, and so a threshold, exists.
MIN_RUNS = 3
#: A figure noisier than this per run is not judged at all: its runs' spread comes from a
#: few stalled runs (heavy tails: mpi-micro's allreduce_large at ci size on a 2-core VM had
#: 247 %, and an unchanged night's median of 3 repeats was 12x its baseline), where a
#: threshold of standard deviations assumes a bell curve.
NOISE_MAX = 1.0

#: Runs in a row beyond the threshold that make a shift with nothing changed a regression
#: (``apptune check-regressions``; one such run alone is "unexplained").
CONFIRM = causes.CONFIRM

#: Verdicts of one figure against its baseline. ``unexplained``: beyond the threshold while
#: nothing recorded changed since the baseline's runs (the figure's ``direction`` says which
#: way); it fails nothing until ``CONFIRM`` runs in a row hold it.
VERDICTS = ("regression", "improvement", "unexplained", "within noise", "no verdict")


def record_command(apps, tier: str, system: str = "local", partition: str | None = None) -> str:
    """The one command that records the baselines of ``apps`` (a name or several) for the
    tier, system and partition a run was on
    (:func:`apptune.commands.baseline.cmd_baseline_record`)."""
    apps = [apps] if isinstance(apps, str) else sorted(set(apps))
    checks = " ".join(f"-c reframe-checks/{a}" for a in apps)
    mode = tier if tier in ("ci", "nightly") else "ci"
    where = (
        f" -- --system {system}" + (f":{partition}" if partition else "")
        if system != "local"
        else ""
    )
    return f"apptune baseline record {checks} --mode {mode}{where}"


def record_advice(apps, tier: str, system: str = "local", partition: str | None = None) -> str:
    """How to record the baselines of ``apps``: the command (:func:`record_command`), what it
    costs, and the cheaper way from the sessions already stored (docs/regressions.md)."""
    mode = tier if tier in ("ci", "nightly") else "ci"
    return (
        f"record one with `{record_command(apps, tier, system, partition)}` (it runs 5 "
        f"sessions now; with `--from-history 5` after `--mode {mode}` it records from the "
        "last 5 stored sessions of that mode instead, running nothing)"
    )


def load(system: str, app: str) -> tuple[Path, BaselineFile | None]:
    f = paths.baselines_file(system, app)
    if not f.exists():
        return f, None
    data = load_yaml(f)
    if isinstance(data, dict) and "machines" not in data:
        raise ApptuneError(
            f,
            "machines",
            "baseline file has no machine fingerprint (baselines are bound "
            "to the machine they were measured on): delete it and record it again on its "
            "machine (apptune baseline record)",
        )
    b = load_model(f, BaselineFile)
    if b.app != app or b.system != system:
        raise ApptuneError(
            f, "app/system", f"file says {b.app}/{b.system}, expected {app}/{system}"
        )
    return f, b


def lookup(b: BaselineFile | None, machine_id: str | None, env: str, variant: str, tier: str):
    if b is None:
        return None
    return next(
        (
            e
            for e in b.entries
            if (e.machine, e.environment, e.variant, e.tier) == (machine_id, env, variant, tier)
        ),
        None,
    )


def not_applicable(
    b: BaselineFile | None, bfile: Path, machine_id: str | None, system: str, app: str
) -> str | None:
    """Why no baseline of the file can apply to a run on ``machine_id``; None if one can."""
    rel = paths.rel(bfile)
    if b is None:
        return f"no baseline file ({rel})"
    if machine_id is None:
        return "the run recorded no machine fingerprint"
    if machine_id not in b.machines:
        where = "; ".join(
            f"{machine.describe(fp.model_dump())} ({mid})" for mid, fp in b.machines.items()
        )
        return f"no baseline for this machine (baselines recorded on {where})"
    return None


def _f(k: int) -> float:
    """Variance of the median of k runs, in units of one run's variance."""
    return 1.0 if k <= 1 else 0.5 if k == 2 else math.pi / (2 * k)


def threshold(
    noise: float,
    base_runs: int,
    repeats: int = 1,
    between: float | None = None,
    sessions: int | None = None,
) -> tuple[float, float, bool]:
    """(threshold, noise of the difference, judged) for a figure (module docstring)."""
    var = noise**2 * (_f(repeats) + _f(base_runs))
    if between is not None and sessions:
        var += between**2 * (1 + 1 / sessions)
    sd = math.sqrt(var)
    t = max(FLOOR, SIGMAS * sd)
    return t, sd, t + POWER_Z * sd <= DETECT + 1e-12


def energy_no_verdict(trust: str | None) -> str | None:
    """Why energy figures of a run get no verdict (None: measured, they do)."""
    if trust == "measured":
        return None
    return {
        "modelled": "modelled energy (no meter): shown, never judged",
        "measured-shared": "energy of a shared node: shown, never judged",
    }.get(trust or "", "no energy meter")


def judge(
    fig: Figure,
    name: str,
    value,
    base,
    *,
    blocked: str | None,
    energy_trust: str | None,
    repeats: int = 1,
) -> FigureVerdict:
    """One figure's comparison: value, baseline, change, noise, threshold, verdict, why."""
    from ..data.recipes import is_energy_figure

    out = FigureVerdict(
        value=value,
        baseline=base.value if base else None,
        change=None,
        noise=base.noise if base else None,
        threshold=None,
        verdict="no verdict",
        why="",
    )
    finite = _finite(value)
    if base is not None and finite and base.value:
        out.change = (value - base.value) / base.value
    why_energy = energy_no_verdict(energy_trust) if is_energy_figure(name) else None
    if why_energy:
        out.why = why_energy
    elif blocked:
        out.why = blocked
    elif not finite:
        out.why = f"not a finite number ({value!r})"
    elif fig.discrete:
        out.why = (
            "discrete figure (its values lie on a grid): a step between grid points is no "
            "evidence, even as the median of repeats; the history's change points judge it"
        )
    elif base is None:
        out.why = "no baseline for this figure"
    elif base.noise is None or base.runs < MIN_RUNS:
        out.why = (
            f"noise unknown: the baseline comes from {base.runs} clean run(s), it needs {MIN_RUNS}"
        )
    elif base.noise > NOISE_MAX:
        out.why = (
            f"not judged: noise {_noise_words(base.noise, base)}, beyond {NOISE_MAX:.0%}: its "
            "clean runs differ by more than their own size (a few stalled runs make its "
            "spread), so no multiple of it is evidence"
        )
    else:
        noise = effective_noise(base.noise, base.runs)
        t, sd, judged = threshold(noise, base.runs, repeats, base.between, base.sessions)
        worse, better = worse_better(value, base.value, fig.better)
        bad, good = worse > t, better > t
        rule = f"threshold {t:.1%} = max({FLOOR:.0%}, {SIGMAS:g} x noise of the difference)"
        if bad and fig.better == "higher" and out.change >= -t:
            rule += f"; the rate fell {1 + worse:.3g}x (the baseline over this run)"
        if judged:
            out.threshold = round(t, 4)
            out.verdict = "regression" if bad else "improvement" if good else "within noise"
            out.why = rule
        elif bad or good:
            # too noisy to vouch for "within noise", but a change beyond 4 sd is no noise
            out.threshold = round(t, 4)
            out.verdict = "regression" if bad else "improvement"
            out.why = (
                f"{rule}; noise {_noise_words(noise, base)}: a change inside it would not be judged"
            )
        else:
            out.why = (
                f"not judged here: noise {_noise_words(noise, base)} (a {DETECT:.0%} change "
                f"would be missed more than 1 time in 10 with {repeats} run(s); only a change "
                f"beyond {t:.1%} would be)"
            )
    return out


def _noise_words(noise: float, base) -> str:
    """The noise a threshold came from, in words."""
    if base.between is None:
        return f"{noise:.1%} per run"
    return f"{noise:.1%} per run, {base.between:.1%} between sessions"


def compare(
    b: BaselineFile | None,
    entry,
    figures: dict[str, Figure],
    values: dict,
    *,
    blocked: str | None = None,
    energy_trust: str | None = None,
    repeats: int = 1,
) -> dict[str, FigureVerdict]:
    """Every figure of a run against its baseline entry. ``blocked``: why no figure of
    this run can be judged (another machine, a disturbed run), or None."""
    if entry is None and blocked is None:
        blocked = "no baseline for this variant on this machine"
    out = {}
    for name, fig in figures.items():
        v = values.get(name)
        if v is None:
            continue
        base = entry.figures.get(name) if entry is not None else None
        out[name] = judge(
            fig, name, v, base, blocked=blocked, energy_trust=energy_trust, repeats=repeats
        )
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def verdicts(
    system: str, app: str, runs: list[RunRecord], figures: dict[str, Figure]
) -> BaselineVerdicts:
    """The performance verdict of one run, or of the repeats of one variant (their medians,
    with the threshold for that many repeats): ``runs`` are run records of one app, tier,
    environment, variant and machine. The one place that decides what may be judged: a
    readable baseline of this machine, verified runs, clean runs, finite figures.

    The verdicts' ``why`` says why no figure of the runs can be judged (None: each
    figure's own ``why`` says); ``advice`` and ``changed`` are set only when they apply."""

    first = runs[0]
    env, variant, tier = first.environment, first.variant, first.tier
    out = BaselineVerdicts(file=paths.rel(paths.baselines_file(system, app)), found=False, why=None)
    try:
        bfile, b = load(system, app)
        blocked = None
    except ApptuneError as e:  # a bad baseline withholds the verdict, never the verification
        bfile, b, blocked = paths.baselines_file(system, app), None, f"baseline unusable: {e}"
    mid = first.machine_id
    entry = lookup(b, mid, env, variant, tier)
    out.found = entry is not None
    verified = [r for r in runs if r.verification.ok]
    clean = [r for r in verified if _grade(r) == "clean"]
    blocked = blocked or not_applicable(b, bfile, mid, system, app)
    if blocked is None and not verified:
        blocked = "not verified" + (f" (none of the {len(runs)} repeats)" if len(runs) > 1 else "")
    if blocked is None and not clean:
        blocked = (
            f"run {quality.summary(verified[0].quality)}"
            if len(runs) == 1
            else f"none of the {len(runs)} repeats was clean"
            if len(verified) == len(runs)
            else f"none of the {len(verified)} verified repeats was clean"
        )
    values = {}
    for n in {n for r in (clean or runs) for n in (r.figures or {})}:
        vals = [(r.figures or {}).get(n) for r in (clean or runs)]
        vals = [v for v in vals if v is not None]
        if not vals:
            continue
        bad = [v for v in vals if not _finite(v)]  # no median hides a non-finite repeat
        values[n] = bad[0] if bad else statistics.median(vals)
    out.why = blocked
    if not out.found and not (blocked or "").startswith("baseline unusable"):
        # the one piece of advice of a run without a baseline here (said once per run)
        out.advice = record_command(app, tier, system, first.partition)
    if entry is not None:
        out.changed = what_changed(entry, first)
    out.repeats = max(1, len(clean))
    out.figures = compare(
        b,
        entry,
        figures,
        values,
        blocked=blocked,
        energy_trust=first.energy.trust if first.energy else None,
        repeats=out.repeats,
    )
    if out.changed is not None:
        now = causes.typical([causes.condition(r.quality) for r in clean or runs])
        out.changed = causes.weigh_changes(entry, out.changed, out.figures, figures, now)
    return out


def run_facts(r: RunRecord) -> dict[str, str]:
    """The facts of a run a baseline keeps: all but the machine's (a baseline applies
    only on the machine it names)."""
    return {k: v for k, v in changes.facts(r).items() if not k.startswith("machine ")}


def what_changed(entry, run: RunRecord) -> list[str] | None:
    """What differs between the runs of a baseline ``entry`` and ``run`` (an empty list:
    nothing recorded); None when the baseline did not keep its runs' provenance."""
    if entry.provenance is None:
        return None
    return changes.describe(entry.provenance, run_facts(run))


#: Said (once) when a baseline entry has no provenance to compare with.
NO_PROVENANCE = (
    "the baseline was recorded without its runs' provenance (before baselines kept it): "
    "record it again to see what changed"
)


# --------------------------------------------------------------------------- recording
#: One-sided normal quantile of the confidence level of the noise's upper bound (80 %).
NOISE_Z = 0.8416
#: What a few runs that agree cannot rule out: a figure's noise is pooled with this prior,
#: the median noise of 14 clean HPCC figures on a 2-core VM (docs/measurements.md,
#: "Performance verdicts"), weighted as this many runs' worth of evidence.
PRIOR_NOISE = 0.015
PRIOR_DF = 4


def run_noise(values: list[float]) -> float | None:
    """The relative run-to-run noise of a figure from ``values`` (at least MIN_RUNS clean
    runs): the sample standard deviation over the median, raised to its upper 80 %
    confidence bound (sd x sqrt((n-1) / chi2_0.2(n-1)), Wilson-Hilferty), so that a
    handful of runs that happened to agree does not make a threshold tighter than the
    machine is (verdicts also pool it with a prior: :func:`effective_noise`). None with
    fewer runs."""
    n = len(values)
    if n < MIN_RUNS:
        return None
    med = statistics.median(values)
    if not med:
        return None
    k = n - 1
    chi2 = k * (1 - 2 / (9 * k) - NOISE_Z * math.sqrt(2 / (9 * k))) ** 3
    return statistics.stdev(values) / abs(med) * math.sqrt(k / chi2)


def effective_noise(noise: float, runs: int) -> float:
    """The noise a baseline's verdicts use: its recorded noise, and at least that noise
    pooled with ``PRIOR_NOISE`` (worth ``PRIOR_DF`` runs), so that a handful of runs that
    happened to agree is not taken for a machine without noise: 3 identical runs give
    1.2 %, 10 give 0.8 %, and many runs their own noise."""
    k = max(runs - 1, 1)
    return max(noise, math.sqrt((PRIOR_DF * PRIOR_NOISE**2 + k * noise**2) / (PRIOR_DF + k)))


def _grade(r: RunRecord) -> str | None:
    return r.quality.grade if r.quality else None


def usable(r: RunRecord) -> str | None:
    """Why a result may not enter a baseline (None: it may)."""
    if not r.verification.ok:
        return "not verified"
    q = _grade(r)
    if q != "clean":
        return f"run quality {q or 'unmeasured'}"
    if not r.machine_id or not r.machine:
        return "no machine fingerprint"
    return None


def update(system: str, app: str, results: list[RunRecord], **kw) -> tuple[Path, list[str]]:
    """Merge results into the system's baseline file (atomically); see ``merge``."""
    f, text, notes = merge(system, app, results, **kw)
    if not text:
        raise ApptuneError(
            f,
            None,
            f"nothing to record for {app}: no clean, verified result "
            f"({'; '.join(notes) or 'no result'})",
        )
    atomic_write_text(f, text)
    return f, notes


def merge(
    system: str, app: str, results: list[RunRecord], figures: dict[str, Figure] | None = None
) -> tuple[Path, str, list[str]]:
    """The baseline file with ``results`` merged in: (path, new text, notes).

    Only verified, clean results with a machine fingerprint count; per machine and
    (environment, variant, tier) each figure becomes the median of its runs, with their
    robust noise. Modelled (or shared, or absent) energy is not recorded; figures whose
    value is not a positive finite number are left out (and said so)."""
    from ..data.recipes import is_energy_figure

    f, b = load(system, app)
    data = (
        b.model_dump(mode="json")
        if b
        else {"app": app, "system": system, "machines": {}, "entries": []}
    )
    entries = {
        (e["machine"], e["environment"], e["variant"], e["tier"]): e for e in data["entries"]
    }
    notes, groups = [], {}
    for r in results:
        if r.app != app:
            continue
        why = usable(r)
        if why:
            notes.append(
                f"{r.environment}/{r.variant} tier {r.tier} ({r.run_id or '?'}): left out: {why}"
            )
            continue
        groups.setdefault((r.machine_id, r.environment, r.variant, r.tier), []).append(r)
    today = datetime.date.today().isoformat()
    for key, rs in groups.items():
        mid = key[0]
        data["machines"].setdefault(mid, rs[0].machine.data())
        figs = {}
        names = sorted({n for r in rs for n in (r.figures or {})})
        for n in names:
            if is_energy_figure(n) and any(
                energy_no_verdict(r.energy.trust if r.energy else None) for r in rs
            ):
                continue
            vals = [
                v
                for r in rs
                for v in [(r.figures or {}).get(n)]
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            ]
            bad = [v for v in vals if not (math.isfinite(v) and v > 0)]
            if bad or not vals:
                notes.append(
                    f"{key[1]}/{key[2]} tier {key[3]}: {n} left out "
                    f"({'value ' + repr(bad[0]) if bad else 'no value'}: a baseline holds "
                    "positive finite numbers)"
                )
                continue
            noise = run_noise(vals)
            figs[n] = {
                "value": round(statistics.median(vals), 6),
                "noise": round(noise, 4) if noise is not None else None,
                "runs": len(vals),
            } | _sessions(rs, n)
        if not figs:
            continue
        runs = sorted({r.run_id or "?" for r in rs})
        entries[key] = {
            "machine": mid,
            "environment": key[1],
            "variant": key[2],
            "tier": key[3],
            "recorded": f"{today}, median of {len(rs)} clean run(s): {', '.join(runs)}",
            "figures": figs,
            "provenance": changes.common([run_facts(r) for r in rs]),
        }
        state = causes.typical([causes.condition(r.quality) for r in rs])
        if state:
            entries[key]["quality"] = {k: round(v, 4) for k, v in state.items()}
    if not groups:  # nothing to record: the file stays as it is
        return f, f.read_text() if f.exists() else "", notes
    data["entries"] = sorted(entries.values(), key=_entry_order)
    BaselineFile.model_validate(data)
    if b is None:
        return f, HEADER + dump_yaml_roundtrip(data), notes
    recorded = {k: entries[k] for k in groups if k in entries}
    text = edit_yaml_text(f.read_text(), lambda doc: _merge_into(doc, data, recorded))
    BaselineFile.model_validate(yaml.safe_load(text))
    return f, text, notes


def _sessions(rs: list[RunRecord], name: str) -> dict:
    """``sessions`` and ``between`` of a figure from runs of several sessions (run ids)."""
    by: dict[str, list[float]] = {}
    for r in rs:
        v = (r.figures or {}).get(name)
        if _finite(v) and v > 0:
            by.setdefault(r.session or r.run_id or "?", []).append(v)
    if len(by) < 2:
        return {}
    between = run_noise([statistics.median(v) for v in by.values()])
    return {"sessions": len(by)} | ({"between": round(between, 4)} if between is not None else {})


def _entry_order(e) -> tuple:
    return (e["machine"], e["tier"], e["environment"], e["variant"])


def _merge_into(doc, data: dict, recorded: dict) -> None:
    """The recorded entries merged into the baseline file's own YAML (a ruamel round trip:
    its comments, order and style stay): a new machine's fingerprint is added, an entry
    recorded again gets its new figures in place, a new entry goes where the order puts it."""
    for key in ("machines", "entries"):
        if not doc.get(key):  # empty (often `{}` / `[]`): filled in block style
            doc[key] = type(data[key])()
    for mid, fp in data["machines"].items():
        if mid not in doc["machines"]:
            doc["machines"][mid] = fp
    seq = doc["entries"]
    for e in sorted(recorded.values(), key=_entry_order):
        at = next((i for i, x in enumerate(seq) if _entry_order(x) == _entry_order(e)), None)
        if at is not None:
            seq[at]["recorded"] = e["recorded"]
            seq[at]["figures"] = e["figures"]
            seq[at]["provenance"] = e["provenance"]
            if e.get("quality"):
                seq[at]["quality"] = e["quality"]
        else:
            pos = next((i for i, x in enumerate(seq) if _entry_order(x) > _entry_order(e)), None)
            seq.insert(len(seq) if pos is None else pos, e)
