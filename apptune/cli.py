"""``apptune``: run the suite through ReFrame, list what it holds, report, validate data.

Every command is a thin layer: ``apptune run`` builds the same ``reframe``
command line a user would type (and prints it), so plain ReFrame keeps working.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path

from . import baselines, paths, recipes
from .constants import REPEATS_ENV, RUN_NOTES_FILE
from .errors import ApptuneError


def runs_dir() -> Path:
    return Path(os.environ.get("APPTUNE_RUNS", paths.root() / "runs"))


def reframe_command(
    root: Path, mode: str, checks: list[str], run_dir: Path, config: str, extra: list[str]
) -> list[str]:
    exe = Path(sys.executable).with_name("reframe")
    cmd = [str(exe) if exe.exists() else "reframe", "-C", str(root / config)]
    for c in checks or ["reframe-checks"]:
        p = Path(c)
        cmd += ["-c", str(p if p.is_absolute() else root / p)]
    cmd += [
        "-R",
        "--mode",
        mode,
        "-r",
        "--report-file",
        str(run_dir / "report.json"),
        "--stage",
        str(run_dir / "stage"),
        "--output",
        str(run_dir / "output"),
        "--perflogdir",
        str(run_dir / "perflogs"),
        *extra,
    ]
    return cmd


def checks_without(root: Path, checks: list[str], apps: list[str]) -> list[str]:
    """The ``-c`` paths with the check directories ``reframe-checks/APP/`` of ``apps`` left
    out (a directory holding them is replaced by its other entries)."""
    if not apps:
        return list(checks or ["reframe-checks"])
    bad = [(root / "reframe-checks" / app).resolve() for app in apps]
    out = []
    for c in checks or ["reframe-checks"]:
        p = (Path(c) if Path(c).is_absolute() else root / c).resolve()
        if any(p == b or b in p.parents for b in bad):
            continue
        if p.is_dir() and any(p in b.parents for b in bad):
            out += checks_without(
                root,
                [str(e) for e in sorted(p.iterdir()) if not e.name.startswith((".", "_"))],
                apps,
            )
        else:
            out.append(c)
    return out


def new_run_dir(base: Path, mode: str) -> Path:
    """``BASE/<time>-<mode>``, created by this call: a run started in the same second
    gets ``-2``, ``-3``, ... (mkdir is exclusive, so two runs never share a directory)."""
    base.mkdir(parents=True, exist_ok=True)
    name = f"{datetime.datetime.now().strftime('%Y%m%dT%H%M%S')}-{mode}"
    for i in itertools.count(1):
        d = base / (name if i == 1 else f"{name}-{i}")
        try:
            d.mkdir()
        except FileExistsError:
            continue
        return d.resolve()


def point_latest(run_dir: Path) -> None:
    """``runs/latest`` -> ``run_dir``, replaced in one step (never missing or broken)."""
    latest = runs_dir() / "latest"
    tmp = latest.with_name(f".latest-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir)
        os.replace(tmp, latest)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        print(
            f"apptune: note: could not point {latest} at this run ({e.strerror})", file=sys.stderr
        )


def cmd_run(a) -> int:
    from . import validate

    root = paths.root()
    # every data file is checked before ReFrame starts; an application with a problem is
    # left out (its check directory), the others run, and the run's exit status says so
    found = validate.check(root / a.config)
    for p in found.all():
        print(f"apptune: error: {p}", file=sys.stderr)
    if found.site:
        print(
            "apptune: run refused: the site config has problems (apptune validate)", file=sys.stderr
        )
        return 2
    from . import selection

    sel = selection.Selection(a.app, a.env, a.variant, a.placement)
    sel_opts: list[str] = []
    if sel:
        if a.checks and sel.apps:
            raise ApptuneError(None, "--app", "give the checks with -c or with --app, not both")
        envs = validate.load_site_facts(root / a.config)[0].environments
        sel_checks, sel_opts = selection.reframe_options(sel, list(envs) if envs else None)
        a.checks = a.checks or sel_checks
    withheld = [app for app, ps in found.baselines.items() if ps and app not in found.bad_apps]
    if withheld:
        print(
            f"apptune: baseline problems (above) withhold the performance verdict of "
            f"{', '.join(withheld)}: built, run and verified all the same",
            file=sys.stderr,
        )
    checks = checks_without(root, a.checks, found.bad_apps)
    if found.bad_apps:
        print(
            f"apptune: left out of the run: {', '.join(found.bad_apps)} (problems above)",
            file=sys.stderr,
        )
        if not checks:
            print("apptune: run refused: no check left to run", file=sys.stderr)
            return 2
    refused = 2 if found.all() else 0
    where = Path(a.run_dir).resolve() if a.run_dir else runs_dir()
    free = paths.free_mib(where)
    if free is not None and free < paths.MIN_FREE_MIB:
        print(
            f"apptune: error: {where}: {free:.0f} MiB free on its file system; a run needs "
            f"{paths.MIN_FREE_MIB} MiB for its stage and output directories (free some, or "
            "choose another --run-dir)",
            file=sys.stderr,
        )
        return paths.NO_SPACE_STATUS
    if a.run_dir:
        run_dir = Path(a.run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = new_run_dir(runs_dir(), a.mode)
    from .yamlio import atomic_write_json

    atomic_write_json(run_dir / RUN_NOTES_FILE, {"left_out": found.bad_apps})
    extra = (["--repeat", str(a.repeats)] if a.repeats > 1 else []) + sel_opts + a.reframe_args
    cmd = reframe_command(root, a.mode, checks, run_dir, a.config, extra)
    env = dict(os.environ, APPTUNE_ROOT=str(root))
    if a.wait_for_quiet is not None:
        env["APPTUNE_QUIET_WAIT"] = str(a.wait_for_quiet)
    env[REPEATS_ENV] = str(a.repeats)
    storage = reframe_storage_env(env) if not a.no_history else {}
    env.update(storage)
    print("apptune: " + shlex.join([f"{k}={v}" for k, v in storage.items()] + cmd), flush=True)
    from . import progress, supervise

    # SIGTERM/SIGINT/SIGHUP go to ReFrame, which aborts and writes its report; what
    # completed is then stored and reported, and the exit status is 128 + the signal
    with supervise.Supervisor() as sup:
        rc = sup.run(cmd, cwd=run_dir, env=env, follow=lambda p: progress.relay(p, run_dir))
        if sup.leftovers:
            print(
                f"apptune: note: stopped what the run left running: {', '.join(sup.leftovers)}",
                file=sys.stderr,
            )
        rc = store_run(a, run_dir, rc, stopped_by=sup.signum)
    return 128 + sup.signum if sup.signum else (rc or refused)


def store_run(a, run_dir: Path, rc: int, stopped_by: int | None = None) -> int:
    """After ReFrame: runs/latest, the history, the report; the run's exit status."""
    # runs/latest follows runs kept under runs/; an explicit --run-dir elsewhere leaves it alone
    if run_dir.parent == runs_dir().resolve():
        point_latest(run_dir)
    stopped = f"stopped by {signal.Signals(stopped_by).name}" if stopped_by else None
    if (run_dir / "report.json").exists():
        from . import report

        hdir = None
        if not a.no_history:
            from . import history

            try:
                with history.History() as h:
                    uuid, n, _ = h.ingest(run_dir)
                hdir = h.dir
                print(f"apptune: history: {n} results of session {uuid[:8]} in {h.path}")
            except (ApptuneError, sqlite3.Error, OSError) as e:
                if paths.out_of_space(e, history.history_dir()):
                    print(
                        f"apptune: error: history: run not stored: "
                        f"{paths.no_space(history.history_dir())}",
                        file=sys.stderr,
                    )
                    rc = rc or paths.NO_SPACE_STATUS
                else:
                    print(f"apptune: error: history: {e}", file=sys.stderr)
                    rc = rc or 2
        try:
            sj, md, html = report.write(run_dir, history_dir=hdir)
        except OSError as e:
            if not paths.out_of_space(e, run_dir):
                raise
            print(f"apptune: error: report not written: {paths.no_space(run_dir)}", file=sys.stderr)
            return rc or paths.NO_SPACE_STATUS
        summary = json.loads(sj.read_text())
        for s in summary.get("summary", []):
            print("apptune: " + report.summary_line(s))
        for line in summary.get("advice", []):
            print("apptune: " + line)
        # with repeats, ReFrame judged no single repeat: the medians' regression fails the run
        if any(s.get("verdict") == "regression" for s in summary.get("summary", [])):
            rc = rc or 1
        print(f"apptune: report {md} and {html}")
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
                f.write(md.read_text())
        if stopped:
            print(
                f"apptune: error: {stopped}: ReFrame aborted the run; the tests that completed "
                f"are stored and in the report",
                file=sys.stderr,
            )
            return rc
        # a run that tested nothing of an application (every case skipped) is not a pass
        for app, reasons in report.untested_apps(run_dir / "report.json").items():
            print(f"apptune: error: {app}: nothing tested: {'; '.join(reasons)}", file=sys.stderr)
            rc = rc or 1
    elif stopped:
        print(
            f"apptune: error: {stopped} before ReFrame wrote a run report: nothing stored",
            file=sys.stderr,
        )
    elif rc == 0:
        # ReFrame exits 0 when the options select nothing; a run that ran nothing is not a pass
        print(
            "apptune: error: ReFrame wrote no run report: no test case ran "
            "(do the -n/-t/-S options and --mode select anything? `apptune list`)",
            file=sys.stderr,
        )
        return 1
    # otherwise ReFrame stopped before running tests and printed why (its last line)
    return rc


