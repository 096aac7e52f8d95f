"""The outcome of a run of an application, the same for the checks
(:class:`apptune.rfm.AppRun`) and for tune and bisect (:mod:`apptune.core.run.localrun`),
prepared by :mod:`apptune.core.run.prepare`.

:func:`evaluate`: the run record made of what the run left: the runner's record (exit
status, wall time, run quality, machine, the CPUs the ranks could run on), the outputs
parsed and verified against ``reference/APP/<tier>.yaml`` and the binding against the
placement's, the figures, the energy and the build's provenance. It writes
``verification.json``, ``provenance.json`` and the curves into the run directory; the
caller adds what only it knows (a baseline verdict) and writes the record as
``apptune-result.json`` (:func:`write_record`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic

from ...constants import CURVES_DIR, RESULT_FILE
from ...errors import ApptuneError, format_validation_error, printable
from ...models import READER_FIELDS, Recipe, RunnerRecord, RunRecord, as_data
from ...yamlio import atomic_write_json
from ..data import recipes
from ..verification import outputs, verify
from . import envrecord, knobs, quality, ranks, runner


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


def launch_facts(run_dir: Path, site: dict | None) -> dict:
    """How the program was launched: the launcher and its options (the timed step's
    arguments before the program), the environment the runner set, and the modules and
    environment variables of the site's environment (``site``: ``{modules, env_vars}``,
    as :func:`apptune.core.run.prepare.recorded_launch` keeps them)."""
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
    # a build of apptune's own (python -m apptune.core.builds.steps) has one; bisect's mixed trees
    # not
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
    what was in effect, and one line per knob that was not
    (:func:`apptune.core.run.knobs.problems`)."""
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
