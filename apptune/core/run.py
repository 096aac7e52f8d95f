"""One run of an application, the same for the checks (:class:`apptune.rfm.AppRun`) and for
tune and bisect (:mod:`apptune.core.localrun`).

* :func:`prepare`: from the facts both have (:class:`Where` a run runs, its launch, and
  its plan: :class:`apptune.core.runplan.RunPlan`), the runner's spec, the energy sampler
  (started) and the run record's identity.
* :func:`steps`: the commands the runner (:mod:`apptune.core.runner`) starts, as argument
  lists: the recipe's pre-run steps, then the program with its arguments.
* :func:`evaluate`: the run record made of what the run left: the runner's record (exit
  status, wall time, run quality, machine, the CPUs the ranks could run on), the outputs
  parsed and verified against ``reference/APP/<tier>.yaml`` and the binding against the
  placement's, the figures, the energy and the build's provenance.
  It writes ``verification.json``, ``provenance.json`` and the curves into the run
  directory; the caller adds what only it knows (a baseline verdict) and writes the
  record as ``apptune-result.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pydantic

from .. import energy
from ..constants import CURVES_DIR, RESULT_FILE
from ..errors import ApptuneError, format_validation_error, printable
from ..models import READER_FIELDS, Recipe, RunnerRecord, RunRecord, as_data
from ..yamlio import atomic_write_json
from . import envrecord, inputs, knobs, outputs, quality, ranks, recipes, runner, scratch, verify
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
    partition, or a trial's :class:`apptune.core.site.Site` (whose job is its runner, on this
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
    #: The modules and variables the site declares (:func:`apptune.core.site.declared_environment`).
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

    #: The runner's spec; the caller writes it (:func:`apptune.core.runner.write_spec`).
    spec: runner.Spec
    #: The energy sampler, started; the caller stops it when the run has ended.
    sampler: energy.Sampler
    #: The run record's identity (:func:`evaluate`); the caller adds the job.
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
    """Prepare the run ``plan`` of ``recipe`` (:func:`apptune.core.runplan.make`: its tier,
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


def last_line(path: str | os.PathLike | None) -> str | None:
    """A program's last words on stderr: the last non-empty line of a file, or None. A
    message framed by rules of dashes (Open MPI's and PMIx's help messages, e.g. "There are
    not enough slots available ...") gives its first sentence instead of the rule."""
    if path is None:
        return None
    try:
        lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines()]
    except OSError:
        return None
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    if _rule(lines[-1]):
        top = next((i for i in range(len(lines) - 2, -1, -1) if _rule(lines[i])), None)
        if top is not None and top + 1 < len(lines) - 1:
            text = " ".join(lines[top + 1 : len(lines) - 1])
            first = text.split(". ")[0].split(": ")[0]
            return first.rstrip(".:")[:200]
    return lines[-1][:200]


def _rule(line: str) -> bool:
    return len(line) >= 10 and set(line) <= set("-=*")


def run_summary(rec: RunnerRecord) -> dict:
    """The parts of the runner's record a result keeps (machine and quality are kept whole)."""
    keys = ("exit_status", "failed_step", "message", "wall_s", "t_start", "quiet_wait", "completed")
    return {k: getattr(rec, k) for k in keys}


def figures(recipe: Recipe, values: dict, wall_s: float | None, energy_record) -> dict:
    """The recipe's figures of a run, its wall time, and the energy figures."""
    out = recipes.figure_values(recipe, values)
    out["wall_time"] = wall_s
    out.update(energy_record.figures(wall_s, {n: out.get(n) for n in recipe.run.per_watt}))
    return out


def failed(result: dict, message: str, run_dir: Path) -> RunRecord:
    """``result`` as a run that produced nothing to verify, saying why."""
    result["verification"] = {"ok": False, "summary": printable(message)}
    return _typed(run_dir, result)


def _typed(run_dir: str | os.PathLike, record: dict) -> RunRecord:
    """``record`` as a :class:`RunRecord`; a key the schema does not know, or a part that is
    not one, is an error naming the record's file and the field (the checks and the trials
    cannot drift apart)."""
    path = Path(run_dir, RESULT_FILE)
    unknown = sorted(set(record) - set(RunRecord.model_fields) | set(record) & READER_FIELDS)
    if unknown:
        raise ApptuneError(
            path, unknown[0], "not a field of a run record (apptune.models.RunRecord)"
        )
    try:
        return RunRecord.model_validate(record)
    except pydantic.ValidationError as e:
        raise format_validation_error(path, e, record, RunRecord, hint=None) from None


