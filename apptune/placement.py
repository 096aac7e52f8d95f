"""Runtime placement: ranks per node, threads per rank, binding.

Three test variables of every application check (``apptune.rfm.AppRun``);
``-P ranks_per_node=full,half`` makes one a ReFrame parameter (the ``placement``
mode of a cluster does exactly that):

* ``ranks_per_node``: ``full`` (a node's cores / threads per rank), ``half`` (half
  of that: memory-bound codes gain bandwidth per rank; the published cluster
  studies measured up to 40 %) or a number. The total rank count stays the tier's, so the result is
  the same computation, verified against the same reference, on more nodes;
* ``threads_per_rank``: cores per rank (``--cpus-per-task``; ``--map-by slot:PE=N``
  under Open MPI's mpirun) and the thread count of OpenMP and of every BLAS pool
  the recipe pins (``*_NUM_THREADS`` in ``run.env``);
* ``binding``: ``core``, ``socket`` or ``none``, spelled for the launcher and MPI.

Unset, the launcher's and scheduler's defaults apply, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
