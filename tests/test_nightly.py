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
  history) if [ "$2" = site ]; then exit "${STUB_SITE_RC:-0}"; fi ;;
esac
"""


def night(tmp_path, **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    """ci/nightly.sh with the stand-in apptune and ``env``; its result and the calls made."""
    stub = tmp_path / "apptune"
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = tmp_path / "log"
    env = dict(
        os.environ,
        APPTUNE=str(stub),
        STUB_LOG=str(log),
        APPTUNE_RUNS=str(tmp_path / "runs"),
        **{k: str(v) for k, v in env.items()},
    )
    p = subprocess.run(
        ["bash", str(REPO / "ci/nightly.sh")],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return p, log.read_text().splitlines()


@pytest.mark.parametrize(
    "run_rc,check_rc,no_report,want",
    [(0, 0, 0, 0), (0, 1, 0, 1), (1, 0, 0, 1), (1, 1, 0, 1), (0, 0, 1, 2)],
)
def test_steps_and_exit_status(tmp_path, run_rc, check_rc, no_report, want):
    p, calls = night(
        tmp_path,
        STUB_RUN_RC=run_rc,
        STUB_CHECK_RC=check_rc,
        STUB_NO_REPORT=no_report,
        APPTUNE_NIGHTLY_REPEATS="5",
        APPTUNE_NIGHTLY_ARGS="-n HPCC",
    )
    assert p.returncode == want, p.stdout + p.stderr
    assert calls[0].startswith("run --mode nightly --repeats 5 --run-dir ")
    assert calls[0].endswith("-- -n HPCC")
    run_dir = calls[0].split("--run-dir ")[1].split()[0]
    if no_report:
        assert len(calls) == 1 and "no run report" in p.stderr
        return
    assert calls[1:] == [
        f"history ingest {run_dir}",
        f"check-regressions --mode nightly --json {run_dir}/regressions.json",
    ]


@pytest.mark.parametrize("run_rc,check_rc,site_rc,want", [(0, 0, 0, 0), (0, 0, 2, 2), (1, 0, 2, 1)])
def test_the_history_site_when_asked_for(tmp_path, run_rc, check_rc, site_rc, want):
    """APPTUNE_NIGHTLY_SITE: the site of the night's mode is written after the verdict; a
    site that could not be written fails a night that was otherwise green."""
    p, calls = night(
        tmp_path,
        STUB_RUN_RC=run_rc,
        STUB_CHECK_RC=check_rc,
        STUB_SITE_RC=site_rc,
        STUB_NO_REPORT=0,
        APPTUNE_NIGHTLY_MODE="ci",
        APPTUNE_NIGHTLY_SITE=tmp_path / "site",
    )
    assert p.returncode == want, p.stdout + p.stderr
    assert calls[-1] == f"history site {tmp_path / 'site'} --mode ci"
    assert calls[-2].startswith("check-regressions --mode ci")
    assert ("the history site was not written" in p.stderr) == bool(site_rc)


def test_the_partitions_quiet_wait_applies_unless_one_is_given(tmp_path, monkeypatch):
    """Without APPTUNE_QUIET_WAIT each partition waits as its cluster file says, and 120 s
    where it says nothing; APPTUNE_QUIET_WAIT overrides every partition's."""
    from apptune.core.run import quality

    monkeypatch.delenv("APPTUNE_QUIET_WAIT", raising=False)
    p, calls = night(tmp_path, STUB_RUN_RC=0, STUB_CHECK_RC=0, STUB_NO_REPORT=0)
    assert p.returncode == 0 and "--wait-for-quiet" not in calls[0]
    p, calls = night(
        tmp_path, STUB_RUN_RC=0, STUB_CHECK_RC=0, STUB_NO_REPORT=0, APPTUNE_QUIET_WAIT=30
    )
    assert "--wait-for-quiet 30 --run-dir" in calls[-3]
    # what a check waits (apptune/rfm/check.py): the environment ci/nightly.sh gives apptune run
    nightly = {"APPTUNE_QUIET_WAIT_DEFAULT": "120"}
    assert quality.quiet_wait_s({"quiet_wait_s": 600}, nightly) == 600
    assert quality.quiet_wait_s({}, nightly) == 120
    assert quality.quiet_wait_s({"quiet_wait_s": 600}, dict(nightly, APPTUNE_QUIET_WAIT="30")) == 30
    assert quality.quiet_wait_s({}, {}) == 0


def test_netpipe_is_given_its_round_trips_on_every_tier():
    """NetPIPE's own choice of round trips (-n 0) follows the best of the last size's
    trials: on a node shared with other work the nightly curve did not end in 10 minutes
    (docs/measurements.md, "ExaML and NetPIPE"). Every tier gives a count."""
    import yaml

    for tier in ("ci", "nightly"):
        params = yaml.safe_load((REPO / f"inputs/netpipe/{tier}/input.yaml").read_text())
        assert params["parameters"]["repeats"] >= 100, tier
