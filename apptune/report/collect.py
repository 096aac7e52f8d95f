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
from ..core.data import recipes
from ..core.run import knobs
from ..errors import ApptuneError
from ..history import records
from ..models import BaselineVerdicts, RunRecord
from .axes import axis_tables
from .knob_table import knob_tables
from .matrices import matrices_of
from .row import Row
from .scaling import scaling_tables
from .screen import app_summary, changed_since_baseline, first_screen, untested_summaries
from .values import number_or_none, variant_key

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
    return " ".join(str(tc.get("fail_reason") or "expected failure").split())


#: A failure's reason where space is short (the first screen, the terminal, report.md): at
#: most this many characters, and of many failed fields the first few by name.
BRIEF_CHARS, BRIEF_FIELDS = 300, 3


def brief(reason: str, failed: list[str]) -> str:
    """A fair summary of a failure's ``reason`` (``failed``: the fields that failed): every
    failed field counted and the first named, or the reason cut at a word, each saying
    that report.html has all of it."""
    if len(failed) > BRIEF_FIELDS:
        return (
            f"{len(failed)} fields failed: {', '.join(failed[:BRIEF_FIELDS])}, … "
            "(all in report.html)"
        )
    if len(reason) <= BRIEF_CHARS:
        return reason
    cut = reason[:BRIEF_CHARS].rsplit(" ", 1)[0]
    return f"{cut} … (all in report.html)"


def _failure(tc: dict, row: Row | None = None, r: RunRecord | None = None) -> dict:
    """A failed test case (:func:`apptune.history.records.failure`) with its :func:`brief`."""
    f = records.failure(tc, row.verification if row else None)
    failed = [x.field for x in (r.verification.fields or []) if not x.ok] if r else []
    return f | {"brief": brief(f["reason"], failed)}


def _testcases(report_file: Path) -> tuple[dict, list[dict], dict]:
    """The run report, its test cases, and the cases by unique name (and environment)."""
    rep = records.read_report(Path(report_file).parent, report_file)
    cases = records.testcases(rep)
    by_name = {(tc["unique_name"], tc.get("environ")): tc for tc in cases}
    by_name.update({tc["unique_name"]: tc for tc in cases})
    return rep, cases, by_name


