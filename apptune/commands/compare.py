"""``apptune compare``: two machines from the history, figure by figure with ratio and
noise (:mod:`apptune.history.compare`)."""

from __future__ import annotations

import argparse

from ..errors import ApptuneError
from ..history.compare import compare, format_text


def register(subparsers) -> None:
    """``apptune compare``: its parser, among the CLI's subcommands."""
    p = subparsers.add_parser(
        "compare",
        help="two machines (fingerprint ids or systems) from the history: the same figures "
        "side by side with ratio and noise, next to the micro-benchmarks' ratios",
    )
    p.add_argument(
        "machines",
        nargs="*",
        metavar="MACHINE",
        help="two machine ids (m-…, or a prefix) or systems; default the history's two machines",
    )
    p.add_argument("--mode", help="only runs of this ReFrame mode")
    p.add_argument(
        "--history",
        help="history directory (default $APPTUNE_HISTORY or ~/.local/share/apptune/history)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the comparison to this JSON file")
    p.set_defaults(func=cmd_compare)


def cmd_compare(a: argparse.Namespace) -> int:
    """Compare two machines of the history, print the comparison and write its JSON."""
    from ..history.store import History
    from ..yamlio import atomic_write_json

    if len(a.machines) not in (0, 2):
        raise ApptuneError(None, "compare", "give two machines, or none for the history's two")
    with History(a.history, create=False) as h:
        c = compare(h, *(a.machines or (None, None)), mode=a.mode)
    print(format_text(c))
    if a.json:
        atomic_write_json(a.json, c.to_dict())
    return 0