def reframe_storage_env(env: dict) -> dict:
    """ReFrame's own results database, next to apptune's history (unless the caller set it)."""
    from . import history

    if "RFM_ENABLE_RESULTS_STORAGE" in env or "RFM_SQLITE_DB_FILE" in env:
        return {}
    return {
        "RFM_ENABLE_RESULTS_STORAGE": "1",
        "RFM_SQLITE_DB_FILE": str(history.history_dir() / history.REFRAME_DB_FILE),
    }


@contextlib.contextmanager
def trials_in_history(a, tool: str):
    """What ``tune`` or ``bisect`` calls with each trial's run directory; when the command
    ends, also by an error or an interrupt, the trials that ran are stored in the history as
    one session (``--no-history``: nothing, ``--history DIR``: that history)."""
    from . import history

    if a.no_history:
        yield None
        return
    argv = getattr(a, "argv", sys.argv[1:])
    session = history.TrialSession(tool, shlex.join(["apptune", *argv]))
    try:
        yield session.add
    finally:
        if session.run_dirs:
            a.history_failed = store_trials(session, a.history)


def history_status(a, rc: int) -> int:
    """The command's exit status: instead of success, :func:`store_trials`' status when its
    trials were not stored."""
    return getattr(a, "history_failed", 0) or rc if rc == 0 else rc


