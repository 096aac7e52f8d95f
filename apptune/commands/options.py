"""Options more than one command takes."""

from __future__ import annotations


def trial_history_options(p) -> None:
    """``--history`` and ``--no-history`` of a command that stores trials (tune, bisect)."""
    p.add_argument(
        "--history",
        help="history directory for the trials (default $APPTUNE_HISTORY or "
        "~/.local/share/apptune/history)",
    )
    p.add_argument(
        "--no-history", action="store_true", help="do not store the trials in the history"
    )
