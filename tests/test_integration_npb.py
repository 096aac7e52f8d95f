"""Integration: build the NPB kernels from the repository and run the ci tier (class S).

Through ``apptune run --mode ci``: gnu/baseline and gnu/tuned build, run EP, CG, MG, FT and
IS on 2 ranks and verify every published value; the planted wrong seed
(``baseline+seed=planted``) is the expected failure the reference lists, its record naming
each wrong value with the value expected and the value got. Then plain ReFrame runs the same
check (the builds restored from the build cache). About a minute on 2 cores. Asserts
correctness and provenance, never timings.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_records

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]
REFRAME = [str(Path(sys.executable).with_name("reframe"))]

pytestmark = pytest.mark.integration


def _results(run_dir: Path) -> dict:
    return {(r["environment"], r["variant"]): r for r in run_records(run_dir)}


def test_npb_ci_gnu_builds_runs_and_verifies_the_published_values(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        APPTUNE
        + ["run", "--mode", "ci", "--run-dir", str(run_dir), "-c", "reframe-checks/npb"]
        + ["--", "-S", "valid_prog_environs=gnu"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    results = _results(run_dir)
    for variant in ("baseline", "tuned"):
        r = results[("gnu", variant)]
        assert r["verification"]["ok"], r["verification"]["summary"]
        fields = {f["field"]: f for f in r["verification"]["fields"]}
        for name in ("ep_sx", "ep_sy", "cg_zeta", "mg_rnm2", "ft_sum_im_6", "is_partial_passed"):
            assert fields[name]["ok"], fields[name]
        assert all(r["figures"][f] > 0 for f in ("ep_rate", "cg_rate", "mg_rate", "ft_rate"))
        assert r["provenance"]["compile_lines"]["compiles"] == 8  # 7 Fortran files + is.c
    planted = results[("gnu", "baseline+seed=planted")]
    v = planted["verification"]
    assert not v["ok"] and v.get("xfail"), v
    assert "cg_zeta = 8.39671, expected 8.59718 ± " in v["summary"], v["summary"]
    assert "mg_rnm2 = 5.43472e-05, expected 5.30771e-05 ± " in v["summary"]
    assert "0001-planted-wrong-seed.patch" in json.dumps(planted["provenance"])
    s = json.loads((run_dir / "summary.json").read_text())
    assert not s["failures"], s["failures"]


def test_npb_ci_plain_reframe(tmp_path):
    p = subprocess.run(
        REFRAME
        + ["-C", "site-config/settings.py", "-c", "reframe-checks/npb", "--mode", "ci", "-r"]
        + ["-n", "build.variant=tuned$", "-S", "valid_prog_environs=gnu"]
        + ["--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    # the source, the gnu/tuned build and its run
    assert "Ran 3/3 test case(s)" in out and "0 failure(s)" in out, out[-2000:]
