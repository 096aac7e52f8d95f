"""The run record (``apptune-result.json``) every check and trial writes.

Every part is typed as :func:`apptune.core.run.outcome.evaluate` writes it today. A part's fields
default to what a reader of an older record assumed of a missing key (None, an empty
list), and each part keeps keys it does not know (``extra="allow"``): records written by
older and newer versions load. The writer (:func:`apptune.core.run.outcome.write_record`) refuses an
unknown key at the top level only.
"""

from __future__ import annotations

import math
from typing import Any

from .part import Part
from .provenance import Provenance, RunLaunch


# ------------------------------------------------------------------------- run records
class FieldComparison(Part):
    """One field of the output against its reference (apptune/core/verification/verify.py
    ``FieldResult``)."""

    field: str
    #: The value the output gave (a number, or the text that is not one).
    value: Any = None
    #: The reference value and its tolerance, in words.
    expected: str | None = None
    #: The share of the tolerance the difference used (1.0: all of it).
    used: float | None = None
    ok: bool
    message: str = ""


class OwnCheckResult(Part):
    """One of the recipe's own checks on the output
    (:func:`apptune.core.verification.verify.run_own_checks`), or a check of the run itself (its
    exit status, binding, knobs)."""

    pattern: str | None = None
    #: The file it read (what a reference's ``xfail`` ``fails`` names it by).
    file: str | None = None
    matches: int = 0
    ok: bool
    message: str = ""
    #: Where a line that must not be there was found first.
    first: str | None = None


class RunVerification(Part):
    """The verification part of a run record: always a verdict and one sentence; the
    per-field comparison when there was output to compare (apptune/core/verification/verify.py)."""

    ok: bool
    summary: str
    #: The reference file compared with; with ``fields``, only when there was output.
    reference: str | None = None
    #: Each field's comparison (None: nothing was compared, the summary is the verdict).
    fields: list[FieldComparison] | None = None
    own_checks: list[OwnCheckResult] = []
    #: Why the result is known to be wrong (an expected failure: exactly what the reference's
    #: ``xfail`` entry names failed), or None.
    xfail: str | None = None
    #: A known-wrong variant that failed otherwise than its entry says: what differs.
    unexpected: str | None = None
    #: Fields not compared because an input they depend on was changed.
    skipped: list[str] = []
    #: Why nothing could be compared: the reference has no fields yet.
    no_reference: str | None = None


class RunQuality(Part):
    """How undisturbed the run was (apptune/core/run/quality.py): a grade and its reasons, and the
    measurements they come from (absent when the runner could not measure)."""

    grade: str | None = None
    reasons: list[str] = []
    limits: dict = {}
    #: Where it was measured, when not the whole job (the first of several nodes).
    scope: str | None = None
    wall_s: float | None = None
    cpus: int | None = None
    job_cpu_s: float | None = None
    harness_cpu_s: float | None = None
    runner_cpu_s: float | None = None
    others_cpu_s: float | None = None
    outside_cpu_s: float | None = None
    outside_cpu_fraction: float | None = None
    steal_fraction: float | None = None
    procs_running_max: int | None = None
    load1: list | None = None
    freq_mhz: list | None = None
    others: list | None = None


class EnergyRecord(Part):
    """The energy of a run: how far it can be trusted and, measured or modelled, what it
    was. The sampler (:class:`apptune.energy.Sampler`) and the per-node agents make it;
    the run record keeps it as its ``energy`` part."""

    #: ``measured``, ``measured-shared``, ``modelled`` or ``none`` (apptune.energy.GRADES).
    trust: str
    #: The meter it came from, or None.
    source: str | None = None
    energy_J: float | None = None
    energy_integrated_J: float | None = None
    disagreement: float | None = None
    avg_power_W: float | None = None
    peak_power_W: float | None = None
    duration_s: float | None = None
    sample_hz: float | None = None
    samples: int = 0
    coverage: float | None = None
    exclusive: bool | None = None
    sampler_cpu_s: float | None = None
    #: The power trace's file in the run directory.
    trace: str | None = None
    reason: str = ""
    notes: list[str] = []

    def to_dict(self) -> dict:
        """Every field, as ``energy.json`` holds it."""
        return self.model_dump()

    def figures(self, wall_time: float | None, rates: dict[str, float] | None = None) -> dict:
        """Perf figures: energy_J, avg/peak power, EDP and rate per watt."""
        if self.trust == "none" or self.energy_J is None:
            return {}
        out = {
            "energy_J": self.energy_J,
            "avg_power_W": self.avg_power_W,
            "peak_power_W": self.peak_power_W,
        }
        if wall_time:
            out["edp_Js"] = self.energy_J * wall_time
        if self.avg_power_W:
            for name, v in (rates or {}).items():
                if isinstance(v, (int, float)):
                    out[f"{name}_per_W"] = v / self.avg_power_W
        return {k: v for k, v in out.items() if v is not None and math.isfinite(v)}


