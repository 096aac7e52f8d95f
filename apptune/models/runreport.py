"""The parts of ReFrame's run report (``report.json``, and each session ReFrame's results
database stores) that apptune reads: a report of another shape (cut short, hand-edited, of
another program) is one error naming the file and the field, never a traceback halfway
through a history ingest or a report. What apptune does not read is left as it is."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    """A part of ReFrame's report: the fields apptune reads are checked, the rest kept."""

    model_config = ConfigDict(extra="allow")


class ReportSession(_Open):
    #: The session's uuid: the history's key of the run (required to store it).
    uuid: str | None = None
    #: Seconds since 1970 (up to the year 9999, as a date can be written).
    time_start_unix: float | None = Field(default=None, ge=0, le=253402300799)
    hostname: str | None = None
    version: str | None = None
    cmdline: str | None = None
    num_cases: int | None = Field(default=None, ge=0)
    num_failures: int | None = Field(default=None, ge=0)


class ReportCase(_Open):
    """One test case (ReFrame's ``testcase_type``)."""

    display_name: str
    unique_name: str
    environ: str | None = None
    system: str | None = None
    partition: str | None = None
    result: str | None = None
    fail_phase: str | None = None
    fail_reason: str | None = None
    fixture: bool = False
    outputdir: str | None = None
    stagedir: str | None = None
    job_stderr: str | None = None
    #: ``{name: [value, reference, lower, upper, unit, ...]}`` of a plain ReFrame check.
    perfvalues: dict[str, Any] | None = None
    #: ``[[name, partition, environment], ...]``.
    dependencies_actual: list[list[str | None]] | None = None


class ReportRun(_Open):
    testcases: list[ReportCase] = []


class RunReport(_Open):
    """ReFrame's run report, as far as apptune reads it."""

    session_info: ReportSession = ReportSession()
    runs: list[ReportRun] = []
