"""The compiler cache a long build resumes with (apptune/core/builds/ccache.py): its environment,
and the counters of one build read from ccache's own stats log (recorded from ccache 4.7: a miss,
a direct hit, a link and a call without an input file)."""

import json
import os
from pathlib import Path

import pytest

from apptune.core.builds import buildcache, ccache

DATA = Path(__file__).parent / "data"


def test_counts_of_a_real_stats_log(tmp_path):
    (tmp_path / ccache.STATS_LOG).write_bytes((DATA / "ccache-4.7-stats.log").read_bytes())
    assert ccache.counts(tmp_path) == {"hits": 1, "misses": 1, "uncacheable": 2}
    assert ccache.counts(tmp_path / "elsewhere") is None  # no log: no compiler cache


def test_the_environment_puts_ccache_links_first_and_paths_relative(tmp_path):
    bin_dir = tmp_path / "usr-bin"
    bin_dir.mkdir()
    for name in ("ccache", "gcc-12", "clang++-14", "gcc-ar-12"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    stage = tmp_path / "stage"
    (stage / ccache.STATS_LOG).parent.mkdir(parents=True)
    (stage / ccache.STATS_LOG).write_text("# old build\ncache_miss\n")
    env, warning = ccache.environment(stage, str(tmp_path / "cc"), {"PATH": str(bin_dir)})
    assert warning is None
    links = stage / ccache.BIN_DIR
    assert env["PATH"] == f"{links}{os.pathsep}$PATH"  # ReFrame's job script expands $PATH
    assert env["CCACHE_BASEDIR"] == str((stage / "src").resolve())
    assert env["CCACHE_DIR"] == str(tmp_path / "cc") and env["CCACHE_NOHASHDIR"] == "1"
    names = {p.name for p in links.iterdir()}
    assert {"gcc", "g++", "mpicc"} & names == {"gcc", "g++"}  # MPI wrappers run these
    assert {"gcc-12", "clang++-14"} <= names and "gcc-ar-12" not in names
    assert all(os.readlink(links / n) == str(bin_dir / "ccache") for n in names)
    assert not (stage / ccache.STATS_LOG).exists()  # this build's counters only
    # the environment is idempotent (a retried build job)
    assert ccache.environment(stage, str(tmp_path / "cc"), {"PATH": str(bin_dir)})[0] == env


def test_without_ccache_installed_the_build_runs_without_it_and_says_so(tmp_path):
    env, warning = ccache.environment(tmp_path, str(tmp_path / "cc"), {"PATH": str(tmp_path)})
    assert env == {} and warning.startswith("APPTUNE_CCACHE_DIR is set but ccache is not installed")
    assert ccache.requested({}) is None and ccache.requested({"APPTUNE_CCACHE_DIR": "/c"}) == "/c"


def test_the_build_cache_keeps_a_builds_counters_beside_its_time(tmp_path, monkeypatch):
    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "builds"))
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "prog").write_text("x")
    (stage / ccache.STATS_LOG).write_text("# a.c\ndirect_cache_hit\n# b.c\ncache_miss\n")
    plan = {"app": "toy", "variant": "tuned", "environment": "gnu"}
    e = buildcache.store("ee" + "5" * 62, {"plan": plan}, stage, ["prog"], 3.0, 2)
    assert e.manifest["ccache"] == {"hits": 1, "misses": 1, "uncacheable": 0}
    (t,) = buildcache.recorded_times()
    assert t["ccache"] == e.manifest["ccache"] and not buildcache.cold(t)
    assert json.loads((e.path / buildcache.MANIFEST).read_text())["ccache"]["hits"] == 1


@pytest.mark.integration
def test_a_build_in_another_run_directory_takes_its_objects_from_ccache(toy_root, tmp_path):
    """The toy built twice (the build cache off), each in its own run directory: the second
    build's compiles are all ccache hits, and its compile lines are still recorded and
    checked (the run verifies)."""
    from test_run_lifecycle import _run, toy_checks

    toy_checks(toy_root, "{gnu: [tuned]}")
    env = dict(
        os.environ,
        APPTUNE_ROOT=str(toy_root),
        APPTUNE_CCACHE_DIR=str(tmp_path / "ccache"),
        APPTUNE_USE_BUILD_CACHE="0",
    )
    found = []
    for name in ("first", "second"):
        p = _run(["--no-history", "--run-dir", str(tmp_path / name)], env=env, cwd=toy_root)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        (log,) = (tmp_path / name / "output").rglob(ccache.STATS_LOG)
        (lines,) = (tmp_path / name / "output").rglob("compile-lines.jsonl")
        compiles = [r for r in map(json.loads, lines.read_text().splitlines()) if r["source"]]
        found.append((ccache.counts(log.parent), len(compiles)))
    (first, n), (second, m) = found
    assert n == m >= 2
    assert first["misses"] == n and first["hits"] == 0, first
    assert second["hits"] == n and second["misses"] == 0, second
