"""Schemas of every data file apptune reads, as pydantic models.

Unknown fields are errors (``extra='forbid'``), so a typo in a recipe is a
one-line message naming the field rather than a silently ignored setting.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .placement import TARGETS as _TARGETS
from .placement import PlacementError, spell

NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"
#: Figure names and units reach reports, pages and plots: letters, digits and a few marks.
FIGURE_NAME_RE = r"^[A-Za-z][A-Za-z0-9_.-]*$"
FIGURE_UNIT_RE = r"^[A-Za-z0-9 %/._()*^µ·-]*$"
SHA256_RE = r"^[0-9a-f]{64}$"


def _valid_regex(v: str) -> str:
    try:
        re.compile(v)
    except re.error as e:
        raise ValueError(f"not a valid regular expression: {e}") from None
    return v


#: What a process environment's variable is named (POSIX: letters, digits, underscores).
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_names(env: dict) -> dict:
    bad = [k for k in env if not ENV_NAME_RE.match(k)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is not an environment variable name (letters, digits and "
            "underscores, not starting with a digit)"
        )
    return env


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- recipes
class DebianSource(Strict):
    package: str = Field(pattern=NAME_RE)
    #: Debian source version, e.g. ``1.5.0-3``; the orig tarball is taken from it.
    version: str


class SourceSpec(Strict):
    #: File name of the tarball in the mirror and the cache.
    file: str | None = Field(default=None, pattern=r"^[^/]+$")
    sha256: str | None = Field(default=None, pattern=SHA256_RE)
    debian: DebianSource | None = None
    url: str | None = None
    #: Project-written source kept in this repository (e.g. ``src/mpi-micro``), pinned by
    #: git; it is packed into a reproducible tarball named by its content digest.
    path: str | None = Field(default=None, pattern=r"^[^/.][^\\]*$")
    #: Leading path components to drop when unpacking (the tarball's top directory).
    strip_components: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _one_origin(self):
        given = [k for k in ("debian", "url", "path") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'debian', 'url' or 'path'")
        if self.path is None and (self.file is None or self.sha256 is None):
            raise ValueError("a downloaded source needs 'file' and its pinned 'sha256'")
        if self.path is not None and (self.file is not None or self.sha256 is not None):
            raise ValueError("a 'path' source is pinned by the repository: no 'file'/'sha256'")
        return self


class SystemRequirements(Strict):
    """What the application needs from the system besides its environment's toolchain."""

    #: Debian packages (libraries and headers the build links, e.g. ScaLAPACK): installed by
    #: ci/bootstrap.sh; a build on a partition with ``extras.debian_packages`` is skipped,
    #: naming the package, when one is missing. On a cluster the environments' modules
    #: provide them instead.
    debian: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9+.-]+$")]] = []


class Template(Strict):
    #: A jinja2 template under build-recipes/templates/.
    src: str
    #: Where the rendered file goes, relative to the source root.
    dest: str


class BuildStep(Strict):
    """One command of a multi-step build; every word is a jinja2 template (plan + ``vars``)."""

    #: Directory to run in, relative to the source root.
    directory: str = "."
    #: ``make -jJOBS`` followed by these words (variables, ``-f FILE``, targets) ...
    make: list[str] | None = None
    #: ... or any other command, e.g. ``[./configure, ...]`` (an argument list, never a shell).
    command: list[str] | None = Field(default=None, min_length=1)
    #: Run this step with one job even when ``jobs`` > 1 (e.g. Fortran module races).
    serial: bool = False

    @model_validator(mode="after")
    def _one_kind(self):
        if (self.make is None) == (self.command is None):
            raise ValueError("give exactly one of 'make' or 'command'")
        return self


class Product(Strict):
    #: Path relative to the source root (a jinja2 template, e.g. ``examl/examl{{ vars.suffix }}``).
    src: str
    #: Name in the build's install directory (what ``run.executable`` and inputs refer to).
    name: str = Field(pattern=r"^[^/]+$")


