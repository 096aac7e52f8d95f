"""The tuning space of ``apptune tune`` (``tuning/APP.yaml``) and the value file of
``apptune plan``."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from .base import Strict, env_names


# --------------------------------------------------------------------------- tuning
class TuneBaseline(Strict):
    environment: str
    variant: str


class TuneEnvKnob(Strict):
    #: Values to try; "" leaves the variable unset.
    values: list[str] = Field(min_length=1)
    #: Only when the build's axes (or the layout's ranks, threads) have one of these
    #: values (e.g. {blas: [openblas]}).
    when: dict[str, list[int | str]] = {}


class TuneBuild(Strict):
    environments: list[str] = Field(min_length=1)
    ladders: list[str] = Field(min_length=1)
    #: axis -> options to try (default: the recipe's default only).
    axes: dict[str, list[str]] = {}
    #: Flag sets appended to the ladder (C and Fortran); [] = none.
    extra_flags: list[list[str]] = [[]]


class TuneLayout(Strict):
    #: MPI ranks of the run (the tier's input derives e.g. HPL's P x Q from it).
    ranks: int = Field(ge=1)
    #: Threads per rank: OMP_NUM_THREADS and every *_NUM_THREADS the recipe pins,
    #: and that many cores per rank (apptune/placement.py).
    threads: int = Field(default=1, ge=1)
    #: Only with these build axis values, e.g. {blas: [mkl-threaded]} for threads > 1.
    when: dict[str, list[str]] = {}


class TuneRuntime(Strict):
    #: Ranks x threads per rank to try (default: the tier's ranks, one thread each).
    layouts: list[TuneLayout] = []
    #: Bindings to try: core, socket, none; "" = the launcher's default.
    binding: list[str] = []


Scalar = int | float | str


class TuneInputKnob(Strict):
    values: list[Scalar | dict[str, Scalar]] = Field(min_length=1)
    #: Only when the build's axes or the layout (ranks, threads) have one of these
    #: values, e.g. {ranks: [2]} for HPL's P x Q sets of two ranks.
    when: dict[str, list[Scalar]] = {}


class TuneTarget(Strict):
    name: str
    figure: str
    #: Divided by another figure of the same run ...
    per: str | None = None
    #: ... times the run's rank count (e.g. HPL over ranks x SingleDGEMM) ...
    per_ranks: bool = False
    #: ... or divided by the baseline's median of the same figure.
    over_baseline: bool = False
    goal: float

    @model_validator(mode="after")
    def _one(self):
        if (self.per is None) == (not self.over_baseline):
            raise ValueError(
                "give either 'per' (a figure of the same run) or 'over_baseline: true'"
            )
        return self


class TuningSpace(Strict):
    """tuning/APP.yaml: what ``apptune tune APP`` may change, and what it maximises."""

    app: str
    #: The tier whose input the knobs modify and whose reference verifies every candidate.
    tier: str = "ci"
    baseline: TuneBaseline
    #: --objective name -> figures; the score is the geometric mean of their ratios to
    #: the baseline (inverted for figures where lower is better).
    objectives: dict[str, list[str]] = {}
    build: TuneBuild
    #: Environment variables of the run (e.g. OPENBLAS_CORETYPE).
    env: dict[str, TuneEnvKnob] = {}
    #: Input parameters: name -> values, or a knob name -> {param: value} sets (e.g. P x Q);
    #: either as a list or as {values: [...], when: {...}}.
    inputs: dict[str, list[Scalar | dict[str, Scalar]] | TuneInputKnob] = {}
    #: Runtime placement: ranks x threads per rank, binding.
    runtime: TuneRuntime = TuneRuntime()
    targets: list[TuneTarget] = []

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        return env_names(v)

    def input_knobs(self) -> dict[str, TuneInputKnob]:
        return {
            k: v if isinstance(v, TuneInputKnob) else TuneInputKnob(values=v)
            for k, v in self.inputs.items()
        }


# ------------------------------------------------------------------------- plan values
class PlanValues(Strict):
    """The value file of ``apptune plan``: what finishing each application's job is worth
    (an application it does not name is not planned; without a file every job is worth 1)."""

    values: dict[str, float] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _positive(cls, v):
        bad = [k for k, x in v.items() if not x > 0 or x != x or x == float("inf")]
        if bad:
            raise ValueError(f"{bad[0]}: a value must be a number more than 0")
        return v