class RunJob(Part):
    """The job that ran: its scheduler, id and final state; on a cluster also its nodes,
    time limit and the scheduler's reason (apptune/core/run/slurm.py)."""

    scheduler: str | None = None
    jobid: str | None = None
    state: str | None = None
    #: The job's nodes as the scheduler names them (``n[01-02]``).
    nodes: str | int | None = None
    requested_nodes: str | None = None
    partition: str | None = None
    time_limit: str | None = None
    reason: str | None = None
    source: str | None = None
    node_states: dict[str, dict] | None = None
    note: str | None = None


class RunSummary(Part):
    """The runner's summary of the run (:func:`apptune.core.run.outcome.run_summary`)."""

    exit_status: int | None = None
    #: The step that failed (``run.prerun[0]``, ``run``), or None.
    failed_step: str | None = None
    message: str | None = None
    wall_s: float | None = None
    t_start: float | None = None
    #: The wait for a quiet node before the run (apptune/core/run/quality.py), or None.
    quiet_wait: dict | None = None
    completed: bool | None = None


class FigureVerdict(Part):
    """One figure against the baseline (:func:`apptune.core.judge.baselines.judge`)."""

    value: Any = None
    baseline: float | None = None
    #: The relative change against the baseline (None: no baseline or no finite value).
    change: float | None = None
    noise: float | None = None
    threshold: float | None = None
    #: ``regression``, ``improvement``, ``unexplained`` (beyond the threshold with nothing
    #: changed since the baseline: fails nothing yet), ``within noise`` or ``no verdict``.
    verdict: str = "no verdict"
    #: Of an ``unexplained`` verdict: ``regression`` or ``improvement``.
    direction: str | None = None
    why: str = ""


class BaselineVerdicts(Part):
    """A run (or the repeats of a variant) against this machine's baseline
    (:func:`apptune.core.judge.baselines.verdicts`)."""

    #: The baseline file, relative to the data.
    file: str | None = None
    #: Whether the file has an entry for this machine, environment, variant and tier.
    found: bool = False
    #: Why no figure can be judged (None: each figure's own ``why`` says).
    why: str | None = None
    #: The command that records the missing baseline (only when there is none).
    advice: str | None = None
    #: How many clean runs were judged.
    repeats: int = 1
    #: What differs between the baseline's runs and this one (None: not recorded).
    changed: list[str] | None = None
    figures: dict[str, FigureVerdict] = {}


class PlacementLayout(Part):
    """Where the ranks were meant to run (apptune/placement.py ``Layout``), with the
    binding asked for."""

    ranks: int | None = None
    ranks_per_node: int | None = None
    threads_per_rank: int = 1
    nodes: int | None = None
    #: The binding asked for (``cores``, ``sockets``, ...), or None: the launcher's own.
    binding: str | None = None


class RankBinding(Part):
    """The CPUs one rank could run on (apptune/core/run/procfs.py ``observe_binding``)."""

    pid: int | None = None
    cpus: str | None = None
    cores: int | None = None
    sockets: int | None = None
    #: The launch (the runner's step, e.g. ``run.prerun[0]``, ``run``) that started it.
    launch: str | None = None


class RunBinding(Part):
    """The CPUs each rank of the program seen on the job's first node could run on."""

    program: str | None = None
    #: The CPUs the job may use on the node, as a CPU list (``0-3``).
    node_cpus: str | None = None
    ranks: list[RankBinding] = []


class KnobsAsked(Part):
    """The knobs a run asked for (apptune/core/run/knobs.py ``Asked.to_dict``): only those asked."""

    #: kHz (``1800000``), a Slurm name (``low``, ``high``, ...) or a governor.
    cpu_freq: str | int | None = None
    #: ``on`` or ``off``.
    smt: str | None = None
    turbo: str | None = None

    def given(self) -> dict[str, str]:
        """The knobs asked for, as text: ``{knob: value}`` (``cpu_freq``, ``smt``, ``turbo``)."""
        return {n: str(v) for n in type(self).model_fields if (v := getattr(self, n)) is not None}


