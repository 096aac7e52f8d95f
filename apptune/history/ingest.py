"""What the history stores of a run, read into records (:class:`RunRec`): a run directory
(ReFrame's run report and apptune's per-test result files, :func:`read_run`), a tune or
bisect session (:class:`TrialSession`, :func:`read_trials`), and the sessions of
ReFrame's own results database (:func:`reframe_sessions`). :mod:`apptune.history.store` stores
them."""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

from ..constants import RESULT_FILE
from ..core.data import recipes
from ..core.run import envrecord
from ..errors import ApptuneError
from ..models import EnergyRecord, RunQuality, RunRecord, as_data
from . import records

#: Seconds a reader or writer waits for an SQLite database another process holds.
BUSY_TIMEOUT_S = 60

_REPEAT = re.compile(r"\s*%\.repeat_no=(\d+)")


# ---------------------------------------------------------------------- reading a run
# ---------------------------------------------------------------------- reading a run
@dataclass
class FigureRec:
    name: str
    value: float
    unit: str | None
    better: str | None
    baseline: float | None = None
    verdict: str | None = None


@dataclass
class ResultRec:
    test: str
    repeat: int
    system: str | None
    app: str | None
    tier: str | None
    environment: str | None
    variant: str | None
    result: str
    fail_phase: str | None
    reason: str | None
    verified: bool
    provenance: dict | None
    energy: EnergyRecord | None
    figures: list[FigureRec] = field(default_factory=list)
    quality: RunQuality | None = None
    machine_id: str | None = None
    #: The placement layout and the CPU frequency asked for (:func:`_layout`).
    layout: dict | None = None
    machine: dict | None = None  # the fingerprint (apptune/machine.py)


@dataclass
class RunRec:
    uuid: str
    run_dir: Path
    started_unix: float | None
    started: str | None
    mode: str | None
    hostname: str | None
    reframe_version: str | None
    cmdline: str | None
    num_cases: int | None
    num_failures: int | None
    results: list[ResultRec]
    kind: str = "check"  # or "trial": a tune or bisect session


_TIME_UNITS = {"s", "ms", "us", "ns", "min", "h"}


def _figure_specs(app: str | None) -> dict:
    try:
        return recipes.figure_specs(recipes.load_recipe(app)) if app else {}
    except ApptuneError:
        return dict(recipes.COMMON_FIGURES)


def _mode(cmdline: str | None) -> str | None:
    m = re.search(r"--mode[= ](\S+)", cmdline or "")
    return m.group(1) if m else None


def read_run(run_dir: Path, report_file: Path | None = None, rep: dict | None = None) -> RunRec:
    """A run from ReFrame's run report (what ReFrame's results database stores as well)
    and apptune's per-test result files.  Tests without an apptune result (plain ReFrame
    checks) keep their performance values from the run report."""
    if rep is None:
        rep = records.read_report(run_dir, report_file)
    else:  # a session of ReFrame's results database
        rep = records.check_report(rep, report_file or run_dir)
    si = rep.get("session_info") or {}
    if not si.get("uuid"):
        raise ApptuneError(
            report_file or run_dir, "session_info.uuid", "run report has no session uuid"
        )
    start = si.get("time_start_unix")
    results = []
    for run in rep.get("runs", []):
        for tc in run.get("testcases", []):
            if tc.get("fixture"):
                if tc.get("result") == "fail":
                    results.append(_failed_fixture(tc))
                continue
            results.append(_result(tc))
    # --reruns: the same test in several runs of the session is stored once per run
    seen: dict[tuple, int] = {}
    for r in results:
        k = (r.test, r.environment, r.repeat)
        if k in seen:
            seen[k] += 1
            r.repeat += 1000 * seen[k]
        else:
            seen[k] = 0
    return RunRec(
        uuid=si["uuid"],
        run_dir=run_dir.resolve(),
        started_unix=start,
        started=(
            datetime.datetime.fromtimestamp(start, datetime.UTC).isoformat(timespec="seconds")
            if start
            else None
        ),
        mode=_mode(si.get("cmdline")),
        hostname=si.get("hostname"),
        reframe_version=si.get("version"),
        cmdline=si.get("cmdline"),
        num_cases=si.get("num_cases"),
        num_failures=si.get("num_failures"),
        results=results,
    )


