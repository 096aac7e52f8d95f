"""Runtime placement: ranks per node, threads per rank, binding.

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

Unset, the launcher's and scheduler's defaults apply.

A check (``apptune.rfm.AppRun``) and a tune/bisect trial (``apptune.localrun``) place
their ranks with the same two functions: :func:`plan` (the recipe's named placement,
the layout, the binding and thread variables) and :func:`launch_argv` (ReFrame's
launcher for the partition, given the job's sizes).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

BINDINGS = ("core", "socket", "none")

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
        "core": ["-genv", "I_MPI_PIN_DOMAIN=core"],
        "socket": ["-genv", "I_MPI_PIN_DOMAIN=socket"],
        "none": ["-genv", "I_MPI_PIN=0"],
    },
}


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
    binding: str | None, launcher: str, mpi: str, threads_per_rank: int = 1
) -> list[str]:
    """Launcher options for a binding; [] when unset.

    With several threads per rank, a rank bound to "core" gets that many cores:
    Open MPI's ``mpirun`` binds each rank to one core by default for up to two
    ranks, which would put every thread of a rank on one core. So for Open MPI,
    ``--map-by slot:PE=N`` is given whenever N > 1 and the binding is not none;
    MPICH's Hydra takes ``-bind-to core:N``; srun has ``--cpus-per-task``."""
    if binding not in (None, "") and binding not in BINDINGS:
        raise PlacementError(f"binding={binding!r}: give one of {', '.join(BINDINGS)}")
    mpirun = launcher in ("mpirun", "mpiexec")
    if mpirun and mpi not in _MPIRUN and (binding not in (None, "") or threads_per_rank > 1):
        raise PlacementError(
            f"binding={binding}: no binding options known for MPI {mpi!r} "
            f"(known: {', '.join(_MPIRUN)})"
        )
    if mpirun and threads_per_rank > 1 and binding != "none":
        if mpi == "openmpi":
            return ["--map-by", f"slot:PE={threads_per_rank}"] + (
                ["--bind-to", binding] if binding else []
            )
        if mpi == "mpich" and binding in (None, "", "core"):
            return ["-bind-to", f"core:{threads_per_rank}"]
    if binding in (None, ""):
        return []
    if launcher in ("srun", "srunalloc"):
        return list(_SRUN[binding])
    if mpirun:
        return list(_MPIRUN[mpi][binding])
    raise PlacementError(f"binding={binding}: launcher {launcher!r} cannot bind ranks")


def thread_env(run_env: dict, threads_per_rank: int) -> dict[str, str]:
    """The variables that set a rank's thread count: ``OMP_NUM_THREADS`` and every
    ``*_NUM_THREADS`` the recipe pins (``run.env``: OpenBLAS, MKL, BLIS pin their
    own pools to 1), all set to ``threads_per_rank``."""
    names = {"OMP_NUM_THREADS"} | {k for k in run_env if k.endswith("_NUM_THREADS")}
    return {k: str(threads_per_rank) for k in sorted(names)}


def label(ranks_per_node, threads_per_rank: int, binding) -> str:
    """The placement part of a result's variant name, e.g. ``rpn=half,bind=core``.

    '' when the placement is the default."""
    parts = []
    if ranks_per_node not in (None, ""):
        parts.append(f"rpn={ranks_per_node}")
    if threads_per_rank != 1:
        parts.append(f"tpr={threads_per_rank}")
    if binding not in (None, ""):
        parts.append(f"bind={binding}")
    return ",".join(parts)


def run_variant(
    build_variant: str, name: str, ranks_per_node, threads_per_rank: int, binding
) -> str:
    """A result's variant: the build variant, plus ``@NAME`` for a named placement of the
    recipe and ``@rpn=..,tpr=..,bind=..`` for a runtime placement, e.g. ``tuned@rpn=half``."""
    v = build_variant if name == "default" else f"{build_variant}@{name}"
    rt = label(ranks_per_node, threads_per_rank, binding)
    return f"{v}@{rt}" if rt else v


def cores_per_node(num_cpus: int | None, scheduler: str) -> int | None:
    """A node's cores: the partition's ``processor.num_cpus``; with the local scheduler
    (the node is this machine) this machine's when the config does not say."""
    if not num_cpus and scheduler == "local":
        return os.cpu_count()
    return num_cpus


@dataclass(frozen=True)
class Plan:
    """Where the ranks of one run go, and how the launcher is told."""

    layout: Layout
    #: The launcher's options: the named placement's, then the binding's.
    options: list[str]
    #: The thread-count variables (empty with one thread per rank).
    env: dict[str, str]

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
    placements: dict[str, dict[str, list[str]]] | None = None,
    name: str = "default",
    ranks_per_node: str | int | None = None,
    threads_per_rank: int = 1,
    binding: str | None = None,
    cores_per_node: int | None = None,
    run_env: dict | None = None,
) -> Plan:
    """The placement of ``ranks`` ranks started by ReFrame's launcher ``launcher`` (its
    registered name) with MPI ``mpi``: the recipe's named placement ``name`` (its
    ``run.placements``: options per MPI library, under ``srun`` for srun, which places
    ranks itself whatever the MPI), then ranks per node, threads per rank and binding.

    Raises :class:`NoLauncherOptions` when the named placement has no options for this
    launcher or MPI, :class:`PlacementError` for a placement that cannot be applied."""
    options: list[str] = []
    if name != "default":
        srun = launcher in ("srun", "srunalloc")
        opts = (placements or {}).get(name, {}).get("srun" if srun else mpi)
        if opts is None:
            what = "the srun launcher" if srun else f"MPI {mpi!r}"
            raise NoLauncherOptions(f"placement {name!r} has no launcher options for {what}")
        options = list(opts)
    lay = layout(ranks, ranks_per_node, threads_per_rank, cores_per_node)
    options += binding_options(binding, launcher, mpi, threads_per_rank)
    env = thread_env(run_env or {}, threads_per_rank) if threads_per_rank != 1 else {}
    return Plan(lay, options, env)


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
