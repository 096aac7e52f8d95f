"""The schema of a cluster file, ``site-config/clusters/NAME.yaml`` (one Slurm cluster, the
ReFrame system NAME; apptune/core/data/site.py turns it into ReFrame's configuration). Every
value of one is data: it is one line of text (:func:`line_break_problems`), its
variables' values expand as ReFrame's do in the job script but never run a command where
ReFrame runs (:func:`job_variables`), its modules are names."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from ..errors import LINE_BREAKING, ApptuneError, escape_line_breaks, field_path
from .base import Strict, env_names, valid_regex

#: The longest wait for a quiet node a partition may ask for (seconds: a day).
QUIET_WAIT_MAX = 86400

#: Launchers a partition may use (ReFrame launcher names).
LAUNCHERS = ("srun", "mpirun", "mpiexec")


#: A module's name: one word of the job script's ``module load`` line (no blank, no
#: shell punctuation).
MODULE_RE = r"^[^\s;&|<>`$'\"\\()*?\[\]{}!#~]+$"


def line_break_problems(file, data, where: tuple = ()) -> list[ApptuneError]:
    """Every value or key of ``data`` (a cluster file, a site config's systems and
    environments) that holds a character ending a line (:data:`LINE_BREAKING`: a newline,
    NUL, ...), one error each naming the field: ReFrame writes these values into the lines
    of a job script (``#SBATCH OPTION``, ``export NAME=value``), where such a character
    would start a command line of its own."""
    found = []
    if isinstance(data, str):
        m = LINE_BREAKING.search(data)
        if m:
            found.append(
                ApptuneError(
                    file,
                    field_path(list(where)) or "(top level)",
                    f"holds the control character {escape_line_breaks(m.group())} (a line "
                    "break or NUL): every value is one line of text",
                )
            )
    elif isinstance(data, dict):
        for k, v in data.items():
            found += line_break_problems(file, k, (*where, k)) if isinstance(k, str) else []
            found += line_break_problems(file, v, (*where, k))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            found += line_break_problems(file, v, (*where, i))
    return found


def job_variables(env: dict[str, str]) -> dict[str, str]:
    """A cluster file's ``env_vars``: names of variables, values without command
    substitution. ReFrame expands a value where it runs (``$(cmd)`` and backquotes run in a
    shell on the login node each time it writes a job script, dry runs too), and writes it
    unquoted into the job script, where ``$HOME`` and ``$SLURM_JOB_ID`` expand."""
    env_names(env)
    for k, v in env.items():
        if "`" in v or "$(" in v:
            raise ValueError(
                f"{k}: command substitution ($(...) or `...`) would run on the machine "
                "ReFrame runs on whenever it writes a job script, dry runs included: a "
                "command the job needs goes in the environment's prepare_cmds"
            )
    return env


JobVariables = Annotated[dict[str, str], AfterValidator(job_variables)]


class ClusterEnvironment(Strict):
    """What a cluster adds to an environment of the base config (same name)."""

    #: Modules loaded in the job script and for the build, e.g. ``[gcc/12.2, openmpi/4.1]``.
    modules: list[Annotated[str, Field(pattern=MODULE_RE)]] = []
    #: Environment variables, e.g. ``{SLURM_MPI_TYPE: pmix}`` for srun with Open MPI; a value
    #: is expanded by the job script's shell (``$HOME``, ``$SLURM_JOB_ID``).
    env_vars: JobVariables = {}
    #: Shell commands run before the modules are loaded (e.g. ``source /opt/spack/setup-env.sh``).
    prepare_cmds: list[str] = []


class RunQualityLimits(Strict):
    """Run-quality limits of a partition's runs (apptune/core/run/quality.py ``Limits``); unset ones
    keep their defaults. Each is a fraction: 0.3 is 30 %; 1 turns the limit off."""

    #: Largest share of CPU time the hypervisor may steal (default 0.02).
    max_steal: float | None = Field(default=None, gt=0, le=1)
    #: Largest share of the node's CPUs other processes may use (default 0.05).
    max_outside_cpu: float | None = Field(default=None, gt=0, le=1)
    #: Largest (max - min) / max of the CPU frequency during a run (default 0.1).
    max_freq_spread: float | None = Field(default=None, gt=0, le=1)


class ClusterPartition(Strict):
    descr: str = ""
    #: sbatch options every job of the partition gets, e.g. ``[--partition=cpu, --account=proj]``.
    sbatch: list[str] = []
    launcher: Literal["srun", "mpirun", "mpiexec"] = "srun"
    #: Cores of one node (``ranks_per_node=full|half`` and the energy model need it);
    #: ``this-host``: the cores of the machine reading the config (a cluster of this host).
    cores_per_node: int | Literal["this-host"] | None = Field(default=None)
    #: Jobs ReFrame keeps in the queue at once for this partition.
    max_jobs: int = Field(default=8, ge=1)
    #: Every job gets its nodes alone (``--exclusive``): energy figures are then graded
    #: ``measured`` instead of ``measured-shared``.
    exclusive: bool = False
    #: Environments of the base config valid here (default: every one the cluster lists,
    #: else every base environment).
    environs: list[str] | None = None
    #: Variables set in every job script of the partition.
    env_vars: JobVariables = {}
    #: Energy meters in order of preference (apptune/energy/, docs/energy.md).
    energy_meters: list[str] = ["slurm"]
    #: Per-node idle/load power for the ``model`` meter, ``{idle_W: .., load_W: ..}``.
    power_model: dict[str, float] | None = None
    #: Run-quality limits: a node that is never quiet enough (small, shared) gets wider ones.
    run_quality: RunQualityLimits = RunQualityLimits()
    #: Seconds each timed run may wait for a quiet node before it starts (0: no wait).
    quiet_wait_s: float = Field(default=0, ge=0, le=QUIET_WAIT_MAX)
    #: Where I/O benchmarks write (a parallel file system's directory; ``$VAR`` and ``~``
    #: are expanded): each run makes a directory of its own in it and removes it.
    scratch_dir: str | None = None
    #: Variables whose values a run record keeps besides apptune's own list (fnmatch
    #: patterns, e.g. ``[MY_FABRIC_*]``; apptune/core/run/envrecord.py): any other value of
    #: ``env_vars`` is kept as a keyed hash, and a secret's never.
    record_env: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_*?]+$")]] = []

    #: Not a field: what ReFrame keeps in a partition's ``extras`` is written directly here.
    extras: None = Field(default=None, exclude=True)

    @field_validator("extras", mode="before")
    @classmethod
    def _no_extras(cls, v):
        raise ValueError(
            "a cluster file has no 'extras': write run_quality, quiet_wait_s, "
            "energy_meters and power_model directly under the partition"
        )

    @field_validator("cores_per_node")
    @classmethod
    def _positive(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError("must be at least 1")
        return v


class Cluster(Strict):
    """site-config/clusters/NAME.yaml: one Slurm cluster, the ReFrame system NAME."""

    descr: str = ""
    #: Regexes of the hosts ReFrame runs on (login nodes); none: only ``--system NAME`` selects it.
    hostnames: list[str] = []
    modules_system: Literal["nomod", "tmod", "tmod31", "tmod32", "tmod4", "lmod", "spack"] = "nomod"
    #: ``squeue`` (polls squeue: works without slurmdbd) or ``slurm`` (polls sacct).
    scheduler: Literal["squeue", "slurm"] = "squeue"
    #: Let Slurm requeue a job whose node fails (default no: the check says which node failed).
    requeue: bool = False
    #: Seconds a check keeps asking for its job while slurmctld does not answer; then it
    #: fails saying so and leaves the job alone.
    slurmctld_timeout: int = Field(default=600, ge=10)
    #: Seconds a job may stay pending on DOWN, DRAINED or unresponsive nodes before it is
    #: cancelled with a verdict naming them.
    down_node_wait: int = Field(default=300, ge=0)
    partitions: dict[str, ClusterPartition] = Field(min_length=1)
    environments: dict[str, ClusterEnvironment] = {}

    @field_validator("hostnames")
    @classmethod
    def _regexes(cls, v):
        return [valid_regex(x) for x in v]
