"""Runtime placement: ranks per node, threads per rank, binding, distribution.

A placement says what the ranks should get; this module spells it for the launcher a
partition uses (``srun``, or the ``mpirun``/``mpiexec`` of the environment's MPI library:
Open MPI, MPICH's Hydra, Intel MPI) and judges what the ranks really got.

Three test variables of every application check (``apptune.rfm.AppRun``);
``-P ranks_per_node=full,half`` makes one a ReFrame parameter (the ``placement``
mode of a cluster does exactly that):

* ``ranks_per_node``: ``full`` (a node's cores / threads per rank), ``half`` (half
  of that: a memory-bound code gets more bandwidth per rank) or a number. The total rank
  count stays the tier's, so the result is the same computation, verified against the
  same reference, on more nodes;
* ``threads_per_rank``: cores per rank (``--cpus-per-task``; ``--map-by slot:PE=N``
  under Open MPI's mpirun) and the thread count of OpenMP and of every BLAS pool
  the recipe pins (``*_NUM_THREADS`` in ``run.env``);
* ``binding``: ``core``, ``socket`` or ``none``, spelled for the launcher and MPI.

A recipe's named placements (``run.placements``, a ReFrame parameter of its check) say the
same in data: ``bind``, ``distribution`` (``packed`` or ``spread`` over a node's sockets)
and ``threads_per_rank``; the check's variables, when set, win. Unset, the launcher's and
scheduler's defaults apply.

A check (``apptune.rfm.AppRun``) and a tune/bisect trial (``apptune.core.run.localrun``) place
their ranks with the same two functions: :func:`plan` (the recipe's named placement,
the layout, the binding and thread variables) and :func:`launch_argv` (ReFrame's
launcher for the partition, given the job's sizes). The runner records the CPUs each rank
of the program may run on (:mod:`apptune.core.run.quality`);
:func:`apptune.core.run.ranks.binding_problem` says when they are not what the placement asked
for.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

BINDINGS = ("core", "socket", "none")
#: How consecutive ranks of a node are laid out: ``packed`` on neighbouring cores (one
#: socket filled before the next), ``spread`` round robin over the node's sockets.
DISTRIBUTIONS = ("packed", "spread")
#: What a recipe placement is spelled for: srun (whatever the MPI), and the mpirun/mpiexec
#: of each MPI library (an environment's ``extras.mpi``).
TARGETS = ("srun", "openmpi", "mpich", "intelmpi")
#: ReFrame launchers that start the ranks themselves with srun, and those that are the MPI
#: library's own (``mpirun``/``mpiexec``: Open MPI's, MPICH's Hydra, Intel MPI's Hydra).
SRUN_LAUNCHERS = ("srun", "srunalloc")
MPI_LAUNCHERS = ("mpirun", "mpiexec")

#: Launcher options per binding: srun's own; mpirun/mpiexec by MPI library.
_SRUN = {
    "core": ["--cpu-bind=cores"],
    "socket": ["--cpu-bind=sockets"],
    "none": ["--cpu-bind=none"],
}
_MPIRUN = {
    "openmpi": {
        "core": ["--bind-to", "core"],
        "socket": ["--bind-to", "socket"],
        "none": ["--bind-to", "none"],
    },
    "mpich": {
        "core": ["-bind-to", "core"],
        "socket": ["-bind-to", "socket"],
        "none": ["-bind-to", "none"],
    },
    "intelmpi": {
        "core": ["-genv", "I_MPI_PIN_DOMAIN", "core"],
        "socket": ["-genv", "I_MPI_PIN_DOMAIN", "socket"],
        "none": ["-genv", "I_MPI_PIN", "0"],
    },
}
#: Launcher options per distribution (srun: block over nodes, then block or cyclic over a
#: node's sockets; Open MPI and Hydra: the object ranks are mapped to in turn).
_SRUN_DIST = {"packed": "--distribution=block:block", "spread": "--distribution=block:cyclic"}
_MAP_BY = {"packed": "core", "spread": "socket"}
_INTEL_ORDER = {"packed": "compact", "spread": "scatter"}


class PlacementError(ValueError):
    """A placement that cannot be applied; the message names the variable."""


class NoLauncherOptions(PlacementError):
    """The recipe's named placement has no launcher options for this launcher or MPI."""


