"""What a run's report says, collected from ReFrame's run report plus apptune's per-test
result files: the failures with their one-line reason, a variant matrix per application
with the correctness mark, the figures, the change against the baseline and the best
correct variant per figure, a summary per application and the first screen made of them
(:mod:`~apptune.report.screen`), and the history's verdicts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import machine
from ..constants import RUN_NOTES_FILE, SKIP_FILE, XFAIL_FILE
from ..core import knobs, recipes
from ..errors import ApptuneError
from ..history import records
from ..models import BaselineVerdicts, RunRecord
from .axes import axis_tables
from .knob_table import knob_tables
from .scaling import scaling_tables
from .screen import app_summary, changed_since_baseline, first_screen, untested_summaries
from .values import _key, _num

#: ReFrame's results of a test that did not run: ``skip`` (it skipped itself, or a test it
#: depends on was skipped or an expected failure) and ``fail_deps`` (a test it depends on
#: failed).  ReFrame records no reason for either: the reason is the dependency's.
SKIPPED_RESULTS = ("skip", "fail_deps")


def _skip_reason(tc: dict, by_name: dict, depth: int = 0) -> str:
    """The recorded reason of the test or of the dependency (skipped, expected failure or
    failed) that caused it."""
    skip_file = Path(tc.get("stagedir") or "/nonexistent") / SKIP_FILE
    if skip_file.is_file():
        return skip_file.read_text().strip()
    if depth < 5:
        for dep in tc.get("dependencies_actual") or []:
            d = by_name.get((dep[0], dep[2]) if len(dep) > 2 else dep[0])
            if d and d.get("result") == "xfail":
                return f"depends on {d['display_name']}, an expected failure: {_xfail_reason(d)}"
            if d and d.get("result") == "fail":
                f = records.failure(d, None)
                return (
                    f"depends on {d['display_name']}, which failed"
                    f"{' in ' + f['phase'] if f['phase'] else ''}: {f['reason']}"
                )
            if d and d.get("result") in SKIPPED_RESULTS:
                return _skip_reason(d, by_name, depth + 1)
    if tc.get("result") == "fail_deps":
        return tc.get("fail_reason") or "a test it depends on failed"
    return tc.get("fail_reason") or "skipped (no reason recorded)"


def _xfail_reason(tc: dict) -> str:
    """Why a test failed as expected: the build's record (reason and the compiler's own
    message), the run record's known-wrong reason, or ReFrame's message."""
    rec = next(
        (
            r
            for d in (tc.get("outputdir"), tc.get("stagedir"))
            if d
            for r in [records.load_json(Path(d) / XFAIL_FILE)]
            if r
        ),
        None,
    )
    if rec:
        return f"{rec['reason']} (compiler said: {rec['compiler_said']})"
    r = records.record_of(tc)
    known_wrong = r.verification.xfail if r else None
    if known_wrong:
        return f"known-wrong result: {known_wrong}"
    return " ".join(str(tc.get("fail_reason") or "expected failure").split())[:500]


def _testcases(report_file: Path) -> tuple[dict, list[dict], dict]:
    """The run report, its test cases, and the cases by unique name (and environment)."""
    rep = records.read_report(Path(report_file).parent, report_file)
    cases = records.testcases(rep)
    by_name = {(tc["unique_name"], tc.get("environ")): tc for tc in cases}
    by_name.update({tc["unique_name"]: tc for tc in cases})
    return rep, cases, by_name


def collect(report_file: Path) -> dict:
    rep, cases, by_name = _testcases(report_file)
    rows, runs, failures, skipped, xfailed = [], [], [], [], []
    for tc in cases:
        res = tc.get("result")
        if res == "xfail":
            xfailed.append(
                {
                    "test": tc["display_name"],
                    "environment": tc.get("environ"),
                    "reason": _xfail_reason(tc),
                    **_app_tier(tc),
                }
            )
            continue
        if tc.get("fixture"):
            if res == "fail":
                failures.append(records.failure(tc, None))
            continue
        r = records.record_of(tc)
        if res in SKIPPED_RESULTS:
            skipped.append(
                {
                    "test": tc["display_name"],
                    "environment": tc.get("environ"),
                    "reason": _skip_reason(tc, by_name),
                    **_app_tier(tc),
                    **_asked_of(tc, r),
                }
            )
            continue
        if r is None:
            failures.append(records.failure(tc, None))
            continue
        row = {
            "test": tc["display_name"],
            "app": r.app,
            "tier": r.tier,
            "variant": r.variant,
            "environment": r.environment,
            "system": f"{r.system}:{r.partition}",
            "result": res,
            "fail_phase": tc.get("fail_phase"),
            "fail_reason": tc.get("fail_reason"),
            "verified": r.verification.ok,
            "verification": r.verification.summary,
            "figures": r.figures or {},
            # the parts of the run record, typed (summary.json holds them as the record does)
            "baseline": r.baseline,
            "energy": r.energy,
            "provenance": r.provenance,
            "outputdir": tc.get("outputdir") if res == "pass" else tc.get("stagedir"),
            "ranks": r.ranks,
            "input": r.input,
            "curves": r.curves or {},
            "job": r.job,
            "placement_layout": r.placement_layout,
            "launch": r.launch,
            "quality": r.quality,
            "machine_id": r.machine_id,
            "machine": r.machine,
            "run": r.run,
            "scratch": r.scratch,
            "knobs": r.knobs,
        }
        rows.append(row)
        runs.append(r)
        if res != "pass":
            failures.append(records.failure(tc, row))
    si = rep.get("session_info", {})
    session = {
        k: si.get(k)
        for k in (
            "uuid",
            "time_start",
            "time_end",
            "time_elapsed",
            "cmdline",
            "hostname",
            "version",
            "num_cases",
            "num_failures",
            "num_skipped",
        )
    }
    for k in ("time_start", "time_end"):
        session[k] = _readable_time(session[k])
    apps = _matrices(_merge_repeats(rows, runs))
    machines = {
        r["machine_id"]: machine.describe(r["machine"].data())
        for r in rows
        if r["machine_id"] and r["machine"]
    }
    summaries = [app_summary(a) for a in apps] + untested_summaries(
        cases, apps, failures, xfailed, skipped
    )
    out = {
        "session": session,
        "machines": machines,
        "outcome": outcome(report_file, failures, summaries),
        "first_screen": None,
        "summary": summaries,
        "advice": baseline_advice(rows),
        "failures": failures,
        "expected_failures": xfailed,
        "skipped": skipped,
        "baseline_verdicts": _baseline_verdicts(apps, failures),
        "history_verdicts": None,
        "apps": apps,
        "knobs": knob_tables(apps, skipped),
        "scaling": scaling_tables(apps),
        "axes": axis_tables(apps, skipped),
        "results": rows,
    }
    out["first_screen"] = first_screen(out)
    return out


def _app_tier(tc: dict) -> dict:
    """The application and tier of a test case that gave no result (a build has no tier),
    for the first screen's counts."""
    app = tc.get("app")  # the checks' `app` variable (ReFrame: "<undefined>" when unset)
    tier = tc.get("tier")
    return {
        "app": app if isinstance(app, str) and app != "<undefined>" else None,
        "tier": tier if isinstance(tier, str) and tier != "<undefined>" else None,
    }