def store_trials(session, directory: str | None) -> int:
    """Store a trial session: 0, or the exit status its failure gives the command (the
    tool's own result files are written before, and the command goes on): 3 for want of
    space, 2 for a database that cannot be used; one line naming the database."""
    from . import history

    db = Path(directory or history.history_dir()) / history.DB_FILE
    try:
        with history.History(directory) as h:
            uuid, n, _ = h.ingest_trials(session)
        print(f"apptune: history: {n} {session.tool} trials of session {uuid[:8]} in {db}")
        return 0
    except (ApptuneError, sqlite3.Error, OSError) as e:
        full = paths.out_of_space(e, db.parent)
        same = isinstance(e, ApptuneError) and e.file == str(db)
        detail = (
            paths.no_space(db.parent)
            if full
            else str(ApptuneError(None, e.field, e.message))
            if same
            else str(e)
        )
        print(
            f"apptune: error: history: {session.tool} trials not stored in {db}: {detail}",
            file=sys.stderr,
        )
        return paths.NO_SPACE_STATUS if full else 2


def cmd_list(a) -> int:
    from . import inputs

    for app in recipes.list_recipes():
        r = recipes.load_recipe(app)
        print(f"{r.name} {r.version}: {r.description}")
        if r.source.path:
            print(f"  source: {r.source.path}/ (this repository)")
        else:
            print(f"  source: {r.source.file} sha256 {r.source.sha256[:16]}…")
        for p in r.patches:
            print(f"  patch: {p.file} — {p.reason}")
        for tname, t in r.tiers.items():
            stands = inputs.load_input(app, tname)[1].stands_for
            print(
                f"  tier {tname} ({t.ranks} ranks)" + (f", stands for {stands}:" if stands else ":")
            )
            for env, specs in t.variants.items():
                print(f"    {env}: {', '.join(specs)}")
    return 0


def cmd_report(a) -> int:
    from . import history, report

    run_dir = Path(a.run_dir or runs_dir() / "latest").resolve()
    hdir = None if a.no_history else Path(a.history) if a.history else history.history_dir()
    if hdir is not None and not (hdir / history.DB_FILE).is_file():
        hdir = None
    paths_ = report.write(run_dir, Path(a.report_file) if a.report_file else None, history_dir=hdir)
    for p in paths_:
        print(p)
    if a.print:
        print(paths_[1].read_text())
    return 0


def cmd_validate(a) -> int:
    from . import validate

    found = validate.problems(paths.root() / a.config)
    for p in found:
        print(f"apptune: error: {p}", file=sys.stderr)
    n = len(recipes.list_recipes())
    if found:
        print(
            f"apptune: validate: {len(found)} problem(s) in the data ({n} applications checked)",
            file=sys.stderr,
        )
        return 1
    print(
        f"apptune: all data files valid ({n} applications with their inputs, references "
        f"and baselines, the site config and the tuning spaces checked)"
    )
    return 0


def cmd_baseline_record(a) -> int:
    """Record baselines: ``--sessions`` runs (each a session of ``apptune run`` with a quiet
    wait), then the clean verified results merged per (system, app) into their baseline
    files; each file's diff is shown and written only with ``--yes`` or a "y" at a tty."""
    from . import records

    if a.sessions < 1:
        raise ApptuneError(None, "--sessions", f"{a.sessions}: give at least 1 (3 give a noise)")
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    base = runs_dir() / f"baseline-{stamp}"
    dirs = []
    for i in range(1, a.sessions + 1):
        run_dir = base / f"session-{i}"
        print(f"apptune: baseline record: session {i} of {a.sessions} in {run_dir}", flush=True)
        ra = argparse.Namespace(
            mode=a.mode,
            checks=a.checks,
            app=[],
            env=[],
            variant=[],
            placement=[],
            config=a.config,
            run_dir=str(run_dir),
            repeats=1,
            wait_for_quiet=a.wait_for_quiet,
            no_history=a.no_history,
            reframe_args=a.reframe_args,
        )
        rc = cmd_run(ra)
        if rc >= 128 or rc in (2, paths.NO_SPACE_STATUS) and not (run_dir / "report.json").exists():
            print(
                f"apptune: baseline record: stopped after session {i} (exit {rc})", file=sys.stderr
            )
            return rc
        dirs.append(run_dir)
    by = _by_baseline_file(
        [
            c.record
            for d in dirs
            if (d / "report.json").exists()
            for c in records.cases(d)
            if c.record and c.verified
        ],
        a.system,
    )
    if not by:
        print(
            "apptune: baseline record: no verified result in any session: nothing to record",
            file=sys.stderr,
        )
        return 1
    changed, recordable = [], False
    for (system, app), rs in by.items():
        f, text, notes = baselines.merge(system, app, rs)
        for n in notes:
            print(f"apptune: baseline {app}: {n}", file=sys.stderr)
        recordable = recordable or bool(text)
        old = f.read_text() if f.exists() else ""
        if not text or text == old:
            why = " (no clean, verified result)" if not text else ""
            print(f"apptune: baseline {app}: {f}: unchanged{why}")
            continue
        print(_file_diff(f, old, text), end="")
        changed.append((f, text))
    if not changed:
        return 0 if recordable else 1
    if not a.yes:
        if not sys.stdin.isatty():
            print(
                f"apptune: baseline record: {len(changed)} file(s) not written (no tty to "
                f"confirm: --yes writes them; the runs are in {base})",
                file=sys.stderr,
            )
            return 1
        answer = input(f"write {len(changed)} baseline file(s)? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print(f"apptune: baseline record: not written (the runs are in {base})")
            return 1
    from .yamlio import atomic_write_text

    for f, text in changed:
        atomic_write_text(f, text)
        print(f"apptune: baseline record: wrote {f}")
    return 0


def cmd_baseline_update(a) -> int:
    from . import records

    results = []
    for d in a.run_dirs:
        run_dir = Path(d).resolve()
        cs = records.cases(run_dir)
        got = [c.record for c in cs if c.record and c.verified]
        if not got:
            raise ApptuneError(
                run_dir, None, f"no verified result in this run ({len(cs)} test case(s))"
            )
        results += got
    for (system, app), rs in _by_baseline_file(results, a.system).items():
        before = paths.baselines_file(system, app)
        old = before.read_text() if before.exists() else ""
        f, notes = baselines.update(system, app, rs)
        for n in notes:
            print(f"apptune: baseline {app}: {n}", file=sys.stderr)
        print(_file_diff(f, old, f.read_text()) or f"{f}: unchanged")
    return 0


def _by_baseline_file(results: list[dict], system: str | None) -> dict:
    """Run records by the baseline file they go into: (system, app) -> records."""
    by: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        by.setdefault((system or r["system"], r["app"]), []).append(r)
    return dict(sorted(by.items()))


def _file_diff(f: Path, old: str, new: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"{f} (before)", f"{f} (after)"
        )
    )


