"""Full disks: a run that cannot have the space it needs says so before it starts; a
history or report that cannot be written says "no space left on ..." naming the directory
and its free space, and the run exits 3 (README), never 2 (bad input)."""

import os
import subprocess

import pytest
from conftest import hpcc_ci_run

from apptune import cli, paths
from apptune.commands import workflow

pytestmark = pytest.mark.unit


@pytest.fixture
def tiny_fs(tmp_path):
    """A 512 KiB tmpfs (the tests run as root in CI; elsewhere they need it too)."""
    d = tmp_path / "tiny"
    d.mkdir()
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the full-disk tests need root to mount a tmpfs")
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(d)], check=True)
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def _fill(d):
    with open(d / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass


def test_a_run_refuses_to_start_without_room_for_its_stage(tiny_fs, capsys, monkeypatch):
    from apptune.core.run import supervise

    monkeypatch.setattr(
        supervise.Supervisor, "run", lambda *a, **k: pytest.fail("ReFrame must not start")
    )
    rc = cli.main(["run", "--no-history", "--run-dir", str(tiny_fs / "run")])
    err = capsys.readouterr().err.splitlines()
    assert rc == paths.NO_SPACE_STATUS == 3
    assert err[-1].startswith(f"apptune: error: {tiny_fs / 'run'}: 0 MiB free on its file system")
    assert "a run needs 256 MiB" in err[-1]
    assert not (tiny_fs / "run").exists()


def test_a_full_history_says_no_space_and_exits_3(tiny_fs, tmp_path, capsys, monkeypatch):
    run_dir = hpcc_ci_run(tmp_path / "run")
    hdir = tiny_fs / "history"
    hdir.mkdir()
    _fill(tiny_fs)
    monkeypatch.setenv("APPTUNE_HISTORY", str(hdir))
    rc = workflow.store_run(run_dir, 0, history=True, judged=True)
    err = [ln for ln in capsys.readouterr().err.splitlines() if "history" in ln]
    assert rc == 3, err
    assert err == [
        f"apptune: error: history: run not stored: no space left on the file system of {hdir} "
        "(0 MiB free)"
    ]
    # the report, on another file system, is written all the same
    assert (run_dir / "report.html").is_file()


def test_a_full_run_directory_keeps_the_report_error_to_one_line(tmp_path, capsys, monkeypatch):
    import errno

    from apptune import report

    run_dir = hpcc_ci_run(tmp_path / "run")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write", full)
    rc = workflow.store_run(run_dir, 0, history=False, judged=True)
    err = capsys.readouterr().err.splitlines()
    assert rc == 3 and err[-1].startswith(
        f"apptune: error: report not written: no space left on the file system of {run_dir} ("
    )
