"""The other data files of an application and of the site: inputs
(``inputs/APP/TIER/input.yaml``), references (``reference/APP/TIER.yaml``), baselines
(``reference/baselines/SYSTEM/APP.yaml``), the flag ladders and libraries of the site."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import Strict


# --------------------------------------------------------------------------- inputs
class FromMemory(Strict):
    #: Fraction of the node's memory the problem may use.
    fraction: float = Field(gt=0, le=0.9)
    #: Bytes per element and elements per unit (N*N doubles for HPL: power=2).
    element_bytes: int = 8
    power: int = Field(default=2, ge=1, le=3)
    multiple_of: int = Field(default=1, ge=1)
    minimum: int = 1


class GridParam(Strict):
    #: One side of the squarest P x Q grid for the run's rank count (P <= Q).
    grid: Literal["P", "Q"]


class InputSpec(Strict):
    description: str
    #: destination file name -> template under this input directory
    files: dict[str, str] = {}
    #: destination file name -> installed build product (data shipped in the source
    #: tarball, e.g. ExaML's testData/49 or QE's pseudopotentials), or ``tree/PATH``: a
    #: file or directory of the build's install tree (``build.tree.paths``)
    from_build: dict[str, str] = {}
    #: What the input stands for (ci inputs name the nightly input they reduce).
    stands_for: str | None = None
    parameters: dict[str, int | float | str | FromMemory | GridParam] = {}


# --------------------------------------------------------------------------- references
class FieldTolerance(Strict):
    value: float | None = None
    abs: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    rel: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max: float | None = None
    min: float | None = None
    why: str | None = None
    #: Input parameters (inputs/APP/<tier>/input.yaml) the value is for, e.g. ``[N]`` for
    #: HPL's matrix size: a run with another value of one of them (``apptune tune``'s
    #: input knobs) does not compare this field and says so.
    depends_on: list[str] = []

    @model_validator(mode="after")
    def _shape(self):
        if self.value is None and self.max is None and self.min is None:
            raise ValueError("give 'value' (with 'abs' and/or 'rel') or a 'max'/'min' bound")
        if self.value is not None and self.abs is None and self.rel is None:
            raise ValueError("'value' needs an 'abs' or 'rel' tolerance (0 for exact)")
        for name in ("value", "max", "min"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name}: must be a finite number (got {v})")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min: {self.min} is above max {self.max}: no value can pass")
        return self


class KnownWrong(Strict):
    """A known-wrong result of a variant (an expected failure): why, and what must fail."""

    reason: str
    #: What must fail, and nothing else: fields of this reference (shell-style patterns:
    #: ``ft_sum_*``) and the recipe's own checks by the file they read (``stdout``: the job's
    #: output; ``exit status``: the program's). A run that fails otherwise (another field, a
    #: crash, no output at all) is a failure, not the expected one.
    fails: list[str] = Field(min_length=1)


class ReferenceFile(Strict):
    app: str
    tier: str
    recorded: str
    #: Empty only in the skeleton ``apptune new`` writes: a run against it fails ("no
    #: reference yet") until ``apptune bless --new RUN`` writes the first fields.
    fields: dict[str, FieldTolerance]
    #: "environment/variant" or "variant" -> its known-wrong result: reported by ReFrame as
    #: an expected failure (XFAIL) when exactly what it names fails, never hidden by a
    #: looser tolerance.
    xfail: dict[str, KnownWrong] = {}


# --------------------------------------------------------------------------- baselines
class Machine(Strict):
    """A machine fingerprint (apptune/machine.py): the key fields decide whether a
    baseline applies; ``kernel`` is recorded, not matched."""

    cpu_vendor: str
    cpu_model: str
    cpu_id: str
    isa: list[str]
    sockets: int = Field(ge=1)
    cores_per_socket: int = Field(ge=1)
    threads_per_core: int = Field(ge=1)
    cpus: int = Field(ge=1)
    memory_gib: int = Field(ge=0)
    hypervisor: str
    kernel: str | None = None


def _positive_finite(v: float, what: str) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number, not {v}")
    if v <= 0:
        raise ValueError(f"{what} must be positive, not {v}")
    return v


class BaselineFigure(Strict):
    #: Median of the clean runs.
    value: float
    #: Relative noise of one run on this machine: the clean runs' standard deviation over
    #: their median, at its upper 80 % confidence bound (apptune/core/judge/baselines.py run_noise);
    #: absent when fewer than 3 runs.
    noise: float | None = Field(default=None, ge=0)
    #: Clean runs the value is the median of.
    runs: int = Field(ge=1)
    #: Sessions (ReFrame runs, e.g. nights) the runs came from.
    sessions: int | None = Field(default=None, ge=1)
    #: Relative noise between sessions: the standard deviation of the sessions' medians
    #: over their median, at its upper 80 % confidence bound; absent with fewer than 3
    #: sessions. It holds what one run's noise cannot: the level moving from night to night.
    between: float | None = Field(default=None, ge=0)

    @field_validator("value")
    @classmethod
    def _value(cls, v):
        return _positive_finite(v, "value")

    @field_validator("noise", "between")
    @classmethod
    def _noise(cls, v):
        if v is not None and not math.isfinite(v):
            raise ValueError(f"noise must be a finite number, not {v}")
        return v


class BaselineEntry(Strict):
    #: Id of the machine (``machines``) the figures were measured on.
    machine: str
    environment: str
    variant: str
    tier: str
    recorded: str
    figures: dict[str, BaselineFigure] = Field(min_length=1)
    #: What the runs were: compilers, flags, libraries, patches, input, launcher and site
    #: environment (apptune/core/judge/changes.py ``facts``), so that a verdict says what changed
    #: since. Absent in a baseline recorded before baselines kept it.
    provenance: dict[str, str] | None = None
    #: The state of the node during the runs, their medians (apptune/core/judge/causes.py
    #: ``condition``): ``outside`` and ``steal``, shares of its CPU time, ``load`` per CPU;
    #: a change of it is one more candidate cause of a verdict. Absent before it was kept.
    quality: dict[str, float] | None = None


class BaselineFile(Strict):
    app: str
    system: str
    #: Machine id -> fingerprint; an entry applies only on a machine with that fingerprint.
    machines: dict[str, Machine] = Field(min_length=1)
    entries: list[BaselineEntry] = []

    @model_validator(mode="after")
    def _consistent(self):
        from ..machine import machine_id

        for mid, fp in self.machines.items():
            want = machine_id(fp.model_dump())
            if mid != want:
                raise ValueError(
                    f"machines.{mid}: the id does not match its fingerprint "
                    f"(the fingerprint's id is {want}); do not edit fingerprints by hand"
                )
        seen = set()
        for i, e in enumerate(self.entries):
            if e.machine not in self.machines:
                raise ValueError(
                    f"entries[{i}].machine: '{e.machine}' is not one of machines "
                    f"({', '.join(self.machines)})"
                )
            key = (e.machine, e.environment, e.variant, e.tier)
            if key in seen:
                raise ValueError(
                    f"entries[{i}]: a second entry for {e.environment}/{e.variant} "
                    f"tier {e.tier} on machine {e.machine}"
                )
            seen.add(key)
        return self


# --------------------------------------------------------------------------- site
class Ladder(Strict):
    cflags: list[str] = []
    fflags: list[str] = []
    description: str = ""


class FlagLadders(Strict):
    #: compiler family -> ladder name -> flags
    families: dict[str, dict[str, Ladder]] = Field(min_length=1)


class Library(Strict):
    description: str = ""
    cppflags: list[str] = []
    ldflags: list[str] = []
    #: How to find the library's version for provenance: a Debian or PyPI package.
    debian_package: str | None = None
    pypi_package: str | None = None


class Libraries(Strict):
    libraries: dict[str, Library] = Field(min_length=1)
