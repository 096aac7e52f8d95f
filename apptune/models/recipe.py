"""The recipe (``build-recipes/APP.yaml``): source, build, patches, axes, tiers, figures,
outputs, placements and the run."""

from __future__ import annotations

import datetime
import math
import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ..constants import STACK_LIMIT_PATTERN
from ..placement import TARGETS as _TARGETS
from ..placement import PlacementError, spell
from .base import (
    FIGURE_NAME_RE,
    FIGURE_UNIT_RE,
    NAME_RE,
    OneLine,
    Strict,
    env_names,
    valid_regex,
)
from .install import BuildEstimate, EnvFile, Install, InstallTree
from .scratch import RunScratchSpec
from .source import SourceSpec, SystemRequirements


# --------------------------------------------------------------------------- recipes
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
    #: What the run needs beside the products (libraries, ``etc/``), kept as a tree.
    tree: InstallTree | None = None
    #: How long a first build takes when none was recorded on this machine.
    estimate: BuildEstimate | None = None
    languages: list[Literal["c", "cxx", "fortran"]] = ["c"]
    #: Flags the source itself needs with every compiler and ladder (e.g. -fcommon).
    cflags: list[OneLine] = []
    fflags: list[OneLine] = []
    #: ... and those one compiler family needs (gfortran's -fallow-argument-mismatch,
    #: flang-new's -flang-experimental-exec to link), keyed by family.
    family_flags: dict[str, FamilyFlags] = {}
    #: A shell file that sets up the build's environment (OpenFOAM's ``etc/bashrc``), read
    #: after the templates are written; its variables reach every build step.
    env_file: EnvFile | None = None
    #: Builds known to fail, e.g. a compiler that cannot compile the source yet. The
    #: build is reported as an expected failure (XFAIL) when its log matches ``match``;
    #: any other failure, or a success, is reported as such.
    expected_failures: list[ExpectedBuildFailure] = []


class FamilyFlags(Strict):
    cflags: list[OneLine] = []
    fflags: list[OneLine] = []
    #: Link flags (before the libraries), e.g. ``-flang-experimental-exec``.
    ldflags: list[OneLine] = []


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
        return valid_regex(v)


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
    cppflags: list[OneLine] = []
    #: Compiler flags this option adds to every compile line, checked there like the
    #: recipe's own (``-fno-exceptions`` with the patch that lets the code compile so).
    cflags: list[OneLine] = []
    #: Values for templates (build steps, products, makefile templates) as ``vars.NAME``.
    vars: dict[str, OneLine] = {}
    #: CPU flags (as /proc/cpuinfo names them, e.g. ``avx512f``) the option's code needs:
    #: on a node without one its builds and runs are skipped, saying which flag is missing.
    cpu: list[Annotated[str, Field(pattern=r"^[a-z0-9_]+$")]] = []


class PerFileOverride(Strict):
    #: Globs relative to the source root.
    files: list[str] = Field(min_length=1)
    #: Ladder whose flags replace the variant's ladder flags for these files ...
    flags: str | None = None
    #: ... or explicit flags (e.g. upstream's ``-O1`` for one file), replacing them.
    cflags: list[OneLine] | None = None
    fflags: list[OneLine] | None = None
    reason: str

    @model_validator(mode="after")
    def _one_kind(self):
        explicit = self.cflags is not None or self.fflags is not None
        if (self.flags is None) == (not explicit):
            raise ValueError("give either 'flags' (a ladder name) or explicit 'cflags'/'fflags'")
        return self


# ReFrame's Duration (reframe.utility.typecheck), the type of a test's time_limit, reads a
# number of seconds or <days>d<hours>h<minutes>m<seconds>s. Its rule is written here because
# importing ReFrame costs each helper process that loads a recipe a second; a unit test
# (tests/test_validate.py) holds both to the same answers.
_DURATION_RE = re.compile(
    r"^((?P<days>\d+)d)?((?P<hours>\d+)h)?((?P<minutes>\d+)m)?((?P<seconds>\d+)s)?$"
)


def duration_seconds(spec: str) -> float:
    """A time limit as ReFrame reads it (``5m``, ``1h30m``, ``90s``, ``2d``, or seconds);
    ValueError for what it refuses and for a limit that is zero or not finite (ReFrame
    would then use the partition's limit, silently)."""
    s = str(spec).strip()
    try:
        v = float(s)
    except ValueError:
        m = _DURATION_RE.match(s)
        try:
            if not m:
                raise ValueError(f"invalid duration: {s}")
            parts = {k: int(n) for k, n in m.groupdict().items() if n}
            v = datetime.timedelta(**parts).total_seconds()
        except (ValueError, OverflowError) as e:
            raise ValueError(
                f"'{spec}' is not a time limit ReFrame reads ({e}); write e.g. "
                "5m, 1h30m, 90s, 2d or a number of seconds"
            ) from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"'{spec}' is not a positive, finite time limit")
    return v


class TierSpec(Strict):
    ranks: int = Field(default=2, ge=1)
    #: environment -> list of variant specs (``ladder[+axis=value...]``).
    variants: dict[str, list[str]] = Field(min_length=1)
    #: ReFrame's time limit of the run: ``5m``, ``1h30m``, ``90s``, ``2d`` or seconds.
    time_limit: str = "10m"
    #: Other tags the tier's runs carry besides its name, so that a mode selects them: a
    #: planted fault's input (``tags: [ci]``) runs with ``--mode ci``.
    tags: list[str] = []

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
    #: Values on a grid (a message size; a curve's ``x_at_fraction_of_max`` and ``count``):
    #: a step between grid points is no change, so only change points judge it, not a baseline.
    discrete: bool = False
    #: The field holding the seconds it was timed over: too short a time ranks nothing.
    timed_over: str | None = None