class BuildSpec(Strict):
    #: make: a Makefile (``make`` steps or ``command`` steps); cmake: ``command`` steps
    #: that configure and build (the compiler wrappers as CMAKE_<LANG>_COMPILER).
    system: Literal["make", "cmake"]
    #: Single-step builds: directory, make arguments and targets (``steps`` for more).
    directory: str = "."
    args: list[str] = []
    targets: list[str] = []
    #: Multi-step builds (e.g. the program and its input parser), run in order.
    steps: list[BuildStep] = []
    jobs: int = Field(default=2, ge=1)
    templates: list[Template] = []
    #: Files the build must produce (relative to the source root); copied to the install dir
    #: (a plain path keeps its base name; ``{src, name}`` renames).
    products: list[str | Product] = Field(min_length=1)
    languages: list[Literal["c", "cxx", "fortran"]] = ["c"]
    #: Flags the source itself needs with every compiler and ladder (e.g. -fcommon).
    cflags: list[str] = []
    fflags: list[str] = []
    #: ... and those one compiler family needs (gfortran's -fallow-argument-mismatch,
    #: flang-new's -flang-experimental-exec to link), keyed by family.
    family_flags: dict[str, FamilyFlags] = {}
    #: Builds known to fail, e.g. a compiler that cannot compile the source yet. The
    #: build is reported as an expected failure (XFAIL) when its log matches ``match``;
    #: any other failure, or a success, is reported as such.
    expected_failures: list[ExpectedBuildFailure] = []


class FamilyFlags(Strict):
    cflags: list[str] = []
    fflags: list[str] = []
    #: Link flags (before the libraries), e.g. ``-flang-experimental-exec``.
    ldflags: list[str] = []


class ExpectedBuildFailure(Strict):
    #: ReFrame environments (e.g. ``llvm``) this applies to.
    environments: list[str] = Field(min_length=1)
    #: Variants (globs, ``*`` for all).
    variants: list[str] = ["*"]
    #: A regular expression the build log must contain (the compiler's own message).
    match: str
    reason: str

    @field_validator("match")
    @classmethod
    def _regex(cls, v):
        return _valid_regex(v)


BuildSpec.model_rebuild()


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
    #: Values for templates (build steps, products, makefile templates) as ``vars.NAME``.
    vars: dict[str, str] = {}


class PerFileOverride(Strict):
    #: Globs relative to the source root.
    files: list[str] = Field(min_length=1)
    #: Ladder whose flags replace the variant's ladder flags for these files ...
    flags: str | None = None
    #: ... or explicit flags (e.g. upstream's ``-O1`` for one file), replacing them.
    cflags: list[str] | None = None
    fflags: list[str] | None = None
    reason: str

    @model_validator(mode="after")
    def _one_kind(self):
        explicit = self.cflags is not None or self.fflags is not None
        if (self.flags is None) == (not explicit):
            raise ValueError("give either 'flags' (a ladder name) or explicit 'cflags'/'fflags'")
        return self


def duration_seconds(spec: str) -> float:
    """A time limit as ReFrame reads it (``5m``, ``1h30m``, ``90s``, ``2d``, or seconds),
    by ReFrame's own conversion; ValueError for what it refuses and for a limit that is
    zero or not finite (ReFrame would then use the partition's limit, silently)."""
    from reframe.utility.typecheck import Duration  # the type of a test's time_limit

    try:
        v = Duration(str(spec).strip())
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"'{spec}' is not a time limit ReFrame reads ({e}); write e.g. "
            "5m, 1h30m, 90s, 2d or a number of seconds"
        ) from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"'{spec}' is not a positive, finite time limit")
    return float(v)


class TierSpec(Strict):
    ranks: int = Field(default=2, ge=1)
    #: environment -> list of variant specs (``ladder[+axis=value...]``).
    variants: dict[str, list[str]] = Field(min_length=1)
    #: ReFrame's time limit of the run: ``5m``, ``1h30m``, ``90s``, ``2d`` or seconds.
    time_limit: str = "10m"

    @field_validator("time_limit", mode="before")
    @classmethod
    def _duration(cls, v):
        duration_seconds(v)
        return str(v)


class Figure(Strict):
    field: str
    unit: str = Field(pattern=FIGURE_UNIT_RE)
    better: Literal["higher", "lower"]
    scale: float = 1.0
    #: Divide by another extracted field (e.g. inference time / search iterations).
    per: str | None = None
    #: The output may lack it where the system cannot measure it (e.g. other-socket
    #: latency on a one-socket node): no performance variable then, instead of a failure.
    optional: bool = False
    #: The figure takes values on a grid (a message size, a count): one run's step from a
    #: grid point to the next is no evidence of a change, so a single run is not judged
    #: against its baseline (the history's change points judge it). Set by itself for a
    #: curve's ``x_at_fraction_of_max`` and ``count``.
    discrete: bool = False


class RegexField(Strict):
    #: Regex whose first group is the value (``occurrence: count`` counts matches instead).
    pattern: str
    occurrence: Literal["first", "last", "count"] = "last"

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v):
        return _valid_regex(v)


