"""What happened to a Slurm job, in one clear sentence.

ReFrame's ``squeue`` backend (the default of apptune's clusters: it needs no
slurmdbd) sees a job leave the queue and takes it as completed, whatever ended
it. slurmctld keeps every finished job for ``MinJobAge`` seconds (default 300),
so the final state is read from it with ``squeue --states=all`` in an explicit
``|``-separated format; where accounting exists and the job has aged out,
``sacct --parsable2`` answers instead. The node's own state and the reason an
administrator (or slurmctld) gave come from ``sinfo``.

ReFrame's own failures around the scheduler (sbatch failing because slurmctld
cannot be reached, a pending job cancelled because its nodes are down) are
explained from the run report's ``fail_reason`` by :func:`explain_reframe_failure`.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass

SQUEUE_FORMAT = "%i|%T|%N|%r|%l"
SACCT_FIELDS = "JobID,State,NodeList,Reason,Timelimit"

#: Final states that mean the job did not run to its end, and how to say it.
UNFINISHED = {
    "TIMEOUT": "job exceeded its time limit ({time_limit})",
    "NODE_FAIL": "node DOWN: {nodes} failed while the job ran",
    "BOOT_FAIL": "node {nodes} failed to boot for the job",
    "OUT_OF_MEMORY": "job ran out of memory on {nodes}",
    "DEADLINE": "job reached its deadline before it ended",
    "PREEMPTED": "job was preempted on {nodes}",
    "CANCELLED": "job was cancelled ({reason})",
}


@dataclass
class JobOutcome:
    jobid: str
    state: str
    nodes: str = ""
    reason: str = ""
    time_limit: str = ""
    source: str = "squeue"

    def to_dict(self) -> dict:
        return asdict(self)


def _run(cmd: list[str], timeout: float = 30) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, f"{cmd[0]}: {e}"
    return p.returncode, p.stdout if p.returncode == 0 else (p.stderr or p.stdout).strip()


def parse_squeue(text: str, jobid: str) -> JobOutcome | None:
    """The job's line of ``squeue -h -t all -j ID -o '%i|%T|%N|%r|%l'``."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0] == str(jobid):
            return JobOutcome(jobid=parts[0], state=parts[1], nodes=parts[2],
                              reason=parts[3], time_limit=parts[4], source="squeue")
    return None


def parse_sacct(text: str, jobid: str) -> JobOutcome | None:
    """The allocation's line (not its steps) of ``sacct --parsable2 --noheader -o JobID,State,...``."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0] == str(jobid):
            # sacct says "CANCELLED by 0"; the state is the first word
            return JobOutcome(jobid=parts[0], state=parts[1].split()[0] if parts[1] else "",
                              nodes=parts[2], reason=parts[3], time_limit=parts[4], source="sacct")
    return None


def job_outcome(jobid: str, run=_run) -> tuple[JobOutcome | None, str]:
    """The job's final state, and what went wrong when it cannot be known."""
    rc, out = run(["squeue", "-h", "--states=all", "-j", str(jobid), "-o", SQUEUE_FORMAT])
    if rc == 0:
        o = parse_squeue(out, jobid)
        if o is not None:
            return o, ""
        why = f"squeue no longer knows job {jobid} (older than slurmctld's MinJobAge)"
    else:
        why = f"squeue failed: {out[:200]}"
    rc, out2 = run(["sacct", "--parsable2", "--noheader", "-X", "-j", str(jobid), "-o", SACCT_FIELDS])
    if rc == 0:
        o = parse_sacct(out2, jobid)
        if o is not None:
            return o, ""
    return None, why


def parse_sinfo(text: str) -> dict[str, tuple[str, str]]:
    """Node -> (state, reason) from ``sinfo -h -N -n NODES -o '%N|%T|%E'``."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            out.setdefault(parts[0], (parts[1], parts[2]))
    return out


def node_states(nodes: str, run=_run) -> dict[str, tuple[str, str]]:
    if not nodes:
        return {}
    rc, out = run(["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%T|%E"])
    return parse_sinfo(out) if rc == 0 else {}


def explain(o: JobOutcome, nodes: dict[str, tuple[str, str]] | None = None) -> str | None:
    """One sentence for a job that did not run to its end; None when it did."""
    state = o.state.split(",")[0].rstrip("+")
    tmpl = UNFINISHED.get(state)
    if tmpl is None:
        return None
    msg = tmpl.format(time_limit=o.time_limit or "?", nodes=o.nodes or "its node",
                      reason=o.reason if o.reason and o.reason != "None" else "no reason given")
    extra = [f"{n} is {s} ({r})" if r and r != "none" else f"{n} is {s}"
             for n, (s, r) in sorted((nodes or {}).items())
             if state in ("NODE_FAIL", "BOOT_FAIL") or s.rstrip("*~#!%$@^-").lower() in ("down", "drained", "fail")]
    if extra:
        msg += "; now " + ", ".join(extra)
    return f"{msg} (Slurm job {o.jobid}: {o.state}, reason {o.reason or '-'})"


_PATTERNS = [
    (re.compile(r"(Unable to contact slurm controller[^\n]*)"), "slurmctld unreachable at submit: {0}"),
    (re.compile(r"(Socket timed out on send/recv operation)"), "slurmctld did not answer at submit: {0}"),
    (re.compile(r"(Could not establish a configuration source)"),
     "sbatch found no Slurm configuration (no slurm.conf, SLURM_CONF unset): {0}"),
    (re.compile(r"job cancelled because it was blocked due to reason: ([^\n]+)"),
     "job cancelled while pending, its nodes cannot run it: {0}"),
    (re.compile(r"(maximum pending time for job exceeded)"), "job pending too long: {0}"),
]
_SBATCH_ERROR = re.compile(r"^sbatch: (?:error|fatal): (.+)$", re.MULTILINE)


def explain_reframe_failure(fail_reason: str | None) -> str | None:
    """A clear reason for ReFrame's scheduler failures (submit, blocked job), else None."""
    text = str(fail_reason or "")
    for pattern, tmpl in _PATTERNS:
        m = pattern.search(text)
        if m:
            return tmpl.format(*(g.strip() for g in m.groups()))
    errors = _SBATCH_ERROR.findall(text)
    if errors:  # the last line is the one that says why
        return f"sbatch refused the job: {errors[-1].strip()}"
    return None