class RegexField(Strict):
    #: Regex whose first group is the value (``occurrence: count`` counts matches instead).
    pattern: str
    #: ``min``/``max``: the least/greatest of all matches (numbers), e.g. a bound over
    #: every time step of a solver's log.
    occurrence: Literal["first", "last", "count", "min", "max"] = "last"

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v):
        return valid_regex(v)


class CurveDerived(Strict):
    """A figure computed from a curve: ``y`` at the first/last row, its max/min, or the
    first ``x`` where ``y`` reaches ``fraction`` of its maximum (NetPIPE's half-peak size),
    or the number of rows (``count``); ``y`` at the row where ``x`` is ``at`` (a sample at
    a fixed time); ``relative_range``: (max - min) / |first| of ``y`` (how far a conserved
    quantity moved). With ``until``, only the rows whose ``x`` is at most ``until`` count:
    a quantity conserved only up to a time (water before it splashes out of the domain)."""

    op: Literal[
        "first", "last", "max", "min", "count", "x_at_fraction_of_max", "at", "relative_range"
    ]
    y: str
    x: str | None = None
    fraction: float | None = Field(default=None, gt=0, le=1)
    at: float | None = None
    until: float | None = None

    @model_validator(mode="after")
    def _shape(self):
        if self.until is not None and self.x is None:
            raise ValueError("'until' needs 'x' (the column it bounds)")
        if self.op == "x_at_fraction_of_max" and (self.x is None or self.fraction is None):
            raise ValueError("op x_at_fraction_of_max needs 'x' and 'fraction'")
        if (self.op == "at") != (self.at is not None) or (self.op == "at" and self.x is None):
            raise ValueError("op 'at' needs 'x' and 'at' (and only it takes 'at')")
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
    #: tree ``reference`` (under reference/); curve: whitespace columns, figures derived;
    #: gmx_check_energy / gmx_check_forces: a ``gmx check`` report, one ``field``;
    #: gmx_mdlog: mdrun's md.log (ns/day, wall time, cycle-table shares). Each format is a
    #: module of apptune/core/verification/formats/ (a new one is named here too).
    format: Literal[
        "keyvalue",
        "regex",
        "newick_rf",
        "curve",
        "gmx_check_energy",
        "gmx_check_forces",
        "gmx_mdlog",
    ]
    begin: str | None = None
    end: str | None = None
    #: keyvalue: the keys the program prints that figures and references read, names or
    #: shell patterns (``*_errors``); the run keeps every key it prints. The scratch
    #: checksums (``run.scratch.sums_file``) need none: their keys follow from
    #: ``run.scratch.files``.
    keys: list[str] = []
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
            "gmx_check_energy": ["field"],
            "gmx_check_forces": ["field"],
        }.get(self.format, [])
        for n in need:
            if not getattr(self, n):
                raise ValueError(f"format {self.format} needs '{n}'")
        if self.keys and self.format != "keyvalue":
            raise ValueError(f"'keys' is for format keyvalue, not {self.format}")
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
    #: ... and its standard error into this one (default: with the standard output).
    stderr: str | None = Field(default=None, pattern=r"^[^/]+$")
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
        return valid_regex(v)


class ErrorMessage(Strict):
    """An application's own fatal message, said in one line when a run fails (OpenFOAM's
    ``FOAM FATAL IO ERROR`` naming a dictionary and the missing keyword)."""

    #: Regex over the failed run's outputs (the job's stdout and stderr, each pre-run
    #: step's ``stdout`` file), multiline; named groups are the message's ``{NAME}``s.
    pattern: str
    #: The line the verdict gives: ``{NAME}`` is the group's text (a path inside the run
    #: directory relative to it).
    message: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v):
        return valid_regex(v)

    @model_validator(mode="after")
    def _names(self):
        groups = set(re.compile(self.pattern).groupindex)
        used = set(re.findall(r"\{(\w+)\}", self.message))
        if used - groups:
            raise ValueError(f"message: {sorted(used - groups)} not a named group of the pattern")
        return self


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
    #: The stack size limit the program runs with (``ulimit -s``): ``unlimited`` or a size
    #: (``512M``; K, M or G), for codes whose large local arrays live on the stack.
    stack: str | None = Field(default=None, pattern=STACK_LIMIT_PATTERN)
    prerun: list[PreRun] = []
    #: Runtime placements (a ReFrame parameter of the check): name -> what the ranks get
    #: (:class:`Placement`), spelled for every launcher and MPI library.
    placements: dict[str, Placement] = {}
    #: Where the fields come from: one output spec or several (field names must not clash).
    output: OutputSpec | list[OutputSpec]
    figures: dict[str, Figure] = Field(min_length=1)
    own_checks: list[OwnCheck] = []
    #: The application's fatal messages: the first that matches a failed run's outputs is
    #: its verdict, one line.
    errors: list[ErrorMessage] = []
    #: Rate figures also reported per watt when energy is known (e.g. HPL: the Green500 measure).
    per_watt: list[str] = []
    #: The program writes data files into a scratch directory of the site (:class:`RunScratchSpec`).
    scratch: RunScratchSpec | None = None

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
        return env_names(v)

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
    #: Builds not compiled here (the distribution's packages, a site's module): name ->
    #: install; a tier names one as a variant (``gnu: [debian]``).
    installs: dict[str, Install] = {}
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
        for iname, inst in self.installs.items():
            if self.run.executable not in inst.programs:
                raise ValueError(
                    f"installs.{iname}.programs: lacks run.executable '{self.run.executable}'"
                )
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