def _asked_of(tc: dict, r: RunRecord | None) -> dict:
    """The variant and the machine knobs a skipped test case asked for (its loggable
    ``cpu_freq``, ``smt``, ``turbo``), for the knob tables; nothing when it asked for none."""
    asked = {k: str(tc[k]) for k in knobs.KNOBS if tc.get(k) not in (None, "", "<undefined>")}
    if not asked:
        return {}
    m = re.search(r"%build\.variant=(\S+)", tc.get("display_name") or "")
    variant = r.variant if r is not None else (m[1] if m else None)
    return {"variant": variant, "knobs": asked}


def outcome(report_file: Path, failures: list[dict], summaries: list[dict] = ()) -> dict:
    """The run's exit status as ``apptune run`` gives it (README) and why, for the report's
    first screen: applications left out for their data (2), failed test cases, regressions
    against this machine's baseline (with repeats, their medians' verdicts fail the run after
    ReFrame) and applications of which nothing was tested (1), else 0."""
    report_file = Path(report_file)
    why, status = [], 0
    try:
        notes = json.loads((report_file.parent / RUN_NOTES_FILE).read_text())
    except (OSError, ValueError):
        notes = {}
    if notes.get("left_out"):
        status = 2
        why.append(f"left out for problems in their data: {', '.join(notes['left_out'])}")
    if failures:
        status = status or 1
        why.append(f"{len(failures)} test case(s) failed")
    regressed = [f"{s['app']}/{s['tier']}" for s in summaries if s.get("verdict") == "regression"]
    if regressed:
        status = status or 1
        why.append(f"regression against this machine's baseline: {', '.join(regressed)}")
    for app, reasons in untested_apps(report_file).items():
        status = status or 1
        why.append(f"{app}: nothing tested: {'; '.join(reasons)}")
    return {"status": status, "why": why or ["every test case that ran passed"]}


