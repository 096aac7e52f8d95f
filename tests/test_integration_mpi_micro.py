"""Integration: build mpi-micro from the repository and run the ci tier through ReFrame.

gnu/tuned (Open MPI, Fortran 2008 noise kernel) bound to cores builds, runs all six
benchmarks, verifies their data checks and checksums, and plots their curves; the llvm
build of the Fortran kernel is reported as the expected failure the recipe states
(flang-new-16 cannot read the gfortran mpi_f08 module). About 1-2 minutes on 2 cores.
Asserts correctness, provenance and reporting, never timings; the speed goal
"each benchmark <= 20 s on 2 ranks" (a speed goal: benchmarks/mpi_micro_budget.py).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]

pytestmark = pytest.mark.integration

BENCHMARKS = ["imb", "noise", "overlap", "contention", "placement", "rma"]


def test_mpi_micro_ci_gnu_builds_runs_verifies_and_plots(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        APPTUNE
        + [
            "run",
            "--mode",
            "dev",
            "--run-dir",
            str(run_dir),
            "-c",
            "reframe-checks/mpi-micro",
            "--",
            "-n",
            "placement=bound.*build.variant=tuned$",
            "-S",
            "valid_prog_environs=gnu,llvm",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    results = {}
    for f in (run_dir / "output").rglob("apptune-result.json"):
        r = json.loads(f.read_text())
        results[(r["environment"], r["variant"])] = (r, f.parent)
    r, outdir = results[("gnu", "tuned@bound")]
    assert r["verification"]["ok"], r["verification"]["summary"]
    fields = {f["field"]: f for f in r["verification"]["fields"]}
    assert fields["pingpong_checksum"]["ok"] and fields["rma_amo_errors"]["value"] == 0
    assert len(r["curves"]) == 16
    assert r["figures"]["pingpong_latency"] > 0 and r["figures"]["rma_amo_rate"] > 0
    prov = r["provenance"]
    assert prov["source"]["file"].startswith("mpi-micro-")
    assert "Open MPI" in prov["compilers"]["ftn"]["mpi"]
    assert prov["compile_lines"]["compiles"] == 9  # 8 C files + the Fortran kernel
    summary = dict(
        ln.split("=", 1) for ln in (outdir / "mpi-micro.summary").read_text().splitlines()
    )
    assert summary["noise_kernel_fortran"] == "1" and summary["bound"] == "1"
    # every benchmark ran to its end (its time budget, <= 20 s on 2 ranks, is a speed goal
    # checked by benchmarks/mpi_micro_budget.py, not asserted here: timings are noisy)
    for b in BENCHMARKS:
        assert 0 < float(summary[f"{b}_seconds"]) < 900, (b, summary[f"{b}_seconds"])
    for name in (
        "pingpong-t_us",
        "allreduce-t_avg_us",
        "noise-hist-count",
        "overlap-t_16KiB_us",
        "contention-wicon_us",
        "placement-same_socket_us",
        "rma-put-bw_mbytes_per_s",
        "rma-amo-mops_per_s",
    ):
        assert (run_dir / "plots" / f"curve-mpi-micro-ci-{name}.png").is_file(), name
    md = (run_dir / "report.md").read_text()
    assert "## mpi-micro — tier ci" in md
    # flang-new-16 and the gfortran mpi_f08 module: an expected failure with flang's words
    s = json.loads((run_dir / "summary.json").read_text())
    xf = [x for x in s["expected_failures"] if x.get("environment") == "llvm"]
    assert xf and any("Cannot read module file for module 'mpi_f08'" in x["reason"] for x in xf), xf
    assert not s["failures"], s["failures"]
