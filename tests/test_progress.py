"""Progress of a long run: which test case of how many, files compiled against the last
build of the same application, and no more than a line a minute in a log."""

import io
import json
import os
import subprocess
import sys
import time

from apptune.core.run import progress

RUN = (
    "[ \x1b[32mRUN     \x1b[0m ] QEBuild %variant=baseline ~local:default+gnu /a1b2 "
    "@local:default+gnu\n"
)
OK = (
    "[ \x1b[32m      OK\x1b[0m ] ( 3/12) HPCCCheck %tier=ci %build.variant=tuned /5f7d "
    "@local:default+gnu\n"
)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_follows_test_cases_and_a_build_against_the_last_cached_one(tmp_path, monkeypatch):
    monkeypatch.setattr(
        progress,
        "expected_build",
        lambda app, env=None, variant=None: (600, 300.0) if app == "qe" else (None, None),
    )
    clock = Clock()
    f = progress.Follower(tmp_path, clock=clock)
    assert f.status() == "starting; 0 s elapsed"
    f.feed(OK)
    f.feed(RUN)
    assert f.status().startswith("3/12 test cases done; running QEBuild %variant=baseline")
    build = tmp_path / "stage/local/default/gnu/QEBuild_a1b2"
    build.mkdir(parents=True)
    (build / "plan.json").write_text(json.dumps({"app": "qe"}))
    (build / "compile-lines.jsonl").write_text('{"kind": "compile"}\n' * 150)
    started = time.time() - 100  # the plan was written when the build started
    os.utime(build / "plan.json", (started, started))
    s = f.status()
    assert "building qe: 150/600 files, about 5 min left, 1 min 40 s so far" in s, s
    (build / "provenance.json").write_text("{}")  # finished: no longer a build in progress
    assert "building" not in f.status()


def test_the_expected_file_count_comes_from_the_newest_cached_build_of_the_app(
    tmp_path, monkeypatch
):
    from apptune.core.builds import buildcache

    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "cache"))
    assert progress.expected_build("qe") == (None, None)
    for key, app, compiles in (
        ("a" * 64, "qe", 500),
        ("b" * 64, "hpcc", 90),
        ("c" * 64, "qe", 612),
    ):
        stage = tmp_path / key
        stage.mkdir()
        (stage / "provenance.json").write_text(
            json.dumps({"compile_lines": {"compiles": compiles}, "build_seconds": compiles / 2})
        )
        buildcache.store(key, {"plan": {"app": app}}, stage, ["provenance.json"])
        time.sleep(0.01)  # entries are ordered by their creation time
    assert progress.expected_build("qe") == (612, 306.0)
    assert progress.expected_build("hpcc") == (90, 45.0)


def test_the_expected_file_count_is_of_the_same_variant_where_the_cache_has_one(
    tmp_path, monkeypatch
):
    """Variants of one application can compile different files (a library built with one,
    a patch): a FLASH-IO build's progress read "224/64 files" against another build."""
    from apptune.core.builds import buildcache

    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "cache"))
    for key, variant, compiles in (("a" * 64, "baseline", 224), ("b" * 64, "planted", 64)):
        stage = tmp_path / key
        stage.mkdir()
        (stage / "provenance.json").write_text(
            json.dumps({"compile_lines": {"compiles": compiles}, "build_seconds": compiles})
        )
        plan = {"app": "flashio", "environment": "gnu", "variant": variant}
        buildcache.store(key, {"plan": plan}, stage, ["provenance.json"])
        time.sleep(0.01)
    assert progress.expected_build("flashio", "gnu", "baseline") == (224, 224.0)
    assert progress.expected_build("flashio", "gnu", "tuned") == (64, 64.0)  # the newest
    b = {"app": "flashio", "compiled": 100, "expected": 64, "expected_s": 64.0, "elapsed": 9.0}
    f = progress.Follower(tmp_path)
    monkeypatch.setattr(f, "active_build", lambda: b)
    assert "building flashio: 100 files (more than the 64 of the last build)" in f.status()


def test_a_warm_builds_time_is_not_what_the_next_build_is_bounded_by(tmp_path, monkeypatch):
    """A build whose objects came from ccache gives its file count, not its time: the time
    left then comes from the rate of the build under way."""
    from apptune.core.builds import buildcache, ccache

    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "cache"))
    stage = tmp_path / "warm"
    stage.mkdir()
    (stage / "provenance.json").write_text(
        json.dumps({"compile_lines": {"compiles": 2069}, "build_seconds": 150.0})
    )
    (stage / ccache.STATS_LOG).write_text("# a.C\ndirect_cache_hit\n# b.C\ndirect_cache_hit\n")
    plan = {"app": "openfoam", "environment": "gnu", "variant": "tuned"}
    buildcache.store("a" * 64, {"plan": plan}, stage, ["provenance.json"])
    assert progress.expected_build("openfoam", "gnu", "tuned+exceptions=none") == (2069, None)
    b = {"compiled": 826, "expected": 2069, "expected_s": None, "elapsed": 660.0}
    assert progress._left(b) == 660.0 * 1243 / 826


