"""``apptune baseline record`` and ``apptune baseline update``: baselines from runs."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from .. import paths
from ..core.judge import baselines
from ..errors import ApptuneError
from ..models import RunRecord
from .options import COUNT, SECONDS, history_option
from .run import RunOptions, run_session
from .workflow import runs_dir


def cmd_baseline_record(a) -> int:
    """Record baselines: ``--sessions`` runs (each a session of ``apptune run`` with a quiet
    wait), then the clean verified results merged per (system, app) into their baseline
    files; each file's diff is shown and written only with ``--yes`` or a "y" at a tty."""
    from ..history import records

    if a.from_history is not None:
        dirs, base = _stored_sessions(a)
    else:
        dirs, base, rc = _run_sessions(a)
        if rc is not None:
            return rc
    apps, system = _selected(a)
    by = _by_baseline_file(
        [
            c.record
            for d in dirs
            if (d / "report.json").exists()
            for c in records.cases(d)
            if c.record and c.verified and _in_selection(c.record, apps, system)
        ],
        a.system,
    )
    if not by:
        print(
            "apptune: baseline record: no verified result in any session: nothing to record",
            file=sys.stderr,
        )
        return 1
    changed, recordable, refused = [], False, []
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
        noisy = too_noisy(text, rs)
        for line, _ in noisy:
            print(f"apptune: baseline {app}: warning: {line}", file=sys.stderr)
        if any(disturbed for _, disturbed in noisy) and not a.accept_noisy:
            refused.append(f)
            continue
        changed.append((f, text))
    if refused:
        print(
            f"apptune: baseline record: {len(refused)} file(s) not written "
            f"({', '.join(str(f) for f in refused)}): figures too noisy to judge by, from runs "
            "on a node other work disturbed: record them again on a quiet node (a longer "
            "--wait-for-quiet, another night), or --accept-noisy to record them as they are",
            file=sys.stderr,
        )
    if not changed:
        return 1 if refused or not recordable else 0
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
    from ..yamlio import atomic_write_text

    for f, text in changed:
        atomic_write_text(f, text)
        print(f"apptune: baseline record: wrote {f}")
    return 1 if refused else 0


#: A figure whose threshold is beyond this (it must double or halve to be judged) is too
#: noisy to judge by.
TOO_NOISY = 1.0


def too_noisy(text: str, rs: list[RunRecord]) -> list[tuple[str, bool]]:
    """The entries of a baseline file's ``text`` recorded from ``rs`` with figures too noisy
    to judge by: one ``(line, disturbed)`` each, the line naming every such figure, its
    noise and what it lets be judged, and the node's state during the runs; ``disturbed``:
    the runs shared their node beyond the default limits of a clean run (other work, not
    the machine's own noise: recording again on a quiet node helps)."""
    import yaml

    from ..core.judge import causes
    from ..core.run import quality
    from ..models import BaselineFile

    out = []
    limits = quality.Limits()
    for e in BaselineFile.model_validate(yaml.safe_load(text)).entries:
        mine = [
            r
            for r in rs
            if (r.machine_id, r.environment, r.variant, r.tier)
            == (e.machine, e.environment, e.variant, e.tier)
        ]
        bad = [w for n, fig in sorted(e.figures.items()) if (w := _unjudged(n, fig))]
        if not mine or not bad:
            continue
        states = [c for r in mine if (c := causes.condition(r.quality))]
        outside = max((c.get("outside", 0.0) for c in states), default=0.0)
        steal = max((c.get("steal", 0.0) for c in states), default=0.0)
        disturbed = outside > limits.max_outside_cpu or steal > limits.max_steal
        why = (
            f"its runs shared the node: other processes used up to {outside:.0%} of its CPUs"
            f"{f', steal up to {steal:.0%}' if steal > limits.max_steal else ''} (a clean "
            f"run's default limits: {limits.max_outside_cpu:.0%} of its CPUs, "
            f"{limits.max_steal:.0%} steal; the partition's run_quality allowed more)"
            if disturbed
            else "its runs were quiet: this is the machine's own noise at this input"
        )
        out.append(
            (
                f"{e.environment}/{e.variant} tier {e.tier}: too noisy to judge by: "
                f"{'; '.join(bad)}; {why}",
                disturbed,
            )
        )
    return out


def _unjudged(name: str, fig) -> str | None:
    """What a baseline figure lets be judged, when that is too little (None otherwise)."""
    if fig.noise is None:
        return None
    if fig.noise > baselines.NOISE_MAX:
        return f"{name} (noise {fig.noise:.0%} per run: never judged)"
    noise = baselines.effective_noise(fig.noise, fig.runs)
    t, _, _ = baselines.threshold(noise, fig.runs, 1, fig.between, fig.sessions)
    if t > TOO_NOISY:
        return f"{name} (noise {fig.noise:.0%} per run: only a change beyond {t:.0%} is judged)"
    return None


