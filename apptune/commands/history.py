"""``apptune history``: store runs in the history, list them, show trial sessions."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ApptuneError
from .options import history_option


def cmd_history(a) -> int:
    from ..history import store
    from ..history.ingest import reframe_sessions

    with store.History(a.history, create=a.hcmd == "ingest") as h:
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
            for rep, report_file in reframe_sessions(a.reframe_db, a.run_dirs or None):
                rf = Path(report_file) if report_file else None
                sources.append((rf.parent if rf else Path(a.reframe_db).parent, rf, rep))
        else:
            if not a.run_dirs:
                raise ApptuneError(
                    None, "history ingest", "give run directories (or --reframe-db FILE)"
                )
            sources = [(Path(d), None, None) for d in a.run_dirs]
        failed = 0
        for run_dir, rf, rep in sources:
            try:
                uuid, n, new = h.ingest(run_dir, rf, rep)
            except ApptuneError as e:  # one run that cannot be read stops no other
                print(f"apptune: error: {e}", file=sys.stderr)
                failed += 1
                continue
            print(
                f"{run_dir}: session {uuid[:8]}: "
                + (f"{n} results stored" if new else "already in the history (unchanged)")
            )
        print(f"history: {h.path}" + (f" ({failed} run(s) not stored)" if failed else ""))
    return 2 if failed else 0


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


def register(subparsers) -> None:
    """Add ``apptune history`` and its subcommands."""
    hp = subparsers.add_parser("history", help="the history store of every run's results")
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
        history_option(p_)
    hp.set_defaults(func=cmd_history)
    register_site(hs)


def register_site(subparsers) -> None:
    """Add ``apptune history site OUT`` to ``apptune history``'s subcommands."""
    p = subparsers.add_parser(
        "site",
        help="write the history as a static site into OUT: trends with change points and "
        "their causes, the latest verdicts, since the last nightly, machines compared",
    )
    p.add_argument("out", metavar="OUT", help="the site's directory (created; pages replaced)")
    p.add_argument("--mode", help="only runs of this ReFrame mode (ci/nightly.sh: nightly)")
    history_option(p)
    p.set_defaults(func=cmd_history_site)


def cmd_history_site(a) -> int:
    """Write the history's static site (:func:`apptune.report.historysite.build`)."""
    from ..history import store
    from ..report import historysite

    with store.History(a.history, create=False) as h:
        pages = historysite.build(h, a.out, mode=a.mode)
    print(f"apptune: history site: {len(pages)} pages in {Path(a.out).resolve()}/index.html")
    return 0
