"""``apptune compare``: two machines, or two environments or variants of the same machines,
from the history, figure by figure with ratio and noise (:mod:`apptune.history.compare`)."""

from __future__ import annotations

import argparse

from ..errors import ApptuneError, printable
from ..history.compare import AXES, compare, format_text
from .options import history_option


def register(subparsers) -> None:
    """``apptune compare``: its parser, among the CLI's subcommands."""
    p = subparsers.add_parser(
        "compare",
        help="two machines (fingerprint ids or systems), or two environments or variants of "
        "the same machines, from the history: the same figures side by side with ratio and "
        "noise, next to the micro-benchmarks' ratios",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="two machine ids (m-…, or a prefix) or systems, two environments (gnu llvm) or "
        "two variants (baseline tuned); default the history's two of --by",
    )
    p.add_argument(
        "--by",
        choices=AXES,
        help="what the two names are (default: what they name, machines before environments "
        "before variants; without names, machine)",
    )
    p.add_argument("--app", help="only this application's runs")
    p.add_argument(
        "--machine",
        metavar="MACHINE",
        help="only the runs of this machine id (or prefix) or system: environments or "
        "variants compared on it",
    )
    p.add_argument("--mode", help="only runs of this ReFrame mode")
    history_option(p)
    p.add_argument("--json", metavar="FILE", help="also write the comparison to this JSON file")
    p.set_defaults(func=cmd_compare)


def cmd_compare(a: argparse.Namespace) -> int:
    """Compare two sides of the history, print the comparison and write its JSON."""
    from ..history.store import History
    from ..yamlio import atomic_write_json

    if len(a.names) not in (0, 2):
        raise ApptuneError(None, "compare", "give two names, or none for the history's two")
    with History(a.history, create=False) as h:
        c = compare(
            h,
            *(a.names or (None, None)),
            mode=a.mode,
            by=a.by,
            app=a.app,
            machine_sel=a.machine,
        )
    print(printable(format_text(c)))  # names come from stored records
    if a.json:
        atomic_write_json(a.json, c.to_dict())
    return 0