def _run_sessions(a) -> tuple[list[Path], Path, int | None]:
    """Run ``--sessions`` sessions of ``apptune run``: (their run directories, the directory
    they are in, an exit status when a session stopped the recording)."""
    if a.sessions < 1:
        raise ApptuneError(None, "--sessions", f"{a.sessions}: give at least 1 (3 give a noise)")
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    base = runs_dir() / f"baseline-{stamp}"
    dirs = []
    for i in range(1, a.sessions + 1):
        run_dir = base / f"session-{i}"
        print(f"apptune: baseline record: session {i} of {a.sessions} in {run_dir}", flush=True)
        rc = run_session(
            RunOptions(
                mode=a.mode,
                checks=a.checks,
                config=a.config,
                reframe_args=a.reframe_args,
                no_history=a.no_history,
                run_dir=str(run_dir),
                wait_for_quiet=a.wait_for_quiet,
            )
        )
        if rc >= 128 or rc in (2, paths.NO_SPACE_STATUS) and not (run_dir / "report.json").exists():
            print(
                f"apptune: baseline record: stopped after session {i} (exit {rc})", file=sys.stderr
            )
            return dirs, base, rc
        dirs.append(run_dir)
    return dirs, base, None


def _stored_sessions(a) -> tuple[list[Path], Path]:
    """The run directories of the last ``--from-history`` stored sessions of this mode with
    results of the selected applications (the nights already run): nothing is run."""
    from ..history.store import History

    if a.from_history < 3:
        raise ApptuneError(
            None, "--from-history", f"{a.from_history}: give at least 3 sessions (3 give a noise)"
        )
    apps, system = _selected(a)
    with History(a.history, create=False) as h:
        dirs = []
        for app in sorted(apps) or [None]:
            dirs += h.recent_run_dirs(a.from_history, system=system, mode=a.mode, app=app)
        where = h.path
    dirs = list(dict.fromkeys(dirs))
    if len(dirs) < 3:
        raise ApptuneError(
            where,
            None,
            f"{len(dirs)} stored session(s) of mode {a.mode} with results of "
            f"{', '.join(sorted(apps)) or 'any application'}"
            + (f" on {system}" if system else "")
            + " whose run directory still exists: a baseline needs at least 3",
        )
    print(
        f"apptune: baseline record: from {len(dirs)} stored session(s): "
        + ", ".join(str(d) for d in dirs),
        flush=True,
    )
    return dirs, dirs[-1].parent


def _selected(a) -> tuple[set[str], str | None]:
    """The applications of ``-c`` (a check file or its directory under reframe-checks/)
    and the ``--system`` among the ReFrame options, if any."""
    # a check directory is reframe-checks/APP; a check file is in it
    apps = {Path(c).parent.name if Path(c).suffix == ".py" else Path(c).name for c in a.checks}
    system = None
    args = list(a.reframe_args or [])
    for i, x in enumerate(args):
        if x == "--system" and i + 1 < len(args):
            system = args[i + 1]
        elif x.startswith("--system="):
            system = x.split("=", 1)[1]
    return apps, system


def _in_selection(r: RunRecord, apps: set[str], system: str | None) -> bool:
    if apps and r.app not in apps:
        return False
    if system and system not in (r.system, f"{r.system}:{r.partition}"):
        return False
    return True


def cmd_baseline_update(a) -> int:
    from ..history import records

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


def _by_baseline_file(results: list[RunRecord], system: str | None) -> dict:
    """Run records by the baseline file they go into: (system, app) -> records."""
    by: dict[tuple[str, str], list[RunRecord]] = {}
    for r in results:
        by.setdefault((system or r.system, r.app), []).append(r)
    return dict(sorted(by.items()))


def _file_diff(f: Path, old: str, new: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"{f} (before)", f"{f} (after)"
        )
    )


def register(subparsers) -> None:
    """Add ``apptune baseline`` and its subcommands."""
    b = subparsers.add_parser("baseline", help="baselines")
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
        type=COUNT,
        default=5,
        metavar="N",
        help="sessions to run (default 5; at least 3 give a noise, docs/regressions.md)",
    )
    br.add_argument(
        "--wait-for-quiet",
        type=SECONDS,
        default=120,
        metavar="SECONDS",
        help="before each timed run, wait at most SECONDS for a quiet node (default 120)",
    )
    br.add_argument(
        "--from-history",
        type=COUNT,
        metavar="N",
        help="run nothing: record from the last N stored sessions of --mode (e.g. the "
        "nightlies already run; at least 3), whose spread holds the night-to-night noise",
    )
    history_option(br)
    br.add_argument("--system", help="baseline system name (default: the ReFrame system)")
    br.add_argument("--yes", action="store_true", help="write the baseline files without asking")
    br.add_argument(
        "--accept-noisy",
        action="store_true",
        help="record figures too noisy to judge by from runs on a disturbed node (refused "
        "without it; the figures are named either way)",
    )
    br.add_argument(
        "--no-history", action="store_true", help="do not store the sessions in the history"
    )
    br.add_argument(
        "reframe_args", nargs="*", help="extra ReFrame options after --, e.g. -- --system c:p"
    )
    br.set_defaults(func=cmd_baseline_record)
