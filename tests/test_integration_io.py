"""Integration: the parallel I/O benchmarks build, write into the partition's scratch
directory, verify what they wrote and remove it.

h5perf through ``apptune run --mode ci`` (gnu: baseline, tuned and the planted wrong byte,
the expected failure naming the file and the byte), then through plain ReFrame with the
scratch directory given on the command line. About two minutes on 2 cores. FLASH-IO
through plain ReFrame: gnu baseline on the ci tier (a build of PnetCDF and FLASH-IO, 1.5 to
4 minutes on 2 cores unless the build cache has it; `make run` builds it), and, with `make
test-long`, its planted wrong value (tier planted: another build of the library). Asserts
correctness, the file system recorded and the removal, never timings.
"""

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


def test_h5perf_ci_verifies_every_byte_and_names_a_wrong_one(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        APPTUNE
        + ["run", "--mode", "ci", "--run-dir", str(run_dir), "-c", "reframe-checks/h5perf"]
        + ["--", "-S", "valid_prog_environs=gnu"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    results = _results(run_dir)
    for variant in ("baseline", "tuned"):
        r = results[("gnu", variant)]
        assert r["verification"]["ok"], r["verification"]["summary"]
        fields = {f["field"]: f for f in r["verification"]["fields"]}
        assert fields["verify_errors"]["value"] == 0 and fields["verify_apis"]["value"] == 3
        assert all(r["figures"][f] > 0 for f in ("posix_write", "mpiio_coll_read", "hdf5_read"))
        s = r["scratch"]
        assert s["root"] == "/var/tmp" and s["fstype"] and s["removed"], s
        assert not Path(s["path"]).exists()
    v = results[("gnu", "baseline+data=planted")]["verification"]
    assert not v["ok"] and v.get("xfail"), v
    assert (
        "#pio_tmp_1.posix, dataset 1, byte 524288 of rank 0's data: expected (1), got (254)"
        in (v["summary"])
    )
    assert "#pio_tmp_1.mpio, dataset 1, byte 524288" in v["summary"]


def test_h5perf_plain_reframe_writes_where_it_is_told(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    p = subprocess.run(
        REFRAME
        + ["-C", "site-config/settings.py", "-c", "reframe-checks/h5perf", "--mode", "ci", "-r"]
        + ["-n", "build.variant=tuned$", "-S", "valid_prog_environs=gnu"]
        + ["-S", f"scratch_dir={scratch}", "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    (r,) = _results(tmp_path).values()
    assert r["verification"]["ok"], r["verification"]["summary"]
    assert r["scratch"]["root"] == str(scratch) and r["scratch"]["removed"]
    assert list(scratch.iterdir()) == []


def _flashio_plain_reframe(tmp_path, mode, *select):
    """Plain ReFrame on FLASH-IO's checks, gnu, the scratch directory from the command line:
    the run records by (environment, variant), after checking the files are removed."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    p = subprocess.run(
        REFRAME
        + ["-C", "site-config/settings.py", "-c", "reframe-checks/flashio", "--mode", mode, "-r"]
        + [*select, "-S", "valid_prog_environs=gnu"]
        + ["-S", f"scratch_dir={scratch}", "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    results = _results(tmp_path)
    for r in results.values():
        assert r["scratch"]["root"] == str(scratch) and r["scratch"]["removed"], r["scratch"]
    assert list(scratch.iterdir()) == []
    return results


def test_flashio_plain_reframe_verifies_every_variable(tmp_path):
    """FLASH-IO through plain ReFrame (the ci tier by its mode, as the README runs it), gnu
    baseline: its three files verify variable by variable; the files are removed."""
    results = _flashio_plain_reframe(tmp_path, "ci", "-n", "build.variant=baseline")
    good = results[("gnu", "baseline")]
    assert good["verification"]["ok"], good["verification"]["summary"]
    checked = {f["field"] for f in good["verification"]["fields"] if f["ok"]}
    for f in ("ncmpi_chk_0000", "ncmpi_plt_cnt_0000", "ncmpi_plt_crn_0000"):
        assert f"{f}.dens.crc32" in checked, sorted(checked)[:20]
    assert good["figures"]["checkpoint_bandwidth"] > 0


@pytest.mark.long_build
def test_flashio_planted_wrong_value_is_named(tmp_path):
    """The build with one wrong value of dens in its checkpoint file (patch 0003, tier
    planted: the ci tier's input, run by --mode dev and nightly, not by make run) fails on
    that file's dens alone, as the reference's expected failure; the files are removed."""
    results = _flashio_plain_reframe(tmp_path, "dev", "-n", "FlashioCheck%tier=planted")
    v = results[("gnu", "baseline+data=planted")]["verification"]
    assert not v["ok"] and v.get("xfail"), v
    wrong = {f["field"] for f in v["fields"] if not f["ok"]}
    assert wrong and all(f.startswith("ncmpi_chk_0000.dens.") for f in wrong), wrong
    assert "ncmpi_chk_0000.dens.crc32" in wrong and "ncmpi_chk_0000.dens.min" in wrong
    right = {f["field"] for f in v["fields"] if f["ok"]}
    assert {"ncmpi_chk_0000.velx.crc32", "ncmpi_plt_crn_0000.dens.crc32"} <= right
