"""Run one timed run of an application: pre-run steps, the program, its exit status,
its wall time and how disturbed it was.

    python -m apptune.core.run.runner SPEC.json

The job script of every application check (and every candidate of ``apptune tune``
and ``apptune bisect``) is this one command: every word that comes from a recipe or
an input (arguments, environment values, launcher options) is an element of an
argument list in ``SPEC.json`` and reaches ``execve`` unchanged. No shell ever
sees it, so a word like ``; rm -rf ~`` is one argument, not a command.

The runner

* sets the spec's environment variables (and ``APPTUNE_RUN_TAG``, by which the
  job's tasks are recognised when a scheduler starts them outside its process tree);
* records the machine's fingerprint (:mod:`apptune.machine`);
* optionally waits, bounded, until the node is quiet
  (:func:`apptune.core.run.quality.wait_for_quiet`);
* runs the steps in order (pre-run steps, then the measured program, each an argument
  list, optionally with its standard input read from a file and its output redirected
  into a file, both opened here and passed as file descriptors), stopping at the first
  step that fails; the timed region spans all of them;
* measures the run's quality meanwhile (:class:`apptune.core.run.quality.Monitor`), and the CPUs
  each rank of the measured program may run on (its binding), with the step that launched it
  (an integrity pass before the timed run is a launch of its own);
* writes the run record (``SPEC['record']``, atomically) and exits with the failed
  step's exit status (``128 + N`` for a step killed by signal N), so the scheduler
  and ReFrame see the application's status, not that of a later command.

SIGTERM, SIGINT and SIGHUP are passed on to the running step; the record then says
which signal ended the run, and the runner exits with ``128 + N``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ... import machine
from ...constants import STACK_LIMIT_PATTERN
from ...errors import ApptuneError, format_validation_error
from ...yamlio import atomic_write_json
from . import knobs, quality, scratch
from .scratch import ScratchSpec

if TYPE_CHECKING:
    from ...models import RunnerRecord

#: The run record's default name in the run's directory.
RECORD_FILE = ".apptune-run.json"
#: The spec's default name.
SPEC_FILE = ".apptune-run-spec.json"


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Where the step comes from, for messages (e.g. ``run.prerun[0]``, ``run``).
    label: str
    argv: list[str] = Field(min_length=1)
    #: Redirect standard output (and error, unless ``stderr`` is given) into this file
    #: (relative to the run directory).
    stdout: str | None = None
    stderr: str | None = None
    #: Standard input from this file (relative to the run directory), given to the step
    #: as an open file: no shell redirection.
    stdin: str | None = None


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Pre-run steps, then the measured program (the last step).
    steps: list[Step] = Field(min_length=1)
    env: dict[str, str] = {}
    record: str = RECORD_FILE
    #: The process that started the job (ReFrame's, or apptune's for trials): it and its
    #: parents are the harness, not a disturbance, where they run on the job's node ...
    harness_pid: int | None = None
    #: ... which is where the boot id (:func:`apptune.core.run.procfs.boot_id`) is the harness's.
    harness_boot_id: str | None = None
    #: Tag of the job's tasks (``APPTUNE_RUN_TAG``): they are found by it also when a
    #: scheduler starts them outside the runner's process tree (srun).
    tag: str | None = None
    #: The measured program: the CPUs each of its ranks may run on are recorded
    #: (``binding`` in the run record).
    program: str | None = None
    #: Wait at most this long for a quiet node before the timed region (0: do not wait).
    quiet_wait_s: float = Field(default=0, ge=0)
    #: Run-quality limits (:class:`apptune.core.run.quality.Limits`).
    limits: dict[str, float] = {}
    #: Touched when the timed region ends (stops the per-node energy agents).
    stop_file: str | None = None
    #: The run's own directory under the site's scratch directory (:mod:`apptune.core.run.scratch`):
    #: checked before the steps, its files read after them, removed at the end.
    scratch: ScratchSpec | None = None
    #: The machine knobs asked for (:mod:`apptune.core.run.knobs`: ``asked``, ``launcher``,
    #: ``mpi``): refused before the steps where the node cannot set one (nothing runs then), the
    #: runner's sysfs writes done and put back after them, what was in effect recorded.
    knobs: dict | None = None
    #: The stack size limit of the steps (the recipe's ``run.stack``): ``unlimited`` or a
    #: size with K, M or G.
    stack: str | None = Field(default=None, pattern=STACK_LIMIT_PATTERN)


def stack_limit(stack: str) -> tuple[int | None, str | None]:
    """Raise this process's stack limit to ``stack`` (its steps inherit it; srun passes it
    on to the tasks): (the limit set in bytes, None for unlimited; the reason it cannot be)."""
    want = (
        resource.RLIM_INFINITY
        if stack == "unlimited"
        else int(stack[:-1]) * 1024 ** ("KMG".index(stack[-1]) + 1)
    )
    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if hard != resource.RLIM_INFINITY and (want == resource.RLIM_INFINITY or want > hard):
        return None, (
            f"run.stack: the stack limit cannot be raised to {stack}: the hard limit "
            f"(ulimit -Hs) is {hard // 1024} KiB"
        )
    resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
    return (None if want == resource.RLIM_INFINITY else want), None


def exit_status(returncode: int) -> int:
    """A Popen return code as a shell reports it: ``128 + N`` for signal N."""
    return 128 - returncode if returncode < 0 else returncode


class _Signals:
    """Pass SIGTERM/SIGINT/SIGHUP on to the running step and remember the first one."""

    def __init__(self):
        self.received: int | None = None
        self.child: subprocess.Popen | None = None
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signum
        if self.child is not None and self.child.poll() is None:
            try:
                self.child.send_signal(signum)
            except OSError:
                pass


def run(spec: Spec, cwd: Path) -> tuple[int, dict]:
    """Run the spec's steps in ``cwd``; return (exit status, run record)."""
    sig = _Signals()
    env = dict(os.environ, **spec.env)
    if spec.tag:
        env["APPTUNE_RUN_TAG"] = spec.tag
    limits = quality.Limits.from_dict(spec.limits)
    rec: dict = {"machine": machine.fingerprint()}
    rec["machine_id"] = machine.machine_id(rec["machine"])
    # the harness's own processes, the job's and those of its Slurm job are told apart
    who = {
        "harness_boot_id": spec.harness_boot_id,
        "tag": spec.tag,
        "job_id": os.environ.get("SLURM_JOB_ID"),
    }
    if spec.quiet_wait_s > 0:
        rec["quiet_wait"] = quality.wait_for_quiet(
            spec.quiet_wait_s, limits, spec.harness_pid, **who
        )
    status, steps, failed, message = 0, [], None, None
    info = None
    if spec.scratch is not None:
        info, message = scratch.prepare(spec.scratch)
        rec["scratch"] = info
        if message:
            status, failed = 1, "scratch"
    if spec.stack is not None and failed is None:
        rec["stack_limit"], message = stack_limit(spec.stack)
        if message:
            status, failed = 1, "stack"
    kn = None
    if spec.knobs is not None and failed is None:
        kn = knobs.before_run(spec.knobs, _affinity())
        refused = kn[0].get("refused")
        if refused:
            status, failed, message = 1, "knobs", "; ".join(refused.values())
    try:
        _timed(spec, cwd, env, sig, rec, limits, who, (status, steps, failed, message), kn)
    finally:
        if info is not None:
            scratch.cleanup(spec.scratch, info)
        if kn is not None and "knobs" not in rec:  # the timed region broke off
            knobs.restore(kn[1])
    atomic_write_json(cwd / spec.record, rec)
    return rec["exit_status"], rec


