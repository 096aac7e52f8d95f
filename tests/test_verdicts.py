"""Integration: performance verdicts that can be trusted, with real runs through ReFrame.

A small timed C application (tests/timeapp.py) in a throw-away tree with the repository's
site config. Its baseline is recorded here, from clean repeated runs, bound to this
machine's fingerprint. Then:

* a real 2x slowdown (a per-file -O0 rule on the hot file) fails the performance check;
* a run with CPU hogs beside it is graded disturbed and given no verdict (exit 0);
* ``apptune bisect --between`` finds which of two changes carries a regression.

What this application shows without timing anything (no node to itself) is in
tests/test_verdicts_untimed.py.

Assertions are on grades and verdicts, never on timing values.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import timeapp
import yaml

from apptune import machine

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]

# they time real runs and judge them: make test runs them with the node to themselves
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]


def run(args, root, timeout=900):
    env = dict(os.environ, APPTUNE_ROOT=str(root))
    p = subprocess.run(
        APPTUNE + args, capture_output=True, text=True, env=env, cwd=root, timeout=timeout
    )
    return p.returncode, p.stdout + p.stderr


def apptune_run(root, run_dir, *extra, mode="ci"):
    return run(
        [
            "run",
            "--mode",
            mode,
            "--no-history",
            "--run-dir",
            str(run_dir),
            *extra,
            "-c",
            "reframe-checks/timeapp",
        ],
        root,
    )


def summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def the_result(run_dir) -> dict:
    (r,) = summary(run_dir)["results"]
    return r


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The tree with a baseline of 6 clean runs recorded on this machine."""
    root = tmp_path_factory.mktemp("verdicts") / "tree"
    timeapp.write_tree(root, REPO)
    rc, out = apptune_run(root, root / "runs/record", "--repeats", "6", "--wait-for-quiet", "60")
    assert rc == 0, out[-3000:]
    rc, out = run(["baseline", "update", str(root / "runs/record")], root)
    assert rc == 0, out[-3000:]
    b = yaml.safe_load((root / "reference/baselines/local/timeapp.yaml").read_text())
    (entry,) = b["entries"]
    assert entry["machine"] == machine.machine_id(machine.fingerprint())
    kt = entry["figures"]["kernel_time"]
    assert kt["runs"] >= 4, f"fewer than 4 of 6 recording runs were clean: {out}"
    return root


def test_recorded_baseline_holds_noise_and_no_modelled_energy(tree):
    b = yaml.safe_load((tree / "reference/baselines/local/timeapp.yaml").read_text())
    figs = b["entries"][0]["figures"]
    assert (
        figs["kernel_time"]["noise"] is not None and "energy_J" not in figs and "edp_Js" not in figs
    )


def test_a_real_2x_slowdown_of_the_hot_file_fails_the_check(tree, tmp_path):
    recipe = tree / "build-recipes/timeapp.yaml"
    text = recipe.read_text()
    recipe.write_text(
        text.replace(
            "run:\n",
            "per_file:\n  - files: [kernel.c]\n    cflags: [-O0]\n"
            "    reason: the slowdown this test injects\nrun:\n",
        )
    )
    try:
        rc, out = apptune_run(tree, tmp_path / "run", "--wait-for-quiet", "60")
    finally:
        recipe.write_text(text)
    s = summary(tmp_path / "run")
    r = the_result(tmp_path / "run")
    assert r["verified"] and r["quality"]["grade"] == "clean", r["quality"]
    assert rc != 0, (r["baseline"], out[-1500:])
    assert r["baseline"]["figures"]["kernel_time"]["verdict"] == "regression"
    assert any(
        f["phase"] == "performance" and "kernel_time" in f["reason"] for f in s["failures"]
    ), s["failures"]
    assert s["summary"][0]["verdict"] == "regression"
    # what changed since the baseline's runs is named: in the summary, the report, the record
    said = "changed: per-file flags kernel.c: (none) → cflags=-O0, ladder=recipe"
    assert said in s["summary"][0]["verdict_text"], s["summary"][0]["verdict_text"]
    assert r["baseline"]["changed"] == [
        "per-file flags kernel.c: (none) → cflags=-O0, ladder=recipe"
    ]
    assert said in (tmp_path / "run/report.md").read_text()


def test_a_cpu_hog_beside_the_run_is_graded_disturbed_and_not_judged(tree, tmp_path):
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        rc, out = apptune_run(tree, tmp_path / "run")
    finally:
        for h in hogs:
            h.kill()
    r = the_result(tmp_path / "run")
    assert rc == 0, out[-3000:]
    assert r["verified"] and r["quality"]["grade"] == "disturbed"
    assert "other processes used" in r["quality"]["reasons"][0]
    assert r["baseline"]["why"].startswith("run disturbed: other processes used")
    assert all(c["verdict"] == "no verdict" for c in r["baseline"]["figures"].values())


def test_bisect_between_finds_the_change_that_carries_a_regression(tree, tmp_path):
    """Two changes since the baseline: the gnu tuned ladder to -O0 (the kernel 3.8x slower)
    and the BLAS from OpenBLAS to BLIS (called outside the timed kernel: no effect). The run
    names both; bisect --between builds the old BLAS for its candidates and blames the C
    flags alone, in a bounded number of builds."""
    ladders, recipe = tree / "site-config/flag-ladders.yaml", tree / "build-recipes/timeapp.yaml"
    old = {f: f.read_text() for f in (ladders, recipe)}
    lt, rt = old[ladders], old[recipe]
    assert "tuned: {cflags: [-O3," in lt and "defaults: {blas: openblas}" in rt
    ladders.write_text(lt.replace("tuned: {cflags: [-O3,", "tuned: {cflags: [-O0,", 1))
    recipe.write_text(rt.replace("defaults: {blas: openblas}", "defaults: {blas: blis}"))
    try:
        rc, out = apptune_run(tree, tmp_path / "run", "--wait-for-quiet", "60")
        changed = the_result(tmp_path / "run")["baseline"]["changed"]
        assert changed[:2] == ["cflags -O3 → -O0", "ldflags -lopenblas → -lblis"], changed
        assert "axis blas: openblas → blis" in changed, changed
        rc, out = run(
            ["bisect", "--between", str(tmp_path / "run"), "--figure", "kernel_time"]
            + ["--repeats", "2", "--no-history", "--work-dir", str(tmp_path / "b")],
            tree,
        )
    finally:
        for f, text in old.items():
            f.write_text(text)
    assert rc == 0, out[-3000:]
    assert "**cflags -O3 → -O0 carries the regression** (2 build+run cycle(s), 3 build(s))" in out
    assert (
        "| axis blas: openblas → blis | yes |" in out
        and "| cflags -O3 → -O0 | **carries it** |" in out
    )
    assert "| ldflags -lopenblas → -lblis | with axis blas |" in out, out[-3000:]
    built = [json.loads(p.read_text()) for p in (tmp_path / "b/builds").glob("*/provenance.json")]
    assert sorted((b["axes"]["blas"], b["flags"]["cflags"][0]) for b in built) == [
        ("blis", "-O0"),
        ("blis", "-O3"),
        ("openblas", "-O3"),
    ]
