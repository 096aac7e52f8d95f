"""``apptune bless``: promote a verified run into reference/ and reference/baselines/."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import paths


def cmd_bless(a) -> int:
    from ..tools import bless

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


def register(subparsers) -> None:
    """Add ``apptune bless``."""
    bl = subparsers.add_parser(
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
