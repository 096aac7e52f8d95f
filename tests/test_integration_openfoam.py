"""Integration: OpenFOAM's ci tier with the distribution's build (Debian's packages, nothing
compiled) through ``apptune run --mode ci``: damBreak serial and on 2 ranks verifies the
physics' invariants, the blessed pressures and the water's shear stress on the floor, the
package versions are in the provenance, and the planted fault (gravity 1 % low, tier
``planted``) is the expected failure naming the pressures and shear stresses that moved.
About two minutes on 2 cores. Asserts correctness and provenance,
never timings."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_records

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]

pytestmark = pytest.mark.integration


def test_openfoam_ci_distribution_build_verifies_and_the_planted_fault_fails(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        APPTUNE
        + ["run", "--mode", "ci", "--run-dir", str(run_dir), "-c", "reframe-checks/openfoam"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    results = {r["tier"]: r for r in run_records(run_dir)}
    ci = results["ci"]
    assert ci["verification"]["ok"], ci["verification"]["summary"]
    fields = {f["field"]: f for f in ci["verification"]["fields"]}
    for name in (
        "water_volume_drift",
        "serial_alpha_min",
        "alpha_max",
        "p_obstacle_t010",
        "water_shear_t010",
        "serial_water_shear_t020",
        "steps",
    ):
        assert fields[name]["ok"], fields[name]
    assert ci["provenance"]["packages"]["openfoam"].startswith("1912.200626")
    assert ci["launch"]["env_vars"]["WM_PROJECT_DIR"] == "/usr/share/openfoam"
    assert ci["figures"]["time_per_step"] > 0 and ci["figures"]["serial_time_per_step"] > 0
    planted = results["planted"]["verification"]
    assert not planted["ok"] and planted["xfail"], planted
    failed = {f["field"] for f in planted["fields"] if not f["ok"]}
    assert {"p_obstacle_t010", "serial_p_obstacle_t010", "water_shear_t005"} <= failed, planted[
        "summary"
    ]
    assert not failed & {"water_volume_drift", "alpha_min", "alpha_max"}, planted["summary"]