def recorded_launch(declared: dict, record_env=()) -> dict:
    """The site's modules and variables (:func:`apptune.core.site.declared_environment`) as
    a run record keeps them: every name, a value only where it can change a result and is
    no secret (:mod:`apptune.core.envrecord`; ``record_env``: the partition's own patterns)."""
    out = dict(declared)
    if out.get("env_vars"):
        out["env_vars"] = envrecord.record(out["env_vars"], record_env)
    return out


def launch_facts(run_dir: Path, site: dict | None) -> dict:
    """How the program was launched: the launcher and its options (the timed step's
    arguments before the program), the environment the runner set, and the modules and
    environment variables of the site's environment (``site``: ``{modules, env_vars}``,
    as :func:`recorded_launch` keeps them)."""
    out = dict(site or {})
    try:
        spec = runner.Spec.model_validate_json((run_dir / runner.SPEC_FILE).read_text())
    except (OSError, ValueError):  # none, or not a runner's spec (ValidationError included)
        return out
    steps = [s for s in spec.steps if s.label == "run"]
    argv = steps[-1].argv if steps else []
    if spec.program in argv:
        out["launcher"] = argv[: argv.index(spec.program)]
    if spec.env:
        env = dict(spec.env)
        path = spec.scratch.path if spec.scratch else None
        if path:  # the run's own scratch directory is new each run: no change of the launch
            env = {k: v.replace(path, "{{ scratch }}") for k, v in env.items()}
        out["env_vars"] = dict(envrecord.record(env, data=True), **out.get("env_vars", {}))
    return out


def evaluate(
    recipe: Recipe,
    tier: str,
    run_dir: Path,
    identity: dict,
    *,
    build_dir: Path,
    stdout: str,
    energy_record,
    environment: str | None,
    variant: str | None,
    changed_inputs: set[str] | frozenset[str] = frozenset(),
    unfinished: str | None = None,
    stderr: str | os.PathLike | None = None,
    no_record: str = "it was killed before it ended",
    nodes: int = 1,
    require_provenance: bool = True,
) -> RunRecord:
    """The run record (:class:`RunRecord`) of the run in ``run_dir``: ``identity`` (app,
    tier, variant, ...) plus provenance, energy, run quality, values, figures and verification.

    ``unfinished``: the scheduler's reason when the job did not run to its end (that is
    then the verdict); ``stderr``: the job's standard error, whose last line explains a
    crash; ``no_record``: why a run may have left no runner record."""
    run_dir = Path(run_dir)
    result = dict(identity)
    result["launch"] = launch_facts(run_dir, identity.get("launch"))
    prov = Path(build_dir, "provenance.json")
    # a build of apptune's own (python -m apptune.core.build) has one; bisect's mixed trees not
    result["provenance"] = (
        json.loads(prov.read_text()) if prov.is_file() or require_provenance else None
    )
    result["energy"] = energy_record.to_dict()
    try:
        rec = runner.load_record(run_dir)
    except ApptuneError as e:  # not the runner's record: the one line is the verdict
        return failed(result, f"{unfinished}; {e}" if unfinished else str(e), run_dir)
    if unfinished:
        if "time limit" in unfinished:  # slow on a busy node, or hung on a quiet one
            unfinished += f"; {quality.at_time_limit(rec.quality if rec else None)}"
        return failed(result, unfinished, run_dir)
    if rec is None:
        tail = last_line(stderr)
        return failed(
            result,
            f"the run left no run record ({runner.RECORD_FILE}): {no_record}"
            + (f"; {tail}" if tail else ""),
            run_dir,
        )
    if rec.libraries:
        result["launch"]["loaded"] = as_data(rec.libraries)
    q = as_data(rec.quality) or {}
    if nodes > 1 and q:
        # the runner watches the node its job script runs on; the others are not measured
        q["scope"] = f"measured on the first of the job's {nodes} nodes"
    if rec.scratch is not None:
        result["scratch"] = rec.scratch.data()
    result.update(
        quality=q or None,
        machine=as_data(rec.machine),
        machine_id=rec.machine_id,
        run=run_summary(rec),
    )
    if identity.get("knobs"):
        result["knobs"] = knob_record(identity["knobs"], rec)
        if rec.failed_step == "knobs":  # refused on the node: nothing ran
            return failed(result, rec.message or "a knob was refused", run_dir)
    crash = None
    if rec.exit_status != 0:
        tail = last_line(stderr)
        crash = rec.message or f"run exited with status {rec.exit_status}"
        if tail and tail not in crash and not tail.startswith("apptune: error:"):
            crash += f" ({tail})"
    run = recipe.run
    said = app_error(recipe, run_dir, [stdout, stderr]) if crash else None
    if said:  # the application said why, one line: that is the verdict
        prog = Path(((rec.steps[-1].argv if rec.steps else None) or ["the run"])[0]).name
        return failed(result, f"{said} ({prog}: {crash})", run_dir)
    try:
        values, curves = outputs.parse_all(run.outputs, run_dir, stdout, tier)
    except ApptuneError as e:
        return failed(result, f"{crash}: {e}" if crash else str(e), run_dir)
    result["values"] = values  # every parsed field, also unverified (`apptune bless --new`)
    result["curves"] = outputs.write_curves(curves, run_dir / CURVES_DIR)
    texts = outputs.own_check_texts(run, run_dir, stdout)
    v = verify.verify(
        recipe.name,
        tier,
        values,
        run.own_checks,
        texts,
        environment,
        variant,
        run.outputs[0].file,
        changed_inputs=set(changed_inputs),
    )
    if result["provenance"] is not None:
        atomic_write_json(run_dir / "provenance.json", result["provenance"])
    if crash:
        v.ok = False
        v.own_checks.append(verify.failed_check("exit status", crash))
    # the CPUs the ranks could run on against the binding asked for: a result measured in
    # another placement than its name says would be compared with the wrong baseline
    lay = identity.get("placement_layout") or {}
    result["binding"] = as_data(rec.binding)
    wrong = ranks.binding_problem(rec.binding, lay.get("binding"), lay.get("threads_per_rank") or 1)
    if wrong:
        v.ok = False
        v.own_checks.append(verify.failed_check("binding", wrong))
    for line in (result.get("knobs") or {}).get("problems") or []:
        v.ok = False
        v.own_checks.append(verify.failed_check("knobs", line))
    result["figures"] = figures(recipe, values, rec.wall_s, energy_record)
    verify.check_figures(v, result["figures"])
    verify.judge_known_wrong(v)
    atomic_write_json(run_dir / "verification.json", v.to_dict())
    result["verification"] = v.to_dict()
    return _typed(run_dir, result)


