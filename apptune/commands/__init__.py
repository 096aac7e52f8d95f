"""The commands of ``apptune``, one module each (``apptune/commands/<command>.py``).

Each module has a ``register(subparsers)`` that adds its subcommand, its options and the
function that runs it (``func``); :func:`parser` assembles them. A command parses and
prints; what a run or a trial session does is in :mod:`apptune.commands.workflow` and below.
"""

from __future__ import annotations

import argparse

from . import (
    baseline,
    bisect,
    bless,
    cache,
    check_regressions,
    compare,
    history,
    new,
    plan,
    report,
    run,
    sensitivity,
    tune,
    validate,
)
from . import list as list_
from .options import Parser

#: The command modules, in the order ``apptune --help`` lists their commands.
MODULES = (
    run,
    list_,
    report,
    validate,
    baseline,
    history,
    compare,
    check_regressions,
    bless,
    new,
    cache,
    bisect,
    tune,
    plan,
    sensitivity,
)


def parser(description: str) -> argparse.ArgumentParser:
    """The ``apptune`` parser: ``-v`` and every command of :data:`MODULES` (built afresh at
    each call, so a command function replaced in its module is the one that runs)."""
    ap = Parser(prog="apptune", description=description)
    ap.add_argument(
        "-v",
        "--verbose",
        dest="traceback",
        action="store_true",
        help="show the Python traceback of an error (before the command: apptune -v run ...)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for m in MODULES:
        m.register(sub)
    return ap