@dataclass(frozen=True)
class Layout:
    ranks: int
    ranks_per_node: int | None
    threads_per_rank: int
    nodes: int | None

    def to_dict(self) -> dict:
        return {
            "ranks": self.ranks,
            "ranks_per_node": self.ranks_per_node,
            "threads_per_rank": self.threads_per_rank,
            "nodes": self.nodes,
        }


def layout(
    ranks: int, ranks_per_node: str | int | None, threads_per_rank: int, cores_per_node: int | None
) -> Layout:
    """Tasks per node and node count for ``ranks`` ranks."""
    if threads_per_rank < 1:
        raise PlacementError(f"threads_per_rank={threads_per_rank}: must be at least 1")
    if ranks_per_node in (None, ""):
        return Layout(ranks, None, threads_per_rank, None)
    if ranks_per_node in ("full", "half"):
        if not cores_per_node:
            raise PlacementError(
                f"ranks_per_node={ranks_per_node} needs the cores of a node: set the "
                "partition's cores_per_node (site-config/clusters/*.yaml) or "
                "processor.num_cpus (site-config/settings.py)"
            )
        per = cores_per_node // threads_per_rank
        if ranks_per_node == "half":
            per //= 2
        if per < 1:
            raise PlacementError(
                f"ranks_per_node={ranks_per_node} with threads_per_rank={threads_per_rank} "
                f"leaves no rank on a {cores_per_node}-core node"
            )
    else:
        try:
            per = int(ranks_per_node)
        except (TypeError, ValueError):
            raise PlacementError(
                f"ranks_per_node={ranks_per_node!r}: give full, half or a number"
            ) from None
        if per < 1:
            raise PlacementError(f"ranks_per_node={per}: must be at least 1")
    per = min(per, ranks)
    return Layout(ranks, per, threads_per_rank, math.ceil(ranks / per))


def binding_options(
    binding: str | None,
    launcher: str,
    mpi: str,
    threads_per_rank: int = 1,
    distribution: str | None = None,
) -> list[str]:
    """Launcher options for a binding and a distribution; [] when both are unset.

    With several threads per rank, a rank bound to "core" gets that many cores:
    Open MPI's ``mpirun`` binds each rank to one core by default for up to two
    ranks, which would put every thread of a rank on one core. So for Open MPI,
    ``--map-by slot:PE=N`` (``core:PE=N``, ``socket:PE=N`` with a distribution) is given
    whenever N > 1 and the binding is not none; MPICH's Hydra takes ``-bind-to core:N``,
    Intel MPI ``I_MPI_PIN_DOMAIN=omp`` (its ``OMP_NUM_THREADS`` cores); srun has
    ``--cpus-per-task`` (ReFrame's srun launcher passes the job's ``num_cpus_per_task``)."""
    binding = binding or None
    distribution = distribution or None
    if binding is not None and binding not in BINDINGS:
        raise PlacementError(f"binding={binding!r}: give one of {', '.join(BINDINGS)}")
    if distribution is not None and distribution not in DISTRIBUTIONS:
        raise PlacementError(
            f"distribution={distribution!r}: give one of {', '.join(DISTRIBUTIONS)}"
        )
    n = threads_per_rank
    if launcher in SRUN_LAUNCHERS:
        out = list(_SRUN[binding]) if binding else []
        return out + ([_SRUN_DIST[distribution]] if distribution else [])
    if launcher not in MPI_LAUNCHERS:
        if binding or distribution:
            what = f"binding={binding}" if binding else f"distribution={distribution}"
            raise PlacementError(f"{what}: launcher {launcher!r} cannot bind ranks")
        return []
    if mpi not in _MPIRUN:
        if binding or distribution or n > 1:
            raise PlacementError(
                f"binding={binding}: no binding options known for MPI {mpi!r} "
                f"(known: {', '.join(_MPIRUN)})"
            )
        return []
    out: list[str] = []
    if mpi == "openmpi":
        obj = _MAP_BY.get(distribution)
        if n > 1 and binding != "none":
            out += ["--map-by", f"{obj or 'slot'}:PE={n}"]
        elif obj:
            out += ["--map-by", obj]
        return out + (list(_MPIRUN[mpi][binding]) if binding else [])
    if mpi == "mpich":
        if n > 1 and binding in (None, "core"):
            out += ["-bind-to", f"core:{n}"]
        elif binding:
            out += list(_MPIRUN[mpi][binding])
        return out + (["-map-by", _MAP_BY[distribution]] if distribution else [])
    # Intel MPI: pinning domains and their order, as variables of every rank
    if n > 1 and binding in (None, "core"):
        out += ["-genv", "I_MPI_PIN_DOMAIN", "omp"]
    elif binding:
        out += list(_MPIRUN[mpi][binding])
    if distribution and binding != "none":
        out += ["-genv", "I_MPI_PIN_ORDER", _INTEL_ORDER[distribution]]
    return out


