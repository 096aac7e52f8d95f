"""The runner's record (``.apptune-run.json``): what :func:`apptune.core.run.runner.run` writes in
the run directory of every check and trial, and :func:`apptune.core.run.runner.load_record`
reads back for :func:`apptune.core.run.outcome.evaluate` to make the run record
(:class:`apptune.models.RunRecord`) of.

Its parts are those of the run record where the run record keeps them whole (quality,
binding, knobs, scratch, machine, the libraries). Every field defaults to what a reader
assumed of a missing key, and keys this version does not know are kept (``extra="allow"``):
records of older and newer runners load.
"""

from __future__ import annotations

from .part import Part
from .provenance import LoadedLibrary
from .record import RunBinding, RunKnobs, RunMachine, RunQuality, RunScratch


class RunnerStep(Part):
    """One step the runner ran (a pre-run step, then the measured program), in order; the
    runner stops at the first that fails."""

    #: Where the step comes from (``run.prerun[0]``, ``run``).
    label: str
    #: The argument list it ran, as ``execve`` got it.
    argv: list[str] = []
    #: Its exit status as a shell says it (``128 + N`` for a step killed by signal N).
    exit_status: int | None = None
    #: Its wall time.
    seconds: float | None = None


class RunnerRecord(Part):
    """``.apptune-run.json``: one run of the runner (:mod:`apptune.core.run.runner`)."""

    #: The machine's fingerprint (:func:`apptune.machine.fingerprint`) and its id.
    machine: RunMachine | None = None
    machine_id: str | None = None
    #: The bounded wait for a quiet node before the timed region
    #: (:func:`apptune.core.run.quality.wait_for_quiet`); absent when none was asked for.
    quiet_wait: dict | None = None
    #: The run's own directory under the site's scratch directory and its file system
    #: (:mod:`apptune.core.run.scratch`); absent without ``run.scratch``.
    scratch: RunScratch | None = None
    #: The stack limit the steps ran with, in bytes (None: unlimited); absent without
    #: ``run.stack`` or when it could not be raised.
    stack_limit: int | None = None
    #: When the timed region began (seconds since 1970), and its wall time: all the steps.
    t_start: float | None = None
    wall_s: float | None = None
    #: How undisturbed the timed region was (:class:`apptune.core.run.quality.Monitor`).
    quality: RunQuality | None = None
    #: The CPUs each rank of the measured program could run on, with the step that launched
    #: it (None: no program to watch).
    binding: RunBinding | None = None
    #: The libraries of interest the ranks loaded, with the sha256 of each (empty: no rank
    #: was seen, or they could not be read).
    libraries: list[LoadedLibrary] = []
    #: The machine knobs: what the node offers, what was refused or written and what was in
    #: effect (:func:`apptune.core.run.knobs.before_run`, ``after_run``); absent when none asked.
    knobs: RunKnobs | None = None
    #: The exit status the runner exits with: the failed step's, ``128 + N`` for a signal N
    #: that ended the run, 1 when the scratch, stack or knobs check failed.
    exit_status: int | None = None
    #: The step that failed (a step's label, ``scratch``, ``stack``, ``knobs`` or
    #: ``start``), None when none did.
    failed_step: str | None = None
    #: Why the run failed, one line (None: it did not).
    message: str | None = None
    steps: list[RunnerStep] = []
    #: Every step ran and succeeded and no signal ended the run.
    completed: bool | None = None
