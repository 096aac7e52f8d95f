"""The run record (``apptune-result.json``) every check and trial writes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


# ------------------------------------------------------------------------- run records
class RunVerification(BaseModel):
    """The verification part of a run record: always a verdict and one sentence; the
    per-field comparison when there was output to compare (apptune/verify.py)."""

    model_config = ConfigDict(extra="allow")
    ok: bool
    summary: str


class RunRecord(BaseModel):
    """``apptune-result.json``: one run of one input, as the checks (apptune/rfm/check.py) and tune
    and bisect trials (apptune/localrun.py) write it through :func:`apptune.run.write_record`
    and everything that reads a run (report, history, bless) reads it through
    :func:`apptune.records.load_record`. A run that produced nothing to verify has only its
    identity, provenance, energy and verification."""

    # unknown keys are refused by the writer; a reader keeps those of newer versions
    model_config = ConfigDict(extra="allow")

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
    placement_layout: dict | None = None
    #: How the program was launched: ``launcher`` (the timed step's arguments before the
    #: program), ``env_vars`` and ``modules`` the site's environment and the runner set.
    launch: dict | None = None
    #: The CPU frequency the run asked for, as Slurm's ``--cpu-freq`` takes it (kHz, or
    #: ``low``, ``high``, ...); None: the node's own. Runs of one variant at several
    #: frequencies are what ``apptune plan`` weighs time against energy with.
    cpu_freq: str | int | None = None
    #: The job: scheduler, job id, final state (and nodes on a cluster); a trial's job is
    #: its runner, started on this node: scheduler ``local``, the runner's process id.
    job: dict | None = None
    #: A tune or bisect candidate, not a check of a tier.
    trial: bool = False
    provenance: dict | None = None
    energy: dict | None = None
    quality: dict | None = None
    #: The CPUs each rank of the program seen on the job's first node could run on
    #: (apptune/procfs.py ``observe_binding``), judged against ``placement_layout.binding``.
    binding: dict | None = None
    machine: dict | None = None
    machine_id: str | None = None
    #: The runner's summary: exit status, failed step, wall time, start time.
    run: dict | None = None
    values: dict | None = None
    curves: dict | None = None
    figures: dict[str, float | None] | None = None
    verification: RunVerification
    #: Each figure against this machine's baseline (apptune/baselines.py), checks only.
    baseline: dict | None = None
