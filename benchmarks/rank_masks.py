"""How long MPI ranks hold a CPU mask other than their binding, and whether the run-quality
monitor records each rank's binding right (apptune/core/run/quality.py ``Monitor``).

Each repeat launches ``mpirun -np 2 --bind-to none PROGRAM ARGS`` (``--launch``; by default
NetPIPE's integrity pass, the launch the slower machine's binding check failed on), reads
every rank's ``Cpus_allowed_list`` about every half millisecond, and runs the monitor beside
it as the runner does. A rank's binding is the mask it held last; a *detour* is a time it held
another (MPI_Init's topology discovery binds it to one CPU, then back). The monitor is right
when it records each rank's last mask. Repeats alternate between the monitor as it is and as
it was (a mask read at the once-a-second samples only, kept when it held 50 ms), so both see
the same machine. ``--load N`` keeps N busy processes pinned to CPU 0, as other work on a busy
or slower machine does.

    .venv/bin/python benchmarks/rank_masks.py --program PATH/NPmpi --repeats 20 --load 1
    .venv/bin/python benchmarks/rank_masks.py --program PATH/NPmpi \
        --launch "mpirun.mpich -np 2 -bind-to none"    # MPICH's build of NetPIPE
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from apptune.core.run import procfs, quality, ranks

#: NetPIPE's integrity pass as the ci input runs it (inputs/netpipe/ci/input.yaml).
ARGS = ["-i", "-u", "65536", "-n", "200", "-o", "/dev/null"]


def masks_of(name: str) -> dict[int, str]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = (d / "status").read_text()
        except OSError:
            continue
        if f"Name:\t{name[:15]}\n" in st:
            line = next(x for x in st.splitlines() if x.startswith("Cpus_allowed_list:"))
            out[int(d.name)] = line.split(":", 1)[1].strip()
    return out


def one(launch: list[str], program: str, args: list[str], old: bool) -> dict:
    """One launch: each rank's mask phases (mask, seconds) and what the monitor recorded."""
    saved = ranks.YOUNG_S
    if old:
        ranks.YOUNG_S = -1.0  # no reads between the samples: the monitor as it was
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mon = quality.Monitor(program=program)
    if old:
        mon.ranks.seen = lambda pid, key, launch, **_: settled_read(mon.ranks, pid, key, launch)
    mon.start()
    time.sleep(random.uniform(0, mon.period))  # the launch at any phase of the samples
    mon.begin_launch("run")
    phases: dict[int, list[list]] = {}
    done = threading.Event()

    def watch():
        while not done.is_set():
            now = time.monotonic()
            for pid, m in masks_of(os.path.basename(program)).items():
                ph = phases.setdefault(pid, [])
                if ph and ph[-1][0] == m:
                    ph[-1][2] = now
                else:
                    ph.append([m, now, now])
            time.sleep(0.0005)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    cmd = [*launch, program, *args]
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    done.set()
    t.join()
    cpu = thread_cpu(mon._thread.native_id)
    mon.stop()
    ranks.YOUNG_S = saved
    recorded = {r["pid"]: r["cpus"] for r in mon.binding()["ranks"]}
    last = {
        pid: procfs.format_cpulist(procfs.parse_cpulist(ph[-1][0])) for pid, ph in phases.items()
    }
    detours = [e - s for ph in phases.values() for m, s, e in ph[:-1] if m != ph[-1][0]]
    return {
        "right": all(recorded.get(p) == m for p, m in last.items() if p in recorded),
        "ranks": (len(recorded), len(last)),
        "longest_detour_s": max(detours, default=0.0),
        "wrong": {p: recorded[p] for p in recorded if recorded[p] != last.get(p)},
        "monitor_cpu_s": cpu,
    }


def settled_read(r: ranks.Ranks, pid: int, key, launch) -> None:
    """How the monitor read a rank's mask before: a new mask counted once it held 50 ms."""
    cpus = procfs.allowed_cpus(r.proc, pid)
    if cpus and cpus != r.affinity.get(pid):
        time.sleep(0.05)
        if procfs.allowed_cpus(r.proc, pid) != cpus:
            return
    if cpus:
        r.affinity[pid] = cpus


def thread_cpu(tid: int) -> float:
    """CPU seconds of this process's thread ``tid`` (the monitor's sampling thread)."""
    f = (Path("/proc/self/task") / str(tid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", required=True, help="an MPI program (NetPIPE's NPmpi)")
    ap.add_argument("--repeats", type=int, default=10, help="launches per monitor version")
    ap.add_argument("--load", type=int, default=0, help="busy processes pinned to CPU 0")
    ap.add_argument(
        "--launch",
        default="mpirun -np 2 --bind-to none",
        help="the launcher's words (MPICH's: 'mpirun.mpich -np 2 -bind-to none')",
    )
    ap.add_argument("args", nargs="*", help=f"the program's arguments (default: {ARGS})")
    a = ap.parse_args(argv)
    hogs = [
        subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
        for _ in range(a.load)
    ]
    results = {"new": [], "old": []}
    try:
        for i in range(2 * a.repeats):
            which = "old" if i % 2 else "new"
            launch = shlex.split(a.launch)
            results[which].append(one(launch, a.program, a.args or ARGS, old=which == "old"))
    finally:
        for h in hogs:
            h.kill()
    for which, rs in results.items():
        detours = sorted(r["longest_detour_s"] for r in rs)
        seen = sum(r["ranks"][0] for r in rs), sum(r["ranks"][1] for r in rs)
        cpu = sum(r["monitor_cpu_s"] for r in rs) / len(rs)
        print(
            f"monitor {which}: {sum(r['right'] for r in rs)}/{len(rs)} launches recorded "
            f"every rank's binding right ({seen[0]} of the {seen[1]} ranks recorded); "
            "longest detour per launch: median "
            f"{detours[len(detours) // 2] * 1000:.0f} ms, max {detours[-1] * 1000:.0f} ms; "
            f"monitor thread CPU per launch: {cpu:.3f} s; "
            f"wrong records: {[r['wrong'] for r in rs if r['wrong']]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