def cmd_history(a) -> int:
    from . import history

    with history.History(a.history, create=a.hcmd == "ingest") as h:
        if a.hcmd == "trials":
            return show_trials(h, a.session)
        if a.hcmd == "list":
            for r in h.runs(mode=a.mode):
                print(
                    f"{r['started']}  {r['session_uuid'][:8]}  {r['mode'] or '-':<8} "
                    f"{r['num_cases'] or 0:>3} cases {r['num_failures'] or 0:>2} failed  "
                    f"{r['run_dir']}"
                )
            print(f"{len(h.runs(mode=a.mode))} runs in {h.path} (schema version {h.version()})")
            return 0
        sources: list[tuple[Path, Path | None, dict | None]] = []
        if a.reframe_db:
            for rep, report_file in history.reframe_sessions(a.reframe_db, a.run_dirs or None):
                rf = Path(report_file) if report_file else None
                sources.append((rf.parent if rf else Path(a.reframe_db).parent, rf, rep))
        else:
            if not a.run_dirs:
                raise ApptuneError(
                    None, "history ingest", "give run directories (or --reframe-db FILE)"
                )
            sources = [(Path(d), None, None) for d in a.run_dirs]
        for run_dir, rf, rep in sources:
            uuid, n, new = h.ingest(run_dir, rf, rep)
            print(
                f"{run_dir}: session {uuid[:8]}: "
                + (f"{n} results stored" if new else "already in the history (unchanged)")
            )
        print(f"history: {h.path}")
    return 0


def show_trials(h, session: str | None) -> int:
    """The stored tune and bisect sessions, or the trials of one (its uuid or a prefix)."""
    if session is None:
        runs = h.runs(kind="trial")
        for r in runs:
            print(
                f"{r['started']}  {r['session_uuid'][:8]}  {r['mode']:<7} "
                f"{r['num_cases']:>3} trials {r['num_failures']:>2} unverified  {r['run_dir']}"
            )
        print(f"{len(runs)} tune/bisect sessions in {h.path} (apptune history trials SESSION)")
        return 0
    r = h.session(session)
    print(f"{r['mode']} session {r['session_uuid']}, {r['started']} on {r['hostname']}")
    print(f"  {r['cmdline']}\n  runs in {r['run_dir']}")
    for t in h.results(r["session_uuid"]):
        figs = "  ".join(
            f"{k}={v:.6g}" + (f" {u}" if u else "") for k, (v, u) in t["figures"].items()
        )
        state = "verified" if t["verified"] else f"UNVERIFIED ({(t['reason'] or '')[:100]})"
        print(
            f"{t['test']}  {t['variant']} [{t['environment']}]  "
            f"{t['quality_grade'] or 'unmeasured'}  {state}  {figs}"
        )
    return 0


