"""Integration: GROMACS's ci tier (gnu/tuned) through ``apptune run --mode dev``: the build
of gmx_mpi from the orig tarball (every compile line checked for the variant's flags), then
three of GROMACS's own regression tests (grompp, mdrun on 2 ranks, gmx check against the
stored reference energies and forces) and the benchmark mdrun.

The build comes from the build cache when it holds it (the user's, as every integration
test's); a cold cache builds it: 23 minutes on 2 cores (docs/applications.md), so the test
pays it once; with the build cached it takes about 20 seconds. ``--mode ci`` leaves this
tier out (``long_build``), so `make run` does not build GROMACS, nor does `make test` (marker
``long_build``): `make test-long` and the nightly workflow run it. Asserts correctness and
provenance, never timings."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_records

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]

pytestmark = [pytest.mark.integration, pytest.mark.long_build]


def test_gromacs_ci_tier_verifies_by_its_own_regression_tests(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        APPTUNE + ["run", "--mode", "dev", "--run-dir", str(run_dir), "--app", "gromacs"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=5400,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    (ci,) = [r for r in run_records(run_dir) if r["tier"] == "ci"]
    v = ci["verification"]
    assert v["ok"], v["summary"]
    fields = {f["field"]: f for f in v["fields"]}
    for test in ("nbnxn_pme", "nbnxn_vsite", "tip4p"):
        assert fields[f"{test}.energy"]["value"] == 0, fields[f"{test}.energy"]
        assert fields[f"{test}.forces"]["ok"], fields[f"{test}.forces"]
    prov = ci["provenance"]
    assert prov["source"]["components"][0]["file"] == "gromacs_2022.5.orig-regressiontests.tar.gz"
    assert prov["axes"] == {"simd": "AVX2_256", "fft": "fftw3", "fault": "none"}
    assert prov["compile_lines"]["compiles"] > 500
    figures = ci["figures"]
    assert figures["ns_per_day"] > 0 and figures["mdrun_wall"] > 0
    assert 0 < figures["force_share"] < 100 and 0 <= figures["comm_share"] < 100