class CurveDerived(Strict):
    """A figure computed from a curve: ``y`` at the first/last row, its max/min, or the
    first ``x`` where ``y`` reaches ``fraction`` of its maximum (NetPIPE's half-peak size),
    or the number of rows (``count``)."""

    op: Literal["first", "last", "max", "min", "count", "x_at_fraction_of_max"]
    y: str
    x: str | None = None
    fraction: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _shape(self):
        if self.op == "x_at_fraction_of_max" and (self.x is None or self.fraction is None):
            raise ValueError("op x_at_fraction_of_max needs 'x' and 'fraction'")
        return self


class CurvePlot(Strict):
    x: str
    y: list[str] = Field(min_length=1)
    xlog: bool = True
    ylog: bool = False


class OutputSpec(Strict):
    #: File in the run's stage directory; ``stdout`` means the job's standard output.
    file: str
    #: keyvalue: ``key=value`` lines (between ``begin``/``end``); regex: one field per
    #: pattern; newick_rf: Robinson-Foulds distance of the tree in ``file`` to the stored
    #: tree ``reference`` (under reference/); curve: whitespace columns, figures derived.
    format: Literal["keyvalue", "regex", "newick_rf", "curve"]
    begin: str | None = None
    end: str | None = None
    patterns: dict[str, RegexField] = {}
    #: newick_rf: stored tree (relative to reference/; ``{tier}`` is replaced) and
    #: the field name the distance is stored under.
    reference: str | None = None
    field: str | None = None
    #: curve: column names, the curve's name (data file ``curves/NAME.csv``), derived fields.
    columns: list[str] = []
    name: str | None = None
    derived: dict[str, CurveDerived] = {}
    plot: CurvePlot | None = None

    @model_validator(mode="after")
    def _shape(self):
        need = {
            "regex": ["patterns"],
            "newick_rf": ["reference", "field"],
            "curve": ["columns", "name"],
        }.get(self.format, [])
        for n in need:
            if not getattr(self, n):
                raise ValueError(f"format {self.format} needs '{n}'")
        for n, d in self.derived.items():
            for col in (d.y, d.x):
                if col is not None and col not in self.columns:
                    raise ValueError(f"derived.{n}: column '{col}' not in columns {self.columns}")
        if self.plot:
            for col in [self.plot.x, *self.plot.y]:
                if col not in self.columns:
                    raise ValueError(f"plot: column '{col}' not in columns {self.columns}")
        return self


class PreRun(Strict):
    """A step of the run before the measured program (e.g. ExaML's alignment parser)."""

    #: Argument list; words are jinja2 templates with the input parameters.  The first word
    #: names a build product (installed name) or a command on PATH.
    command: list[str] = Field(min_length=1)
    #: Start it with the job's parallel launcher (e.g. NetPIPE's integrity pass).
    launch: bool = False
    #: Redirect its standard output into this file of the stage directory.
    stdout: str | None = Field(default=None, pattern=r"^[^/]+$")
    #: Its standard input: a file of the run directory that the tier's input makes
    #: (``inputs/APP/<tier>/input.yaml`` ``files`` or ``from_build``).
    stdin: str | None = Field(default=None, pattern=r"^[^/]+$")


class OwnCheck(Strict):
    #: Regex that must (``min_count``) or must not (``forbid``) match in the output file.
    pattern: str
    #: File searched (default: the first output's file; ``stdout``: the job's output).
    file: str | None = None
    min_count: int = 1
    forbid: bool = False
    message: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v):
        return _valid_regex(v)


#: What a recipe placement is spelled for (apptune/placement.py ``TARGETS``): srun, and the
#: mpirun/mpiexec of each MPI library.
PlacementTarget = Literal["srun", "openmpi", "mpich", "intelmpi"]


