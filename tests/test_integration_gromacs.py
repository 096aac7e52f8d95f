"""Integration: GROMACS's ci tier (gnu/tuned, gnu-mkl/tuned+fft=mkl and llvm/tuned) through
``apptune run --mode dev``: the build of gmx_mpi from the orig tarball in each (every compile
line checked for the variant's flags), then three of GROMACS's own regression tests (grompp,
mdrun on 2 ranks, gmx check against the stored reference energies and forces) and the
benchmark mdrun.

The builds come from the build cache when it holds them (the user's, as every integration
test's); a cold cache builds them: 10 to 23 minutes each on 2 cores (docs/applications.md),
so the test pays them once; with the builds cached it takes about a minute. ``--mode ci``
leaves this tier out (``long_build``), so `make run` does not build GROMACS, nor does `make
test` (marker ``long_build``): `make test-long` and the nightly workflow run it. Asserts
correctness and provenance, never timings."""

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
        timeout=3 * 3600,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    runs = {r["environment"]: r for r in run_records(run_dir) if r["tier"] == "ci"}
    assert sorted(runs) == ["gnu", "gnu-mkl", "llvm"], sorted(runs)
    axes = {
        "gnu": {"simd": "AVX2_256", "fft": "fftw3", "fault": "none"},
        "gnu-mkl": {"simd": "AVX2_256", "fft": "mkl", "fault": "none"},
        "llvm": {"simd": "AVX2_256", "fft": "fftw3", "fault": "none"},
    }
    for env, ci in runs.items():
        v = ci["verification"]
        assert v["ok"], (env, v["summary"])
        fields = {f["field"]: f for f in v["fields"]}
        for test in ("nbnxn_pme", "nbnxn_vsite", "tip4p"):
            assert fields[f"{test}.energy"]["value"] == 0, (env, fields[f"{test}.energy"])
            assert fields[f"{test}.forces"]["ok"], (env, fields[f"{test}.forces"])
        prov = ci["provenance"]
        components = prov["source"]["components"]
        assert components[0]["file"] == "gromacs_2022.5.orig-regressiontests.tar.gz"
        assert prov["axes"] == axes[env], (env, prov["axes"])
        assert prov["compile_lines"]["compiles"] > 500
        figures = ci["figures"]
        assert figures["ns_per_day"] > 0 and figures["mdrun_wall"] > 0
        assert 0 < figures["force_share"] < 100 and 0 <= figures["comm_share"] < 100