class NodeCpufreq(Part):
    """The cpufreq state of the node's first CPU (kHz; apptune/core/run/knobs.py
    ``read_cpufreq``)."""

    driver: str | None = None
    governor: str | None = None
    min_khz: int | None = None
    max_khz: int | None = None
    cur_khz: int | None = None
    hw_min_khz: int | None = None
    hw_max_khz: int | None = None
    #: The frequencies the driver lists to choose from (empty: it lists none).
    available_khz: list[int] = []
    #: Whether this user may write the scaling limits.
    writable: bool | None = None
    #: How many of the node's CPUs have a cpufreq directory.
    cpus_with_cpufreq: int | None = None


class NodeBoost(Part):
    """The turbo switch (apptune/core/run/knobs.py ``read_boost``): its sysfs file, whether turbo
    was on and whether this user may write it."""

    path: str | None = None
    on: bool | None = None
    writable: bool | None = None


class NodeSmt(Part):
    """The node's hardware threads (apptune/core/run/knobs.py ``read_smt``)."""

    threads_per_core: int = 1
    #: The kernel's ``smt/control`` (``on``, ``notsupported``, ...), or None.
    control: str | None = None
    #: Each CPU (as text) -> the CPU list of its core's threads.
    siblings: dict[str, str] = {}


class KnobsNode(Part):
    """What the job's node offers (apptune/core/run/knobs.py ``node_state``): cpufreq (None: the
    node has none), the turbo switch (None: it has none) and SMT."""

    cpufreq: NodeCpufreq | None = None
    boost: NodeBoost | None = None
    smt: NodeSmt | None = None


class KnobsFrequency(Part):
    """The frequency measured on the ranks' CPUs during the run (MHz; apptune/core/run/knobs.py
    ``frequency_summary``)."""

    #: The CPUs measured, as a CPU list (``0-1``).
    cpus: str | None = None
    median_mhz: float | None = None
    min_mhz: float | None = None
    max_mhz: float | None = None
    samples: int | None = None


class KnobsObserved(Part):
    """What was in effect during the run (apptune/core/run/knobs.py ``after_run``)."""

    #: The frequency measured on the ranks' CPUs (None: not measured).
    frequency: KnobsFrequency | None = None
    #: The turbo switch during the run (None: the node has none).
    boost: NodeBoost | None = None
    #: The governor most of the ranks' CPUs had.
    governor: str | None = None
    #: Who set the frequency: the launcher's option or the runner's sysfs.
    cpu_freq_set_by: str | None = None


class RunKnobs(Part):
    """The machine knobs a run asked for and what was in effect (apptune/core/run/knobs.py)."""

    #: ``cpu_freq``, ``smt``, ``turbo`` as asked (the check's variables).
    asked: KnobsAsked = KnobsAsked()
    #: Who sets each: the launcher's option (``srun --cpu-freq=...``) or the runner's sysfs.
    set_by: dict = {}
    #: What the job's node offers: cpufreq, the turbo switch, SMT (``node_state``).
    node: KnobsNode | None = None
    #: What was in effect: the frequency measured on the ranks' CPUs, the turbo switch and
    #: the governor during the run.
    observed: KnobsObserved | None = None
    #: The knobs the node could not set, one line each (nothing ran then).
    refused: dict | None = None
    #: The sysfs files the runner wrote (path, value), put back after the run.
    written: list | None = None
    restore_errors: list[str] = []
    #: One line per knob asked for that was not in effect; the run then verifies nothing.
    problems: list[str] = []


class RunScratch(Part):
    """Where an I/O benchmark wrote its files (apptune/core/run/scratch.py): the file system
    measured (the same bandwidth means different things on a parallel file system, a local disk and
    a tmpfs), its space, and whether the run wrote more than the node's memory."""

    #: The site's scratch directory and the run's own directory in it (removed after the run).
    root: str | None = None
    path: str | None = None
    #: The file system's type (``/proc/mounts``: ``ext4``, ``tmpfs``, ``lustre``, ...),
    #: mount point and device.
    fstype: str | None = None
    mount: str | None = None
    device: str | None = None
    size_bytes: int | None = None
    free_bytes: int | None = None
    #: What the run writes at most (the recipe's ``run.scratch.bytes``) ...
    bytes: int | None = None
    #: ... against the node's memory: reads of less than it may come from the page cache.
    memory_bytes: int | None = None
    exceeds_memory: bool | None = None
    #: The run's directory was removed after the run.
    removed: bool | None = None


