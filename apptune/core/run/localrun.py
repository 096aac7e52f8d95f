"""Build and run one variant on this node outside ReFrame, with the checks' own steps.

``apptune bisect`` and ``apptune tune`` run dozens of candidates that ReFrame's
checks cannot express: a build tree whose object files are mixed from two builds
(the build cache keeps only products), and input parameters no tier has (tune's
knobs, e.g. HPL's N). They call the same package functions the checks call —
:func:`recipes.resolve`, ``python -m apptune.core.builds.steps``, the run plan
(:func:`apptune.core.run.runplan.make`: placement, input, variables, variant), the run core
(:func:`apptune.core.run.prepare.prepare`, :func:`~apptune.core.run.prepare.steps`,
:func:`~apptune.core.run.outcome.evaluate` and :func:`~apptune.core.run.outcome.write_record`) and
the energy sampler — so a candidate is built, run
and verified as a check would do it, and leaves the same run record
(``apptune-result.json``, flagged ``trial``, its ``test`` named :data:`TRIAL_TEST`).

The site (:func:`apptune.core.data.site.load_site`) comes from the ReFrame configuration the
checks use, read by ReFrame's own loader (the file is validated as ``reframe -C``
validates it), on the partition a check of the environment would get (``SYSTEM`` or
``SYSTEM:PARTITION``):

* the environment's and the partition's variables and modules are loaded as the
  check's job script loads them (their ``prepare_cmds``, the modules system's load
  commands, ``env_vars``), once, by the shell a job script runs in;
* the ranks are started by ReFrame's launcher of the partition (``mpirun``,
  ``mpiexec``, ``local``, ... any launcher the partition names), with the recipe's
  named placement (``run.placements``), ranks per node, threads per rank and binding
  applied by the same run plan as a check's (:mod:`apptune.core.run.runplan`);
* a partition whose jobs go to a batch scheduler runs trials on this node only inside
  an allocation of that scheduler (Slurm: ``salloc``, then ``srun`` starts the ranks
  with the trial's sizes on its command line); otherwise the trial is refused, saying so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from ... import placement as pl
from ...constants import XFAIL_FILE
from ...errors import ApptuneError, last_error_line
from ...models import (
    BuildPlan,
    EnergyRecord,
    Provenance,
    Recipe,
    RunQuality,
    RunRecord,
    RunVerification,
)
from ...yamlio import atomic_write_json
from ..builds import sources
from ..data import recipes
from ..data.recipes import time_limit_seconds
from ..data.site import Site
from . import outcome, prepare, runner, runplan

#: The job's standard output and error in a run directory (``file: stdout`` outputs).
STDOUT = "run.out"
STDERR = "run.err"
#: The ``test`` of a trial's run record (a check's is its ReFrame test's unique name).
TRIAL_TEST = "trial"


# ----------------------------------------------------------------------------- build
def plan_for(
    recipe: Recipe,
    variant: str,
    site: Site,
    ladder_everywhere: bool = False,
    extra_cflags: list[str] = (),
    extra_fflags: list[str] = (),
) -> BuildPlan:
    """The build plan of ``variant`` for :func:`build_variant` (bisect and sensitivity
    change it first); ``ladder_everywhere`` compiles the files of the recipe's per_file
    rules with the variant's ladder too (bisect's way to rediscover why a rule exists);
    extra flags are appended to the ladder (tune's extra flags)."""
    plan = recipes.resolve(recipe, variant, site.toolchain)
    cflags, fflags = plan.cflags + list(extra_cflags), plan.fflags + list(extra_fflags)
    per_file = plan.per_file
    if ladder_everywhere:
        ladder = recipes.Variant.parse(variant, recipe).ladder
        per_file = [
            r.updated(
                cflags=list(cflags),
                fflags=list(fflags),
                ladder=ladder,
                reason=f"ignored: the whole build uses the {ladder} ladder",
            )
            for r in per_file
        ]
    named = plan.variant
    if extra_cflags or extra_fflags:
        named = variant_label(variant, extra_cflags, extra_fflags)
    return plan.updated(variant=named, cflags=cflags, fflags=fflags, per_file=per_file)


def variant_label(variant: str, extra_cflags=(), extra_fflags=()) -> str:
    extra = sorted(set(extra_cflags) | set(extra_fflags))
    return variant + (f" {' '.join(extra)}" if extra else "")


def build_variant(
    recipe: Recipe, plan: BuildPlan, site: Site, stage: Path, use_cache: bool = True
) -> Provenance:
    """Build ``plan`` in ``stage`` as the checks' build fixture does (``python -m
    apptune.core.builds.steps``); return its provenance. A build that already happened in
    ``stage`` for the same plan is kept (bisect's ends survive a restart). The build runs
    in ``stage``: a relative one is taken from the working directory."""
    stage = Path(stage).resolve()
    prov_file = stage / "provenance.json"
    written = plan.to_dict()
    if prov_file.is_file() and (stage / "plan.json").is_file():
        if json.loads((stage / "plan.json").read_text()) == written and (
            use_cache or (stage / "src").is_dir()
        ):
            return Provenance.model_validate_json(prov_file.read_text())
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    (stage / "plan.json").write_text(plan.to_json())
    tarball = sources.fetch(recipe)
    cmd = [
        sys.executable,
        "-m",
        "apptune.core.builds.steps",
        "--plan",
        str(stage / "plan.json"),
        "--source",
        str(tarball),
        "--stage",
        str(stage),
    ] + ([] if use_cache else ["--no-cache"])
    with open(stage / "build.log", "w") as log:
        rc = subprocess.run(
            cmd, cwd=stage, env=site.environ(), stdout=log, stderr=subprocess.STDOUT
        ).returncode
    if (stage / XFAIL_FILE).is_file():
        rec = json.loads((stage / XFAIL_FILE).read_text())
        raise ApptuneError(
            recipes.recipe_path(recipe.name),
            "build.expected_failures",
            f"{plan.variant} with {site.environment} is an expected build failure: {rec['reason']}",
        )
    if rc != 0 or not prov_file.is_file():
        err = last_error_line(stage / "build.log") or f"build exited with status {rc}"
        raise ApptuneError(stage / "build.log", plan.variant, f"build failed: {err}")
    return Provenance.model_validate_json(prov_file.read_text())


def install_variant(recipe: Recipe, variant: str, site: Site, stage: Path) -> Provenance:
    """Resolve the install ``variant`` (``installs.NAME``: the distribution's build, a site's
    module) in ``stage`` as the checks' install fixture does (``python -m
    apptune.core.builds.installed``, in the environment's variables); return its provenance."""
    stage = Path(stage).resolve()
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    cmd = [sys.executable, "-m", "apptune.core.builds.installed", "--app", recipe.name]
    cmd += ["--variant", variant, "--environment", site.environment, "--stage", str(stage)]
    with open(stage / "build.log", "w") as log:
        rc = subprocess.run(
            cmd, cwd=stage, env=site.environ(), stdout=log, stderr=subprocess.STDOUT
        ).returncode
    prov_file = stage / "provenance.json"
    if rc != 0 or not prov_file.is_file():
        err = last_error_line(stage / "build.log") or f"exited with status {rc}"
        raise ApptuneError(stage / "build.log", variant, f"install not found: {err}")
    return Provenance.model_validate_json(prov_file.read_text())


# ------------------------------------------------------------------------------- run
@dataclass
class RunResult:
    ok: bool
    summary: str
    figures: dict
    wall_time: float | None
    verification: RunVerification
    energy: EnergyRecord | None
    params: dict
    run_dir: str
    #: The runner's run-quality record (apptune/core/run/quality.py) and the machine's id.
    quality: RunQuality | None = None
    machine_id: str | None = None


def partition_of(site: Site) -> runplan.Partition:
    """The partition a trial's ranks are placed on: the site's launcher, MPI and cores."""
    return runplan.Partition(site.launcher, site.toolchain.mpi, site.num_cpus, site.scheduler)


def plan_run(
    recipe: Recipe,
    tier: str,
    site: Site,
    stage: Path,
    build_dir: Path,
    ranks: int | None = None,
    *,
    variant: str | None = None,
    placement: str = "default",
    ranks_per_node: str | int | None = None,
    threads: int = 1,
    binding: str | None = None,
    overrides: dict | None = None,
    env: dict | None = None,
) -> runplan.RunPlan:
    """A trial's run plan (:func:`apptune.core.run.runplan.make`, as a check makes its own): a
    placement it cannot apply is one line naming the recipe's placement or the option."""
    where = recipes.recipe_path(recipe.name)
    if placement != "default" and placement not in recipe.run.placements:
        raise ApptuneError(
            where,
            "run.placements",
            f"unknown placement '{placement}' "
            f"(known: {', '.join(recipe.run.placements) or 'none'})",
        )
    try:
        return runplan.make(
            recipe,
            tier,
            partition_of(site),
            stage=stage,
            build_dir=build_dir,
            build_variant=variant,
            ranks=ranks,
            placement=placement,
            ranks_per_node=ranks_per_node,
            threads=threads,
            binding=binding,
            overrides=overrides,
            env=env,
        )
    except pl.NoLauncherOptions as e:
        raise ApptuneError(where, f"run.placements.{placement}", str(e)) from None
    except pl.PlacementError as e:
        raise ApptuneError(None, "placement", str(e)) from None


def launch_line(site: Site, plan: runplan.RunPlan) -> list[str]:
    """The parallel launch that starts a trial's ranks: ReFrame's launcher of the site's
    partition, given the job's sizes and the launcher options of the plan's placement (as
    a check's job gets them)."""
    from reframe.core.backends import getlauncher

    launcher = getlauncher(site.launcher)()
    launcher.options = list(plan.placement.options)
    job = pl.JobSizes(
        num_tasks=plan.ranks,
        num_tasks_per_node=plan.placement.num_tasks_per_node,
        num_cpus_per_task=plan.placement.num_cpus_per_task,
        sched_access=list(site.access),
    )
    return pl.launch_argv(launcher, job)


def run_tier(
    recipe: Recipe,
    tier: str,
    build_dir: Path,
    run_dir: Path,
    site: Site,
    ranks: int | None = None,
    overrides: dict | None = None,
    env: dict | None = None,
    variant: str | None = None,
    changed_inputs: set[str] = frozenset(),
    threads: int = 1,
    binding: str | None = None,
    placement: str = "default",
    ranks_per_node: str | int | None = None,
) -> RunResult:
    """Run the build in ``build_dir`` on ``tier`` in a fresh ``run_dir`` and verify it.

    ``variant``: the build's variant, as a check's ``build_variant`` (None: the one its
    ``provenance.json`` names). ``overrides`` replace input parameters and
    ``changed_inputs`` names those that differ from the tier's (reference fields that
    depend on them are not compared). ``placement`` (a named placement of the recipe's
    ``run.placements``), ``ranks_per_node``, ``threads`` (per rank) and ``binding`` are
    applied as a check's are (:func:`apptune.placement.plan`)."""
    build_dir, run_dir = Path(build_dir).resolve(), Path(run_dir).resolve()
    if variant is None:
        prov = build_dir / "provenance.json"
        variant = (
            Provenance.model_validate_json(prov.read_text()).variant if prov.is_file() else None
        )
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    plan = plan_run(
        recipe,
        tier,
        site,
        run_dir,
        build_dir,
        ranks,
        variant=variant,
        placement=placement,
        ranks_per_node=ranks_per_node,
        threads=threads,
        binding=binding,
        overrides=overrides,
        env=env,
    )
    state = {"pid": None}  # the runner's, once started (_run)
    prepared = prepare.prepare(
        recipe,
        plan,
        _where(site),
        launch=launch_line(site, plan),
        tag=f"{os.getpid()}-{uuid.uuid4().hex[:12]}",
        test=TRIAL_TEST,
        job_id=lambda: state["pid"],
    )
    spec, sampler = prepared.spec, prepared.sampler
    sampler.state = state
    deadline = time_limit_seconds(recipe.tiers[tier].time_limit)
    try:
        (run_dir / "command.txt").write_text(shlex.join(spec.steps[-1].argv) + "\n")
        # the same runner as the checks' job script: no shell, exit status, run quality
        runner.write_spec(run_dir / runner.SPEC_FILE, spec)
        rc = _run(
            [sys.executable, "-m", "apptune.core.run.runner", runner.SPEC_FILE],
            run_dir,
            site.environ(spec.env),
            deadline + spec.quiet_wait_s if deadline else None,
            sampler,
        )
    finally:
        rec_energy = sampler.stop()
    atomic_write_json(run_dir / "energy.json", rec_energy.to_dict())
    identity = {
        **prepared.identity,
        "job": {"scheduler": "local", "jobid": str(state["pid"]), "state": _state(rc)},
        "trial": True,  # a tune or bisect candidate, not a check of a tier
    }
    record = outcome.evaluate(
        recipe,
        tier,
        run_dir,
        identity,
        build_dir=build_dir,
        stdout=STDOUT,
        energy_record=rec_energy,
        environment=site.environment,
        variant=plan.run_variant,
        changed_inputs=changed_inputs,
        stderr=run_dir / STDERR,
        no_record=f"it was killed before it ended (job exit code {rc})",
        nodes=plan.nodes,
        require_provenance=False,
    )
    outcome.write_record(run_dir, record)
    return _result(record, plan.params, run_dir)


def _where(site: Site) -> prepare.Where:
    """Where a trial runs: the site's environment and partition, the job being its runner,
    started on this node (scheduler ``local``)."""
    return prepare.Where(
        environment=site.environment,
        system=site.system,
        partition=site.partition,
        scheduler="local",
        num_cpus=site.num_cpus,
        extras=site.extras,
        declared=site.declared,
    )


def _result(record: RunRecord, params: dict, run_dir: Path) -> RunResult:
    """What tune and bisect read of a trial's run record."""
    v = record.verification
    figures = record.figures or {"wall_time": record.run.wall_s if record.run else None}
    result = RunResult(
        ok=v.ok,
        summary=v.summary,
        figures=figures,
        wall_time=figures.get("wall_time"),
        verification=v,
        energy=record.energy,
        params=params,
        run_dir=str(run_dir),
        quality=record.quality,
        machine_id=record.machine_id,
    )
    return result


def _state(returncode: int | None) -> str:
    """The job state ReFrame's local scheduler gives a job that ended so."""
    if returncode == -9:
        return "TIMEOUT"
    return "SUCCESS" if returncode == 0 else "FAILURE"


def _run(argv, cwd, environ, deadline, sampler) -> int:
    """Start the runner in its own session and wait, its output and errors in
    :data:`STDOUT` and :data:`STDERR` (as a job's, with the program's); at the deadline
    the whole session is killed (the runner and every step it started)."""
    with open(Path(cwd) / STDOUT, "w") as out, open(Path(cwd) / STDERR, "w") as err:
        try:
            p = subprocess.Popen(
                argv, cwd=cwd, env=environ, stdout=out, stderr=err, start_new_session=True
            )
        except OSError as e:
            raise ApptuneError(None, argv[0], f"cannot run: {e.strerror}") from None
        sampler.state["pid"] = p.pid
        try:
            return p.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            return -9
