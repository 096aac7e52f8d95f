"""``apptune report``: (re)write the Markdown/HTML report of a run."""

from __future__ import annotations

from pathlib import Path

from .options import history_option
from .workflow import runs_dir


def cmd_report(a) -> int:
    from .. import report
    from ..history import store

    run_dir = Path(a.run_dir or runs_dir() / "latest").resolve()
    hdir = None if a.no_history else Path(a.history) if a.history else store.history_dir()
    if hdir is not None and not (hdir / store.DB_FILE).is_file():
        hdir = None
    paths_ = report.write(run_dir, Path(a.report_file) if a.report_file else None, history_dir=hdir)
    for p in paths_:
        print(p)
    if a.print:
        print(paths_[1].read_text())
    return 0


def register(subparsers) -> None:
    """Add ``apptune report``."""
    rp = subparsers.add_parser("report", help="(re)write the Markdown/HTML report of a run")
    rp.add_argument("run_dir", nargs="?", help="run directory (default runs/latest)")
    rp.add_argument("--report-file", help="ReFrame run report (default RUN_DIR/report.json)")
    rp.add_argument("--print", action="store_true", help="print the Markdown report")
    history_option(rp, "history directory for trend plots")
    rp.add_argument("--no-history", action="store_true", help="no trend plots")
    rp.set_defaults(func=cmd_report)