def baseline_advice(rows: list[dict]) -> list[str]:
    """How to record the baselines this run lacked: one line per tier and system, naming
    its applications and the one command (said once per run, not per figure)."""
    from ..core.baselines import record_advice

    groups: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        if r["baseline"] and r["baseline"].advice:
            groups.setdefault((r["tier"], r["system"]), set()).add(r["app"])
    out = []
    for (tier, system), apps in sorted(groups.items()):
        name, _, part = system.partition(":")
        out.append(
            f"no baseline of this machine for {', '.join(sorted(apps))} ({tier} tier on "
            f"{system}): {record_advice(apps, tier, name, part or None)}"
        )
    return out


def _baseline_verdicts(apps: list[dict], failures: list[dict]) -> dict:
    """This run against the committed baseline (reference/baselines/), kept apart from the
    history's change points: ReFrame's performance check of each test case against it is
    what fails ``apptune run``.  Verdict strings are shown as the baseline comparison gives them."""
    judged = [
        (a, r, n, c)
        for a in apps
        for r in a["rows"]
        if r["baseline"]
        for n, c in r["baseline"].figures.items()
    ]
    counts: dict[str, int] = {}
    for *_, c in judged:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return {
        "decides": "the exit code of apptune run (ReFrame's performance check of each test case)",
        "files": sorted(
            {
                r["baseline"].file
                for a in apps
                for r in a["rows"]
                if r["baseline"] and r["baseline"].file
            }
        ),
        "performance_failures": [f for f in failures if f["phase"] == "performance"],
        "repeated": any(r.get("repeats", 1) > 1 for a in apps for r in a["rows"]),
        "counts": counts,
        "changes": [
            {
                "app": a["app"],
                "tier": a["tier"],
                "variant": _key(r),
                "figure": n,
                **c.data(),
                "changed": changed_since_baseline(r),
            }
            for a, r, n, c in judged
            if c.verdict in ("regression", "improvement")
        ],
    }


def _merge_repeats(rows: list[dict], runs: list[RunRecord]) -> list[dict]:
    """Repeats of a test (``--repeat``) as one matrix column: the median of each figure,
    its spread ((max - min) / median), verified only when every repeat was. ``runs``: the
    run record of each row, which the verdicts of the repeats' medians are judged from."""
    import statistics

    groups: dict[tuple, list[dict]] = {}
    records_of: dict[tuple, list[RunRecord]] = {}
    for r, run in zip(rows, runs, strict=True):
        key = (r["app"], r["tier"], r["environment"], r["variant"], r["system"])
        groups.setdefault(key, []).append(r)
        records_of.setdefault(key, []).append(run)
    out = []
    for key, rs in groups.items():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        m = dict(
            rs[0],
            test=re.sub(r"\s*%\.repeat_no=\d+", "", rs[0]["test"]),
            repeats=len(rs),
            verified=all(r["verified"] for r in rs),
            figures={},
            spread={},
        )
        for n in {n for r in rs for n in r["figures"]}:
            vals = [r["figures"][n] for r in rs if _num(r["figures"].get(n)) is not None]
            if vals:
                med = statistics.median(vals)
                m["figures"][n] = med
                m["spread"][n] = (max(vals) - min(vals)) / abs(med) if med else None
        bad = [r for r in rs if not r["verified"]]
        m["verification"] = (
            bad[0]["verification"] if bad else rs[0]["verification"]
        ) + f" ({len(rs)} repeats)"
        first = records_of[key][0].baseline
        if first and first.file:  # the verdicts, again, for the clean repeats' medians
            m["baseline"] = _judge_repeats(key[0], key[4], rs[0]["baseline"], records_of[key])
        out.append(m)
    return out