class RunCurvePlot(Part):
    """How a curve is plotted (the recipe's ``CurvePlot``): x against each y column."""

    x: str
    y: list[str] = []
    xlog: bool = True
    ylog: bool = False


class RunCurve(Part):
    """A curve of the run (NetPIPE, micro-benchmarks): its data file in the run directory
    (``curves/NAME.csv``), its columns and how it is plotted (None: it is not)."""

    file: str
    columns: list[str] = []
    plot: RunCurvePlot | None = None


class RunMachine(Part):
    """The fingerprint of the machine a run ran on (:func:`apptune.machine.fingerprint`): its
    key fields decide whether a baseline applies (``machine_id`` hashes them); ``kernel`` is
    recorded, not matched. A baseline file keeps the same fingerprint, checked strictly
    (:class:`apptune.models.Machine`)."""

    cpu_vendor: str | None = None
    cpu_model: str | None = None
    #: ``family/model/stepping`` (``25/1/1``).
    cpu_id: str | None = None
    #: The instruction-set extensions that change generated code (``machine.ISA_FLAGS``).
    isa: list[str] = []
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    cpus: int | None = None
    memory_gib: int | None = None
    #: The hypervisor's name, or ``bare metal``.
    hypervisor: str | None = None
    kernel: str | None = None


class RunRecord(Part):
    """``apptune-result.json``: one run of one input, as the checks (apptune/rfm/check.py) and
    tune and bisect trials (apptune/core/run/localrun.py) write it through
    :func:`apptune.core.run.outcome.write_record` and everything that reads a run (report, history,
    bless) reads it through :func:`apptune.history.records.load_record`. A run that produced
    nothing to verify has only its identity, provenance, energy and verification."""

    # unknown keys are refused by the writer (a reader keeps those of newer versions)

    app: str
    tier: str
    #: The run variant: the build variant, plus ``@placement`` parts.
    variant: str | None
    environment: str | None
    build_variant: str | None = None
    placement: str | None = None
    system: str | None = None
    partition: str | None = None
    #: The ReFrame test's unique name; a trial's is ``trial`` (``localrun.TRIAL_TEST``).
    test: str | None = None
    ranks: int | None = None
    input: dict = {}
    placement_layout: PlacementLayout | None = None
    #: How the program was launched: ``launcher`` (the timed step's arguments before the
    #: program), ``env_vars`` and ``modules`` the site's environment and the runner set.
    launch: RunLaunch | None = None
    #: The CPU frequency the run asked for, as Slurm's ``--cpu-freq`` takes it (kHz, or
    #: ``low``, ``high``, ...); None: the node's own. Runs of one variant at several
    #: frequencies are what ``apptune plan`` weighs time against energy with.
    cpu_freq: str | int | None = None
    #: The machine knobs asked for (frequency, SMT, turbo) and what was in effect.
    knobs: RunKnobs | None = None
    #: The job: scheduler, job id, final state (and nodes on a cluster); a trial's job is
    #: its runner, started on this node: scheduler ``local``, the runner's process id.
    job: RunJob | None = None
    #: A tune or bisect candidate, not a check of a tier.
    trial: bool = False
    provenance: Provenance | None = None
    energy: EnergyRecord | None = None
    quality: RunQuality | None = None
    #: The CPUs each rank of the program seen on the job's first node could run on
    #: (apptune/core/run/procfs.py ``observe_binding``), judged against
    #: ``placement_layout.binding``.
    binding: RunBinding | None = None
    #: The machine's fingerprint, and its id (``m-`` and a hash of its key fields).
    machine: RunMachine | None = None
    machine_id: str | None = None
    #: The runner's summary: exit status, failed step, wall time, start time.
    run: RunSummary | None = None
    #: The file system an I/O benchmark wrote to (``run.scratch`` recipes).
    scratch: RunScratch | None = None
    values: dict | None = None
    curves: dict[str, RunCurve] | None = None
    figures: dict[str, float | None] | None = None
    verification: RunVerification
    #: Each figure against this machine's baseline (apptune/core/judge/baselines.py), checks only.
    baseline: BaselineVerdicts | None = None
    #: Set by the reader of a run directory (:func:`apptune.history.records.cases`), never written:
    #: the run directory's name, and its path (one session of a baseline's runs).
    run_id: str | None = None
    session: str | None = None


#: The fields of a run record its reader sets: a writer refuses them.
READER_FIELDS = frozenset({"run_id", "session"})
