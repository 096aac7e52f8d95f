"""``apptune sensitivity``: plant an application's faults and say which its verification
sees, by which fields, and the smallest change of each swept parameter it sees."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .. import paths


def cmd_sensitivity(a) -> int:
    from ..core.data import faults
    from ..tools import sensitivity

    if a.docs:
        print(sensitivity.docs_table(a.app or faults.apps_with_faults()))
        return 0
    if len(a.app) != 1:
        print("apptune: error: sensitivity: name one application (or --docs)", file=sys.stderr)
        return 2
    app = a.app[0]
    battery = sensitivity.Battery(
        app,
        work=a.work_dir or sensitivity.default_work(app),
        config_file=a.config,
        lock=a.lock,
        only=a.only,
        command=shlex.join(["apptune", "sensitivity", *a.argv[1:]]),
    )
    result = battery.go()
    for line in sensitivity.terminal(battery.data, result):
        print(line)
    print(f"apptune: sensitivity: wrote {faults.seen_path(app).relative_to(paths.root())}")
    docs = sensitivity.update_docs()
    if docs is not None:
        where = docs.relative_to(paths.root())
        print(f"apptune: sensitivity: its row of {where}'s table rewritten")
    return 0


def register(subparsers) -> None:
    """Add ``apptune sensitivity``."""
    s = subparsers.add_parser(
        "sensitivity",
        help="plant faults of our own (reference/APP/sensitivity/faults.yaml) and measure what the "
        "verification sees (docs/applications.md)",
    )
    s.add_argument("app", nargs="*", help="the application (with --docs: any number, or all)")
    s.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run this fault or sweep only (repeatable); the others keep what was recorded",
    )
    s.add_argument(
        "--lock",
        metavar="FILE",
        help="hold this lock file (flock) for each build and each run, not in between",
    )
    s.add_argument(
        "--work-dir",
        type=Path,
        help="builds and runs (default runs/sensitivity/APP; the same directory reuses builds)",
    )
    s.add_argument(
        "--docs",
        action="store_true",
        help="print docs/applications.md's table from what was recorded (a battery rewrites "
        "it there itself); nothing runs",
    )
    s.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    s.set_defaults(func=cmd_sensitivity)