def knob_record(asked: dict, rec: RunnerRecord) -> dict:
    """The run record's knob part: what was asked, the runner's record of the node and of
    what was in effect, and one line per knob that was not (:func:`apptune.core.knobs.problems`)."""
    ran = as_data(rec.knobs)
    out = dict(asked, **(ran or {}))
    out["problems"] = knobs.problems(knobs.Asked.of(**out.get("asked", {})), rec.knobs, rec.binding)
    if not ran:
        out["problems"] = ["the runner recorded no knobs: what was in effect is unknown"]
    return out


def app_error(recipe: Recipe, run_dir: Path, streams: list) -> str | None:
    """The first of the recipe's ``run.errors`` that a failed run's outputs hold (the job's
    stdout and stderr, each pre-run step's stdout file), as its one-line message."""
    import re

    files = [*streams, *(f for s in recipe.run.prerun for f in (s.stdout, s.stderr) if f)]
    texts = []
    for f in files:
        p = Path(run_dir, f) if f else None
        if p is not None and p.is_file():
            texts.append(p.read_text(errors="replace"))
    for e in recipe.run.errors:
        for text in texts:
            m = re.search(e.pattern, text, flags=re.M)
            if m is None:
                continue
            groups = {k: _in_run(v, run_dir) for k, v in m.groupdict(default="").items()}
            return re.sub(r"\{(\w+)\}", lambda g, d=groups: d[g.group(1)], e.message)
    return None


def _in_run(text: str, run_dir: Path) -> str:
    """A path inside the run directory relative to it; anything else as it is."""
    for d in (Path(run_dir), Path(run_dir).resolve()):
        if text and Path(text).is_absolute() and Path(text).is_relative_to(d):
            return os.path.relpath(text, d)
    return text


def write_record(run_dir: str | os.PathLike, record: RunRecord | dict) -> Path:
    """Write ``record`` as the run directory's ``apptune-result.json``, atomically, after
    checking it against :class:`RunRecord` (a key the schema does not know is refused, so
    the checks and the trials cannot drift apart)."""
    data = record.data() if isinstance(record, RunRecord) else record
    _typed(run_dir, data)
    path = Path(run_dir, RESULT_FILE)
    atomic_write_json(path, data)
    return path
