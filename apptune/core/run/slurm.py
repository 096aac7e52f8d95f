"""What happened to a Slurm job, in one clear sentence, and a watch that keeps
polling it through slurmctld outages and drops it when it waits on dead nodes.

ReFrame's ``squeue`` backend (the default of apptune's clusters: it needs no
slurmdbd) sees a job leave the queue and takes it as completed, whatever ended
it; a failed ``squeue`` (slurmctld stopped, restarting or overloaded) looks the
same to it. slurmctld keeps every finished job for ``MinJobAge`` seconds
(default 300), so the final state is read from it with ``squeue --states=all``
in an explicit ``|``-separated format; where accounting exists and the job has
aged out, ``sacct --parsable2`` answers instead. The node's own state and the
reason an administrator (or slurmctld) gave come from ``sinfo``.

:class:`JobWatch` is what a check uses (apptune/rfm/check.py ``AppRun``): a thread
beside ReFrame's own polling cancels a job that stays pending on DOWN/DRAINED
nodes longer than ``down_node_wait`` seconds, and :meth:`JobWatch.settle`, once
ReFrame counts the job as ended, polls until the job's state is final: a failed
``squeue`` is an unknown state, retried with backoff for up to
``slurmctld_timeout`` seconds, never the job's end.

ReFrame's own failures around the scheduler (sbatch failing because slurmctld
cannot be reached, a pending job cancelled because its partition is down) are
explained from the run report's ``fail_reason`` by :func:`explain_reframe_failure`.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ...yamlio import atomic_write_text

#: Job id, state, nodes, reason, time limit, partition(s), nodes the job asked for (-w).
SQUEUE_FORMAT = "%i|%T|%N|%r|%l|%P|%n"
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
    partition: str = ""
    requested_nodes: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _run(cmd: list[str], timeout: float = 30) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, f"{cmd[0]}: {e}"
    return p.returncode, p.stdout if p.returncode == 0 else (p.stderr or p.stdout).strip()


def parse_squeue(text: str, jobid: str) -> JobOutcome | None:
    """The job's line of ``squeue -h -t all -j ID -o SQUEUE_FORMAT`` (the first five
    fields are enough: partition and requested nodes are optional)."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) in (5, 7) and parts[0] == str(jobid):
            extra = parts[5:] or ["", ""]
            return JobOutcome(
                jobid=parts[0],
                state=parts[1],
                nodes=parts[2],
                reason=parts[3],
                time_limit=parts[4],
                source="squeue",
                partition=extra[0],
                requested_nodes=extra[1],
            )
    return None


def parse_sacct(text: str, jobid: str) -> JobOutcome | None:
    """The allocation's line (not its steps) of
    ``sacct --parsable2 --noheader -o JobID,State,...``."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0] == str(jobid):
            # sacct says "CANCELLED by 0"; the state is the first word
            return JobOutcome(
                jobid=parts[0],
                state=parts[1].split()[0] if parts[1] else "",
                nodes=parts[2],
                reason=parts[3],
                time_limit=parts[4],
                source="sacct",
            )
    return None


class ControllerUnreachable(Exception):
    """slurmctld did not answer (stopped, restarting, overloaded): the job's state is unknown."""


#: squeue's answer for a job slurmctld no longer knows (purged after MinJobAge).
_INVALID_JOB = re.compile(r"Invalid job id", re.IGNORECASE)


def query_job(jobid: str, run=_run) -> tuple[JobOutcome | None, str]:
    """The job's current (or final) state, or None and why it is not known.

    Raises :class:`ControllerUnreachable` when squeue fails for any other reason than
    an unknown job id: that says nothing about the job."""
    rc, out = run(["squeue", "-h", "--states=all", "-j", str(jobid), "-o", SQUEUE_FORMAT])
    if rc == 0:
        o = parse_squeue(out, jobid)
        if o is not None:
            return o, ""
    elif not _INVALID_JOB.search(out):
        raise ControllerUnreachable(" ".join(out.split())[:200] or f"squeue exited with {rc}")
    rc, out2 = run(
        ["sacct", "--parsable2", "--noheader", "-X", "-j", str(jobid), "-o", SACCT_FIELDS]
    )
    if rc == 0:
        o = parse_sacct(out2, jobid)
        if o is not None:
            return o, ""
    return None, f"squeue no longer knows job {jobid} (older than slurmctld's MinJobAge)"