def cmd_check_regressions(a) -> int:
    from . import changepoint, history, regressions

    with history.History(a.history, create=False) as h:
        known = set(recipes.list_recipes()) | set(h.stored("app"))
        if a.app and a.app not in known:
            raise ApptuneError(
                None, "--app", f"unknown application '{a.app}' (known: {', '.join(sorted(known))})"
            )
        runs = h.runs(mode=a.mode)
        verdicts = regressions.check(
            h,
            system=a.system,
            mode=a.mode,
            app=a.app,
            baseline_system=a.baseline_system,
            alpha=a.alpha,
            min_change=a.min_change,
        )
        path = h.path
        grades = h.grades(system=a.system, mode=a.mode, app=a.app)
        chosen = " ".join(
            f"--{k} {v}" for k, v in (("mode", a.mode), ("system", a.system), ("app", a.app)) if v
        )
        if not verdicts and grades["results"]:
            # results are stored but none can be judged yet: a new cluster's first nights
            print(
                f"apptune: check-regressions: nothing to judge yet: {grades['results']} "
                f"result(s) stored{' selected by ' + chosen if chosen else ''} in "
                f"{path.resolve()}: "
                f"{grades['disturbed']} disturbed (runs not graded clean are never judged), "
                f"{grades['unverified']} not verified, {grades['clean']} clean; a series needs "
                f"{changepoint.MIN_SIZE} clean verified runs before and after a change, and a "
                "baseline needs 3 (docs/regressions.md)"
            )
            if a.json:
                from .yamlio import atomic_write_json

                atomic_write_json(a.json, [])
            return 0
        if not verdicts:  # a verdict over nothing is not a pass
            raise ApptuneError(
                path,
                None,
                f"no stored result to judge in {len(runs)} run(s)"
                + (f" selected by {chosen}" if chosen else "")
                + f" (stored: modes {', '.join(h.stored('mode')) or '-'}; "
                f"systems {', '.join(h.stored('system')) or '-'}; "
                f"apps {', '.join(h.stored('app')) or '-'})",
            )
    verdicts.sort(key=lambda v: (regressions.ORDER[v.verdict], v.name))
    count = {k: sum(v.verdict == k for v in verdicts) for k in regressions.ORDER}
    for v in verdicts:
        if v.verdict in ("regression", "improvement") or a.verbose:
            print(regressions.format_verdict(v))
    if a.json:
        from .yamlio import atomic_write_json

        atomic_write_json(a.json, [v.to_dict() for v in verdicts])
    print(
        f"apptune: check-regressions: {count['regression']} regression(s), "
        f"{count['improvement']} improvement(s), {count['unchanged']} unchanged, "
        f"{count['insufficient data']} with insufficient data; {len(verdicts)} series over "
        f"{len(runs)} run(s){' of mode ' + a.mode if a.mode else ''} in {path.resolve()}"
    )
    return 1 if count["regression"] else 0


def cmd_new(a) -> int:
    from . import scaffold

    s = scaffold.new(
        a.app,
        debian=a.debian,
        url=a.url,
        sha256=a.sha256,
        file=a.file,
        path=a.path,
        version=a.version,
        build_system=a.build_system,
        ranks=a.ranks,
    )
    scaffold.write(s)
    print(
        f"apptune: new: {a.app}: source {s.tarball.name} verified; build {s.kind} ({s.guess}); "
        f"languages {', '.join(s.languages)}"
    )
    print(f"apptune: new: wrote {', '.join(str(f.relative_to(paths.root())) for f in s.files)}")
    print(scaffold.next_steps(s))
    return 0


def cmd_bless(a) -> int:
    from . import bless

    run_dir = Path(a.run_dir).resolve()
    notes: list[str] = []
    if a.new:  # the first reference of an application, from a run without one
        changes = bless.plan_new(run_dir, only_passing=a.only_passing, notes=notes)
    else:
        changes = bless.plan(run_dir, a.system, only_passing=a.only_passing, notes=notes)
    for n in notes:
        print(f"apptune: bless: {n}", file=sys.stderr)
    if not changes:
        print(
            f"apptune: bless: {run_dir} matches reference/ and reference/baselines/: nothing to "
            "change"
        )
        return 0
    sys.stdout.write(bless.diff(changes))
    names = ", ".join(str(f.relative_to(paths.root())) for f, _, _ in changes)
    if not a.yes:
        if not sys.stdin.isatty():
            print(
                f"apptune: bless: no TTY and no --yes: nothing written ({len(changes)} file(s) "
                "would change)"
            )
            return 0
        if input(f"Write {len(changes)} file(s) ({names})? [y/N] ").strip().lower() not in (
            "y",
            "yes",
        ):
            print("apptune: bless: nothing written")
            return 0
    bless.write(changes)
    print(f"apptune: bless: wrote {names}")
    return 0


