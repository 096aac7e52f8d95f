"""A run stopped at its time limit says whether the node was busy when the run-quality
monitor watched it, and a planted fault's tier says its fault was never reached."""

import json
import re

from apptune.core.run import outcome, quality
from apptune.history import records
from apptune.models import RunQuality

DISTURBED = {
    "grade": "disturbed",
    "reasons": ["other processes used 61% of the node's CPU time (limit 5%)"],
    "outside_cpu_fraction": 0.61,
}
TIMED_OUT = "job error: [jobid=5822] job timed out (300.053s > 300.0s)"


def _stopped_case(tmp_path, tier: str, quality_rec: dict | None) -> dict:
    stage = tmp_path / tier
    stage.mkdir()
    if quality_rec is not None:
        rec = {"exit_status": 143, "message": "run ended by signal SIGTERM", "quality": quality_rec}
        (stage / ".apptune-run.json").write_text(json.dumps(rec))
    (stage / "rfm_job.err").write_text(
        "mpirun noticed that process rank 0 with PID 5 on node vm exited on signal 15.\n"
    )
    return {
        "display_name": f"OpenFOAMInstalledCheck %tier={tier} %build.variant=debian",
        "environ": "gnu",
        "app": "openfoam",
        "tier": tier,
        "result": "fail",
        "fail_phase": "run_wait",
        "fail_reason": TIMED_OUT,
        "stagedir": str(stage),
    }


def test_a_job_stopped_at_its_time_limit_says_the_node_was_busy(tmp_path):
    f = records.failure(_stopped_case(tmp_path, "ci", DISTURBED))
    assert f["reason"].startswith(TIMED_OUT + "; the node was busy: ")
    assert "graded the run disturbed (other processes used 61%" in f["reason"]
    assert "expected failure" not in f["reason"]  # the ci tier expects none


def test_a_planted_tier_stopped_at_its_time_limit_never_reached_its_fault(tmp_path):
    f = records.failure(_stopped_case(tmp_path, "planted", DISTURBED))
    assert "the node was busy" in f["reason"]
    assert f["reason"].endswith(
        "; the expected failure (reference/openfoam/planted.yaml xfail gnu/debian) was never "
        "reached: a run stopped at its time limit is not the planted fault caught"
    )


def test_a_quiet_node_or_no_record_is_said_as_such(tmp_path):
    clean = records.failure(_stopped_case(tmp_path, "ci", {"grade": "clean", "reasons": []}))
    assert "saw the node quiet (clean): the limit is too short" in clean["reason"]
    gone = records.failure(_stopped_case(tmp_path / "..", "gone", None) | {"tier": "ci"})
    assert "no run-quality record" in gone["reason"]


def _stopped_run(run_dir, said: str):
    """The run record of a toy run in ``run_dir`` stopped at its time limit (``said``)."""

    class NoEnergy:
        def to_dict(self):
            return {"trust": "none"}

    return outcome.evaluate(
        None,
        "ci",
        run_dir,
        {"app": "toy", "tier": "ci", "variant": "tuned", "environment": "gnu"},
        build_dir=run_dir,
        stdout="",
        energy_record=NoEnergy(),
        environment="gnu",
        variant="tuned",
        unfinished=said,
        require_provenance=False,
    )


def test_a_slurm_time_limit_says_what_the_monitor_saw(tmp_path):
    (tmp_path / ".apptune-run.json").write_text(json.dumps({"quality": DISTURBED}))
    said = "job exceeded its time limit (1:00) (Slurm job 12: TIMEOUT, reason TimeLimit)"
    r = _stopped_run(tmp_path, said)
    assert r.verification.summary == f"{said}; {quality.at_time_limit(RunQuality(**DISTURBED))}"
    assert "the node was busy" in r.verification.summary


def test_a_run_whose_record_is_not_a_runners_fails_saying_so(tmp_path):
    (tmp_path / ".apptune-run.json").write_text('{"wall_s": "long"}')
    r = _stopped_run(tmp_path, "job exceeded its time limit (1:00)")
    assert not r.verification.ok
    assert r.verification.summary.startswith("job exceeded its time limit (1:00); ")
    assert ".apptune-run.json: wall_s: " in r.verification.summary


def test_a_report_on_a_record_that_is_not_a_runners_says_so(tmp_path):
    case = _stopped_case(tmp_path, "ci", {"grade": 5})
    f = records.failure(case)
    assert f"{TIMED_OUT}; " in f["reason"] and ".apptune-run.json: quality.grade: " in f["reason"]


#: Runs on the slower machine kind take up to 1.5 times as long; the rest of the headroom
#: is for a busier neighbour than the one measured (docs/measurements.md).
HEADROOM = 2.5


def _measured() -> list[tuple[str, str, float]]:
    """(application, tier, longest job in seconds) of the table of busy runs in
    docs/measurements.md's 'Time limits of the ci tier'."""
    from conftest import REPO

    text = (REPO / "docs/measurements.md").read_text()
    section = text[text.index("## Time limits of the ci tier") :]
    rows = re.findall(r"^\| ([\w-]+) \| ([\w-]+) \| ([\d.]+) \|", section, re.M)
    return [(app, tier, float(s)) for app, tier, s in rows]


def test_every_time_limit_has_headroom_over_the_longest_busy_run():
    from apptune.core.data import recipes

    measured = _measured()
    assert {app for app, *_ in measured} >= {"examl", "hpcc", "openfoam", "nwchem"}
    short = []
    for app, tier, seconds in measured:
        limit = recipes.time_limit_seconds(recipes.load_recipe(app).tiers[tier].time_limit)
        if limit < HEADROOM * seconds:
            short.append(f"{app}/{tier}: {limit:g} s < {HEADROOM} x {seconds:g} s")
    assert short == []