def collect(report_file: Path) -> dict:
    rep, cases, by_name = _testcases(report_file)
    c = _sorted_cases(cases, by_name)
    rows, failures, skipped = c["rows"], c["failures"], c["skipped"]
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
            "num_aborted",
        )
    }
    for k in ("time_start", "time_end"):
        session[k] = _readable_time(session[k])
    apps = matrices_of(_merge_repeats(rows, c["runs"]))
    machines = {
        r.machine_id: machine.describe(r.machine.data()) for r in rows if r.machine_id and r.machine
    }
    summaries = [app_summary(a) for a in apps] + untested_summaries(
        cases, apps, failures, c["xfailed"], skipped, c["aborted"]
    )
    for x in summaries:  # what the run left undone, when it was stopped
        x["aborted"] = sum(e["app"] == x["app"] for e in c["aborted"])
    out = {
        "session": session,
        "machines": machines,
        "outcome": outcome(report_file, failures, summaries, c["aborted"]),
        "first_screen": None,
        "summary": summaries,
        "advice": baseline_advice(rows),
        "failures": failures,
        "expected_failures": c["xfailed"],
        "skipped": skipped,
        "aborted": c["aborted"],
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


def _sorted_cases(cases: list[dict], by_name: dict) -> dict[str, list]:
    """The test cases by what became of them: ``rows`` (a run record: verified or not, with
    ``runs`` their records), ``failures``, ``xfailed``, ``skipped`` (builds and sources too,
    as ReFrame counts them) and ``aborted`` (a stopped run's tests: begun or never run)."""
    out: dict[str, list] = {k: [] for k in ("rows", "runs", "failures", "skipped", "xfailed")}
    out["aborted"] = []
    for tc in cases:
        res = tc.get("result")
        if res == "xfail":
            out["xfailed"].append(
                {
                    "test": tc["display_name"],
                    "environment": tc.get("environ"),
                    "reason": _xfail_reason(tc),
                    **_app_tier(tc),
                }
            )
            continue
        if res == "abort":
            out["aborted"].append(_aborted(tc))
            continue
        if tc.get("fixture"):  # a build or source: a failure or a skip, as ReFrame counts them
            if res == "fail":
                out["failures"].append(_failure(tc))
            elif res in SKIPPED_RESULTS:
                out["skipped"].append(_skip(tc, by_name, None))
            continue
        r = records.record_of(tc)
        if res in SKIPPED_RESULTS:
            out["skipped"].append(_skip(tc, by_name, r))
            continue
        if r is None:
            out["failures"].append(_failure(tc))
            continue
        row = Row.of(tc, r, res)
        out["rows"].append(row)
        out["runs"].append(r)
        if res != "pass":
            out["failures"].append(_failure(tc, row, r))
    return out


def _aborted(tc: dict) -> dict:
    """A test case of a stopped run that ReFrame aborted: a build, a source or a run, begun
    (the phase it was in) or never run."""
    phase = tc.get("fail_phase")
    begun = bool(tc.get("stagedir")) and phase not in (None, "startup", "setup")
    what = "build" if tc.get("fixture") else "run"
    return {
        "test": tc["display_name"],
        "environment": tc.get("environ"),
        "phase": phase,
        "what": f"{what} aborted in {phase}" if begun else f"{what} never started",
        **_app_tier(tc),
    }


def _skip(tc: dict, by_name: dict, r: RunRecord | None) -> dict:
    """A skipped test case (also a build or source skipped: ReFrame counts them) and why."""
    return {
        "test": tc["display_name"],
        "environment": tc.get("environ"),
        "reason": _skip_reason(tc, by_name),
        **_app_tier(tc),
        **_asked_of(tc, r),
    }


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


def outcome(
    report_file: Path, failures: list[dict], summaries: list[dict] = (), aborted: list = ()
) -> dict:
    """The run's exit status as ``apptune run`` gives it (README) and why, for the report's
    first screen: a run stopped by a signal (128 + N, what it left undone), applications
    left out for their data (2), failed test cases, regressions against this machine's
    baseline (with repeats, their medians' verdicts fail the run after ReFrame) and
    applications of which nothing was tested (1), else 0."""
    report_file = Path(report_file)
    why, status = [], 0
    try:
        notes = json.loads((report_file.parent / RUN_NOTES_FILE).read_text())
    except (OSError, ValueError):
        notes = {}
    if notes.get("stopped_by"):  # the command's own status: 128 + the signal
        status = int(notes.get("exit_status") or 1)
        why.append(
            f"stopped by {notes['stopped_by']}: ReFrame aborted the run"
            + (f"; {len(aborted)} test case(s) aborted or never ran" if aborted else "")
        )
    if notes.get("left_out"):
        status = status or 2
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


def baseline_advice(rows: list[Row]) -> list[str]:
    """How to record the baselines this run lacked: one line per tier and system, naming
    its applications and the one command (said once per run, not per figure)."""
    from ..core.judge.baselines import record_advice

    groups: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        if r.baseline and r.baseline.advice:
            groups.setdefault((r.tier, r.system), set()).add(r.app)
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
        if r.baseline
        for n, c in r.baseline.figures.items()
    ]
    counts: dict[str, int] = {}
    for *_, c in judged:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return {
        "decides": "the exit code of apptune run (ReFrame's performance check of each test case)",
        "files": sorted(
            {r.baseline.file for a in apps for r in a["rows"] if r.baseline and r.baseline.file}
        ),
        "performance_failures": [f for f in failures if f["phase"] == "performance"],
        "repeated": any(r.repeats > 1 for a in apps for r in a["rows"]),
        "counts": counts,
        "changes": [
            {
                "app": a["app"],
                "tier": a["tier"],
                "variant": variant_key(r),
                "figure": n,
                **c.data(),
                "changed": changed_since_baseline(r),
            }
            for a, r, n, c in judged
            if c.verdict in ("regression", "improvement")
        ],
    }


