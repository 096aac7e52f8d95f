"""One session of the suite through ReFrame, and the trials of ``tune`` and ``bisect``:
the run directory, the ``reframe`` command line a user would type, and what follows a
run (``runs/latest``, the history, the report, the exit status).

The commands (:mod:`apptune.commands`) call these; nothing here parses arguments.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import shlex
import signal
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import ApptuneError, printable


def runs_dir() -> Path:
    """Where runs are kept: ``$APPTUNE_RUNS``, else ``runs/`` of the repository."""
    return Path(os.environ.get("APPTUNE_RUNS", paths.root() / "runs"))


def reframe_command(
    root: Path, mode: str, checks: list[str], run_dir: Path, config: str, extra: list[str]
) -> list[str]:
    """The ``reframe`` command line of a run: the site config, the checks (default all of
    ``reframe-checks/``), the mode and the run directory's report, stage, output and
    perflogs, then ``extra``."""
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


def store_run(
    run_dir: Path, rc: int, *, history: bool, judged: bool, stopped_by: int | None = None
) -> int:
    """After ReFrame: runs/latest, the history (``history``: the run is stored), the report;
    the run's exit status. ``judged``: a regression of the medians fails the run (with
    repeats ReFrame judged no single repeat; :func:`judged` says whether a run's options ask
    for a performance verdict)."""
    # runs/latest follows runs kept under runs/; an explicit --run-dir elsewhere leaves it alone
    if run_dir.parent == runs_dir().resolve():
        point_latest(run_dir)
    stopped = f"stopped by {signal.Signals(stopped_by).name}" if stopped_by else None
    if (run_dir / "report.json").exists():
        from .. import report

        if stopped_by:  # the report states the status the command exits with
            note_stop(run_dir, stopped_by)

        hdir = None
        if history:
            from ..history import store

            try:
                with store.History() as h:
                    uuid, n, _ = h.ingest(run_dir)
                hdir = h.dir
                print(f"apptune: history: {n} results of session {uuid[:8]} in {h.path}")
            except (ApptuneError, sqlite3.Error, OSError) as e:
                if paths.out_of_space(e, store.history_dir()):
                    print(
                        f"apptune: error: history: run not stored: "
                        f"{paths.no_space(store.history_dir())}",
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
            print("apptune: " + printable(line))
        if judged and any(s.get("verdict") == "regression" for s in summary.get("summary", [])):
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
            said = printable("; ".join(reasons))  # skip reasons may quote program output
            print(f"apptune: error: {app}: nothing tested: {said}", file=sys.stderr)
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


def judged(mode: str, reframe_args: list[str]) -> bool:
    """Whether a run in ``mode`` with the extra ReFrame options ``reframe_args`` asks for a
    performance verdict: not with ``--mode dev`` nor ``--skip-performance-check``."""
    return mode != "dev" and "--skip-performance-check" not in reframe_args


def note_stop(run_dir: Path, signum: int) -> None:
    """Add to the run's notes (``apptune-run.json``) the signal that stopped it and the
    status the command exits with (128 + N), for its report."""
    from ..constants import RUN_NOTES_FILE
    from ..yamlio import atomic_write_json

    try:
        notes = json.loads((run_dir / RUN_NOTES_FILE).read_text())
    except (OSError, ValueError):
        notes = {}
    notes = notes if isinstance(notes, dict) else {}
    notes |= {"stopped_by": signal.Signals(signum).name, "exit_status": 128 + signum}
    atomic_write_json(run_dir / RUN_NOTES_FILE, notes)


def reframe_storage_env(env: dict) -> dict:
    """ReFrame's own results database, next to apptune's history (unless the caller set it)."""
    from ..history import store

    if "RFM_ENABLE_RESULTS_STORAGE" in env or "RFM_SQLITE_DB_FILE" in env:
        return {}
    return {
        "RFM_ENABLE_RESULTS_STORAGE": "1",
        "RFM_SQLITE_DB_FILE": str(store.history_dir() / store.REFRAME_DB_FILE),
    }


@dataclass
class Trials:
    """The trials of one ``tune`` or ``bisect`` command on their way to the history
    (:func:`trials_in_history`)."""

    #: What the tool calls with each trial's run directory; None: the trials are not stored.
    add: Callable[[Path], None] | None = None
    #: :func:`store_trials`' exit status once the command ends (0: stored, or nothing to store).
    failed: int = 0

    def status(self, rc: int) -> int:
        """The command's exit status: instead of success, the status of a failed store."""
        return self.failed or rc if rc == 0 else rc


@contextlib.contextmanager
def trials_in_history(tool: str, *, store: bool, history: str | None, argv: list[str]):
    """The :class:`Trials` of ``tool`` (``tune`` or ``bisect``) run as ``apptune ARGV``; when
    the command ends, also by an error or an interrupt, the trials that ran are stored as
    one session in the history ``history`` (None: the default one); ``store`` False
    (``--no-history``): nothing is stored."""
    from ..history import store as history_store

    trials = Trials()
    if not store:
        yield trials
        return
    session = history_store.TrialSession(tool, shlex.join(["apptune", *argv]))
    trials.add = session.add
    try:
        yield trials
    finally:
        if session.run_dirs:
            trials.failed = store_trials(session, history)


def store_trials(session, directory: str | None) -> int:
    """Store a trial session: 0, or the exit status its failure gives the command (the
    tool's own result files are written before, and the command goes on): 3 for want of
    space, 2 for a database that cannot be used; one line naming the database."""
    from ..history import store

    db = Path(directory or store.history_dir()) / store.DB_FILE
    try:
        with store.History(directory) as h:
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
