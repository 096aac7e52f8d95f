"""Energy sampler overhead: CPU time of the sampler thread vs the job's CPU time.

Runs a CPU-bound job (one busy process per core for --seconds) twice, with and
without the model meter sampling beside it at --hz, and prints the sampler's
own CPU time as a fraction of the job's CPU time (goal: < 1 %), plus the
job's wall time in both runs (noisy; for information only).

    .venv/bin/python benchmarks/sampler_overhead.py --seconds 10 --hz 10
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from apptune.energy import Sampler

BUSY = "import time\nt=time.time()\nwhile time.time()-t<{s}: pass\n"


def job(seconds: float, procs: int):
    """Start a job script (like ReFrame's local job) with `procs` busy children."""
    script = "\n".join([f'{sys.executable} -c "{BUSY.format(s=seconds)}" &'] * procs + ["wait"])
    return subprocess.Popen(["/bin/sh", "-c", script])


def children_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system


def run(seconds: float, hz: float, procs: int, sample: bool):
    c0 = children_cpu()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        p = job(seconds, procs)
        s = None
        if sample:
            s = Sampler(
                ["model"],
                "bench",
                d,
                hz=hz,
                context={
                    "power_model": {"idle_W": 20, "load_W": 60},
                    "pid": p.pid,
                    "ncpus": os.cpu_count(),
                },
            )
            s.start()
        p.wait()
        rec = s.stop() if s else None
    return time.monotonic() - t0, children_cpu() - c0, rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    wall0, cpu0, _ = run(a.seconds, a.hz, a.procs, sample=False)
    wall1, cpu1, rec = run(a.seconds, a.hz, a.procs, sample=True)
    frac = rec.sampler_cpu_s / cpu1
    print(
        f"job: {a.procs} busy processes x {a.seconds} s; sampler: model meter at {a.hz} Hz, "
        f"{rec.samples} samples"
    )
    print(
        f"sampler CPU {rec.sampler_cpu_s:.3f} s / job CPU {cpu1:.2f} s = {frac:.2%} "
        f"(goal < 1 %): {'OK' if frac < 0.01 else 'OVER'}"
    )
    print(
        f"job wall time without / with sampler: {wall0:.2f} s / {wall1:.2f} s (noisy, information "
        "only)"
    )
    print(f"modelled energy {rec.energy_J:.1f} J, average power {rec.avg_power_W:.1f} W")


if __name__ == "__main__":
    main()
