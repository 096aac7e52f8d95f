"""Integration: GROMACS verified by three of its own regression tests (grompp, mdrun on 2
ranks, gmx check against the stored reference energies and forces) and the benchmark mdrun.

The ci tier (``make test``, `make run`): the distribution's build, Debian's gmx_mpi, nothing
compiled, the regression tests' data unpacked from the source's regressiontests component;
about half a minute. The builds of the orig tarball (``make test-long``, marker ``long_build``):
gnu/tuned, gnu-mkl/tuned and tuned+fft=mkl, llvm/tuned on the nightly tier, every compile line
checked for the variant's flags; from the build cache when it holds them (the user's, as
every integration test's), else 10 to 23 minutes each on 2 cores (docs/applications.md).
Asserts correctness and provenance, never timings."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_records

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]
TESTS = ("nbnxn_pme", "nbnxn_vsite", "tip4p")

pytestmark = pytest.mark.integration


def _run(run_dir: Path, *args: str, timeout: int) -> list[dict]:
    p = subprocess.run(
        APPTUNE + ["run", *args, "--run-dir", str(run_dir), "--app", "gromacs"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return run_records(run_dir)


def _regression_tests_passed(record: dict) -> None:
    v = record["verification"]
    assert v["ok"], (record["environment"], record["build_variant"], v["summary"])
    fields = {f["field"]: f for f in v["fields"]}
    for test in TESTS:
        assert fields[f"{test}.energy"]["value"] == 0, fields[f"{test}.energy"]
        assert fields[f"{test}.forces"]["ok"], fields[f"{test}.forces"]
    components = record["provenance"]["source"]["components"]
    assert components[0]["file"] == "gromacs_2022.5.orig-regressiontests.tar.gz"
    figures = record["figures"]
    assert figures["ns_per_day"] > 0 and figures["mdrun_wall"] > 0
    assert 0 < figures["force_share"] < 100 and 0 <= figures["comm_share"] < 100


def test_gromacs_ci_tier_verifies_the_distributions_build(tmp_path):
    records = _run(tmp_path / "run", "--mode", "ci", timeout=900)
    # a record in the kept stage directory and its copy in the output directory
    runs = {(r["tier"], r["environment"], r["build_variant"]): r for r in records}
    assert list(runs) == [("ci", "gnu", "debian")]
    ci = runs["ci", "gnu", "debian"]
    _regression_tests_passed(ci)
    prov = ci["provenance"]
    assert prov["packages"]["gromacs"].startswith("2022.5")
    assert prov["install"]["name"] == "debian" and "compile_lines" not in prov
    assert prov["products"][0]["path"] == "/usr/bin/gmx_mpi"
    assert prov["tree"]["paths"] == [f"regressiontests/complex/{t}" for t in TESTS]


@pytest.mark.long_build
def test_gromacs_builds_of_the_tarball_verify_by_the_same_regression_tests(tmp_path):
    records = _run(
        tmp_path / "run",
        *("--mode", "nightly", "--env", "gnu", "--env", "gnu-mkl", "--env", "llvm"),
        *("--variant", "tuned", "--variant", "tuned+fft=mkl"),
        timeout=4 * 3600,
    )
    runs = {(r["environment"], r["build_variant"]): r for r in records}
    assert sorted(runs) == [
        ("gnu", "tuned"),
        ("gnu-mkl", "tuned"),
        ("gnu-mkl", "tuned+fft=mkl"),
        ("llvm", "tuned"),
    ], sorted(runs)
    for (env, variant), r in runs.items():
        _regression_tests_passed(r)
        prov = r["provenance"]
        fft = "mkl" if variant.endswith("fft=mkl") else "fftw3"
        assert prov["axes"] == {"simd": "AVX2_256", "fft": fft, "fault": "none"}, (env, variant)
        assert prov["compile_lines"]["compiles"] > 500
