"""`apptune baseline record`: the sessions, the merge of clean verified runs, the diff, and
the file written only when confirmed (a small timed C application, tests/timeapp.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import timeapp
import yaml

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration


def record(root, *extra):
    env = dict(os.environ, APPTUNE_ROOT=str(root), APPTUNE_RUNS=str(root / "runs"))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "apptune",
            "baseline",
            "record",
            "-c",
            "reframe-checks/timeapp",
            "--sessions",
            "3",
            "--wait-for-quiet",
            "60",
            "--no-history",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    return p.returncode, p.stdout + p.stderr


def test_record_shows_the_diff_and_writes_only_when_confirmed(tmp_path):
    root = tmp_path / "tree"
    timeapp.write_tree(root, REPO, n=20_000_000)
    f = root / "reference/baselines/local/timeapp.yaml"
    rc, out = record(root)
    assert rc == 1 and not f.exists(), out[-3000:]
    assert out.count("apptune: baseline record: session ") == 3
    assert "+++ " + str(f) + " (after)" in out and "kernel_time:" in out
    assert "1 file(s) not written (no tty to confirm: --yes writes them" in out
    rc, out = record(root, "--yes")
    assert rc == 0, out[-3000:]
    assert f"apptune: baseline record: wrote {f}" in out
    b = yaml.safe_load(f.read_text())
    (entry,) = b["entries"]
    assert (entry["environment"], entry["variant"], entry["tier"]) == ("gnu", "tuned", "ci")
    assert entry["figures"]["kernel_time"]["runs"] == 3, "every session of a quiet node is clean"
    assert entry["figures"]["kernel_time"]["noise"] is not None