def target(launcher: str, mpi: str) -> str:
    """What a recipe placement is spelled for under ``launcher`` with MPI ``mpi``: ``srun``
    for srun (whatever the MPI), else the MPI library (its mpirun/mpiexec)."""
    return "srun" if launcher in SRUN_LAUNCHERS else mpi


def spell(want, launcher: str, mpi: str) -> list[str]:
    """The launcher options of a recipe placement ``want`` (``bind``, ``distribution``,
    ``threads_per_rank``: :class:`apptune.models.Placement`) for ``launcher`` and ``mpi``."""
    return binding_options(
        want.bind, launcher, mpi, want.threads_per_rank, distribution=want.distribution
    )


def thread_env(run_env: dict, threads_per_rank: int) -> dict[str, str]:
    """The variables that set a rank's thread count: ``OMP_NUM_THREADS`` and every
    ``*_NUM_THREADS`` the recipe pins (``run.env``: OpenBLAS, MKL, BLIS pin their
    own pools to 1), all set to ``threads_per_rank``."""
    names = {"OMP_NUM_THREADS"} | {k for k in run_env if k.endswith("_NUM_THREADS")}
    return {k: str(threads_per_rank) for k in sorted(names)}


def label(ranks_per_node, threads_per_rank: int, binding, ranks: int | None = None) -> str:
    """The placement part of a result's variant name, e.g. ``rpn=half,bind=core``, with
    ``ranks=N`` first when the run has another rank count than its tier's (``-S num_ranks``,
    ``-P num_ranks=1,2``: a scaling series, never compared with the tier's baseline).

    '' when the placement is the default."""
    parts = []
    if ranks is not None:
        parts.append(f"ranks={ranks}")
    if ranks_per_node not in (None, ""):
        parts.append(f"rpn={ranks_per_node}")
    if threads_per_rank != 1:
        parts.append(f"tpr={threads_per_rank}")
    if binding not in (None, ""):
        parts.append(f"bind={binding}")
    return ",".join(parts)


def run_variant(
    build_variant: str,
    name: str,
    ranks_per_node,
    threads_per_rank: int,
    binding,
    knobs=(),
    ranks: int | None = None,
) -> str:
    """A result's variant: the build variant, plus ``@NAME`` for a named placement of the
    recipe and ``@ranks=..,rpn=..,tpr=..,bind=..`` for a runtime placement, e.g.
    ``tuned@rpn=half``, with the machine knobs asked for after it (``knobs``:
    ``freq=1800000``, ``smt=off``). ``ranks``: the run's rank count when it is not its tier's."""
    v = build_variant if name == "default" else f"{build_variant}@{name}"
    rt = ",".join(x for x in [label(ranks_per_node, threads_per_rank, binding, ranks), *knobs] if x)
    return f"{v}@{rt}" if rt else v


def without_labels(variant: str, prefixes: tuple[str, ...]) -> str:
    """A run variant without the runtime labels that start with one of ``prefixes``
    (``tuned@ranks=1,freq=low`` without ``ranks=`` -> ``tuned@freq=low``)."""
    build, *rest = variant.split("@")
    parts = [",".join(x for x in p.split(",") if not x.startswith(prefixes)) for p in rest]
    return "@".join([build, *(p for p in parts if p)])


def cores_per_node(num_cpus: int | None, scheduler: str) -> int | None:
    """A node's cores: the partition's ``processor.num_cpus``; with the local scheduler
    (the node is this machine) this machine's when the config does not say."""
    if not num_cpus and scheduler == "local":
        return os.cpu_count()
    return num_cpus