def _judge_repeats(
    app: str, system: str, first: BaselineVerdicts, runs: list[RunRecord]
) -> BaselineVerdicts:
    """The baseline verdicts of repeated runs (:func:`apptune.core.baselines.verdicts`); ``first``:
    the first repeat's own."""
    from ..core import baselines

    try:
        specs = recipes.figure_specs(recipes.load_recipe(app))
    except ApptuneError as e:
        out = first.model_copy(deep=True)
        out.why = f"recipe unusable: {e}"
        return out
    judged = baselines.verdicts(system.split(":")[0], app, runs, specs)
    return BaselineVerdicts.model_validate(first.data() | judged)


def _readable_time(stamp):
    """ReFrame's compact 20261121T220731+0000 as 2026-11-21 22:07:31 +0000."""
    import datetime

    try:
        return datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S%z").strftime("%Y-%m-%d %H:%M:%S %z")
    except (TypeError, ValueError):
        return stamp


def _matrices(rows: list[dict]) -> list[dict]:
    apps = []
    for app, tier in sorted({(r["app"], r["tier"]) for r in rows}):
        try:
            recipe = recipes.load_recipe(app)
            figures = recipes.figure_specs(recipe)
            primary, installs = recipe.run.primary, set(recipe.installs)
        except ApptuneError:
            figures, primary, installs = dict(recipes.COMMON_FIGURES), "wall_time", set()
        sel = sorted(
            [r for r in rows if r["app"] == app and r["tier"] == tier],
            key=lambda r: (r["environment"], r["variant"]),
        )
        present = {n for r in sel for n, v in r["figures"].items() if v is not None}
        names = [n for n in figures if n in present] + sorted(present - set(figures))
        better = {n: (figures[n].better if n in figures else "higher") for n in names}
        units = {n: (figures[n].unit if n in figures else "") for n in names}
        # ratios are over gnu/baseline, else over the distribution's build (an install: the
        # build every tuned one must beat), else over the first verified row
        verified = [r for r in sel if r["verified"]]
        ref = next(
            (r for r in verified if (r["environment"], r["variant"]) == ("gnu", "baseline")),
            next((r for r in verified if r["variant"] in installs), next(iter(verified), None)),
        )
        best, ties = {}, {}
        for n in names:
            cand = [r for r in sel if r["verified"] and _num(r["figures"].get(n)) is not None]
            if recipes.is_energy_figure(n):  # modelled energy ranks nothing
                cand = [r for r in cand if _measured(r)]
            if cand:
                pick = max if better[n] == "higher" else min
                top = pick(cand, key=lambda r: r["figures"][n])
                best[n] = _key(top)
                tied = [_key(r) for r in cand if r is not top and _tied(top, r, n)]
                if tied:
                    ties[n] = tied
        for r in sel:
            r["speedup"] = {}
            for n in names:
                v, b = _num(r["figures"].get(n)), _num(ref["figures"].get(n)) if ref else None
                if v and b:
                    r["speedup"][n] = v / b if better[n] == "higher" else b / v
            r["baseline_verdicts"] = (
                {n: c.verdict for n, c in r["baseline"].figures.items()} if r["baseline"] else {}
            )
        # energy figures that no meter measured here: shown, labelled, never judged
        modelled = sorted(
            n for n in names if recipes.is_energy_figure(n) and not all(_measured(r) for r in sel)
        )
        apps.append(
            {
                "app": app,
                "tier": tier,
                "figures": names,
                "units": units,
                "better": better,
                "modelled": modelled,
                "primary": primary,
                "rows": sel,
                "best": best,
                "ties": ties,
                "reference_variant": _key(ref) if ref else None,
            }
        )
    return apps