def _split_repeat(name: str) -> tuple[str, int]:
    m = _REPEAT.search(name)
    return (_REPEAT.sub("", name), int(m.group(1))) if m else (name, 0)


def _failed_fixture(tc: dict) -> ResultRec:
    test, repeat = _split_repeat(tc["display_name"])
    f = records.failure(tc, None)
    return ResultRec(
        test=test,
        repeat=repeat,
        system=f"{tc.get('system')}:{tc.get('partition')}",
        app=None,
        tier=None,
        environment=tc.get("environ"),
        variant=None,
        result="fail",
        fail_phase=tc.get("fail_phase"),
        reason=f["reason"],
        verified=False,
        provenance=None,
        energy=None,
    )


def _result(tc: dict) -> ResultRec:
    test, repeat = _split_repeat(tc["display_name"])
    res = tc.get("result")
    r = records.record_of(tc)
    system = f"{tc.get('system')}:{tc.get('partition')}"
    if r is None:
        # a plain ReFrame check (or a test that died before writing its result):
        # the run report's performance values, direction from the unit
        figs = []
        for key, pv in (tc.get("perfvalues") or {}).items():
            if isinstance(pv, list) and pv and isinstance(pv[0], (int, float)):
                unit = pv[4] if len(pv) > 4 else None
                figs.append(
                    FigureRec(
                        key.rsplit(":", 1)[-1],
                        float(pv[0]),
                        unit,
                        "lower" if unit in _TIME_UNITS else "higher",
                    )
                )
        # a record that is not one is no verified result: its one line is the reason
        problem = records.record_problem(tc)
        if res == "fail" or problem is not None:
            reason = records.failure(tc, None)["reason"]
        else:
            reason = tc.get("fail_reason")
        return ResultRec(
            test=test,
            repeat=repeat,
            system=system,
            app=None,
            tier=None,
            environment=tc.get("environ"),
            variant=None,
            result=res or "?",
            fail_phase=tc.get("fail_phase"),
            reason=reason,
            verified=res == "pass" and problem is None,
            provenance=None,
            energy=None,
            figures=figs,
        )
    rec = _record_result(r, test, repeat, res or "?", tc.get("fail_phase"))
    if res == "fail":
        rec.reason = records.failure(tc, rec.reason or "")["reason"]
    return rec


def _record_result(
    r: RunRecord, test: str, repeat: int, result: str, fail_phase: str | None
) -> ResultRec:
    """A result from an apptune run record (:func:`apptune.core.run.outcome.evaluate`'s, the same
    for a check and a trial); the reason is the verification's summary."""
    specs = _figure_specs(r.app)
    verdicts = r.baseline.figures if r.baseline else {}
    figs = []
    for name, v in (r.figures or {}).items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            continue  # the record keeps it; a series and its verdicts hold numbers
        spec = specs.get(name)
        c = verdicts.get(name)
        figs.append(
            FigureRec(
                name,
                float(v),
                spec.unit if spec else None,
                spec.better if spec else None,
                c.baseline if c else None,
                c.verdict if c else None,
            )
        )
    launch = as_data(r.launch)
    if launch and launch.get("env_vars"):  # a record made before values were hidden
        launch["env_vars"] = envrecord.record(launch["env_vars"])
    return ResultRec(
        test=test,
        repeat=repeat,
        # a check's record names the system and the partition, a trial's partition both
        system=r.partition if r.trial and r.system is None else f"{r.system}:{r.partition}",
        app=r.app,
        tier=r.tier,
        environment=r.environment,
        variant=r.variant,
        result=result,
        fail_phase=fail_phase,
        reason=r.verification.summary,
        verified=r.verification.ok,
        # how it was launched, and its input, travel with the build: a change point names
        # any of them, and a changed input starts a series of its own (regressions.series)
        provenance=(
            r.provenance.data()
            | ({"launch": launch} if launch else {})
            | ({"input": r.input} if r.input else {})
        )
        if r.provenance
        else None,
        energy=r.energy,
        figures=figs,
        quality=r.quality,
        machine_id=r.machine_id,
        layout=_layout(r),
        machine=as_data(r.machine),
    )


