"""The build cache keeps what is dear to rebuild, and a build the cache lacks says how long it
will take before it starts."""

import json
import os
import time
from types import SimpleNamespace

import pytest

from apptune.core.builds import buildcache, buildcost
from apptune.core.data import recipes
from apptune.core.run import progress
from apptune.models.install import BuildEstimate

DAY = 86400.0
HOUR, MINUTES = 5400.0, 300.0


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "builds"))
    monkeypatch.delenv("APPTUNE_BUILD_CACHE_MAX_GB", raising=False)
    return tmp_path / "builds"


def entry(key: str, size: int, seconds: float | None, idle_days: float, now: float):
    """A cache entry as the manifest describes it (its bytes are not needed to rank it)."""
    d = buildcache.entry_dir(key)
    (d / "files").mkdir(parents=True)
    manifest = {"key": key, "files": [], "size": size, "created": now, "app": key}
    if seconds is not None:
        manifest["build_seconds"] = seconds
    (d / buildcache.MANIFEST).write_text(json.dumps(manifest))
    (d / buildcache.LAST_USED).touch()
    t = now - idle_days * DAY
    os.utime(d / buildcache.LAST_USED, (t, t))
    return key


def test_hours_of_build_are_not_evicted_to_keep_minutes_under_the_default_limit(cache):
    now = time.time()
    limit = buildcache.max_bytes()
    # the hour-long build was used three days ago, the minutes' one just now: by age alone
    # the hour would go
    dear = entry("aa" + "1" * 62, limit // 2, HOUR, 3, now)
    cheap = entry("bb" + "2" * 62, limit // 2 + 1, MINUTES, 0, now)
    removed = buildcache.prune()
    assert [e.key for e in removed] == [cheap]
    assert [e.key for e in buildcache.entries()] == [dear]


def test_a_dear_build_nobody_used_for_months_gives_way_in_the_end(cache):
    now = time.time()
    dear = entry("aa" + "1" * 62, 600, HOUR, 120, now)
    cheap = entry("bb" + "2" * 62, 600, MINUTES, 0, now)
    assert [e.key for e in buildcache.prune(limit=1000)] == [dear]
    assert [e.key for e in buildcache.entries()] == [cheap]


def test_a_large_cheap_removal_spares_a_dear_entry_ranked_before_it(cache):
    now = time.time()
    small_dear = entry("aa" + "1" * 62, 100, 2 * MINUTES, 0, now)
    tiny_cheap = entry("cc" + "3" * 62, 10, 10.0, 0, now)
    large_cheap = entry("bb" + "2" * 62, 900, 3 * MINUTES, 0, now)
    # ranked by worth: tiny (10 s), small (600 s), large (900 s); removing the large one
    # alone makes room, so the two before it stay
    removed = buildcache.eviction(buildcache.entries(), limit=200, now=now)
    assert [e.key for e in removed] == [large_cheap]
    assert {e.key for e in buildcache.entries()} >= {small_dear, tiny_cheap}


def test_entries_of_unknown_cost_go_least_recently_used_first(cache):
    now = time.time()
    old = entry("aa" + "1" * 62, 600, None, 5, now)
    new = entry("bb" + "2" * 62, 600, None, 1, now)
    assert [e.key for e in buildcache.prune(limit=700)] == [old]
    assert [e.key for e in buildcache.entries()] == [new]


def _recipe(estimate=None):
    return SimpleNamespace(name="openfoam", build=SimpleNamespace(estimate=estimate))


PLAN = {"app": "openfoam", "variant": "tuned", "environment": "gnu"}


def test_the_notice_says_the_last_recorded_time_of_the_same_build():
    times = [
        {"app": "openfoam", "variant": "tuned", "environment": "gnu", "seconds": 4000.0},
        {"app": "openfoam", "variant": "tuned", "environment": "llvm", "seconds": 9000.0},
        {"app": "openfoam", "variant": "tuned", "environment": "gnu", "seconds": 5460.0},
    ]
    line = buildcost.notice(_recipe(BuildEstimate(compiles=10, seconds_per_compile=1)), PLAN, times)
    assert line.startswith("no cached build of openfoam gnu/tuned: building takes ~1 h 31 min")
    assert "(last recorded on " in line


def test_the_notice_estimates_from_the_declared_file_count():
    est = BuildEstimate(compiles=2000, seconds_per_compile=1.5)
    line = buildcost.notice(_recipe(est), PLAN, [])
    assert "building takes ~50 min" in line
    assert "estimated from the declared 2000 compiles at the recipe's 1.5 s each" in line
    # another variant's recorded rate on this machine wins over the recipe's
    other = {"app": "openfoam", "variant": "tuned+exceptions=none", "environment": "gnu"}
    line = buildcost.notice(_recipe(est), PLAN, [{**other, "seconds": 6000.0, "compiles": 2000}])
    assert "building takes ~1 h 40 min" in line and "recorded 3.00 s each" in line


def test_without_a_record_or_a_declaration_the_notice_says_it_cannot_tell():
    line = buildcost.notice(_recipe(None), PLAN, [])
    assert line == (
        "no cached build of openfoam gnu/tuned: no earlier build recorded and no "
        "build.estimate declared"
    )


def test_stored_builds_are_recorded_and_outlive_their_entries(cache, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "prog").write_text("x")
    inputs = {"plan": PLAN}
    e = buildcache.store("dd" + "4" * 62, inputs, stage, ["prog"], build_seconds=42.5, compiles=7)
    assert e.manifest["build_seconds"] == 42.5
    buildcache.prune(limit=0)
    assert buildcache.entries() == []
    [t] = buildcache.recorded_times()
    assert (t["app"], t["variant"], t["seconds"], t["compiles"]) == ("openfoam", "tuned", 42.5, 7)
    seconds, how = buildcost.estimate(_recipe(None), PLAN)
    assert seconds == 42.5 and how.startswith("last recorded on")


def test_apptune_run_says_a_builds_notice_once(tmp_path, toy_root, gnu_toolchain):
    run_dir = tmp_path / "run"
    stage = run_dir / "stage/local/default/gnu/ToyBuild_1234"
    stage.mkdir(parents=True)
    plan = recipes.resolve(recipes.load_recipe("toy"), "tuned", gnu_toolchain).to_dict()
    said = buildcost.announce(recipes.load_recipe("toy"), plan, stage)
    f = progress.Follower(run_dir)
    assert f.notices() == [said] and said.startswith("no cached build of toy gnu/tuned")
    assert f.notices() == []


def test_a_build_with_compiler_cache_hits_is_not_what_a_build_takes():
    warm = {"ccache": {"hits": 1900, "misses": 170, "uncacheable": 40}}
    times = [
        {**PLAN, "seconds": 9300.0, "compiles": 2070, "ccache": {"hits": 0, "misses": 2070}},
        {**PLAN, "seconds": 700.0, "compiles": 2070, **warm},
    ]
    est = BuildEstimate(compiles=2070, seconds_per_compile=4.5)
    line = buildcost.notice(_recipe(est), PLAN, times)
    assert "building takes ~2 h 35 min (last recorded on " in line, line
    # the resumed build of another variant gives no rate either
    other = {**PLAN, "variant": "tuned+exceptions=none"}
    line = buildcost.notice(
        _recipe(est), PLAN, [{**other, "seconds": 700.0, "compiles": 2070, **warm}]
    )
    assert "at the recipe's 4.5 s each" in line, line


def test_a_build_whose_few_hits_are_its_build_systems_probes_is_a_cold_build():
    """GROMACS's first build through ccache: 950 compiles, 2 hits (CMake's checks)."""
    probes = {"ccache": {"hits": 2, "misses": 950, "uncacheable": 100}}
    est = BuildEstimate(compiles=872, seconds_per_compile=1.6)
    times = [{**PLAN, "seconds": 461.6, "compiles": 872, **probes}]
    assert "~8 min (last recorded on " in buildcost.notice(_recipe(est), PLAN, times)
    other = {**PLAN, "variant": "tuned+simd=None"}
    assert "gnu/tuned's recorded 0.53 s each" in buildcost.notice(_recipe(est), other, times)


def test_a_resumed_build_is_as_dear_to_evict_as_its_cold_build(cache):
    now = time.time()
    warm = entry("aa" + "1" * 62, 600, 10 * 60, 0, now)
    e = next(x for x in buildcache.entries() if x.key == warm)
    e.manifest.update(PLAN, ccache={"hits": 2000, "misses": 70})
    cold = [
        {**PLAN, "seconds": 9300.0, "ccache": None},
        {**PLAN, "seconds": 600.0, "ccache": {"hits": 5}},
    ]
    assert buildcache.rebuild_seconds(e, cold) == 9300.0
    # no cold build recorded: what it took, a lower bound
    assert buildcache.rebuild_seconds(e, []) == 600.0


# ---------------------------------------------------------------- a first run: one line
def _notice(run_dir, name, **said):
    stage = run_dir / "stage/local/default/gnu" / name
    stage.mkdir(parents=True, exist_ok=True)
    (stage / buildcost.NOTICE_FILE).write_text(json.dumps(said))


def test_a_first_run_says_the_empty_cache_once_and_no_build_says_it_again(cache, tmp_path):
    """On a fresh machine every build is uncached: 31 lines "no cached build of X: no
    earlier build recorded ..." before the builds said nothing a first run does not imply.
    One line says it and what the builds cost; the builds then say nothing of their cost.
    What the run must hear still comes through: a build it waits for in another run."""
    est = BuildEstimate(compiles=100, seconds_per_compile=6)
    foam = SimpleNamespace(name="openfoam", build=SimpleNamespace(estimate=est))
    hpcc = SimpleNamespace(name="hpcc", build=SimpleNamespace(estimate=None))
    builds = [(foam, "gnu", "tuned"), (hpcc, "gnu", "baseline"), (hpcc, "gnu", "tuned")]
    line = buildcost.empty_cache_line(builds, [])
    assert line == (
        f"the build cache ({cache}) is empty: this run builds its 3 variant(s) of 2 "
        "application(s) from source: ~10 min for 1 of them (this machine's recorded "
        "builds and the recipes' build.estimate), unknown for the other 2 (no build recorded "
        "on this machine, no build.estimate in the recipe: hpcc)"
    )
    times = [{"app": "hpcc", "environment": "gnu", "variant": v, "seconds": 30.0} for v in
             ("baseline", "tuned")]  # fmt: skip
    assert buildcost.empty_cache_line(builds, times).endswith(
        "from source, ~11 min in all (this machine's recorded builds and the recipes' "
        "build.estimate)"
    )
    assert buildcost.empty_cache_line(builds[1:], []).endswith(
        "; how long is unknown (no build recorded on this machine, no build.estimate in the "
        "recipe: hpcc)"
    )
    run_dir = tmp_path / "run"
    for i, (r, env, v) in enumerate(builds):
        _notice(run_dir, f"B{i}", notice=f"no cached build of {r.name} {env}/{v}: ...",
                kind=buildcost.COST, seconds=600.0 if i == 0 else None, app=r.name)  # fmt: skip
    f = progress.Follower(run_dir, first_run=True)
    assert f.notices() == []
    _notice(run_dir, "B3", notice="the build of qe gnu/tuned is in progress in pid 7", kind="wait")
    assert f.notices() == ["the build of qe gnu/tuned is in progress in pid 7"]
    # a cache that holds a build: no such line, each build says its own cost
    stage = tmp_path / "s"
    stage.mkdir()
    (stage / "prog").write_text("x")
    buildcache.store("ee" + "5" * 62, {"plan": PLAN}, stage, ["prog"], build_seconds=1.0)
    assert buildcost.empty_cache_line(builds, []) is None


def test_a_later_run_says_a_builds_cost_only_where_it_is_news(tmp_path):
    """A build of a minute or more says what it will take; one of seconds does not (the
    progress line shows it as it goes); of an application whose builds' time is unknown,
    the first says so, not each of its variants."""
    run_dir = tmp_path / "run"
    said = [
        ("A", "no cached build of openfoam gnu/tuned: building takes ~1 h", 3600.0, "openfoam"),
        ("B", "no cached build of netpipe gnu/tuned: building takes ~5 s", 5.0, "netpipe"),
        ("C", "no cached build of fring gnu/baseline: no earlier build recorded", None, "fring"),
        ("D", "no cached build of fring gnu/tuned: no earlier build recorded", None, "fring"),
        ("E", "no cached build of fring llvm/tuned: no earlier build recorded", None, "fring"),
    ]
    for name, line, seconds, app in said:
        _notice(run_dir, name, notice=line, kind=buildcost.COST, seconds=seconds, app=app)
    assert progress.Follower(run_dir).notices() == [said[0][1], said[2][1]]


def test_the_builds_of_a_run_are_those_its_mode_and_selection_name(toy_root):
    """What the first run's line counts: the variants of the tiers the mode's tags select
    (a tier tagged long_build is not in `make run`), in the environments whose tools are
    found, compiled ones only (not a distribution's build), narrowed by --env and --variant."""
    from apptune.models import Recipe

    d = recipes.load_recipe("toy").model_dump(exclude_unset=True)
    d["installs"] = {"debian": {"debian": ["toy"], "programs": ["toy"]}}
    d["tiers"]["ci"]["variants"] = {"gnu": ["baseline", "tuned", "debian"], "llvm": ["tuned"]}
    d["tiers"]["nightly"] = {"ranks": 1, "variants": {"gnu": ["tuned"]}, "tags": ["long_build"]}
    r = Recipe.model_validate(d)
    anywhere = lambda *_: True  # noqa: E731
    ci = buildcost.mode_tiers(["--tag=^ci$", "--exclude-tag=^long_build$", "--exec-policy=serial"])
    assert [(e, v) for _, e, v in buildcost.run_builds([r], ci, anywhere)] == [
        ("gnu", "baseline"),
        ("gnu", "tuned"),
        ("llvm", "tuned"),
    ]
    every = buildcost.mode_tiers(["-t", "."])
    assert every(r) == ["ci", "nightly"] and buildcost.mode_tiers(["-T", "long"])(r) == ["ci"]
    assert len(buildcost.run_builds([r], every, anywhere)) == 3  # gnu/tuned once
    gnu = lambda rec, env: env == "gnu"  # noqa: E731  llvm's tools not found
    assert [v for _, _, v in buildcost.run_builds([r], ci, gnu, (), ["tuned"])] == ["tuned"]
    assert buildcost.run_builds([r], ci, anywhere, ["nosuch"]) == []


def test_apptune_run_counts_the_builds_of_its_mode_and_selection(cache):
    """`apptune run --app netpipe --env gnu` on an empty cache: the line counts the gnu
    variants of NetPIPE's ci tier (from the site config's ci mode), no other."""
    from apptune.commands.run import RunOptions, empty_cache_line
    from apptune.core.data import selection

    a = RunOptions(mode="ci", checks=[], config="site-config/settings.py", reframe_args=[])
    sel = selection.Selection(apps=["netpipe"], envs=["gnu"])
    n = len(recipes.load_recipe("netpipe").tiers["ci"].variants["gnu"])
    line = empty_cache_line(a, sel, recipes.list_recipes(), ["reframe-checks"])
    assert line.startswith(
        f"the build cache ({cache}) is empty: this run builds its {n} variant(s) of 1 "
        "application(s) from source"
    ), line
    nosuch = selection.Selection(envs=["nosuch"])
    assert empty_cache_line(a, nosuch, ["netpipe"], ["reframe-checks"]) is None


def test_a_recipe_without_a_check_directory_is_not_counted_as_a_build(cache):
    """npb-official's recipe ships without a check (a site adds one): a run of every check
    builds nothing of it, and the first line does not count it."""
    from apptune.commands.run import empty_cache_line
    from apptune.core.data import selection

    a = SimpleNamespace(config="site-config/settings.py", mode="ci", reframe_args=[])
    everything = empty_cache_line(
        a, selection.Selection(), recipes.list_recipes(), ["reframe-checks"]
    )
    assert "npb-official" in recipes.list_recipes() and "npb-official" not in everything
    only = empty_cache_line(a, selection.Selection(), ["npb-official"], ["reframe-checks"])
    assert only is None
