"""A run of an application prepared, the same for the checks (:class:`apptune.rfm.AppRun`)
and for tune and bisect (:mod:`apptune.core.run.localrun`).

* :func:`prepare`: from the facts both have (:class:`Where` a run runs, its launch, and
  its plan: :class:`apptune.core.run.runplan.RunPlan`), the runner's spec, the energy sampler
  (started) and the run record's identity.
* :func:`steps`: the commands the runner (:mod:`apptune.core.run.runner`) starts, as argument
  lists: the recipe's pre-run steps, then the program with its arguments.

What the run left is made into its run record by :mod:`apptune.core.run.outcome`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ... import energy
from ...errors import ApptuneError
from ...models import Recipe
from ..data import inputs, recipes
from . import envrecord, quality, runner, scratch
from .runplan import RunPlan


def program(recipe: Recipe, build_dir: Path) -> str:
    """The measured program's path: the recipe's executable in the build."""
    return os.path.join(build_dir, recipe.run.executable)


def steps(
    recipe: Recipe,
    params: dict,
    build_dir: Path,
    launch: list[str],
    stdout: str | None = None,
    stderr: str | None = None,
    scratch_path: str | None = None,
) -> list[runner.Step]:
    """The run's commands: each pre-run step (a build product named by its file name runs
    from the build), then the program, started with ``launch`` (the job's parallel launch);
    a ``stdin`` file of the recipe is the step's standard input (the launcher passes it on).
    ``scratch_path``: the run's scratch directory, ``{{ scratch }}`` in their words."""
    if scratch_path is not None:  # not an input parameter: the path differs from run to run
        params = dict(params, scratch=scratch_path)
    out = []
    for i, step in enumerate(recipe.run.prerun):
        argv = inputs.render_words(step.command, params, recipe.name, f"run.prerun[{i}]")
        product = Path(build_dir, argv[0])
        if product.is_file():
            argv[0] = str(product)
        out.append(
            runner.Step(
                label=f"run.prerun[{i}]",
                stdout=step.stdout,
                stderr=step.stderr,
                stdin=step.stdin,
                argv=(list(launch) if step.launch else []) + argv,
            )
        )
    args = inputs.render_words(recipe.run.args, params, recipe.name, "run.args")
    out.append(
        runner.Step(
            label="run",
            argv=[*launch, program(recipe, build_dir), *args],
            stdin=recipe.run.stdin,
            stdout=stdout,
            stderr=stderr,
        )
    )
    return out


@dataclass
class Where:
    """Where a run runs, as the run core needs it: a check's current environment and
    partition, or a trial's :class:`apptune.core.data.site.Site` (whose job is its runner, on this
    node: scheduler ``local``)."""

    environment: str
    system: str
    partition: str
    #: ReFrame's registered name of the scheduler that runs the job.
    scheduler: str
    #: The partition's ``processor.num_cpus`` (None: not configured).
    num_cpus: int | None
    #: The partition's ``extras``: run-quality limits, quiet wait, energy meters, ...
    extras: dict
    #: The modules and variables the site declares
    #: (:func:`apptune.core.data.site.declared_environment`).
    declared: dict = field(default_factory=dict)

    @property
    def fullname(self) -> str:
        """``SYSTEM:PARTITION``."""
        return f"{self.system}:{self.partition}"


def scratch_spec(recipe: Recipe, where: Where, params: dict, tag: str, root: str | None):
    """The runner's scratch spec of a recipe that writes files (``run.scratch``), in a new
    directory under ``root`` (``-S scratch_dir``), else the partition's ``scratch_dir``;
    None for a recipe that writes none."""
    want = recipe.run.scratch
    if want is None:
        return None
    root = root or where.extras.get("scratch_dir")
    if not root:
        raise ApptuneError(
            None,
            f"partition {where.fullname}",
            f"{recipe.name} writes files and the partition has no scratch directory: set "
            "extras.scratch_dir (scratch_dir: in a cluster file) or -S scratch_dir=DIR",
        )
    root = os.path.expandvars(os.path.expanduser(str(root)))
    path = os.path.join(root, "apptune-" + "".join(c if c.isalnum() else "-" for c in tag))
    words = dict(params, scratch=path)
    rendered = inputs.render_words(
        [want.bytes or "", *(f.file for f in want.files)], words, recipe.name, "run.scratch"
    )
    size = rendered.pop(0) if want.bytes else None
    try:
        nbytes = int(float(size)) if size is not None else None
    except ValueError:
        raise ApptuneError(
            recipes.recipe_path(recipe.name), "run.scratch.bytes", f"{size!r} is not a number"
        ) from None
    return scratch.ScratchSpec(
        root=root,
        path=path,
        bytes=nbytes,
        files=[
            scratch.ScratchFile(
                file=file,
                name=f.name,
                format=f.format,
                fill=f.fill.model_dump(mode="json") if f.fill else None,
            )
            for f, file in zip(want.files, rendered, strict=True)
        ],
        sums_file=want.sums_file,
    )


@dataclass
class Prepared:
    """A run ready to start (:func:`prepare`)."""

    #: The runner's spec; the caller writes it (:func:`apptune.core.run.runner.write_spec`).
    spec: runner.Spec
    #: The energy sampler, started; the caller stops it when the run has ended.
    sampler: energy.Sampler
    #: The run record's identity (:func:`apptune.core.run.outcome.evaluate`); the caller adds the
    #: job.
    identity: dict


def prepare(
    recipe: Recipe,
    plan: RunPlan,
    where: Where,
    *,
    launch: list[str],
    tag: str,
    test: str,
    job_id: Callable[[], object],
    quiet_wait: float | None = None,
    meters: list[str] | None = None,
    exclusive: bool = False,
    scratch_dir: str | None = None,
    knob_spec: dict | None = None,
) -> Prepared:
    """Prepare the run ``plan`` of ``recipe`` (:func:`apptune.core.run.runplan.make`: its tier,
    stage, build, input, variables, placement and variant): the runner's spec of its
    steps (:func:`steps`, started with ``launch``), the energy sampler of the partition's
    meters (``meters``: those sampled here, default every one of ``extras``) started, and
    the record's identity. ``quiet_wait``: the wait for a quiet node (default the
    partition's ``extras.quiet_wait_s``); ``exclusive``: the job has its nodes to itself
    (or ``extras.exclusive_node`` says the partition's jobs do); ``job_id``: the job's id
    once it runs (with the local scheduler, the process the meters follow);
    ``scratch_dir``: where a recipe that writes files writes them (default the partition's
    ``scratch_dir``)."""
    ex = where.extras
    params, build_dir = plan.params, plan.build_dir
    scr = scratch_spec(recipe, where, params, tag, scratch_dir)
    words = dict(params, scratch=scr.path) if scr else params
    # a value of the recipe's run.env is a template like its arguments (HDF5_PARAPREFIX)
    env = {
        k: inputs.render_words([v], words, recipe.name, f"run.env.{k}")[0] if "{{" in v else v
        for k, v in plan.env.items()
    }
    spec = runner.Spec(
        steps=steps(recipe, params, build_dir, launch, scratch_path=scr and scr.path),
        scratch=scr,
        env=env,
        tag=tag,
        # ReFrame polls the job (and samples energy) beside a run on its own node: it is
        # the harness, not a disturbance; the boot id tells whether the job's node is this
        harness_pid=os.getpid(),
        harness_boot_id=quality.boot_id(),
        program=program(recipe, build_dir),
        limits=dict(ex.get("run_quality", {})),
        quiet_wait_s=float(ex.get("quiet_wait_s", 0)) if quiet_wait is None else quiet_wait,
        knobs=knob_spec if knob_spec and knob_spec.get("asked") else None,
        stack=recipe.run.stack,
    )
    sampler = energy.Sampler(
        list(ex.get("energy_meters", [])) if meters is None else meters,
        where.fullname,
        plan.stage,
        hz=float(ex.get("energy_sample_hz", 10)),
        options=ex.get("energy_meter_options", {}),
        context={
            "power_model": ex.get("power_model"),
            "scheduler": where.scheduler,
            "ncpus": where.num_cpus,
            "nodes": plan.nodes,
            # with the local scheduler the job id is the pid of the job (script or runner)
            "pid": job_id if where.scheduler == "local" else None,
            "jobid": job_id,
        },
        exclusive=bool(exclusive or ex.get("exclusive_node", False)),
    )
    sampler.start()
    identity = {
        "app": recipe.name,
        "tier": plan.tier,
        "variant": plan.run_variant,
        "build_variant": plan.build_variant,
        "placement": plan.placement_name,
        "environment": where.environment,
        "system": where.system,
        "partition": where.partition,
        "test": test,
        "ranks": plan.ranks,
        "input": params,
        "placement_layout": dict(plan.layout.to_dict(), binding=plan.binding),
        "launch": recorded_launch(where.declared, ex.get("record_env") or ()),
    }
    if spec.knobs:  # what the run asked for, also when the runner leaves no record
        identity["knobs"] = {"asked": dict(spec.knobs["asked"])}
        identity["cpu_freq"] = spec.knobs["asked"].get("cpu_freq")
    return Prepared(spec, sampler, identity)


def recorded_launch(declared: dict, record_env=()) -> dict:
    """The site's modules and variables (:func:`apptune.core.data.site.declared_environment`) as
    a run record keeps them: every name, a value only where it can change a result and is
    no secret (:mod:`apptune.core.run.envrecord`; ``record_env``: the partition's own patterns)."""
    out = dict(declared)
    if out.get("env_vars"):
        out["env_vars"] = envrecord.record(out["env_vars"], record_env)
    return out