def parse_sinfo(text: str) -> dict[str, tuple[str, str]]:
    """Node -> (state, reason) from ``sinfo -h -N -n NODES -o '%N|%T|%E'``."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            out.setdefault(parts[0], (parts[1], parts[2]))
    return out


def node_states(nodes: str = "", run=_run, partition: str = "") -> dict[str, tuple[str, str]]:
    """State and reason of the given nodes, or of every node of the partition(s)."""
    if not nodes and not partition:
        return {}
    cmd = ["sinfo", "-h", "-N", "-o", "%N|%T|%E"]
    cmd += ["-n", nodes] if nodes else ["-p", partition]
    rc, out = run(cmd)
    return parse_sinfo(out) if rc == 0 else {}


#: Node states (sinfo %T, lower case) in which a node starts no job; a trailing ``*``
#: (the node does not respond) makes any state one of them.
UNAVAILABLE_STATES = ("down", "drained", "draining", "drain", "fail", "failing", "inval")


def unavailable(state: str) -> bool:
    s = state.lower()
    return s.endswith("*") or s.rstrip("*~#!%$@^-") in UNAVAILABLE_STATES


def explain(o: JobOutcome, nodes: dict[str, tuple[str, str]] | None = None) -> str | None:
    """One sentence for a job that did not run to its end; None when it did."""
    state = o.state.split(",")[0].rstrip("+")
    tmpl = UNFINISHED.get(state)
    if tmpl is None:
        return None
    msg = tmpl.format(
        time_limit=o.time_limit or "?",
        nodes=o.nodes or "its node",
        reason=o.reason if o.reason and o.reason != "None" else "no reason given",
    )
    shown = {
        n: sr
        for n, sr in (nodes or {}).items()
        if state in ("NODE_FAIL", "BOOT_FAIL") or unavailable(sr[0])
    }
    if shown:
        msg += "; now " + describe_nodes(shown)
    return f"{msg} (Slurm job {o.jobid}: {o.state}, reason {o.reason or '-'})"


def describe_nodes(nodes: dict[str, tuple[str, str]]) -> str:
    """``n2 is down (admin's reason), n3 is drained``."""
    return ", ".join(
        f"{n} is {s} ({r})" if r and r.lower() != "none" else f"{n} is {s}"
        for n, (s, r) in sorted(nodes.items())
    )


# ---------------------------------------------------------------------------- the watch
#: Pending reasons that say the job's nodes cannot run it now (squeue %r). Slurm 22.05
#: gives the long sentence to a job without -w whose partition lacks enough usable
#: nodes; it also covers nodes reserved for other partitions, so the nodes' states
#: decide (:meth:`JobWatch.blocked_nodes`).
NODE_REASONS = re.compile(
    r"^(ReqNodeNotAvail|NodeDown|Nodes[ _]required[ _]for[ _]job[ _]are[ _]DOWN)"
)
_UNAVAILABLE_NODES = re.compile(r"UnavailableNodes:(\S+)")


def _final(state: str) -> bool:
    """The job ended (any state but pending, running, completing, suspended and the like)."""
    final = {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
    return bool(state) and all(x.rstrip("+") in final for x in state.split(","))


@dataclass
class WatchSettings:
    """The bounds of a watch (a cluster's ``slurmctld_timeout`` and ``down_node_wait``)."""

    #: Seconds without an answer from slurmctld before the check gives up on its job.
    slurmctld_timeout: float = 600
    #: Seconds a job may stay pending on DOWN/DRAINED/unresponsive nodes before it is cancelled.
    down_node_wait: float = 300
    #: Seconds between polls while the job pends or runs.
    poll: float = 10
    #: Longest pause between two polls while slurmctld does not answer (the backoff
    #: doubles up to it).
    max_backoff: float = 30

    def __post_init__(self):
        # a short down_node_wait is kept to within half of it, not to the next 10 s poll
        self.poll = min(self.poll, max(1.0, self.down_node_wait / 2))


class JobWatch:
    """One Slurm job from submission to its final state.

    ``jobid`` is a callable (the id is known only once ReFrame has submitted the job).
    ``run``, ``clock`` and ``sleep`` are the command runner and time source (tests
    give fakes)."""

    def __init__(
        self,
        jobid: Callable[[], str | None],
        settings: WatchSettings | None = None,
        run=_run,
        clock=time.monotonic,
        sleep=time.sleep,
        status_file: str | os.PathLike | None = None,
    ):
        self.jobid = jobid
        #: Where each poll writes what Slurm says of the job (``apptune run`` shows it).
        self.status_file = status_file
        self.settings = settings or WatchSettings()
        self.run, self.clock, self.sleep = run, clock, sleep
        #: The job's last known line (its final state once :attr:`done`).
        self.outcome: JobOutcome | None = None
        #: Why the final state is not known (the job aged out of slurmctld), else "".
        self.note = ""
        #: The check's failure reason decided by the watch itself (job cancelled while
        #: pending on unavailable nodes, slurmctld unreachable too long), else None.
        self.verdict: str | None = None
        self.done = False
        self.unreachable = 0  # consecutive polls without an answer
        self.last_error = ""
        self.blocked_since: float | None = None
        self.cancelled = False
        self._last_contact = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ one poll
    def step(self) -> bool:
        """Poll once; True when there is nothing more to wait for."""
        with self._lock:
            if self.done:
                return True
            jobid = self.jobid()
            if jobid is None:
                return False
            now = self.clock()
            try:
                o, why = query_job(jobid, self.run)
            except ControllerUnreachable as e:
                self.unreachable += 1
                self.last_error = str(e)
                return False
            self.unreachable = 0
            self._last_contact = now
            if o is None:  # no longer known: whatever it was, it ended
                self.note, self.done = why, True
                return True
            self.outcome = o
            self._say(o)
            if _final(o.state):
                self.done = True
                return True
            self._check_blocked(o, now)
            return False

    def _say(self, o: JobOutcome) -> None:
        """One line of what Slurm says (with the nodes' states when the job is stuck
        completing: a dead slurmd keeps it there for minutes) into :attr:`status_file`."""
        if self.status_file is None:
            return
        line = f"Slurm job {o.jobid} {o.state}" + (f" on {o.nodes}" if o.nodes else "")
        if o.reason and o.reason != "None":
            line += f" ({o.reason})"
        if o.state.startswith("COMPLETING") and o.nodes:
            bad = {n: sr for n, sr in node_states(o.nodes, self.run).items() if unavailable(sr[0])}
            if bad:
                line += f"; {describe_nodes(bad)}"
        try:
            atomic_write_text(self.status_file, line + "\n")
        except OSError:
            pass  # a status line is a courtesy; the verdict does not depend on it

    def blocked_nodes(self, o: JobOutcome) -> dict[str, tuple[str, str]]:
        """The unavailable nodes a pending job waits for, or {} when it waits for anything else."""
        if not o.state.startswith("PENDING") or not NODE_REASONS.match(o.reason):
            return {}
        m = _UNAVAILABLE_NODES.search(o.reason)
        named = (m.group(1) if m else "") or o.requested_nodes
        nodes = (
            node_states(named, self.run)
            if named
            else node_states("", self.run, partition=o.partition)
        )
        return {n: sr for n, sr in nodes.items() if unavailable(sr[0])}

    def _check_blocked(self, o: JobOutcome, now: float) -> None:
        if self.cancelled:
            return
        nodes = self.blocked_nodes(o)
        if not nodes:
            self.blocked_since = None
            return
        if self.blocked_since is None:
            self.blocked_since = now
        waited = now - self.blocked_since
        if waited < self.settings.down_node_wait:
            return
        rc, out = self.run(["scancel", o.jobid])
        if rc != 0:  # slurmctld gone again: the next poll tries once more
            self.last_error = " ".join(out.split())[:200]
            return
        self.cancelled = True
        self.verdict = (
            f"job cancelled after {waited:.0f} s pending on unavailable nodes: "
            f"{describe_nodes(nodes)} (Slurm job {o.jobid}, reason {o.reason})"
        )

    def _give_up(self) -> None:
        waited = self.clock() - self._last_contact
        last = self.outcome
        if last is None:
            seen = "never seen since its submission"
        else:
            seen = f"last seen {last.state}" + (f" on {last.nodes}" if last.nodes else "")
        self.verdict = (
            f"slurmctld could not be reached for {waited:.0f} s: Slurm job {self.jobid()} ({seen}) "
            f"is left as it is ({self.last_error})"
        )
        self.done = True

    # ------------------------------------------------------------------ while ReFrame polls
    def start(self) -> None:
        """Watch in a thread while ReFrame polls the job (only pending-on-dead-nodes acts here)."""
        self._thread = threading.Thread(target=self._watch, name="apptune-slurm-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        # the job is submitted right after the run hooks; without an id after the
        # submit timeout, the submission failed and there is nothing to watch
        deadline = self.clock() + 300
        while self.jobid() is None:
            if self._stop.wait(1) or self.clock() > deadline:
                return
        while not self._stop.wait(self.settings.poll):
            try:
                if self.step() or self.cancelled:
                    return
            except Exception as e:  # a bug here must not end the run: settle() polls again
                self.last_error = f"watch: {e}"
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    # ------------------------------------------------------------------ after ReFrame's end
    def settle(self) -> None:
        """Poll until the job's state is final: ReFrame's squeue backend may count a job
        as ended only because squeue failed. Unanswered polls back off (2, 4, ... up to
        ``max_backoff`` s); after ``slurmctld_timeout`` s without an answer the verdict
        says so and the job is left alone (cancelling it needs slurmctld too)."""
        self.stop()
        if self.jobid() is None:
            return
        while not self.step():
            if self.unreachable:
                if self.clock() - self._last_contact >= self.settings.slurmctld_timeout:
                    self._give_up()
                    return
                pause = min(2.0**self.unreachable, self.settings.max_backoff)
                left = self.settings.slurmctld_timeout - (self.clock() - self._last_contact)
                self.sleep(max(0.0, min(pause, left)))
            else:
                self.sleep(min(self.settings.poll, 5.0))

    def record(self, info: dict) -> tuple[dict, str | None]:
        """``info`` plus what the watch knows of the job, and the check's failure reason
        when the job did not run to its end (None when it did)."""
        info = dict(info)
        if self.outcome is None or not self.done:
            if self.note:
                info["note"] = self.note
            return info, self.verdict
        info.update(self.outcome.to_dict())
        if self.verdict:
            return info, self.verdict
        nodes = node_states(self.outcome.nodes, self.run)
        if nodes:
            info["node_states"] = {n: {"state": s, "reason": r} for n, (s, r) in nodes.items()}
        return info, explain(self.outcome, nodes)


def watch(
    partition, jobid: Callable[[], str | None], status_file: str | os.PathLike | None = None
) -> JobWatch | None:
    """A started :class:`JobWatch` for a check on a Slurm partition, else None. The
    bounds come from the partition's ``extras['slurm_watch']`` (apptune/core/data/site.py)."""
    if partition.scheduler.registered_name not in ("slurm", "squeue"):
        return None
    w = JobWatch(
        jobid,
        WatchSettings(**partition.extras.get("slurm_watch", {})),
        status_file=status_file,
    )
    w.start()
    return w


_PATTERNS = [
    (
        re.compile(r"(Unable to contact slurm controller[^\n]*)"),
        "slurmctld unreachable at submit: {0}",
    ),
    (
        re.compile(r"(Socket timed out on send/recv operation)"),
        "slurmctld did not answer at submit: {0}",
    ),
    (
        re.compile(r"(Could not establish a configuration source)"),
        "sbatch found no Slurm configuration (no slurm.conf, SLURM_CONF unset): {0}",
    ),
    (
        re.compile(r"job cancelled because it was blocked due to reason: ([^\n]+)"),
        "job cancelled while pending, its nodes cannot run it: {0}",
    ),
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