def cmd_cache(a) -> int:
    from . import buildcache

    if a.ccmd == "list":
        es = buildcache.entries()
        total = 0
        for e in es:
            m = e.manifest
            total += e.size
            print(
                f"{e.key[:16]}  {m.get('app', '?'):<8} {m.get('environment', '?'):<8} "
                f"{m.get('variant', '?'):<24} {e.size / 2**20:8.1f} MiB"
            )
        print(
            f"{len(es)} entries, {total / 2**20:.1f} MiB in {buildcache.root()} "
            f"(limit {buildcache.max_bytes() / 2**30:.1f} GiB)"
        )
        return 0
    if a.ccmd == "prune":
        limit = None if a.max_gb is None else int(a.max_gb * 2**30)
        removed = buildcache.prune(limit)
        print(f"removed {len(removed)} entries ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
        return 0
    bad = buildcache.verify_all()
    for e, why in bad:
        print(f"{e.key[:16]}: {why}")
    print(
        f"{len(buildcache.entries())} entries checked, {len(bad)} corrupted"
        + (" (they are rebuilt on next use)" if bad else "")
    )
    return 1 if bad else 0


def cmd_bisect(a) -> int:
    from . import bisect, localrun

    site = localrun.load_site(
        a.environment, a.config, languages=recipes.load_recipe(a.app).build.languages
    )
    with trials_in_history(a, "bisect") as on_trial:
        res = bisect.bisect(
            a.app,
            a.good,
            a.bad,
            site,
            tier=a.tier,
            work=a.work_dir,
            ignore_per_file=a.ignore_per_file,
            repeats=a.repeats,
            max_cycles=a.max_cycles,
            ranks=a.ranks,
            functions=a.functions,
            on_trial=on_trial,
        )
    print(bisect.report_md(res))
    if not res.verified:
        print(
            f"apptune: bisect: no verified per-file override after {res.n_cycles} cycles",
            file=sys.stderr,
        )
        return 1
    if res.entries and a.write:
        f = recipes.recipe_path(a.app)
        from .yamlio import atomic_write_text

        atomic_write_text(f, bisect.add_per_file(f.read_text(), res.entries, str(f)))
        print(f"apptune: bisect: wrote the per_file rule into {f}")
    elif res.entries:
        print("apptune: bisect: recipe not changed (--write applies the diff above)")
    return history_status(a, 0)


def cmd_tune(a) -> int:
    from . import tune

    try:
        with trials_in_history(a, "tune") as on_trial:
            res = tune.tune(
                a.app,
                objective=a.objective,
                budget=a.budget,
                max_builds=a.max_builds,
                repeats=a.repeats,
                confirm=a.confirm,
                top=a.top,
                work=a.work_dir,
                seed=a.seed,
                polish=a.polish,
                config_file=a.config,
                tier=a.input,
                on_trial=on_trial,
            )
    except KeyboardInterrupt:
        print("apptune: tune: interrupted; the same command resumes the search", file=sys.stderr)
        return 130
    print(tune.report_md(res))
    print(f"apptune: tune: report {Path(res['work']) / 'tune-report.md'}")
    if res["winner"] is None:
        print("apptune: tune: no verified configuration beat the baseline", file=sys.stderr)
        return 1
    if a.write:
        from .yamlio import atomic_write_text

        atomic_write_text(tune.recommended_path(), res["recommended_text"])
        print(f"apptune: tune: wrote {tune.recommended_path()}")
    else:
        print(
            f"apptune: tune: {tune.recommended_path().name} not changed (--write applies the diff "
            "above)"
        )
    return history_status(a, 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="apptune", description=__doc__.splitlines()[0])
    ap.add_argument(
        "-v",
        "--verbose",
        dest="traceback",
        action="store_true",
        help="show the Python traceback of an error (before the command: apptune -v run ...)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run checks through ReFrame and write the report")
    r.add_argument(
        "--mode", default="ci", help="ReFrame execution mode: ci, nightly, dev (default ci)"
    )
    r.add_argument("-c", "--checks", action="append", default=[], help="check file or directory")
    r.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    r.add_argument(
        "--run-dir", help="where to put stage, output, report (default runs/<time>-<mode>)"
    )
    r.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="N",
        help="run each test N times (ReFrame --repeat); verdicts use the median",
    )
    r.add_argument(
        "--wait-for-quiet",
        type=float,
        metavar="SECONDS",
        help="before each timed run, wait at most SECONDS for the node to be quiet "
        "(apptune/quality.py; default: the partition's extras.quiet_wait_s, else 0)",
    )
    r.add_argument(
        "--no-history",
        action="store_true",
        help="do not store the run in the history (nor in ReFrame's results database)",
    )
    for opt, what in (
        ("--app", "an application (its check directory)"),
        ("--env", "an environment of the site config"),
        ("--variant", "a build variant, e.g. tuned or tuned+fft=fftw3"),
        ("--placement", "a placement, e.g. bound"),
    ):
        r.add_argument(
            opt,
            action="append",
            default=[],
            metavar=opt[2:].upper(),
            help=f"run only {what}; repeat for several; different options must all hold "
            "(a name that does not exist is refused, listing those that do)",
        )
    r.add_argument(
        "reframe_args", nargs="*", help="extra ReFrame options after --, e.g. -- -n HPCC -p gnu"
    )
    r.set_defaults(func=cmd_run)
    lst = sub.add_parser("list", help="list applications, patches, tiers and variants")
    lst.set_defaults(func=cmd_list)
    rp = sub.add_parser("report", help="(re)write the Markdown/HTML report of a run")
    rp.add_argument("run_dir", nargs="?", help="run directory (default runs/latest)")
    rp.add_argument("--report-file", help="ReFrame run report (default RUN_DIR/report.json)")
    rp.add_argument("--print", action="store_true", help="print the Markdown report")
    rp.add_argument(
        "--history",
        help="history directory for trend plots (default $APPTUNE_HISTORY "
        "or ~/.local/share/apptune/history)",
    )
    rp.add_argument("--no-history", action="store_true", help="no trend plots")
    rp.set_defaults(func=cmd_report)
    v = sub.add_parser("validate", help="validate every recipe, input, reference and baseline")
    v.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    v.set_defaults(func=cmd_validate)
    b = sub.add_parser("baseline", help="baselines")
    bs = b.add_subparsers(dest="bcmd", required=True)
    bu = bs.add_parser(
        "update",
        help="merge verified, clean runs (median and noise of their repeats) "
        "into reference/baselines/, bound to their machine's fingerprint",
    )
    bu.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    bu.add_argument("--system", help="baseline system name (default: the ReFrame system)")
    bu.set_defaults(func=cmd_baseline_update)
    br = bs.add_parser(
        "record",
        help="run --sessions sessions of the checks, merge their clean verified results into "
        "reference/baselines/ and show the diff; written with --yes or a y at a tty",
    )
    br.add_argument("-c", "--checks", action="append", default=[], help="check file or directory")
    br.add_argument("--mode", default="ci", help="ReFrame execution mode (default ci)")
    br.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    br.add_argument(
        "--sessions",
        type=int,
        default=5,
        metavar="N",
        help="sessions to run (default 5; at least 3 give a noise, docs/regressions.md)",
    )
    br.add_argument(
        "--wait-for-quiet",
        type=float,
        default=120,
        metavar="SECONDS",
        help="before each timed run, wait at most SECONDS for a quiet node (default 120)",
    )
    br.add_argument("--system", help="baseline system name (default: the ReFrame system)")
    br.add_argument("--yes", action="store_true", help="write the baseline files without asking")
    br.add_argument(
        "--no-history", action="store_true", help="do not store the sessions in the history"
    )
    br.add_argument(
        "reframe_args", nargs="*", help="extra ReFrame options after --, e.g. -- --system c:p"
    )
    br.set_defaults(func=cmd_baseline_record)
    hp = sub.add_parser("history", help="the history store of every run's results")
    hs = hp.add_subparsers(dest="hcmd", required=True)
    hi = hs.add_parser("ingest", help="store runs (idempotent: a stored run is left as it is)")
    hi.add_argument(
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run directories (with --reframe-db: session uuids, default all)",
    )
    hi.add_argument(
        "--reframe-db", metavar="FILE", help="read the sessions of ReFrame's results database"
    )
    hl = hs.add_parser("list", help="stored runs")
    hl.add_argument("--mode", help="only runs of this ReFrame mode")
    ht = hs.add_parser(
        "trials", help="stored tune and bisect sessions (never judged), or one session's trials"
    )
    ht.add_argument("session", nargs="?", metavar="SESSION", help="a session's uuid (or a prefix)")
    for p_ in (hi, hl, ht):
        p_.add_argument(
            "--history",
            help="history directory (default $APPTUNE_HISTORY or ~/.local/share/apptune/history)",
        )
    hp.set_defaults(func=cmd_history)
    from . import compare, historysite

    historysite.register(hs)
    compare.register(sub)
    cr = sub.add_parser(
        "check-regressions",
        help="verdict per figure over the history; exit 1 on a confirmed regression",
    )
    cr.add_argument(
        "--history",
        help="history directory (default $APPTUNE_HISTORY or ~/.local/share/apptune/history)",
    )
    cr.add_argument("--system", help="only this system (or system:partition)")
    cr.add_argument("--mode", help="only runs of this ReFrame mode (nightly.sh: nightly)")
    cr.add_argument("--app", help="only this application")
    cr.add_argument("--baseline-system", help="baselines of this system (default: the run's)")
    cr.add_argument(
        "--alpha", type=float, default=0.01, help="significance of a change point (default 0.01)"
    )
    cr.add_argument(
        "--min-change",
        type=float,
        default=0.0,
        help="smallest relative change reported, e.g. 0.02 (default 0: significance only)",
    )
    cr.add_argument("--json", help="also write every verdict to this JSON file")
    cr.add_argument("-v", "--verbose", action="store_true", help="print every series' verdict")
    cr.set_defaults(func=cmd_check_regressions)
    bl = sub.add_parser(
        "bless", help="promote a verified run into reference/ and reference/baselines/"
    )
    bl.add_argument("run_dir", metavar="RUN_DIR")
    bl.add_argument("--yes", action="store_true", help="write without asking")
    bl.add_argument("--system", help="baseline system name (default: the ReFrame system)")
    bl.add_argument(
        "--only-passing",
        action="store_true",
        help="bless the verified tests of a run some of whose tests failed "
        "(each left out is named)",
    )
    bl.add_argument(
        "--new",
        action="store_true",
        help="write an application's first reference (reference/APP/<tier>.yaml, which has "
        "no fields yet) from a run's parsed fields, with default tolerances",
    )
    bl.set_defaults(func=cmd_bless)
    nw = sub.add_parser(
        "new",
        help="start an application: fetch its source, guess its build, write "
        "its recipe, check, ci input and reference skeleton (docs/adding-an-application.md)",
    )
    nw.add_argument("app", metavar="APP", help="application name (build-recipes/APP.yaml)")
    src = nw.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--debian",
        metavar="PACKAGE",
        help="a Debian source package: its newest orig "
        "tarball, name and sha256 from apt-cache showsrc",
    )
    src.add_argument("--url", help="a tarball's URL (https://, file://); with --sha256")
    src.add_argument("--path", metavar="src/NAME", help="source kept in this repository")
    nw.add_argument("--sha256", metavar="HEX", help="the pinned sha256 of the --url tarball")
    nw.add_argument(
        "--file",
        metavar="NAME",
        help="the --url tarball's file name (default: the URL's last part)",
    )
    nw.add_argument(
        "--version",
        help="the application's version (default: the Debian upstream "
        "version, or the one in the file name; 1.0 for --path)",
    )
    nw.add_argument(
        "--build-system",
        metavar="KIND",
        help="how it builds: cmake, configure, autoreconf "
        "(configure.ac, no configure) or make (default: guessed from the top of the source)",
    )
    nw.add_argument("--ranks", type=int, default=2, help="MPI ranks of the ci tier (default 2)")
    nw.set_defaults(func=cmd_new)
    c = sub.add_parser("cache", help="the content-addressed build cache")
    cs = c.add_subparsers(dest="ccmd", required=True)
    cs.add_parser("list", help="entries with app, environment, variant and size")
    cp = cs.add_parser("prune", help="drop least recently used entries beyond the size limit")
    cp.add_argument(
        "--max-gb", type=float, help="size limit (default $APPTUNE_BUILD_CACHE_MAX_GB or 5)"
    )
    cs.add_parser("verify", help="check every entry's checksums; exit 1 if any is corrupted")
    c.set_defaults(func=cmd_cache)
    bi = sub.add_parser(
        "bisect",
        help="find the source files that must keep the good variant's "
        "flags for the bad variant to pass verification (docs/tuning.md)",
    )
    bi.add_argument("app")
    bi.add_argument(
        "--good", required=True, metavar="VARIANT", help="a variant that passes, e.g. tuned"
    )
    bi.add_argument(
        "--bad", required=True, metavar="VARIANT", help="a variant that fails, e.g. aggressive"
    )
    bi.add_argument("-e", "--environment", default="gnu", help="ReFrame environment (default gnu)")
    bi.add_argument("--tier", default="ci", help="input tier whose reference verifies (default ci)")
    bi.add_argument("--ranks", type=int, help="MPI ranks (default: the tier's)")
    bi.add_argument(
        "--ignore-per-file",
        action="store_true",
        help="build the bad variant with its ladder for every file, also those the "
        "recipe's per_file rules exempt (to find out whether a rule is needed)",
    )
    bi.add_argument(
        "--work-dir",
        type=Path,
        help="builds, mixed builds and runs "
        "(default runs/bisect/APP-ENV-GOOD-vs-BAD); the ends are reused when unchanged",
    )
    bi.add_argument(
        "--repeats", type=int, default=3, help="timing runs of good, bad and mixed (default 3)"
    )
    bi.add_argument(
        "--max-cycles", type=int, default=40, help="budget of build+run cycles (default 40)"
    )
    bi.add_argument(
        "--no-functions",
        dest="functions",
        action="store_false",
        help="stop at files: skip the search for the global functions of each culprit "
        "file that must keep the good flags",
    )
    bi.add_argument("--write", action="store_true", help="write the per_file rule into the recipe")
    bi.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    bi.set_defaults(func=cmd_bisect)
    tu = sub.add_parser(
        "tune",
        help="budgeted, resumable search for the fastest verified "
        "configuration (tuning/APP.yaml; docs/tuning.md)",
    )
    tu.add_argument("app")
    tu.add_argument("--input", metavar="TIER", help="input tier (default: the tuning space's, ci)")
    tu.add_argument(
        "--objective",
        default="time",
        help="time, energy, edp (figures per tuning/APP.yaml) or a figure name (default time)",
    )
    tu.add_argument("--budget", type=int, default=24, help="runs the search may use (default 24)")
    tu.add_argument(
        "--max-builds",
        type=int,
        default=6,
        help="builds the search may compile (besides the baseline's; "
        "build-cache restores are free; default 6)",
    )
    tu.add_argument("--repeats", type=int, default=2, help="runs per candidate at most (default 2)")
    tu.add_argument(
        "--confirm",
        type=int,
        default=3,
        help="interleaved runs of the best candidates and the baseline at the end (default 3)",
    )
    tu.add_argument(
        "--top", type=int, default=2, help="candidates confirmed at the end (default 2)"
    )
    tu.add_argument("--seed", type=int, default=1, help="sampler seed (default 1)")
    tu.add_argument(
        "--polish",
        type=int,
        help="the last runs of the budget step from the best trial one "
        "knob at a time (default a third of the budget; 0: TPE only)",
    )
    tu.add_argument(
        "--work-dir",
        type=Path,
        help="trials (tune.db), builds, runs, report "
        "(default runs/tune/APP-TIER-OBJECTIVE); the same directory resumes the search",
    )
    tu.add_argument(
        "--write", action="store_true", help="write the winner into site-config/recommended.yaml"
    )
    tu.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    tu.set_defaults(func=cmd_tune)
    for p_ in (bi, tu):
        p_.add_argument(
            "--history",
            help="history directory for the trials (default $APPTUNE_HISTORY or "
            "~/.local/share/apptune/history)",
        )
        p_.add_argument(
            "--no-history", action="store_true", help="do not store the trials in the history"
        )
    from . import plan_cli

    plan_cli.register(sub)
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return a.func(a)
    except KeyboardInterrupt:
        if a.traceback:
            traceback.print_exc()
        print("apptune: interrupted", file=sys.stderr)
        return 130
    except EXPECTED as e:
        # one line, as for bad data; the traceback only with -v (it is apptune's, not the data's)
        if a.traceback:
            traceback.print_exc()
        print(f"apptune: error: {one_line(e)}", file=sys.stderr)
        return 2


def _expected() -> tuple[type[BaseException], ...]:
    import jinja2
    import pydantic
    import yaml

    return (
        ApptuneError,
        OSError,
        subprocess.SubprocessError,
        yaml.YAMLError,
        pydantic.ValidationError,
        jinja2.TemplateError,
    )


#: Failures reported in one line (anything else is a bug in apptune: its traceback shows).
EXPECTED = _expected()


def one_line(e: BaseException) -> str:
    """An expected failure as one line naming the file where it is known."""
    import pydantic

    from .errors import format_validation_error

    if isinstance(e, ApptuneError):
        return str(e)
    if isinstance(e, pydantic.ValidationError):
        return str(format_validation_error(None, e))
    if isinstance(e, OSError) and e.strerror:
        names = [str(f) for f in (e.filename, e.filename2) if f]
        return ": ".join([*names, e.strerror])
    if isinstance(e, subprocess.CalledProcessError):
        cmd = e.cmd if isinstance(e.cmd, str) else shlex.join(map(str, e.cmd))
        return f"{cmd}: exited with status {e.returncode}"
    return " ".join(f"{type(e).__name__}: {e}".split())


if __name__ == "__main__":
    sys.exit(main())
