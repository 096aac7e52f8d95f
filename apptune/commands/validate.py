"""``apptune validate``: every recipe, input, reference, baseline and the site config."""

from __future__ import annotations

import sys

from .. import paths
from ..core.data import recipes


def cmd_validate(a) -> int:
    from ..core.validation import validate

    found = validate.problems(paths.root() / a.config)
    for p in found:
        print(f"apptune: error: {p}", file=sys.stderr)
    n = len(recipes.list_recipes())
    if found:
        print(
            f"apptune: validate: {len(found)} problem(s) in the data ({n} applications checked)",
            file=sys.stderr,
        )
        return 1
    print(
        f"apptune: all data files valid ({n} applications with their inputs, references "
        f"and baselines, the site config and the tuning spaces checked)"
    )
    return 0


def register(subparsers) -> None:
    """Add ``apptune validate``."""
    v = subparsers.add_parser(
        "validate", help="validate every recipe, input, reference and baseline"
    )
    v.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    v.set_defaults(func=cmd_validate)