def _measured(row: dict) -> bool:
    """Whether a row's energy was measured (modelled energy is shown, never ranked)."""
    return row["energy"] is not None and row["energy"].trust == "measured"


#: Two variants whose figures differ by less than this (or than twice the larger noise of
#: the two: its baseline's noise, or half the spread of its repeats) share the top.
TIE = 0.02


def _noise_of(r: dict, n: str) -> float:
    base = r["baseline"].figures.get(n) if r["baseline"] else None
    spread = (r.get("spread") or {}).get(n)
    return max((base.noise if base else None) or 0.0, (spread or 0.0) / 2)


def _tied(a: dict, b: dict, n: str) -> bool:
    """Whether b's figure ``n`` is within the noise of a's (a ranking cannot tell them apart)."""
    va, vb = _num(a["figures"].get(n)), _num(b["figures"].get(n))
    if not va or vb is None:
        return False
    tol = max(TIE, 2 * max(_noise_of(a, n), _noise_of(b, n)))
    return abs(va - vb) / abs(va) < tol


def history_verdicts(summary: dict, history_dir: Path) -> tuple[list, dict]:
    """The history's verdicts (change points over the runs of this run's mode) for this run's
    applications, into ``summary["history_verdicts"]`` and each row's ``history_verdicts``;
    returns the verdicts and each stored run's position in the history."""
    from ..history import regressions, store

    with store.History(history_dir) as h:
        uuid = summary["session"].get("uuid")
        mode = h.mode_of(uuid)
        order = {r["session_uuid"]: i for i, r in enumerate(h.runs(mode=mode))}
        verdicts = []
        for system, app in sorted({(r["system"], r["app"]) for r in summary["results"]}):
            verdicts += regressions.check(h, system=system, mode=mode, app=app)
    verdicts.sort(key=lambda v: (regressions.ORDER[v.verdict], v.name))
    summary["history_verdicts"] = {
        "decides": "the exit code of apptune check-regressions (change points over the history)",
        "dir": str(history_dir),
        "mode": mode,
        "runs": len(order),
        "this_run_stored": uuid in order,
        "counts": {k: sum(v.verdict == k for v in verdicts) for k in regressions.ORDER},
        "changes": [v.to_dict() for v in verdicts if v.verdict in ("regression", "improvement")],
    }
    for a in summary["apps"]:
        vs = [
            v for v in verdicts if (v.app, v.tier) == (a["app"], a["tier"]) and len(v.points) >= 2
        ]
        for r in a["rows"]:
            r["history_verdicts"] = {
                v.figure: v.verdict
                for v in vs
                if (v.environment, v.variant) == (r["environment"], r["variant"])
            }
    return verdicts, order


def untested_apps(report_file: Path) -> dict[str, list[str]]:
    """Applications of which nothing was tested in a run, with the reasons: every test case
    skipped (e.g. a tool of the only environment missing) and no build attempted.  A run
    that tested some environments of an application and skipped others does not count."""
    _, cases, by_name = _testcases(report_file)
    tested, reasons = set(), {}
    for tc in cases:
        app = tc.get("app")  # the checks' `app` variable (ReFrame: "<undefined>" when unset)
        if not isinstance(app, str) or app == "<undefined>":  # a plain ReFrame check
            continue
        res = tc.get("result")
        # a fixture's pass (a source fetched, a build made) tests nothing by itself;
        # a failed or expected-to-fail build is a result
        if res != "skip" and not (tc.get("fixture") and res == "pass"):
            tested.add(app)
        elif res == "skip" and not tc.get("fixture"):
            r = _skip_reason(tc, by_name)
            if r not in reasons.setdefault(app, []):
                reasons[app].append(r)
        else:
            reasons.setdefault(app, [])
    return {
        app: rs or ["only its fixtures ran"] for app, rs in reasons.items() if app not in tested
    }