def _affinity() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except OSError:
        return set()


def _timed(spec, cwd, env, sig, rec, limits, who, state, kn=None) -> None:
    """The timed region (the steps, unless the scratch or the knobs' check failed) and
    the record; ``kn``: the knob record and what puts the knobs back
    (:mod:`apptune.core.run.knobs`)."""
    status, steps, failed, message = state
    probe = knobs.probe if kn is not None else None
    mon = quality.Monitor(harness_pid=spec.harness_pid, program=spec.program, probe=probe, **who)
    mon.start()
    rec["t_start"] = time.time()
    t0 = time.monotonic()
    for step in spec.steps if failed is None else []:
        if sig.received is not None:
            break
        s0 = time.monotonic()
        mon.begin_launch(step.label)  # the ranks seen from now on are this step's
        out = open(cwd / step.stdout, "w") if step.stdout else None
        err = open(cwd / step.stderr, "w") if step.stderr else None
        inp = None
        try:
            try:
                inp = open(cwd / step.stdin, "rb") if step.stdin else None
            except OSError as e:
                status = 1
                message = f"{step.label}: cannot open its stdin {step.stdin!r}: {e.strerror}"
            else:
                try:
                    sig.child = subprocess.Popen(
                        step.argv,
                        cwd=cwd,
                        env=env,
                        stdin=inp,
                        stdout=out,
                        stderr=err or (subprocess.STDOUT if out else None),
                    )
                except OSError as e:
                    status = 127
                    message = f"{step.label}: cannot run {step.argv[0]!r}: {e.strerror}"
                else:
                    if sig.received is not None:  # a signal that came while it was starting
                        sig.child.send_signal(sig.received)
                    status = exit_status(sig.child.wait())
        finally:
            for f in (inp, out, err):
                if f:
                    f.close()
        steps.append(
            {
                "label": step.label,
                "argv": step.argv,
                "exit_status": status,
                "seconds": round(time.monotonic() - s0, 3),
            }
        )
        if status != 0:
            failed = step.label
            break
    rec["wall_s"] = time.monotonic() - t0
    if spec.stop_file:
        Path(cwd, spec.stop_file).parent.mkdir(parents=True, exist_ok=True)
        Path(cwd, spec.stop_file).touch()
    rec["quality"] = mon.stop(limits)
    rec["binding"] = mon.binding()
    try:  # after the timed region: hashing the libraries costs the run nothing
        rec["libraries"] = mon.libraries()
    except (OSError, ValueError):  # worth recording, never worth a failed run
        rec["libraries"] = []
    if kn is not None:
        rec["knobs"] = knobs.after_run(*kn, mon.freq_cpu, mon.probed, rec["binding"], _affinity())
    if sig.received is not None:
        status = 128 + sig.received
        message = f"run ended by signal {signal.Signals(sig.received).name}" + (
            f" during {steps[-1]['label']}" if steps else " before it started"
        )
        failed = failed or (steps[-1]["label"] if steps else "start")
    elif failed and message is None:
        st = steps[-1]["exit_status"]
        how = (
            f"was killed by signal {signal.Signals(st - 128).name}"
            if 128 < st < 128 + 65 and st - 128 in signal.valid_signals()
            else f"exited with status {st}"
        )
        message = f"{failed} ({' '.join(steps[-1]['argv'])[:200]}) {how}"
        if spec.scratch is not None:
            message = scratch.full(spec.scratch, rec["scratch"]) or message
    if spec.scratch is not None and failed is None and sig.received is None:
        problem = scratch.summarize(spec.scratch, cwd)
        if problem:
            status, failed, message = 1, "scratch", problem
    rec.update(
        exit_status=status,
        failed_step=failed,
        message=message,
        steps=steps,
        completed=failed is None and sig.received is None,
    )


