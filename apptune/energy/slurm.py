"""Slurm accounting: ``sacct --parsable2 --noheader -o JobID,ConsumedEnergyRaw``.

Needs slurmdbd and an ``AcctGatherEnergyType`` plugin on the cluster.  Energy
is known only after the job, so this meter does not sample; the job's total
(the line whose JobID is the job itself) is used.  It is trusted (``measured``)
only when the job had its nodes exclusively, else ``measured-shared``.
"""

from __future__ import annotations

import shutil

from .meter import Meter, MeterError, Reading, register, run_command


def parse(text: str, jobid: str) -> float | None:
    """Joules of the job from sacct's parsable output; None when Slurm recorded none."""
    found = None
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2:
            continue
        if parts[0] == str(jobid):
            found = parts[1].strip()
    if found in (None, "", "0"):
        return None
    try:
        return float(found)
    except ValueError:
        raise MeterError(f"sacct: ConsumedEnergyRaw '{found}' is not a number") from None


def run_sacct(jobid: str) -> str:
    return run_command(
        ["sacct", "--parsable2", "--noheader", "-o", "JobID,ConsumedEnergyRaw", "-j", str(jobid)]
    )


@register
class SlurmMeter(Meter):
    name = "slurm"
    grade = "measured"
    cumulative = True
    samples = False
    node_local = False

    def __init__(self, options=None, context=None, runner=run_sacct):
        super().__init__(options, context)
        self.runner = runner

    def available(self) -> str | None:
        if self.context.get("scheduler") not in ("slurm", "squeue"):
            return "the partition's scheduler is not Slurm"
        if self.runner is run_sacct and shutil.which("sacct") is None:
            return "sacct not found"
        return None

    def read(self) -> Reading:
        return Reading()

    def after(self, record) -> None:
        jobid = self.context.get("jobid")
        jobid = jobid() if callable(jobid) else jobid
        if not jobid:
            record.reason = "slurm: no job id"
            return
        try:
            joules = parse(self.runner(str(jobid)), str(jobid))
        except MeterError as e:
            record.reason = f"slurm: {e}"
            return
        if joules is None:
            record.reason = (
                "slurm: sacct has no ConsumedEnergyRaw for the job "
                "(AcctGatherEnergyType not set, or slurmdbd not recording energy)"
            )
            return
        record.energy_J = joules
