#!/usr/bin/env python3
"""Speed goal: each mpi-micro benchmark <= 20 s on 2 ranks (ci tier).

Not a pass/fail test (timings here are noisy): run it on a quiet node after
`apptune run --mode ci -c reframe-checks/mpi-micro --run-dir RUN`:

    .venv/bin/python benchmarks/mpi_micro_budget.py RUN [--budget 20]

Prints each benchmark's time per run found in RUN and exits 1 if any exceeds the budget.
"""

import argparse
import sys
from pathlib import Path

BENCHMARKS = ("imb", "noise", "overlap", "contention", "placement", "rma")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per benchmark (default 20)")
    a = ap.parse_args(argv)
    files = sorted(a.run_dir.rglob("mpi-micro.summary"))
    if not files:
        print(f"no mpi-micro.summary under {a.run_dir}", file=sys.stderr)
        return 2
    over = 0
    for f in files:
        kv = dict(ln.split("=", 1) for ln in f.read_text().splitlines() if "=" in ln)
        row = []
        for b in BENCHMARKS:
            t = float(kv.get(f"{b}_seconds", "nan"))
            bad = not t <= a.budget
            over += bad
            row.append(f"{b} {t:.1f} s{' OVER' if bad else ''}")
        print(f"{f.parent.relative_to(a.run_dir)}: " + ", ".join(row))
    print(f"{over} benchmark run(s) over {a.budget:g} s")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
