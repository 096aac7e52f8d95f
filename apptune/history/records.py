"""Reading a run directory: ReFrame's run report and apptune's per-test result records.

One reader for everything that looks at a finished run (bless, baseline update, the
report, the history). ReFrame copies a passed test's files into ``output/``; a failed
test's stay in ``stage/`` (its ``stagedir``), so a result record is looked up in the
test's output directory first, then in its stage directory.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pydantic

from ..constants import RESULT_FILE
from ..core.run import slurm
from ..errors import ApptuneError, format_validation_error, last_error_line, printable
from ..models import RunRecord, RunReport


def load_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def load_record(path: str | Path) -> RunRecord | None:
    """The run record (``apptune-result.json``, :class:`apptune.models.RunRecord`) in
    ``path``, a file or its run directory; None if there is none. A record that is not
    one (cut short, hand-edited, of another program) is an error naming the file and field.
    Records of older versions load: a part's missing fields read as their defaults and keys
    a version no longer writes are kept (apptune/models/record.py)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ApptuneError(path, None, f"cannot read the run record: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ApptuneError(path, None, f"not a run record: invalid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise ApptuneError(path, None, "not a run record: not a JSON object")
    try:
        return RunRecord.model_validate(data)
    except pydantic.ValidationError as e:
        raise format_validation_error(path, e, data, RunRecord, hint=None) from None


def _record_and_problem(tc: dict) -> tuple[RunRecord | None, ApptuneError | None]:
    """The run record of one ReFrame test case (:func:`load_record`: in its output
    directory, else in its stage directory) and the error of the first record found that
    is not one."""
    problem = None
    for d in (tc.get("outputdir"), tc.get("stagedir")):
        if d:
            try:
                r = load_record(Path(d))
            except ApptuneError as e:
                problem = problem or e
                continue
            if r is not None:
                return r, problem
    return None, problem


def record_of(tc: dict) -> RunRecord | None:
    """The run record of one ReFrame test case (:func:`load_record`), None if it wrote none
    (or an unreadable one: that is said on stderr, in one line, and the case counts as
    without a record, so one broken file stops no report; :func:`record_problem` says it
    where the case is shown)."""
    r, problem = _record_and_problem(tc)
    if problem is not None:
        print(f"apptune: warning: {problem}", file=sys.stderr)
    return r


def record_problem(tc: dict) -> ApptuneError | None:
    """Why a test case that left a run record has none to show: the error naming the record
    file and the field that is not as the schema says (None: it has a record, or left none)."""
    r, problem = _record_and_problem(tc)
    return problem if r is None else None


def read_report(run_dir: Path, report_file: Path | None = None) -> dict:
    """ReFrame's run report of a run directory (``report_file``: another one), checked
    (:func:`check_report`)."""
    f = Path(report_file or Path(run_dir) / "report.json")
    try:
        rep = json.loads(f.read_text())
    except FileNotFoundError:
        raise ApptuneError(f, None, "no ReFrame run report (did the run start?)") from None
    except OSError as e:
        raise ApptuneError(f, None, f"cannot read the run report: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
        raise ApptuneError(f, None, f"not a ReFrame run report: invalid JSON ({why})") from None
    return check_report(rep, f)


def check_report(rep, source) -> dict:
    """``rep`` when it is a run report of the shape apptune reads (:class:`RunReport`);
    otherwise the error naming ``source`` (its file) and the first field that is not."""
    if not isinstance(rep, dict):
        raise ApptuneError(source, None, "not a ReFrame run report: not a JSON object")
    try:
        RunReport.model_validate(rep)
    except pydantic.ValidationError as e:
        raise format_validation_error(source, e, rep, RunReport, hint=None) from None
    return rep


def testcases(rep: dict) -> list[dict]:
    return [tc for run in rep.get("runs", []) for tc in run.get("testcases", [])]


@dataclass
class Case:
    """One test case of a run: what ReFrame says, and apptune's record if there is one."""

    test: str
    environment: str | None
    result: str  # pass, fail, skip, xfail, xpass, abort
    fail_phase: str | None
    fail_reason: str | None
    fixture: bool
    #: The run record, with the run directory it was read from (``run_id``, ``session``).
    record: RunRecord | None

    @property
    def name(self) -> str:
        return f"{self.test} [{self.environment}]" if self.environment else self.test

    @property
    def verified(self) -> bool:
        return self.record is not None and self.record.verification.ok


def cases(run_dir: Path, report_file: Path | None = None) -> list[Case]:
    """Every test case of a run directory, with the record read where ReFrame left it."""
    run_dir = Path(run_dir)
    out = []
    for tc in testcases(read_report(run_dir, report_file)):
        rec = None if tc.get("fixture") else record_of(tc)
        if rec is not None:
            rec.run_id, rec.session = run_dir.name, str(run_dir.resolve())
        out.append(
            Case(
                test=tc.get("display_name") or tc.get("unique_name", "?"),
                environment=tc.get("environ"),
                result=tc.get("result") or "?",
                fail_phase=tc.get("fail_phase"),
                fail_reason=tc.get("fail_reason"),
                fixture=bool(tc.get("fixture")),
                record=rec,
            )
        )
    return out


#: What ReFrame's local scheduler says of a job it stopped at its time limit.
TIMED_OUT = "job timed out"


def timed_out(tc: dict, reason: str) -> str:
    """A job stopped at its time limit, said with what the run-quality monitor saw of it
    (the runner's record, written when the job was stopped) and, where the tier's reference
    lists the variant's known-wrong result (a planted fault), that it was never reached."""
    from ..core.run import quality, runner
    from ..core.verification import verify

    stage = tc.get("stagedir")
    try:
        rec = runner.load_record(stage) if stage else None
    except ApptuneError as e:  # not the runner's record: say so, not what it would say
        return f"{reason}; {e}"
    out = f"{reason}; {quality.at_time_limit(rec.quality if rec else None)}"
    app, tier = tc.get("app"), tc.get("tier")
    variant = re.search(r"%build\.variant=(\S+)", tc.get("display_name") or "")
    if isinstance(app, str) and isinstance(tier, str) and variant:
        try:
            path, ref = verify.load_reference(app, tier)
        except ApptuneError:
            return out
        known = verify.known_wrong(ref, tc.get("environ"), variant[1])
        if known:
            out += (
                f"; the expected failure (reference/{app}/{path.name} xfail {known[0]}) was "
                "never reached: a run stopped at its time limit is not the planted fault caught"
            )
    return out


def failure(tc: dict, verification: str | None = None) -> dict:
    """A failed test case as the report and the history show it: test, environment, phase and
    the one-line reason (a run record that is not one, the verification's, the build's or
    job's last apptune error, or the scheduler's explanation), with its stage directory.
    ``verification``: the summary of its run record's verification (None: no record read)."""
    reason = tc.get("fail_reason") or "failed"
    phase = tc.get("fail_phase")
    if TIMED_OUT in reason:
        reason = timed_out(tc, reason)
    elif verification and phase == "sanity":
        reason = verification
    elif phase in ("compile", "compile_wait") and tc.get("stagedir"):
        err = last_error_line(Path(tc["stagedir"]) / "rfm_build.err")
        reason = err or reason
    elif tc.get("stagedir"):
        err = last_error_line(Path(tc["stagedir"]) / (tc.get("job_stderr") or "rfm_job.err"))
        reason = err or reason
    # the scheduler's part (sbatch could not reach slurmctld, job blocked on down nodes)
    reason = slurm.explain_reframe_failure(tc.get("fail_reason")) or reason
    # a run record that is not one: whatever else the case says, it has no verified result
    problem = None if verification is not None else record_problem(tc)
    reason = problem or reason
    return {
        "test": tc["display_name"],
        "environment": tc.get("environ"),
        "phase": phase,
        "reason": printable(" ".join(str(reason).split())),
        "stagedir": tc.get("stagedir"),
    }