def test_time_left_is_bounded_by_the_last_cached_build():
    # 8 of 1581 files after 8 minutes of configuring: not 26 hours, the cached build's time
    b = {"compiled": 8, "expected": 1581, "expected_s": 647.0, "elapsed": 480.0}
    assert progress._left(b) == 647.0
    b.update(compiled=0, elapsed=60.0)  # configuring: what the cached build took, less so far
    assert progress._left(b) == 587.0
    b.update(compiled=1500, elapsed=900.0)  # slower than the cached build: the rate decides
    assert progress._left(b) == 900.0 * 81 / 1500
    b.update(expected_s=None)  # no time known: the rate alone
    assert progress._left(b) == 900.0 * 81 / 1500
    b.update(compiled=0)
    assert progress._left(b) is None


def test_a_log_gets_at_most_a_line_a_minute(tmp_path, monkeypatch):
    """Not a TTY: ReFrame's lines pass through unchanged and no progress line appears
    within the first minute."""
    monkeypatch.setenv("CI", "true")
    lines = [OK, "P: HPL: 29.25 Gflop/s\n", RUN]
    p = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    p.stdin.write("".join(lines))
    p.stdin.close()
    out = io.StringIO()
    progress.relay(p, tmp_path, out=out)
    p.wait()
    assert out.getvalue() == "".join(lines)


def test_the_stage_is_read_at_the_tests_level_only(tmp_path):
    """A build tree's own files below a test's directory (CMake's TryCompile directories
    come and go while a build runs) are never walked; a file gone meanwhile is left out."""
    test_dir = tmp_path / "stage/local/default/gnu/GromacsBuild_1"
    deep = test_dir / "src/_build/CMakeFiles/CMakeScratch/TryCompile-x"
    deep.mkdir(parents=True)
    (deep / "compile-lines.jsonl").write_text("{}\n")
    (test_dir / "compile-lines.jsonl").write_text("{}\n")
    (test_dir / "gone.jsonl").symlink_to(test_dir / "nowhere")
    found = progress._in_test_dirs(tmp_path / "stage", "compile-lines.jsonl")
    assert [p for _, p in found] == [test_dir / "compile-lines.jsonl"]
    assert progress._in_test_dirs(tmp_path / "stage", "gone.jsonl") == []