def _merge_repeats(rows: list[Row], runs: list[RunRecord]) -> list[Row]:
    """Repeats of a test (``--repeat``) as one matrix column: the median of each figure,
    its spread ((max - min) / median), verified only when every repeat was. ``runs``: the
    run record of each row, which the verdicts of the repeats' medians are judged from."""
    import statistics

    groups: dict[tuple, list[Row]] = {}
    records_of: dict[tuple, list[RunRecord]] = {}
    for r, run in zip(rows, runs, strict=True):
        key = (r.app, r.tier, r.environment, r.variant, r.system)
        groups.setdefault(key, []).append(r)
        records_of.setdefault(key, []).append(run)
    out = []
    for key, rs in groups.items():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        bad = [r for r in rs if not r.verified]
        m = rs[0].merged(
            test=re.sub(r"\s*%\.repeat_no=\d+", "", rs[0].test),
            repeats=len(rs),
            verified=not bad,
            figures={},
            spread={},
            verification=(bad[0] if bad else rs[0]).verification + f" ({len(rs)} repeats)",
        )
        for n in {n for r in rs for n in r.figures}:
            vals = [r.figures[n] for r in rs if number_or_none(r.figures.get(n)) is not None]
            if vals:
                med = statistics.median(vals)
                m.figures[n] = med
                m.spread[n] = (max(vals) - min(vals)) / abs(med) if med else None
        first = records_of[key][0].baseline
        if first and first.file:  # the verdicts, again, for the clean repeats' medians
            m.baseline = _judge_repeats(key[0], key[4], rs[0].baseline, records_of[key])
        out.append(m)
    return out


def _judge_repeats(
    app: str, system: str, first: BaselineVerdicts, runs: list[RunRecord]
) -> BaselineVerdicts:
    """The baseline verdicts of repeated runs (:func:`apptune.core.judge.baselines.verdicts`);
    ``first``: the first repeat's own."""
    from ..core.judge import baselines

    try:
        specs = recipes.figure_specs(recipes.load_recipe(app))
    except ApptuneError as e:
        out = first.model_copy(deep=True)
        out.why = f"recipe unusable: {e}"
        return out
    judged = baselines.verdicts(system.split(":")[0], app, runs, specs)
    return first.model_copy(update={k: getattr(judged, k) for k in judged.model_fields_set})


def _readable_time(stamp):
    """ReFrame's compact 20261121T220731+0000 as 2026-11-21 22:07:31 +0000."""
    import datetime

    try:
        return datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S%z").strftime("%Y-%m-%d %H:%M:%S %z")
    except (TypeError, ValueError):
        return stamp


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
        for system, app in sorted({(r.system, r.app) for r in summary["results"]}):
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
            # the series of this run's input (or of no recorded input)
            r.history_verdicts = {
                v.figure: v.verdict
                for v in vs
                if (v.environment, v.variant) == (r.environment, r.variant)
                and v.input in (None, r.input or None)
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
        app: distinct(rs) or ["only its fixtures ran"]
        for app, rs in reasons.items()
        if app not in tested
    }


#: Reasons said in one line at most (the others are counted: every one is under Skipped).
MAX_REASONS = 4


def distinct(reasons: list[str]) -> list[str]:
    """Reasons as one line says them: those that differ only in their numbers (a frequency
    asked, a count measured: one knob's skip in each variant) once, with how many more are
    like it, and at most :data:`MAX_REASONS` of them."""
    groups: dict[str, list[str]] = {}
    for r in reasons:
        groups.setdefault(re.sub(r"\d+(?:\.\d+)?", "#", r), []).append(r)
    out = [
        rs[0] + (f" (and {len(rs) - 1} more like it)" if len(rs) > 1 else "")
        for rs in groups.values()
    ]
    if len(out) > MAX_REASONS:
        out = out[:MAX_REASONS] + [
            f"and {len(out) - MAX_REASONS} other reason(s) (each under Skipped in report.html)"
        ]
    return out
