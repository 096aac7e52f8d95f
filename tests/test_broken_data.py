"""Broken data never passes and never hides a correctness check.

* Plain ReFrame on an application whose data has a problem fails, naming the file and
  field (it used to skip the check file and end "PASSED Ran 0/0").
* A baseline file that cannot be read withholds only the performance verdict: the
  application is still built, run and verified, and the run says why there is no verdict.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import timeapp

REPO = Path(__file__).resolve().parent.parent
REFRAME = str(Path(sys.executable).with_name("reframe"))

pytestmark = pytest.mark.integration


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    timeapp.write_tree(root, REPO, n=1_000_000)
    check = root / "reframe-checks/timeapp/timeapp.py"
    # as the shipped checks and `apptune new` write it: the recipe once its data is valid
    check.write_text(
        check.read_text()
        .replace(
            "from apptune.rfm import AppBuild, AppRun, SourceFetch",
            "from apptune.rfm import AppBuild, AppRun, SourceFetch, load_app",
        )
        .replace("RECIPE = load_recipe('timeapp')", "RECIPE = load_app('timeapp')")
    )
    return root


def _env(root):
    return dict(os.environ, APPTUNE_ROOT=str(root), APPTUNE_CACHE=str(root.parent / "cache"))


def plain_reframe(tree, *args) -> str:
    """Plain ReFrame on the timeapp check with ``args``: its output, once it failed (exit 1)
    with the test standing for the application's data problems."""
    p = subprocess.run(
        [REFRAME, "-C", "site-config/settings.py", "-c", "reframe-checks/timeapp", *args],
        capture_output=True,
        text=True,
        cwd=tree,
        env=_env(tree),
        timeout=300,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-3000:]
    assert "PASSED" not in out and "TimeappDataProblems" in out, out[-3000:]
    return out


def test_plain_reframe_fails_an_application_with_broken_data(tree):
    ref = tree / "reference/timeapp/ci.yaml"
    ref.write_text(ref.read_text().replace("abs: 0}", "abs: lots}", 1))
    out = plain_reframe(tree, "-r", "-p", "gnu")
    assert "timeapp: not built, not run: 1 data problem(s): " in out
    assert "reference/timeapp/ci.yaml: fields.n.abs" in out, out[-3000:]


def test_a_bad_baseline_withholds_the_verdict_not_the_verification(tree):
    b = tree / "reference/baselines/local/timeapp.yaml"
    b.parent.mkdir(parents=True)
    b.write_text("app: timeapp\nsystem: local\nmachines: {m: .nan}\nentries: []\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "apptune",
            "run",
            "--no-history",
            "--run-dir",
            str(tree / "runs/r"),
            "-c",
            "reframe-checks/timeapp",
        ],
        capture_output=True,
        text=True,
        cwd=tree,
        env=_env(tree),
        timeout=600,
    )
    out = p.stdout + p.stderr
    assert "apptune: error: reference/baselines/local/timeapp.yaml: machines.m" in out, out[-3000:]
    assert "left out of the run" not in out
    assert "withhold the performance verdict of timeapp: built, run and verified" in out
    (r,) = json.loads((tree / "runs/r/summary.json").read_text())["results"]
    assert r["verified"], out[-3000:]
    assert r["baseline"]["why"].startswith("baseline unusable: "), r["baseline"]
    line = next(ln for ln in out.splitlines() if ln.startswith("apptune: timeapp/ci:"))
    assert "1 of 1 variant(s) verified" in line and "no verdict: baseline unusable" in line
    assert p.returncode == 2, "bad input is exit status 2 (README), after the run"


@pytest.mark.parametrize(
    "mode, system",
    [
        ("ci", None),
        ("nightly", None),
        ("dev", None),
        ("ci", "localslurm:batch"),
        ("dev", "localslurm:batch"),
        ("nightly", "localslurm:batch"),
    ],
)
def test_plain_reframe_fails_broken_data_under_every_mode(tree, mode, system):
    """The modes select tiers by tag (``^ci$``, ``^nightly$``): the failing test that stands
    for an application it could not load is selected by each (it was tagged ``data`` only,
    and every mode ended "PASSED Ran 0/0", exit 0, over a malformed recipe)."""
    recipe = tree / "build-recipes/timeapp.yaml"
    recipe.write_text(recipe.read_text().replace("tiers:", "tiers: [", 1))  # malformed YAML
    out = plain_reframe(tree, "-R", "--mode", mode, "-r", *(["--system", system] if system else []))
    assert "build-recipes/timeapp.yaml: line " in out and "malformed YAML" in out, out[-3000:]