@dataclass(frozen=True)
class PlacementPlan:
    """Where the ranks of one run go, and how the launcher is told."""

    layout: Layout
    #: The launcher's options for the binding and distribution.
    options: list[str]
    #: The thread-count variables (empty with one thread per rank).
    env: dict[str, str]
    #: The binding asked for (the check's variable, else the named placement's); None:
    #: the launcher's default.
    binding: str | None = None
    distribution: str | None = None

    @property
    def num_tasks_per_node(self) -> int | None:
        return self.layout.ranks_per_node

    @property
    def num_cpus_per_task(self) -> int | None:
        t = self.layout.threads_per_rank
        return t if t != 1 else None


def plan(
    ranks: int,
    *,
    launcher: str,
    mpi: str,
    placements: dict | None = None,
    name: str = "default",
    ranks_per_node: str | int | None = None,
    threads_per_rank: int = 1,
    binding: str | None = None,
    cores_per_node: int | None = None,
    run_env: dict | None = None,
) -> PlacementPlan:
    """The placement of ``ranks`` ranks started by ReFrame's launcher ``launcher`` (its
    registered name) with MPI ``mpi``: the recipe's named placement ``name`` (its
    ``run.placements``: what the ranks get, :class:`apptune.models.Placement`), then ranks
    per node, threads per rank and binding; the check's variables, when set, win over the
    named placement's ``threads_per_rank`` and ``bind``.

    Raises :class:`NoLauncherOptions` when the named placement cannot run under this
    launcher or MPI (the recipe's ``unsupported``, an MPI library without known options,
    a launcher that places no ranks), :class:`PlacementError` for a placement that
    cannot be applied."""
    distribution = None
    if name != "default":
        want = (placements or {}).get(name)
        if want is None:
            raise PlacementError(
                f"unknown placement {name!r} (known: {', '.join(placements or {}) or 'none'})"
            )
        to = target(launcher, mpi)
        what = "the srun launcher" if to == "srun" else f"MPI {mpi!r}"
        why = want.unsupported.get(to)
        if why:
            raise NoLauncherOptions(f"placement {name!r} does not run under {what}: {why}")
        if launcher not in SRUN_LAUNCHERS + MPI_LAUNCHERS:
            raise NoLauncherOptions(f"placement {name!r}: launcher {launcher!r} places no ranks")
        if to not in _MPIRUN and to != "srun":
            raise NoLauncherOptions(
                f"placement {name!r} has no launcher options for {what} "
                f"(known: srun, {', '.join(_MPIRUN)})"
            )
        binding = binding or want.bind
        distribution = want.distribution
        if threads_per_rank == 1:
            threads_per_rank = want.threads_per_rank
    lay = layout(ranks, ranks_per_node, threads_per_rank, cores_per_node)
    options = binding_options(binding, launcher, mpi, threads_per_rank, distribution)
    env = thread_env(run_env or {}, threads_per_rank) if threads_per_rank != 1 else {}
    return PlacementPlan(lay, options, env, binding or None, distribution)


@dataclass
class JobSizes:
    """What ReFrame's launchers read from a job (``reframe.core.schedulers.Job``) to spell
    the launch: the sizes of a run that no ReFrame job describes (a tune/bisect trial)."""

    num_tasks: int
    num_tasks_per_node: int | None = None
    num_cpus_per_task: int | None = None
    num_tasks_per_core: int | None = None
    num_tasks_per_socket: int | None = None
    use_smt: bool | None = None
    exclusive_access: bool = False
    time_limit: float | None = None
    name: str | None = None
    options: list[str] = field(default_factory=list)
    cli_options: list[str] = field(default_factory=list)
    sched_access: list[str] = field(default_factory=list)


def launch_argv(launcher, job) -> list[str]:
    """The parallel launch of ``job`` as an argument list, as ReFrame writes it into a job
    script (``JobLauncher.run_command``): the launcher's modifier and its options, the
    launcher's command for the job's sizes, then the launcher's options."""
    mod = [launcher.modifier, *launcher.modifier_options] if launcher.modifier else []
    # command() first: the local launcher drops the options it cannot pass
    cmd = list(launcher.command(job))
    return [*mod, *cmd, *launcher.options]