class Placement(Strict):
    """A named runtime placement of the recipe (``run.placements``): what the ranks get.
    apptune spells it for the partition's launcher (apptune/placement.py) and checks the
    CPUs the ranks really could run on."""

    #: ``core``: each rank on its own core(s) (``threads_per_rank`` of them); ``socket``: on
    #: one socket; ``none``: wherever the OS puts it. Unset: the launcher's default.
    bind: Literal["core", "socket", "none"] | None = None
    #: ``packed``: consecutive ranks on neighbouring cores; ``spread``: round robin over
    #: a node's sockets. Unset: the launcher's default.
    distribution: Literal["packed", "spread"] | None = None
    #: Cores per rank, and the thread count of OpenMP and every pool ``run.env`` pins.
    threads_per_rank: int = Field(default=1, ge=1)
    #: Launchers (``srun``) or MPI libraries (their mpirun/mpiexec) this placement cannot run
    #: under, each with the reason; a check there is skipped, saying it.
    unsupported: dict[PlacementTarget, str] = {}

    @model_validator(mode="before")
    @classmethod
    def _not_launcher_options(cls, data):
        if isinstance(data, dict):
            old = [k for k, v in data.items() if k in _TARGETS and isinstance(v, list)]
            if old:
                raise ValueError(
                    f"launcher options ({', '.join(old)}) are not a placement: say what the "
                    "ranks get (bind, distribution, threads_per_rank); apptune spells it for "
                    "srun and for each MPI library's mpirun"
                )
        return data

    @model_validator(mode="after")
    def _says_something(self):
        if self.bind is None and self.distribution is None and self.threads_per_rank == 1:
            raise ValueError("give bind, distribution or threads_per_rank (or leave it out)")
        for k, why in self.unsupported.items():
            if not why.strip():
                raise ValueError(f"unsupported.{k}: say why it cannot run there")
        return self


class RunSpec(Strict):
    #: Installed name of a build product.
    executable: str
    #: The figure that ranks variants in the report ("fastest correct variant").
    primary: str = "wall_time"
    #: Words are jinja2 templates with the input parameters.
    args: list[str] = []
    #: The program's standard input (``READ(5,*)``, ``./prog < input``): a file of the run
    #: directory that the tier's input makes (its ``files`` or ``from_build``), opened and
    #: given to the program as a file descriptor, never through a shell.
    stdin: str | None = Field(default=None, pattern=r"^[^/]+$")
    #: Environment variables of the run: name -> value.
    env: dict[str, str] = {}
    prerun: list[PreRun] = []
    #: Runtime placements (a ReFrame parameter of the check): name -> what the ranks get
    #: (:class:`Placement`), spelled for every launcher and MPI library.
    placements: dict[str, Placement] = {}
    #: Where the fields come from: one output spec or several (field names must not clash).
    output: OutputSpec | list[OutputSpec]
    figures: dict[str, Figure] = Field(min_length=1)
    own_checks: list[OwnCheck] = []
    #: Rate figures also reported per watt when energy is known (e.g. HPL: the Green500 measure).
    per_watt: list[str] = []

    @field_validator("figures")
    @classmethod
    def _figure_names(cls, v):
        for name in v:
            if not re.match(FIGURE_NAME_RE, name):
                raise ValueError(
                    f"figure name {name!r}: use letters, digits, '_', '.', '-' "
                    "(it names columns, plots and pages)"
                )
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        return _env_names(v)

    @property
    def outputs(self) -> list[OutputSpec]:
        return list(self.output) if isinstance(self.output, list) else [self.output]


def _spelled_everywhere(name: str, want: Placement) -> None:
    """Every recipe placement runs under srun and every MPI library's mpirun, or says why not."""
    for to in _TARGETS:
        if to in want.unsupported:
            continue
        try:
            spell(want, "srun" if to == "srun" else "mpirun", to)
        except PlacementError as e:
            raise ValueError(
                f"run.placements.{name}: cannot be spelled for {to} ({e}); "
                f"say why under unsupported.{to}"
            ) from None


class Recipe(Strict):
    """build-recipes/APP.yaml"""

    name: str = Field(pattern=NAME_RE)
    version: str
    description: str
    source: SourceSpec
    #: What the build and the run need from the system (``debian`` packages).
    requires: SystemRequirements = SystemRequirements()
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
            raise ValueError(
                f"run.primary: '{self.run.primary}' is not a figure "
                f"(figures: {', '.join(self.run.figures)}, or wall_time)"
            )
        names = [
            p.name if isinstance(p, Product) else p.rsplit("/", 1)[-1] for p in self.build.products
        ]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"build.products: installed name {dup[0]!r} used twice (give 'name')")
        if self.run.executable not in names:
            raise ValueError(
                f"run.executable: '{self.run.executable}' is not a build product "
                f"(products: {', '.join(names)})"
            )
        if self.build.steps and (
            self.build.args or self.build.targets or self.build.directory != "."
        ):
            raise ValueError("build: give 'steps' or 'directory'/'args'/'targets', not both")
        for name, want in self.run.placements.items():
            _spelled_everywhere(name, want)
        for f in self.run.per_watt:
            if f not in self.run.figures:
                raise ValueError(f"run.per_watt: '{f}' is not a figure")
        for axis, default in self.defaults.items():
            if axis not in self.axes:
                raise ValueError(
                    f"defaults.{axis}: no such axis (axes: {', '.join(self.axes) or 'none'})"
                )
            if default != "environment" and default not in self.axes[axis]:
                raise ValueError(
                    f"defaults.{axis}: '{default}' is not one of {sorted(self.axes[axis])}"
                )
        for p in self.patches:
            for axis, values in p.when.axes.items():
                if axis not in self.axes:
                    raise ValueError(f"patch {p.file}: when.axes.{axis}: no such axis")
                bad = [v for v in values if v not in self.axes[axis]]
                if bad:
                    raise ValueError(
                        f"patch {p.file}: when.axes.{axis}: {bad} not in {sorted(self.axes[axis])}"
                    )
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
    files: dict[str, str] = {}
    #: destination file name -> installed build product (data shipped in the source
    #: tarball, e.g. ExaML's testData/49 or QE's pseudopotentials)
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


