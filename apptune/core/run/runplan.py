"""The plan of one run, made once for both ways a variant runs: a check
(:class:`apptune.rfm.AppRun`) and a tune or bisect trial (:mod:`apptune.core.run.localrun`).

:func:`make` takes what both know — the recipe, the tier and its input, the build and
its variant, the partition (:class:`Partition`), the rank count and the placement asked
for — and gives a :class:`RunPlan`: where the ranks go (:func:`apptune.placement.plan`),
the input parameters, the run's variables (the install's, the recipe's, then the thread
counts of the placement), the run variant and the node count. The run core
(:func:`apptune.core.run.prepare.prepare`) takes it whole, so the two cannot fill it in apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ... import placement as pl
from ...errors import ApptuneError
from ...models import Recipe
from ..builds import installed
from ..data import inputs, recipes


@dataclass(frozen=True)
class Partition:
    """What a run plan needs of the partition a run runs on."""

    #: ReFrame's registered name of the launcher that starts the ranks.
    launcher: str
    #: The environment's MPI (:class:`apptune.core.data.recipes.Toolchain`).
    mpi: str
    #: The partition's ``processor.num_cpus`` (None: not configured).
    num_cpus: int | None
    #: ReFrame's registered name of the partition's scheduler.
    scheduler: str

    @property
    def cores_per_node(self) -> int | None:
        return pl.cores_per_node(self.num_cpus, self.scheduler)


@dataclass(frozen=True)
class RunPlan:
    """One run of a recipe's tier, planned (:func:`make`)."""

    tier: str
    ranks: int
    #: Where the ranks go and how the launcher is told.
    placement: pl.PlacementPlan
    #: The recipe's named placement (``default``: none).
    placement_name: str
    #: The input parameters (:func:`apptune.core.data.inputs.render`), rendered into ``stage``.
    params: dict
    #: The run's variables: the install's, the recipe's ``run.env``, the placement's
    #: thread counts, then the caller's own.
    env: dict
    build_variant: str | None
    #: The result's variant (:func:`apptune.placement.run_variant`); None with no build variant.
    run_variant: str | None
    stage: Path
    build_dir: Path

    @property
    def layout(self) -> pl.Layout:
        return self.placement.layout

    @property
    def binding(self) -> str | None:
        return self.placement.binding

    @property
    def nodes(self) -> int:
        """The job's node count: the placement's, one when the scheduler packs the ranks."""
        return node_count(self.placement.layout)


def node_count(layout: pl.Layout) -> int:
    """The nodes a run's ranks take: the layout's, one when it leaves the packing to the
    scheduler (no ranks per node asked)."""
    return max(1, layout.nodes or 1)


def thread_environment(build_dir: str | Path, recipe: Recipe) -> dict:
    """The run's variables before its placement: an install's or an install tree's
    (:func:`apptune.core.builds.installed.run_environment`), then the recipe's ``run.env``. Every
    ``*_NUM_THREADS`` among them follows the placement's thread count (:func:`make`)."""
    return {**installed.run_environment(build_dir), **recipe.run.env}


def make(
    recipe: Recipe,
    tier: str,
    partition: Partition,
    *,
    stage: Path,
    build_dir: Path,
    build_variant: str | None,
    ranks: int | None = None,
    placement: str = "default",
    ranks_per_node: str | int | None = None,
    threads: int = 1,
    binding: str | None = None,
    knob_labels: Sequence[str] = (),
    overrides: dict | None = None,
    env: dict | None = None,
) -> RunPlan:
    """The plan of running the build in ``build_dir`` (of ``build_variant``) on ``tier`` in
    ``stage`` with ``ranks`` ranks (None: the tier's) on ``partition``: the recipe's named
    ``placement``, ``ranks_per_node``, ``threads`` per rank and ``binding`` applied
    (:func:`apptune.placement.plan`, given the install's and the recipe's variables so that
    each of their ``*_NUM_THREADS`` is set to the thread count), the input rendered into
    ``stage`` (``overrides`` replace parameters), ``env`` last over the run's variables.
    ``knob_labels``: the machine knobs' part of the run variant (``freq=low``).

    Raises :class:`apptune.placement.PlacementError` (or its
    :class:`~apptune.placement.NoLauncherOptions`) for a placement that cannot be applied:
    the caller says it in its own words."""
    if tier not in recipe.tiers:
        raise ApptuneError(
            recipes.recipe_path(recipe.name),
            "tiers",
            f"unknown tier '{tier}' (allowed: {', '.join(recipe.tiers)})",
        )
    t = recipe.tiers[tier]
    ranks = ranks or t.ranks
    base = thread_environment(build_dir, recipe)
    placed = pl.plan(
        ranks,
        launcher=partition.launcher,
        mpi=partition.mpi,
        placements=recipe.run.placements,
        name=placement,
        ranks_per_node=ranks_per_node,
        threads_per_rank=threads,
        binding=binding,
        cores_per_node=partition.cores_per_node,
        run_env=base,
    )
    params = inputs.render(
        recipe.name, tier, Path(stage), ranks, build_dir=Path(build_dir), overrides=overrides
    )
    other = ranks if ranks != t.ranks else None  # another rank count is another variant
    run_variant = build_variant and pl.run_variant(
        build_variant, placement, ranks_per_node, threads, binding, knob_labels, other
    )
    return RunPlan(
        tier=tier,
        ranks=ranks,
        placement=placed,
        placement_name=placement,
        params=params,
        env={**base, **placed.env, **(env or {})},
        build_variant=build_variant,
        run_variant=run_variant,
        stage=Path(stage),
        build_dir=Path(build_dir),
    )
