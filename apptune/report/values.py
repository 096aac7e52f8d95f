"""How the report names a variant and reads and prints a figure, for each of its steps."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .row import Row


def variant_key(r: Row) -> str:
    """A variant's name in the report: ``environment/variant`` (with its placement)."""
    return f"{r.environment}/{r.variant}"


def number_or_none(v):
    """A figure that is a number (not NaN), else None."""
    return (
        v if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else None
    )