class ReferenceFile(Strict):
    app: str
    tier: str
    recorded: str
    #: Empty only in the skeleton ``apptune new`` writes: a run against it fails ("no
    #: reference yet") until ``apptune bless --new RUN`` writes the first fields.
    fields: dict[str, FieldTolerance]
    #: "environment/variant" or "variant" -> reason: known wrong results, reported
    #: by ReFrame as expected failures (XFAIL), never hidden by a looser tolerance.
    xfail: dict[str, str] = {}


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
    #: their median, at its upper 80 % confidence bound (apptune/baselines.py run_noise);
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
    #: environment (apptune/changes.py ``facts``), so that a verdict says what changed
    #: since. Absent in a baseline recorded before baselines kept it.
    provenance: dict[str, str] | None = None


class BaselineFile(Strict):
    app: str
    system: str
    #: Machine id -> fingerprint; an entry applies only on a machine with that fingerprint.
    machines: dict[str, Machine] = Field(min_length=1)
    entries: list[BaselineEntry] = []

    @model_validator(mode="after")
    def _consistent(self):
        from .machine import machine_id

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
        return _env_names(v)

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


# ------------------------------------------------------------------------- run records
class RunVerification(BaseModel):
    """The verification part of a run record: always a verdict and one sentence; the
    per-field comparison when there was output to compare (apptune/verify.py)."""

    model_config = ConfigDict(extra="allow")
    ok: bool
    summary: str


class RunRecord(BaseModel):
    """``apptune-result.json``: one run of one input, as the checks (apptune/rfm/check.py) and tune
    and bisect trials (apptune/localrun.py) write it through :func:`apptune.run.write_record`
    and everything that reads a run (report, history, bless) reads it through
    :func:`apptune.records.load_record`. A run that produced nothing to verify has only its
    identity, provenance, energy and verification."""

    # unknown keys are refused by the writer; a reader keeps those of newer versions
    model_config = ConfigDict(extra="allow")

    app: str
    tier: str
    #: The run variant: the build variant, plus ``@placement`` parts.
    variant: str | None
    environment: str | None
    build_variant: str | None = None
    placement: str | None = None
    system: str | None = None
    partition: str | None = None
    #: The ReFrame test's unique name; a trial's is ``trial`` (``localrun.TRIAL_TEST``).
    test: str | None = None
    ranks: int | None = None
    input: dict = {}
    placement_layout: dict | None = None
    #: How the program was launched: ``launcher`` (the timed step's arguments before the
    #: program), ``env_vars`` and ``modules`` the site's environment and the runner set.
    launch: dict | None = None
    #: The CPU frequency the run asked for, as Slurm's ``--cpu-freq`` takes it (kHz, or
    #: ``low``, ``high``, ...); None: the node's own. Runs of one variant at several
    #: frequencies are what ``apptune plan`` weighs time against energy with.
    cpu_freq: str | int | None = None
    #: The job: scheduler, job id, final state (and nodes on a cluster); a trial's job is
    #: its runner, started on this node: scheduler ``local``, the runner's process id.
    job: dict | None = None
    #: A tune or bisect candidate, not a check of a tier.
    trial: bool = False
    provenance: dict | None = None
    energy: dict | None = None
    quality: dict | None = None
    #: The CPUs each rank of the program seen on the job's first node could run on
    #: (apptune/procfs.py ``observe_binding``), judged against ``placement_layout.binding``.
    binding: dict | None = None
    machine: dict | None = None
    machine_id: str | None = None
    #: The runner's summary: exit status, failed step, wall time, start time.
    run: dict | None = None
    values: dict | None = None
    curves: dict | None = None
    figures: dict[str, float | None] | None = None
    verification: RunVerification
    #: Each figure against this machine's baseline (apptune/baselines.py), checks only.
    baseline: dict | None = None
