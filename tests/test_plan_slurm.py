"""Integration: a plan from this machine's own history, run through its Slurm script on a
private Slurm cluster (ci/slurm-local.sh), then checked against what the jobs took.

The history is made here: one ``apptune run`` of the ci tier of two light applications
(NPB and Quantum ESPRESSO with gnu; about a second each once built). The plan has a time
budget and a power cap on one node; energy on this VM is modelled, and the plan says so
first.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from test_slurm import _start

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]
APPS = ["--app", "npb", "--app", "qe", "--env", "gnu"]

# its jobs run under srun, and --check compares the plan with what they took: make test runs
# it with the node to itself (see tests/test_slurm.py)
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, request):
    return _start(tmp_path_factory, request, 1)


def run(cmd, env, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def test_a_plan_of_the_ci_tier_runs_through_its_script_within_its_budget(one_node, tmp_path):
    env = dict(one_node["env"], APPTUNE_HISTORY=str(tmp_path / "history"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    rc, out = run([*APPTUNE, "run", "--mode", "ci", "--run-dir", str(tmp_path / "r"), *APPS], env)
    assert rc == 0, out[-3000:]
    plan_dir = tmp_path / "plan"
    # a time budget with room for this shared VM's noise, and a power cap on one node
    cmd = [*APPTUNE, "plan", "--time", "10min", "--power-cap", "100W", "--nodes", "1"]
    rc, out = run([*cmd, "--out", str(plan_dir)], env)
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("ENERGY MODELLED"), out  # this VM has no meter
    data = json.loads((plan_dir / "plan.json").read_text())
    assert sorted(j["app"] for j in data["chosen"]) == ["npb", "qe"], out
    assert all(j["energy_grade"] == "modelled" for j in data["chosen"])
    script = (plan_dir / "plan.sh").read_text()
    assert script.count("sbatch --parsable") == 2 and "--nodes=1" in script
    # submit (the script only), wait for both jobs to leave the queue
    rc, out = run(["bash", str(plan_dir / "plan.sh")], env)
    assert rc == 0, out
    deadline = time.time() + 900
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env).stdout:
        assert time.time() < deadline, "the plan's jobs did not finish in 15 minutes"
        time.sleep(0.5)
    jobs = sorted(p for p in (plan_dir / "jobs").iterdir() if p.is_dir())
    assert len(jobs) == 2, list((plan_dir / "jobs").iterdir())
    rc, out = run([*APPTUNE, "plan", "--check", *map(str, jobs), "--out", str(plan_dir)], env)
    assert rc == 0, out
    assert "within the budget" in out and out.splitlines()[0].startswith("ENERGY MODELLED")
    for app in ("npb", "qe"):
        line = next(x for x in out.splitlines() if x.startswith(app))
        assert "expected" in line and "%" in line and "(modelled)" in line, line