def _layout(r: RunRecord) -> dict | None:
    """Where a run's ranks ran (its ``placement_layout``, with the nodes of its job where the
    layout does not say) and the CPU frequency it asked for (``cpu_freq``), or None."""
    lay = as_data(r.placement_layout) or {}
    nodes = r.job.nodes if r.job else None
    if not (r.placement_layout and r.placement_layout.nodes) and isinstance(nodes, int):
        lay["nodes"] = nodes
    if r.cpu_freq is not None:
        lay["cpu_freq"] = str(r.cpu_freq)
    if r.launch and r.launch.launcher:
        lay["launcher"] = list(r.launch.launcher)
    return lay or None


# --------------------------------------------------------------------- a trial session
@dataclass
class TrialSession:
    """The trials one ``apptune tune`` or ``apptune bisect`` command ran: the run directory
    of each (``apptune/core/run/localrun.py`` leaves its run record there), stored as one run."""

    tool: str  # tune or bisect: the stored run's mode
    cmdline: str
    started_unix: float = field(default_factory=time.time)
    hostname: str = field(default_factory=socket.gethostname)
    run_dirs: list[Path] = field(default_factory=list)

    @property
    def uuid(self) -> str:
        """The session's key in the history: the same session is stored once."""
        key = f"apptune {self.tool} {self.hostname} {self.started_unix!r} {self.cmdline}"
        return str(uuid5(NAMESPACE_URL, key))

    def add(self, run_dir: str | os.PathLike) -> None:
        """One trial, by its run directory (a directory run again is stored once, as last run)."""
        d = Path(run_dir).resolve()
        if d not in self.run_dirs:
            self.run_dirs.append(d)


def read_trials(session: TrialSession) -> RunRec:
    """A tune or bisect session as a run of kind ``trial``: one result per trial from its run
    record, named by its run directory relative to the session's runs directory."""
    if not session.run_dirs:
        raise ApptuneError(None, f"{session.tool} trials", "no trial ran: nothing to store")
    top = Path(os.path.commonpath([d.parent for d in session.run_dirs]))
    results = []
    for d in session.run_dirs:
        f = d / RESULT_FILE
        r = records.load_record(f)  # a broken record: one line naming the file and field
        if r is None:
            raise ApptuneError(f, None, "no run record: the trial did not write one")
        if not r.trial:
            raise ApptuneError(f, "trial", "not the run record of a tune or bisect trial")
        ok = r.verification.ok
        results.append(
            _record_result(r, str(d.relative_to(top)), 0, "pass" if ok else "fail", None)
        )
    return RunRec(
        uuid=session.uuid,
        run_dir=top,
        started_unix=session.started_unix,
        started=datetime.datetime.fromtimestamp(session.started_unix, datetime.UTC).isoformat(
            timespec="seconds"
        ),
        mode=session.tool,
        hostname=session.hostname,
        reframe_version=None,
        cmdline=session.cmdline,
        num_cases=len(results),
        num_failures=sum(not r.verified for r in results),
        results=results,
        kind="trial",
    )


def reframe_sessions(
    db_file: str | os.PathLike, uuids: list[str] | None = None
) -> list[tuple[dict, str | None]]:
    """Session reports stored in ReFrame's results database (its ``sessions`` table:
    the same JSON as the run report), with the report file each came from."""
    path = Path(db_file)
    if not path.is_file():
        raise ApptuneError(path, None, "no ReFrame results database here")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        rows = con.execute(
            "SELECT uuid, json_blob, report_file FROM sessions ORDER BY session_start_unix"
        ).fetchall()
        con.close()
    except sqlite3.Error as e:
        raise ApptuneError(path, None, f"cannot read ReFrame's results database: {e}") from None
    out = []
    for uuid, blob, rf in rows:
        if uuids and uuid not in uuids:
            continue
        try:
            out.append((json.loads(blob), rf))
        except (TypeError, json.JSONDecodeError) as e:
            raise ApptuneError(
                path, f"sessions.{uuid}", f"not a ReFrame run report: invalid JSON ({e})"
            ) from None
    return out
