"""What a long ``apptune run`` is doing, while it does it.

ReFrame's own output passes through unchanged; beside it, apptune follows the run:

* which test case of how many has finished (ReFrame's ``(k/N)`` on each result line), and
  which run now: those started (RUN) and not done whose job or build has begun (under
  ReFrame's async policy several have started at once, most of them waiting);
* what a build says before it starts (:mod:`apptune.core.builds.buildcost`: the
  ``build-notice.json`` it leaves in its stage), once, on apptune's own output, where it
  says something new: that the same build is in progress in another run and is waited for;
  how long a build the cache lacks will take, when that is a minute or more, or unknown
  (once per application). A run on an empty build cache said what all of its builds
  cost in one line before it started (``apptune run``), and its builds say nothing more;
* while a build runs, the files compiled so far (the compile lines of its
  ``compile-lines.jsonl``, which apptune's compiler wrappers append to, the build system's
  probes aside) against the
  count of the last build of the same application in the build cache, the elapsed
  time and an estimate of what is left.

On a terminal this is one status line under ReFrame's output (tqdm, a declared
dependency); in a log (not a TTY, or ``CI=true``) it is at most one line a minute.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pydantic

from ...constants import SLURM_STATE_FILE
from ...figures import fmt_seconds
from ...models import Provenance
from ..builds import buildcache
from ..builds.buildcost import NOTICE_FILE, WAIT
from ..builds.compilelines import is_probe

_DONE = re.compile(
    r"\[\s*(?:OK|FAIL|ERROR|SKIP|XFAIL|XPASS|ABORT\w*)\s*\]\s*\(\s*(\d+)/(\d+)\)\s+(.*)"
)
_RUN = re.compile(r"\[\s*RUN\s*\]\s+(.*)")
#: A test case as ReFrame names it on its RUN and result lines (``task.info()``): its display
#: name, hash and ``@system:partition+environment``.
_CASE = re.compile(r"(?P<name>\S+(?: [%~]\S+)*) /(?P<hash>[0-9a-f]+) @(?P<where>\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A non-interactive log gets a progress line at most this often.
LOG_EVERY_S = 60.0
#: The time left of a build comes from its compile rate over this many seconds at most: a
#: build that resumes through a compiler cache takes its first thousand files in a minute,
#: then compiles the rest at a file every few seconds.
RATE_WINDOW_S = 600.0
#: ... once its samples span at least this long (before that, the rate since the start).
RATE_MIN_SPAN_S = 120.0


def expected_build(
    app: str, environment: str | None = None, variant: str | None = None
) -> tuple[int | None, float | None]:
    """(compiles, seconds) of the last cached build of ``app``, of the same environment and
    variant where the cache has one (another variant can compile other files: a patch, a
    library built with it); (None, None) if none. The seconds are None where that build took
    its objects from a compiler cache: its time is not what a build takes (a warm OpenFOAM
    build of 2.5 minutes made a cold one's progress say "about 2 min 30 s left" for an hour)."""
    found: tuple[int | None, float | None] = (None, None)
    for e in reversed(buildcache.entries()):  # the newest first
        if e.manifest.get("app") != app:
            continue
        try:
            text = (e.path / "files" / "provenance.json").read_text()
            prov = Provenance.model_validate_json(text)
        except (OSError, pydantic.ValidationError):
            continue
        n = prov.compile_lines.compiles if prov.compile_lines else None
        if not n:
            continue
        seconds = prov.build_seconds if buildcache.cold(e.manifest) else None
        same = (e.manifest.get("environment"), e.manifest.get("variant")) == (environment, variant)
        if same:
            return n, seconds
        if found == (None, None):
            found = (n, seconds)
    return found


class Follower:
    """Follows one run: feed it ReFrame's output lines; ``status()`` says what is going on."""

    def __init__(self, run_dir: Path, clock=time.monotonic, first_run: bool = False):
        self.run_dir = Path(run_dir)
        self.clock = clock
        self.t0 = clock()
        self.done = 0
        self.total: int | None = None
        #: The test cases started (ReFrame's RUN line) and not yet done, in the order they
        #: started: several at once under ReFrame's async execution policy.
        self.started: dict[str, dict] = {}
        #: Say each build's cost (:mod:`apptune.core.builds.buildcost`)? Not on a first run, which
        #: said it once for all; later, only where it says something new (:meth:`notices`).
        self.first_run = first_run
        self._costs_said: set[str] = set()
        self._expected: dict[str, tuple] = {}
        self._build_seen: dict[Path, float] = {}
        self._noticed: set[tuple[Path, str]] = set()
        self._samples: dict[Path, list[tuple[float, int]]] = {}
        self._counted: dict[Path, tuple[int, int]] = {}

    def feed(self, line: str) -> None:
        text = _ANSI.sub("", line)
        m = _DONE.search(text)
        if m:
            self.done, self.total = int(m.group(1)), int(m.group(2))
            case = _CASE.match(m.group(3))
            self.started.pop(case.group(0) if case else m.group(3).strip(), None)
            return
        m = _RUN.search(text)
        if m:
            case = _CASE.match(m.group(1))
            key = case.group(0) if case else m.group(1).strip()
            self.started[key] = case.groupdict() if case else {"name": key}

    def running(self) -> tuple[list[str], int]:
        """(the test cases whose job or build runs now, the oldest first; how many others
        have started and wait: for a job slot, a node, their dependencies). ReFrame says RUN
        when a test case starts, which under its async policy is long before its job runs: a
        job runs once its output file exists in the stage (``rfm_job.out``, ``rfm_build.out``
        of a build). Without a stage to look at, the oldest started is taken to run."""
        now, waiting = [], 0
        for c in self.started.values():
            if self._has_job(c):
                now.append(_label(c))
            else:
                waiting += 1
        if not now and self.started:
            return [_label(next(iter(self.started.values())))], waiting - 1
        return now, waiting

    def _has_job(self, c: dict) -> bool:
        if not c.get("hash") or "+" not in c.get("where", ""):
            return False
        part, env = c["where"].rsplit("+", 1)
        system, _, partition = part.partition(":")
        d = self.run_dir / "stage" / system / (partition or "default") / env
        d = d / f"{c['name'].split()[0]}_{c['hash']}"
        return any((d / f).exists() for f in ("rfm_job.out", "rfm_build.out"))

    def active_build(self) -> dict | None:
        """The build compiling now.

        The newest ``compile-lines.jsonl`` written in the last minute."""
        stage = self.run_dir / "stage"
        if not stage.is_dir():
            return None
        now = time.time()
        logs = _in_test_dirs(stage, "compile-lines.jsonl")
        logs = [
            (t, p) for t, p in logs if now - t < 60 and not (p.parent / "provenance.json").exists()
        ]
        if not logs:
            return None
        _, log = max(logs)
        try:
            plan = json.loads((log.parent / "plan.json").read_text())
            app, which = plan["app"], (plan.get("environment"), plan.get("variant"))
        except (OSError, json.JSONDecodeError, KeyError):
            app, which = log.parent.name, (None, None)
        if (app, which) not in self._expected:
            self._expected[(app, which)] = expected_build(app, *which)
        expected = self._expected[(app, which)]
        try:
            compiled = self._count(log)
        except OSError:
            return None
        try:  # the build's plan is written when it starts
            elapsed = max(0.0, now - (log.parent / "plan.json").stat().st_mtime)
        except OSError:
            elapsed = self.clock() - self._build_seen.setdefault(log, self.clock())
        samples = self._samples.setdefault(log, [])
        samples.append((now, compiled))
        return {
            "app": app,
            "compiled": compiled,
            "expected": expected[0],
            "expected_s": expected[1],
            "elapsed": elapsed,
            "rate": recent_rate(samples, now),
        }

    def _count(self, log: Path) -> int:
        """Files of the product compiled so far: the log's compile lines that are not the
        build system's probes (what the build's provenance counts, so a FLASH-IO build
        with configure's 218 conftest compiles is not "282 files (more than the 64 of the
        last build)"). Read from where the last call stopped, whole lines only."""
        offset, count = self._counted.get(log, (0, 0))
        with log.open("rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("kind") == "compile" and not is_probe(e):
                count += 1
        self._counted[log] = (offset + end, count)
        return count

    def notices(self) -> list[str]:
        """What builds of this run said (their ``build-notice.json``) since the last call,
        each once, where it says something new (:meth:`_news`)."""
        stage = self.run_dir / "stage"
        if not stage.is_dir():
            return []
        out = []
        for _, f in sorted(_in_test_dirs(stage, NOTICE_FILE), key=lambda tp: tp[1]):
            try:
                said = json.loads(f.read_text())
                line = said["notice"]
            except (OSError, json.JSONDecodeError, KeyError, TypeError):
                continue  # being written: the next tick reads it
            if (f, line) in self._noticed:
                continue
            self._noticed.add((f, line))
            if self._news(said):
                out.append(line)
        return out

    def _news(self, said: dict) -> bool:
        """Whether a build's notice tells something the run has not said: a wait for the same
        build in another run always does. What a build will cost does not on a first run
        (said once for all its builds before they started); later, a build of a minute or
        more does, and of one whose time is unknown, the first of its application."""
        if said.get("kind") == WAIT:
            return True
        if self.first_run:
            return False
        if said.get("seconds") is not None:
            return said["seconds"] >= LOG_EVERY_S
        app = said.get("app") or said["notice"]
        new = app not in self._costs_said
        self._costs_said.add(app)
        return new

    def slurm_says(self) -> str | None:
        """What Slurm said last of a job not yet ended (the newest ``slurm-state.txt`` of the
        stage written in the last two minutes), e.g. a job stuck COMPLETING on a dead node."""
        stage = self.run_dir / "stage"
        if not stage.is_dir():
            return None
        now = time.time()
        files = _in_test_dirs(stage, SLURM_STATE_FILE)
        files = [(t, p) for t, p in files if now - t < 120]
        if not files:
            return None
        try:
            line = max(files)[1].read_text(errors="replace").strip()
        except OSError:
            return None
        return line if line and " RUNNING" not in line else None

    def status(self) -> str:
        parts = [f"{self.done}/{self.total} test cases done" if self.total else "starting"]
        b = self.active_build()
        if b:
            s = f"building {b['app']}: {b['compiled']}"
            if b["expected"] and b["compiled"] > b["expected"]:
                s += f" files (more than the {b['expected']} of the last build)"
            elif b["expected"]:
                s += f"/{b['expected']} files"
                left = _left(b)
                if left is not None:
                    s += f", about {fmt_seconds(int(left))} left"
            else:
                s += " files (no earlier build to compare)"
            parts.append(s + f", {fmt_seconds(int(b['elapsed']))} so far")
        else:
            now, waiting = self.running()
            if now:
                more = f" and {len(now) - 1} more" if len(now) > 1 else ""
                parts.append(f"running {now[0]}{more}")
            if waiting > 0:
                parts.append(f"{waiting} waiting to run")
        said = self.slurm_says()
        if said:
            parts.append(said)
        parts.append(f"{fmt_seconds(int(self.clock() - self.t0))} elapsed")
        return "; ".join(parts)


def _label(case: dict) -> str:
    """A test case for the status line: its display name and where it runs (which a
    fixture's name already says, ``~local:default+gnu``)."""
    where = case.get("where")
    return case["name"] if not where or where in case["name"] else f"{case['name']} @{where}"


def _in_test_dirs(stage: Path, name: str) -> list[tuple[float, Path]]:
    """(change time, path) of each test's file ``name`` in ReFrame's stage directory
    (stage/<system>/<partition>/<environment>/<test>/): never a walk through the build trees
    below (an OpenFOAM build has tens of thousands of files, CMake's TryCompile directories
    vanish while they are read); a file removed meanwhile is left out."""
    found = []
    for p in stage.glob(f"*/*/*/*/{name}"):
        try:
            found.append((p.stat().st_mtime, p))
        except OSError:
            continue
    return found


def interactive() -> bool:
    return sys.stdout.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


def relay(proc, run_dir: Path, out=sys.stdout, first_run: bool = False) -> None:
    """Pass a ReFrame process's output through, with progress (see the module docstring);
    ``first_run``: the run said what its builds cost before it started (an empty cache)."""
    import threading

    f = Follower(run_dir, first_run=first_run)
    tty = interactive()
    bar = None
    if tty:
        from tqdm import tqdm

        bar = tqdm(total=0, bar_format="{desc}", leave=False, file=out, dynamic_ncols=True)
    stop = threading.Event()

    def ticker():
        last = f.clock()
        while not stop.wait(1.0):
            for line in f.notices():
                if bar is not None:
                    bar.write("apptune: " + line, file=out)
                else:
                    print("apptune: " + line, file=out, flush=True)
            if bar is not None:
                bar.set_description_str("apptune: " + f.status())
            elif f.clock() - last >= LOG_EVERY_S:
                last = f.clock()
                print("apptune: progress: " + f.status(), file=out, flush=True)

    t = threading.Thread(target=ticker, name="apptune-progress", daemon=True)
    t.start()
    try:
        for line in proc.stdout:
            f.feed(line)
            if bar is not None:
                bar.clear()
                out.write(line)
                out.flush()
                bar.refresh()
            else:
                out.write(line)
                out.flush()
    finally:
        stop.set()
        t.join(timeout=2)
        if bar is not None:
            bar.close()


def recent_rate(samples: list[tuple[float, int]], now: float) -> float | None:
    """Files a second over the last :data:`RATE_WINDOW_S` of ``samples`` ((time, files
    compiled), oldest first; older ones are dropped from the list); None until they span
    :data:`RATE_MIN_SPAN_S` or while nothing compiled in the window."""
    while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
        del samples[0]
    (t0, n0), (t1, n1) = samples[0], samples[-1]
    if t1 - t0 < RATE_MIN_SPAN_S or n1 <= n0:
        return None
    return (n1 - n0) / (t1 - t0)


def _left(b: dict) -> float | None:
    """Time left of a build: from its recent compile rate (else its rate so far), bounded by
    the last cached build's time (a build spends its first minutes configuring, before the
    first file compiles)."""
    compiled, expected, total = b["compiled"], b["expected"], b.get("expected_s")
    if not expected or compiled >= expected:
        return None
    if b.get("rate"):
        by_rate = (expected - compiled) / b["rate"]
    else:
        by_rate = b["elapsed"] * (expected - compiled) / compiled if compiled else None
    if not total:
        return by_rate
    if by_rate is None:
        return max(0.0, total - b["elapsed"])
    return max(total - b["elapsed"], min(by_rate, total))