def load_record(run_dir: str | os.PathLike, name: str = RECORD_FILE) -> RunnerRecord | None:
    """The runner's record of a run directory (:class:`apptune.models.RunnerRecord`), None
    if the runner did not write one (or was stopped before it was whole). A record that is
    not one (hand-edited, of another program) is an error naming the file and field."""
    from ...models import RunnerRecord  # here: the runner itself never reads a record

    path = Path(run_dir, name)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        raise ApptuneError(path, None, "not a runner record: not a JSON object")
    try:
        return RunnerRecord.model_validate(data)
    except ValidationError as e:
        raise format_validation_error(path, e, data, RunnerRecord, hint=None) from None


def write_spec(path: str | os.PathLike, spec: Spec) -> None:
    atomic_write_json(path, spec.model_dump())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m apptune.core.run.runner SPEC.json", file=sys.stderr)
        return 2
    path = Path(argv[0]).resolve()
    try:
        spec = Spec.model_validate_json(path.read_text())
    except (OSError, ValueError) as e:
        print(
            f"apptune: error: {path}: not a runner spec ({' '.join(str(e).split())[:300]})",
            file=sys.stderr,
        )
        return 2
    status, rec = run(spec, Path.cwd())
    if rec.get("message"):
        print(f"apptune: error: {rec['message']}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
