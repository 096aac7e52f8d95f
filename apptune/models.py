"""Schemas of every data file apptune reads, as pydantic models.

Unknown fields are errors (``extra='forbid'``), so a typo in a recipe is a
one-line message naming the field rather than a silently ignored setting.
"""
from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"
SHA256_RE = r"^[0-9a-f]{64}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- recipes
class DebianSource(Strict):
    package: str = Field(pattern=NAME_RE)
    #: Debian source version, e.g. ``1.5.0-3``; the orig tarball is taken from it.
    version: str


class SourceSpec(Strict):
    #: File name of the tarball in the mirror and the cache.
    file: str = Field(pattern=r"^[^/]+$")
    sha256: str = Field(pattern=SHA256_RE)
    debian: DebianSource | None = None
    url: str | None = None
    #: Leading path components to drop when unpacking (the tarball's top directory).
    strip_components: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _one_origin(self):
        if (self.debian is None) == (self.url is None):
            raise ValueError("give exactly one of 'debian' or 'url'")
        return self


class Template(Strict):
    #: A jinja2 template under build-recipes/templates/.
    src: str
    #: Where the rendered file goes, relative to the source root.
    dest: str


class BuildSpec(Strict):
    system: Literal["make"]
    #: Directory to run make in, relative to the source root.
    directory: str = "."
    args: list[str] = []
    targets: list[str] = []
    jobs: int = Field(default=2, ge=1)
    templates: list[Template] = []
    #: Files the build must produce (relative to the source root); copied to the install dir.
    products: list[str] = Field(min_length=1)
    languages: list[Literal["c", "cxx", "fortran"]] = ["c"]
    #: Flags the source itself needs with every compiler and ladder (e.g. -fcommon).
    cflags: list[str] = []
    fflags: list[str] = []


class PatchWhen(Strict):
    #: Apply only when the MPI library implements at least this MPI standard.
    mpi_standard: str | None = Field(default=None, pattern=r"^>=\d+(\.\d+)?$")
    #: Apply only when an axis has one of these values, e.g. ``{fft: [fftw3]}``.
    axes: dict[str, list[str]] = {}


class PatchSpec(Strict):
    file: str = Field(pattern=r"^[^/]+\.(patch|diff)$")
    reason: str
    when: PatchWhen = PatchWhen()
    strip: int = Field(default=1, ge=0)


class AxisOption(Strict):
    #: Library key from site-config/libraries.yaml that this option links.
    library: str | None = None
    cppflags: list[str] = []


class PerFileOverride(Strict):
    #: Globs relative to the source root.
    files: list[str] = Field(min_length=1)
    #: Ladder whose flags replace the variant's ladder flags for these files.
    flags: str
    reason: str


class TierSpec(Strict):
    ranks: int = Field(default=2, ge=1)
    #: environment -> list of variant specs (``ladder[+axis=value...]``).
    variants: dict[str, list[str]] = Field(min_length=1)
    time_limit: str = "10m"


class Figure(Strict):
    field: str
    unit: str
    better: Literal["higher", "lower"]
    scale: float = 1.0


class OutputSpec(Strict):
    file: str
    format: Literal["keyvalue"]
    begin: str | None = None
    end: str | None = None


class OwnCheck(Strict):
    #: Regex that must (``min_count``) or must not (``forbid``) match in the output file.
    pattern: str
    min_count: int = 1
    forbid: bool = False
    message: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v):
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from None
        return v


class RunSpec(Strict):
    executable: str
    #: The figure that ranks variants in the report ("fastest correct variant").
    primary: str = "wall_time"
    args: list[str] = []
    env: dict[str, str] = {}
    output: OutputSpec
    figures: dict[str, Figure] = Field(min_length=1)
    own_checks: list[OwnCheck] = []
    #: Rate figures also reported per watt when energy is known (e.g. HPL: the Green500 measure).
    per_watt: list[str] = []


class Recipe(Strict):
    """build-recipes/APP.yaml"""
    name: str = Field(pattern=NAME_RE)
    version: str
    description: str
    source: SourceSpec
    build: BuildSpec
    patches: list[PatchSpec] = []
    #: Library/feature axes besides the flag ladder: axis -> option -> spec.
    axes: dict[str, dict[str, AxisOption]] = {}
    #: Default option per axis; ``environment`` means "what the environment provides".
    defaults: dict[str, str] = {}
    per_file: list[PerFileOverride] = []
    run: RunSpec
    tiers: dict[str, TierSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self):
        if self.run.primary != "wall_time" and self.run.primary not in self.run.figures:
            raise ValueError(f"run.primary: '{self.run.primary}' is not a figure "
                             f"(figures: {', '.join(self.run.figures)}, or wall_time)")
        for f in self.run.per_watt:
            if f not in self.run.figures:
                raise ValueError(f"run.per_watt: '{f}' is not a figure")
        for axis, default in self.defaults.items():
            if axis not in self.axes:
                raise ValueError(f"defaults.{axis}: no such axis (axes: {', '.join(self.axes) or 'none'})")
            if default != "environment" and default not in self.axes[axis]:
                raise ValueError(f"defaults.{axis}: '{default}' is not one of {sorted(self.axes[axis])}")
        for p in self.patches:
            for axis, values in p.when.axes.items():
                if axis not in self.axes:
                    raise ValueError(f"patch {p.file}: when.axes.{axis}: no such axis")
                bad = [v for v in values if v not in self.axes[axis]]
                if bad:
                    raise ValueError(f"patch {p.file}: when.axes.{axis}: {bad} not in {sorted(self.axes[axis])}")
        return self


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
    files: dict[str, str] = Field(min_length=1)
    parameters: dict[str, int | float | str | FromMemory | GridParam] = {}


# --------------------------------------------------------------------------- references
class FieldTolerance(Strict):
    value: float | None = None
    abs: float | None = Field(default=None, ge=0)
    rel: float | None = Field(default=None, ge=0)
    max: float | None = None
    min: float | None = None
    why: str | None = None

    @model_validator(mode="after")
    def _shape(self):
        if self.value is None and self.max is None and self.min is None:
            raise ValueError("give 'value' (with 'abs' and/or 'rel') or a 'max'/'min' bound")
        if self.value is not None and self.abs is None and self.rel is None:
            raise ValueError("'value' needs an 'abs' or 'rel' tolerance (0 for exact)")
        for name in ("value", "max", "min"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"'{name}' must be a finite number")
        return self


class ReferenceFile(Strict):
    app: str
    tier: str
    recorded: str
    fields: dict[str, FieldTolerance] = Field(min_length=1)
    #: "environment/variant" or "variant" -> reason: known wrong results, reported
    #: by ReFrame as expected failures (XFAIL), never hidden by a looser tolerance.
    xfail: dict[str, str] = {}


# --------------------------------------------------------------------------- baselines
class BaselineEntry(Strict):
    environment: str
    variant: str
    tier: str
    recorded: str
    figures: dict[str, float] = Field(min_length=1)


class Threshold(Strict):
    #: Allowed relative change in the bad direction, e.g. 0.3 = 30 % (below 1 for
    #: higher-is-better figures; lower-is-better ones, like latency, may allow more).
    regression: float = Field(gt=0, le=10)


class BaselineFile(Strict):
    app: str
    system: str
    #: Default and per-figure thresholds.
    thresholds: dict[str, Threshold] = Field(min_length=1)
    entries: list[BaselineEntry] = []

    @field_validator("thresholds")
    @classmethod
    def _has_default(cls, v):
        if "default" not in v:
            raise ValueError("needs a 'default' threshold")
        return v


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
