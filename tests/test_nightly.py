"""ci/nightly.sh: the order of its steps and its exit status, with a stand-in apptune."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

STUB = """#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
case "$1" in
  run) d=$(echo "$*" | sed -E 's/.*--run-dir ([^ ]+).*/\\1/'); mkdir -p "$d"
       [ "$STUB_NO_REPORT" = 1 ] || echo '{}' > "$d/report.json"; exit "$STUB_RUN_RC" ;;
  check-regressions) exit "$STUB_CHECK_RC" ;;
esac
"""


@pytest.mark.parametrize(
    "run_rc,check_rc,no_report,want",
    [(0, 0, 0, 0), (0, 1, 0, 1), (1, 0, 0, 1), (1, 1, 0, 1), (0, 0, 1, 2)],
)
def test_steps_and_exit_status(tmp_path, run_rc, check_rc, no_report, want):
    stub = tmp_path / "apptune"
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = tmp_path / "log"
    env = dict(
        os.environ,
        APPTUNE=str(stub),
        STUB_LOG=str(log),
        STUB_RUN_RC=str(run_rc),
        STUB_CHECK_RC=str(check_rc),
        STUB_NO_REPORT=str(no_report),
        APPTUNE_RUNS=str(tmp_path / "runs"),
        APPTUNE_NIGHTLY_REPEATS="5",
        APPTUNE_NIGHTLY_ARGS="-n HPCC",
    )
    p = subprocess.run(
        ["bash", str(REPO / "ci/nightly.sh")],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert p.returncode == want, p.stdout + p.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("run --mode nightly --repeats 5 --wait-for-quiet 120 --run-dir ")
    assert calls[0].endswith("-- -n HPCC")
    run_dir = calls[0].split("--run-dir ")[1].split()[0]
    if no_report:
        assert len(calls) == 1 and "no run report" in p.stderr
        return
    assert calls[1:] == [
        f"history ingest {run_dir}",
        f"check-regressions --mode nightly --json {run_dir}/regressions.json",
    ]