def test_time_left_comes_from_the_recent_rate_when_a_build_resumes_through_ccache():
    """A stopped OpenFOAM build resumed through ccache: 1195 files in its first minute, then
    a file every 2.5 s; its progress said "about 43 s left" for half an hour."""
    samples = [(0.0, 0)]
    assert progress.recent_rate(samples, 0.0) is None
    samples.append((60.0, 1195))
    assert progress.recent_rate(samples, 60.0) is None  # too short a span to tell
    for t in range(120, 1300, 60):
        samples.append((float(t), 1195 + (t - 60) // 2.5))
    rate = progress.recent_rate(samples, samples[-1][0])
    assert rate == 0.4  # the window's first sample is past the ccache minute
    assert samples[0][0] >= samples[-1][0] - progress.RATE_WINDOW_S - 60
    b = {"compiled": samples[-1][1], "expected": 2069, "expected_s": None, "elapsed": 1240.0}
    assert progress._left(dict(b, rate=rate)) == (2069 - samples[-1][1]) / 0.4
    assert progress._left(b) < progress._left(dict(b, rate=rate)) / 3  # since the start
    samples.append((1300.0, samples[-1][1]))  # nothing compiled for a minute: still a rate
    assert progress.recent_rate(samples, 1300.0) > 0
    assert progress.recent_rate([(0.0, 5), (300.0, 5)], 300.0) is None  # linking, no files


def test_the_files_counted_are_the_products_as_the_provenance_counts_them(tmp_path, monkeypatch):
    """configure's conftest compiles are probes: a FLASH-IO build said "282 files (more
    than the 64 of the last build)" while its provenance counted 64."""
    monkeypatch.setattr(progress, "expected_build", lambda *a: (64, None))
    build = tmp_path / "stage/local/default/gnu/FlashioBuild_1"
    build.mkdir(parents=True)
    (build / "plan.json").write_text(json.dumps({"app": "flashio"}))
    probe = {"kind": "compile", "sources": ["conftest.c"], "cwd": str(build), "argv": ["cc"]}
    real = {"kind": "compile", "sources": ["a.c"], "cwd": str(build), "argv": ["cc", "-c"]}
    log = build / "compile-lines.jsonl"
    log.write_text((json.dumps(probe) + "\n") * 218 + (json.dumps(real) + "\n") * 10)
    f = progress.Follower(tmp_path)
    assert f.active_build()["compiled"] == 10
    with log.open("a") as out:  # appended since, the last line still being written
        out.write((json.dumps(real) + "\n") * 5 + json.dumps(real)[:20])
    assert f.active_build()["compiled"] == 15
    with log.open("a") as out:
        out.write(json.dumps(real)[20:] + "\n")
    assert f.active_build()["compiled"] == 16
    assert "building flashio: 16/64 files" in f.status()


def test_a_build_that_waits_for_the_same_build_in_another_run_says_so_on_the_runs_output(
    tmp_path,
):
    """The wait, its end and then the build's cost are three notices of one build (its one
    notice file, rewritten): each is said, once."""
    from apptune import locks
    from apptune.core.builds import buildcost

    stage = tmp_path / "stage/local/default/gnu/QEBuild_a1b2"
    stage.mkdir(parents=True)
    f = progress.Follower(tmp_path)
    wait = buildcost.Waiting(stage, "qe gnu/tuned")
    wait.ended(stored=True)  # no wait: nothing said
    assert f.notices() == []
    wait(locks.Holder(pid=4242, host=None, since=None))
    assert f.notices() == [
        "the build of qe gnu/tuned is in progress in pid 4242: waiting for it, to use what it "
        "stores"
    ]
    assert f.notices() == []
    wait.ended(stored=False)
    assert f.notices() == [
        "the build of qe gnu/tuned in pid 4242 ended: it stored nothing (it died or failed): "
        "building here"
    ]


def _replay(tmp_path, entries, until: int):
    """Feed ReFrame's recorded lines up to ``until`` (index), with the stage as it was at
    each (the job output files that existed when the line came)."""
    import shutil

    f = progress.Follower(tmp_path)
    stage = tmp_path / "stage"
    for e in entries[: until + 1]:
        shutil.rmtree(stage, ignore_errors=True)
        for j in e["jobs"]:
            (stage / j).parent.mkdir(parents=True, exist_ok=True)
            (stage / j).touch()
        f.feed(e["line"])
    return f


def test_the_running_test_cases_under_reframes_async_policy(tmp_path):
    """Recorded ReFrame 4.10 output of an async run (2 job slots; checks on two environments
    each, after their build fixtures): RUN is said when a test case starts, long before its job
    runs, and several at once. The progress line named the last RUN line's test (one waiting
    for a slot) and, after any result line, none at all. It names those whose job has begun,
    and counts the others."""
    from conftest import REPO

    entries = json.loads((REPO / "tests/data/reframe-async-progress.json").read_text())
    lines = [progress._ANSI.sub("", e["line"]).strip() for e in entries]
    # the four checks of the baseline builds have started, the tuned builds still run
    at = lines.index(
        "[ RUN      ] SleepCheck %secs=3 %build.variant=baseline /1cef7c22 @local:default+llvm"
    )
    s = _replay(tmp_path, entries, at).status()
    assert "running SleepBuild %variant=tuned ~local:default+gnu and 1 more; 4 waiting to run" in s
    # a result line: the two checks of 52ef420a run (2 slots), two more have started
    at = lines.index(
        "[       OK ] ( 4/12) SleepBuild %variant=tuned ~local:default+llvm /a08ebb3a "
        "@local:default+llvm"
    )
    s = _replay(tmp_path, entries, at).status()
    assert s.startswith(
        "4/12 test cases done; running SleepCheck %secs=1 %build.variant=baseline "
        "@local:default+gnu and 1 more; 2 waiting to run;"
    ), s
    f = _replay(tmp_path, entries, len(entries) - 1)
    assert f.started == {} and "running" not in f.status()


def test_the_running_test_case_under_the_serial_policy(tmp_path):
    """`apptune run`'s own modes run one test case at a time (recorded, ReFrame 4.10): the one
    started last runs, whether or not its job has begun."""
    f = progress.Follower(tmp_path)
    for line in (
        "[ \x1b[32mRUN     \x1b[0m ] SleepBuild %variant=baseline ~local:default+gnu /3996aeb5 "
        "@local:default+gnu",
        "[ \x1b[32m      OK\x1b[0m ] ( 1/12) SleepBuild %variant=baseline ~local:default+gnu "
        "/3996aeb5 @local:default+gnu",
        "[ \x1b[32mRUN     \x1b[0m ] SleepCheck %secs=1 %build.variant=baseline /52ef420a "
        "@local:default+gnu",
    ):
        f.feed(line + "\n")
    assert f.status().startswith(
        "1/12 test cases done; running SleepCheck %secs=1 %build.variant=baseline "
        "@local:default+gnu; 0 s elapsed"
    ), f.status()
