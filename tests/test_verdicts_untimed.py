"""Integration: what the timed application (tests/timeapp.py) shows without timing anything,
so with no node to itself (``make test``'s first pass): each test in a tree of its own.

* with a baseline of another machine's fingerprint only, a run verifies, exits 0 and says
  that no baseline applies here and how to record one;
* a program that crashes after writing complete output fails, with its exit status;
* every shell payload planted in the recipe's run arguments, environment and pre-run
  steps arrives as one literal argument and runs nothing.

The verdicts that need clean timed runs are tests/test_verdicts.py's.
"""

import json
import sys
from pathlib import Path

import pytest
import timeapp
import yaml
from test_baselines import OTHER
from test_verdicts import apptune_run, run, summary, the_result

from apptune import machine

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    timeapp.write_tree(root, REPO)
    return root


def test_baselines_of_another_machine_give_no_verdict_and_exit_0(tree, tmp_path):
    other = machine.machine_id(OTHER)
    f = tree / "reference/baselines/local/timeapp.yaml"
    f.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "machine": other,
        "environment": "gnu",
        "variant": "tuned",
        "tier": "ci",
        "recorded": "test",
        # would be a huge improvement if it were compared
        "figures": {"kernel_time": {"value": 100.0, "noise": 0.01, "runs": 5}},
    }
    f.write_text(
        yaml.safe_dump(
            {"app": "timeapp", "system": "local", "machines": {other: OTHER}, "entries": [entry]}
        )
    )
    rc, out = apptune_run(tree, tmp_path / "run")
    assert rc == 0, out[-3000:]
    r = the_result(tmp_path / "run")
    assert r["verified"]
    assert r["baseline"]["why"].startswith(
        "no baseline for this machine (baselines recorded on AMD EPYC 7B13"
    )
    assert all(c["verdict"] == "no verdict" for c in r["baseline"]["figures"].values())
    line = next(ln for ln in out.splitlines() if ln.startswith("apptune: timeapp/ci:"))
    assert "performance: no verdict: no baseline for this machine" in line
    # the advice, once per run, with the run's tier (the local system needs no --system)
    assert (
        "apptune: no baseline of this machine for timeapp (ci tier on local:default): record "
        "one with `apptune baseline record -c reframe-checks/timeapp --mode ci`" in out
    ), out[-2000:]
    assert out.count("apptune baseline record") == 1
    md = (tmp_path / "run" / "report.md").read_text()
    assert (
        "no verdict: no baseline for this machine"
        in md.split("## Per application and tier")[1].split("##")[0]
    )
    assert "## No baseline for this machine\n\nNo baseline of this machine for timeapp" in md


def test_a_crash_after_complete_output_fails_with_the_exit_status(tree, tmp_path):
    recipe = tree / "build-recipes/timeapp.yaml"
    text = recipe.read_text()
    recipe.write_text(text.replace('args: ["{{ n }}"]', 'args: ["{{ n }}", crash]'))
    try:
        rc, out = apptune_run(tree, tmp_path / "run", mode="dev")
    finally:
        recipe.write_text(text)
    assert rc != 0
    s = summary(tmp_path / "run")
    (f,) = s["failures"]
    assert f["phase"] == "sanity" and "killed by signal SIGSEGV" in f["reason"], f
    r = the_result(tmp_path / "run")
    assert not r["verified"] and r["run"]["exit_status"] == 139


PAYLOADS = [
    "; touch PWNED1",
    "$(touch PWNED2)",
    "`touch PWNED3`",
    "&& touch PWNED4",
    "export X=a; touch PWNED5",
    "two  words",
    "| touch PWNED6",
]


def test_shell_payloads_in_every_run_field_arrive_literally_and_run_nothing(tree, tmp_path):
    recipe = tree / "build-recipes/timeapp.yaml"
    text = recipe.read_text()
    args = ", ".join(json.dumps(p) for p in PAYLOADS)
    env = ", ".join(f"P{i}: {json.dumps(p)}" for i, p in enumerate(PAYLOADS))
    probe = (
        "import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': [os.environ[f'P{i}'] "
        f"for i in range({len(PAYLOADS)})]}}, open('prerun.json', 'w'))"
    )
    recipe.write_text(
        text.replace(
            'args: ["{{ n }}"]',
            f'args: ["{{{{ n }}}}", {args}]\n'
            f"  env: {{{env}}}\n"
            f'  prerun:\n    - command: [{json.dumps(sys.executable)}, "-c", '
            f"{json.dumps(probe)}, {args}]",
        )
    )
    try:
        # dev mode (the added steps change the timing, which is not what this test is about),
        # keeping the stage directory as ci mode does
        rc, out = run(
            [
                "run",
                "--mode",
                "dev",
                "--no-history",
                "--run-dir",
                str(tmp_path / "run"),
                "-c",
                "reframe-checks/timeapp",
                "--",
                "--keep-stage-files",
            ],
            tree,
        )
    finally:
        recipe.write_text(text)
    assert rc == 0, out[-3000:]
    stage = next((tmp_path / "run" / "stage").rglob("prerun.json")).parent
    seen = json.loads((stage / "prerun.json").read_text())
    assert seen == {"argv": PAYLOADS, "env": PAYLOADS}
    printed = (stage / "rfm_job.out").read_text()
    for i, p in enumerate(PAYLOADS, start=2):
        assert f"arg {i}: [{p}]" in printed
    assert not list(tmp_path.rglob("PWNED*")) and not list(tree.rglob("PWNED*"))
    assert "touch" not in (stage / "rfm_job.sh").read_text()
