"""Histories for the tests of the history site and of compare: nightly runs with a step
injected at a known run, and the recorded runs of two machines (tests/data/compare/)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from conftest import write_run

from apptune import cli

TWO_MACHINES = Path(__file__).parent / "data" / "compare" / "two-machines.json"
#: The run of the nightly history from which gnu/tuned is built with -O1 (13 runs in all).
STEP_AT = 9
NIGHTS = 13
START = 1_795_300_000


def provenance(cflags: str) -> dict:
    return {
        "app": "hpcc",
        "environment": "gnu",
        "flags": {"cflags": [cflags], "fflags": ["-O2"]},
        "compilers": {"cc": {"version": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0"}},
    }


def nightly_history(tmp_path: Path, last_fails: bool = True, variant_names=None) -> tuple:
    """``NIGHTS`` nightly HPCC runs of gnu/baseline and gnu/tuned (3 repeats each, noise
    1 % per repeat); from run ``STEP_AT`` on, gnu/tuned is built with -O1 instead of -O2 and
    its HPL is 10 % lower, its wall time 10 % longer.  In the last run gnu/baseline fails
    its verification (``last_fails``).  Returns (history dir, run dirs)."""
    rng = random.Random(29)
    names = variant_names or {"baseline": "baseline", "tuned": "tuned"}
    dirs = []
    for night in range(NIGHTS):
        results = []
        for variant in ("baseline", "tuned"):
            slow = variant == "tuned" and night >= STEP_AT
            for rep in range(3):
                noise = 1 + rng.gauss(0, 0.01)
                results.append(
                    {
                        "app": "hpcc",
                        "tier": "nightly",
                        "environment": "gnu",
                        "variant": names[variant],
                        "repeat": rep,
                        "figures": {
                            "HPL": (30.0 if variant == "baseline" else 40.0)
                            * (0.9 if slow else 1.0)
                            * noise,
                            "wall_time": 60.0 * (1.1 if slow else 1.0) / noise,
                        },
                        "provenance": provenance("-O1" if slow else "-O2"),
                        "ok": not (last_fails and night == NIGHTS - 1 and variant == "baseline"),
                    }
                )
        uuid = f"5173{night:04d}-0000-4000-8000-000000000000"
        dirs.append(
            write_run(tmp_path / f"night-{night:02d}", uuid, START + night * 86400, results)
        )
    hdir = tmp_path / "history"
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    return hdir, dirs


def two_machine_history(tmp_path: Path, hdir: Path | None = None) -> Path:
    """The recorded HPCC ci runs of two machines (tests/data/compare/two-machines.json)
    in a history, each result with its machine's id and fingerprint."""
    data = json.loads(TWO_MACHINES.read_text())
    hdir = hdir or tmp_path / "history"
    dirs = []
    for run in data["runs"]:
        mid = run["machine"]
        fp = data["machines"][mid]["fingerprint"]
        results = [dict(r, machine=(mid, fp)) for r in run["results"]]
        dirs.append(
            write_run(tmp_path / run["uuid"], run["uuid"], run["start"], results, mode=run["mode"])
        )
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    return hdir
