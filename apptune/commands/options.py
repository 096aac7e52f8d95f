"""Options more than one command takes, the command line's parser, and one argparse type
per kind of number: each refuses what is not finite or out of its range, in one line, while
the command line is read (before a command writes anything)."""

from __future__ import annotations

import argparse
import math

from ..errors import ApptuneError

#: The largest count an option takes: a C ``int`` (what ReFrame, MPI and SQLite are given).
MAX_COUNT = 2**31 - 1


class Parser(argparse.ArgumentParser):
    """argparse's parser, a wrong command line an :class:`~apptune.errors.ApptuneError`:
    one line naming the option, as every bad input is (``--help`` has the usage)."""

    def error(self, message):
        option, sep, what = message.partition(": ")
        if sep and option.startswith("argument "):
            raise ApptuneError(None, option.removeprefix("argument "), what)
        raise ApptuneError(None, None, f"{message} ({self.prog} --help lists the options)")


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    above: bool = False,
    below: bool = False,
    integer: bool = False,
):
    """An argparse type: a finite number (an integer with ``integer``) from ``lo`` to ``hi``
    (``above``/``below``: excluding them)."""
    kind = "an integer" if integer else "a finite number"

    def parse(text: str):
        try:
            v = int(text, 10) if integer else float(text)
        except ValueError:
            v = None
        if v is None or not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be {kind}, not {text!r}")
        if lo is not None and (v <= lo if above else v < lo):
            bound = f"{'more than' if above else 'at least'} {_figure(lo)}"
        elif hi is not None and (v >= hi if below else v > hi):
            bound = f"{'less than' if below else 'at most'} {_figure(hi)}"
        else:
            return v
        raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")

    parse.__name__ = kind
    return parse


def _figure(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


#: A count of runs, sessions, ranks, nodes, builds or cycles: at least 1.
COUNT = number(1, MAX_COUNT, integer=True)
#: A count that may be 0 (``tune --polish``), or a seed.
COUNT0 = number(0, MAX_COUNT, integer=True)
#: Seconds a command waits or adds (a quiet node's wait, a job's overhead): up to a day.
SECONDS = number(0, 86400)
#: A node's power in watts (measured idle power): up to a megawatt.
WATTS = number(0, 1e6)
#: A supply's voltage: more than 0, up to a megavolt.
VOLTS = number(0, 1e6, above=True)
#: A significance level: strictly between 0 and 1.
SIGNIFICANCE = number(0, 1, above=True, below=True)
#: A relative change (0.02 is 2 %): at least 0, up to a million-fold.
RELATIVE = number(0, 1e6)
#: A size in GiB: at least 0 (a pruned cache keeps nothing), up to an exbibyte.
GIB = number(0, 2**30)


def budget(kind: str, unit: str):
    """An argparse type of ``apptune plan``'s budgets (``12h``, ``15kWh``): a quantity with
    its unit (:func:`apptune.tools.plan.quantity`), finite and more than 0."""
    from ..tools.plan import quantity

    def parse(text: str) -> float:
        try:
            return quantity(text, kind, unit)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = kind
    return parse


#: Where the history is when ``--history`` is not given (:func:`apptune.paths.history_dir`).
HISTORY_DEFAULT = (
    "$APPTUNE_HISTORY, else $XDG_DATA_HOME/apptune/history, else ~/.local/share/apptune/history"
)


def history_option(p, what: str = "history directory") -> None:
    """``--history``, the one way every command takes the history's directory."""
    p.add_argument("--history", help=f"{what} (default {HISTORY_DEFAULT})")


def trial_history_options(p) -> None:
    """``--history`` and ``--no-history`` of a command that stores trials (tune, bisect)."""
    history_option(p, "history directory for the trials")
    p.add_argument(
        "--no-history", action="store_true", help="do not store the trials in the history"
    )
