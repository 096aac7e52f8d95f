"""Planted faults (``reference/APP/sensitivity/faults.yaml``) and what the verification saw of
each (``reference/APP/sensitivity/seen.yaml``, written by ``apptune sensitivity APP``).

A fault is a mutation of the application's source (a patch under ``patches/APP/faults/``,
applied after the recipe's own) or of its input (parameters of the tier's input set to other
values); a sweep changes one physical parameter of the input by growing relative amounts to
find the smallest change the reference sees."""

from __future__ import annotations

import datetime
import math
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from .base import NAME_RE, Strict

#: A fault's patch: a file name under ``patches/APP/faults/``.
PATCH_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.patch$"

Scalar = int | float | str


def _iso(v):
    """A date YAML read as one (2026-11-28 unquoted) is the same date written out."""
    return v.isoformat() if isinstance(v, datetime.date) else v


Day = Annotated[str, BeforeValidator(_iso)]


class Fault(Strict):
    #: What is planted and where, in a sentence (the docs' "catches" and "cannot see" name it).
    what: str = Field(min_length=1)
    #: A source mutation: a patch of ``patches/APP/faults/`` (``-p1``, ``--fuzz=0``, after the
    #: recipe's patches), one file and a few lines of a routine the run goes through.
    patch: str | None = Field(default=None, pattern=PATCH_RE)
    #: An input mutation: parameters of the tier's input (``inputs/APP/TIER/input.yaml``)
    #: set to these values.
    set: dict[str, Scalar] = {}

    @model_validator(mode="after")
    def _one_kind(self):
        if (self.patch is None) == (not self.set):
            raise ValueError("give either 'patch' (a source mutation) or 'set' (an input one)")
        return self


class Sweep(Strict):
    #: The physical quantity the parameter is, with its unit (the docs name it so).
    what: str = Field(min_length=1)
    #: Relative changes tried, in increasing order (0.01: 1 % more than the tier's value).
    steps: list[float] = Field(default=[1e-4, 1e-3, 1e-2, 1e-1], min_length=1)
    #: Bisections (on a log scale) between the largest change not seen and the smallest seen.
    bisect: int = Field(default=3, ge=0, le=10)

    @field_validator("steps")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if any(not math.isfinite(s) or s == 0 for s in v):
            raise ValueError("each step is a finite relative change other than 0")
        if any(abs(b) <= abs(a) for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("steps grow: each larger than the one before")
        return v


class FaultsFile(Strict):
    app: str
    #: The tier whose input and reference the faults are planted in and judged by.
    tier: str = "ci"
    #: The clean build the faults are planted in: an environment and a variant the tier lists.
    environment: str
    variant: str
    faults: dict[str, Fault] = Field(min_length=1)
    #: Input parameters (of the tier's input) swept to find the smallest change seen.
    sweeps: dict[str, Sweep] = {}

    @field_validator("faults")
    @classmethod
    def _names(cls, v: dict) -> dict:
        import re

        bad = [k for k in v if not re.match(NAME_RE, k)]
        if bad:
            raise ValueError(f"{bad[0]!r}: a fault's name is lower case letters, digits, _ . -")
        return v


# --------------------------------------------------------------------------- what was seen
class Seen(Strict):
    """One faulted run as the verification judged it, with what it read: the test suite
    judges the stored values again against the current reference."""

    #: sha256 of the fault's definition (its entry, its patch): another definition is stale.
    digest: str
    caught: bool
    #: What failed: fields of the reference, the recipe's own checks by the file they read,
    #: ``exit status`` (the run crashed), ``build`` (the mutation did not compile).
    by: list[str] = []
    #: The verification's summary line.
    summary: str
    #: The largest share of its tolerance a compared field used (1: at the limit).
    used: float | None = None
    #: The field that used it.
    closest: str | None = None
    #: Every reference field's value as the run gave it (None: missing from the output).
    values: dict[str, Scalar | None] = {}
    #: Per file the recipe's own checks read: the lines their patterns matched.
    lines: dict[str, str] = {}
    #: Why the run did not end well (exit status, a crash), if it did not.
    crash: str | None = None
    #: When (a date) and where (a machine id) it ran.
    date: Day
    machine: str | None = None


class SweepStep(Strict):
    change: float
    value: Scalar
    caught: bool
    by: list[str] = []
    used: float | None = None
    closest: str | None = None


class SweepSeen(Strict):
    digest: str
    base: Scalar
    steps: list[SweepStep]
    #: The smallest change seen (its run, judged again by the tests); None: none was.
    smallest: float | None = None
    smallest_run: Seen | None = None


class SensitivityFile(Strict):
    app: str
    tier: str
    environment: str
    variant: str
    #: The command that wrote it.
    command: str
    #: The clean build's own run: it verified (else nothing here would mean anything).
    clean: str
    date: Day
    machine: str | None = None
    faults: dict[str, Seen] = {}
    sweeps: dict[str, SweepSeen] = {}
