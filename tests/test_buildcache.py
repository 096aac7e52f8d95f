"""Content-addressed build cache: keyed by everything that decides the binary."""

import dataclasses
import errno
import json
import multiprocessing
import os
from pathlib import Path

import pytest
import yaml

from apptune import cli
from apptune.core.builds import buildcache, buildcost, sources, steps
from apptune.core.data import recipes

# every test here builds the toy with gcc (one of them in a pool of processes)
pytestmark = pytest.mark.slow


@pytest.fixture
def toy(toy_root, tmp_path, gnu_toolchain):
    tarball = sources.fetch(recipes.load_recipe("toy"))

    def do(variant="tuned", name="stage", use_cache=True, tc=gnu_toolchain):
        stage = tmp_path / name
        stage.mkdir(exist_ok=True)
        plan = recipes.resolve(recipes.load_recipe("toy"), variant, tc).to_dict()
        return steps.build(plan, tarball, stage, use_cache=use_cache), stage

    return do


def test_same_key_is_restored_without_building(toy, capsys):
    p1, s1 = toy(name="a")
    assert p1["cache"]["hit"] is False and (s1 / "src").is_dir()
    p2, s2 = toy(name="b")
    assert p2["cache"]["hit"] is True and p2["cache"]["key"] == p1["cache"]["key"]
    assert not (s2 / "src").exists() and (s2 / "toy").is_file()
    assert (s2 / "compile-lines.jsonl").read_text() == (s1 / "compile-lines.jsonl").read_text()
    assert "build cache hit" in capsys.readouterr().out


def test_flags_and_patches_change_the_key(toy, toy_root):
    p1, _ = toy("tuned", "a")
    p2, _ = toy("baseline", "b")
    assert p1["cache"]["key"] != p2["cache"]["key"] and not p2["cache"]["hit"]
    patch = toy_root / "patches/toy/0001-comment.patch"
    patch.write_text(patch.read_text().replace("patched by apptune's test", "patched again"))
    p3, _ = toy("tuned", "c")
    assert p3["cache"]["key"] != p1["cache"]["key"] and not p3["cache"]["hit"]


def test_steering_environment_changes_the_key(toy, monkeypatch):
    p1, _ = toy(name="a")
    monkeypatch.setenv("OMPI_CC", "clang")
    p2, _ = toy(name="b")
    assert p1["cache"]["key"] != p2["cache"]["key"]


def test_corrupted_entry_is_detected_and_rebuilt(toy, capsys):
    p1, _ = toy(name="a")
    entry = buildcache.entry_dir(p1["cache"]["key"])
    (entry / "files" / "toy").write_bytes(b"flipped bits")
    assert cli.main(["cache", "verify"]) == 1
    assert "does not match its sha256" in capsys.readouterr().out
    p2, s2 = toy(name="b")
    assert p2["cache"]["hit"] is False and (s2 / "src").is_dir()
    assert "was corrupted" in capsys.readouterr().out
    assert cli.main(["cache", "verify"]) == 0


def test_no_cache_builds_and_stores_nothing(toy):
    p, _ = toy(use_cache=False)
    assert p["cache"]["hit"] is False and buildcache.entries() == []


def test_prune_drops_least_recently_used(toy):
    pa, _ = toy("tuned", "a")
    pb, _ = toy("baseline", "b")
    os.utime(buildcache.entry_dir(pa["cache"]["key"]) / buildcache.LAST_USED, (1, 1))
    removed = buildcache.prune(limit=max(e.size for e in buildcache.entries()))
    assert [e.key for e in removed] == [pa["cache"]["key"]]
    assert [e.key for e in buildcache.entries()] == [pb["cache"]["key"]]


def _build_in_process(args):
    root, cache, mirror, stage = args
    os.environ.update(APPTUNE_ROOT=root, APPTUNE_CACHE=cache, APPTUNE_SOURCE_MIRROR=mirror)
    from apptune.core.data.recipes import Toolchain

    tc = Toolchain("gnu", "gnu", "gcc", "g++", "gfortran", "none", "3.1", "openblas", ["gcc"])
    r = recipes.load_recipe("toy")
    os.makedirs(stage, exist_ok=True)
    prov = steps.build(
        recipes.resolve(r, "tuned", tc).to_dict(),
        sources.fetch(r),
        __import__("pathlib").Path(stage),
    )
    return prov["cache"]["hit"]


def test_concurrent_builders_build_once(toy_root, tmp_path):
    sources.fetch(recipes.load_recipe("toy"))
    args = [
        (str(toy_root), str(tmp_path / "cache"), str(tmp_path / "mirror"), str(tmp_path / f"s{i}"))
        for i in range(3)
    ]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        hits = pool.map(_build_in_process, args)
    assert sorted(hits) == [False, True, True]
    assert len(buildcache.entries()) == 1
    m = buildcache.entries()[0].manifest
    assert json.dumps(m["inputs"]["plan"]["cflags"]) == '["-O3", "-march=native", "-funroll-loops"]'


@pytest.mark.unit
def test_the_build_code_identity_ignores_formatting_comments_and_docstrings(tmp_path):
    code = '"""A module."""\n\n\ndef f(x):\n    """Twice x."""\n    return 2 * x\n'
    same = (
        "# reformatted, commented, documented anew\n"
        '"""Another text."""\n'
        "def f( x ):\n"
        '    """Doubled."""\n'
        "    return 2*x  # the same code\n"
    )
    changed = code.replace("2 * x", "3 * x")
    assert buildcache.syntax_of(same) == buildcache.syntax_of(code)
    assert buildcache.syntax_of(changed) != buildcache.syntax_of(code)
    # a function that is only a docstring stays a function
    assert "Pass" in buildcache.syntax_of('def g():\n    """Nothing yet."""\n')
    assert buildcache.code_identity() == buildcache.code_identity(buildcache.BUILD_CODE)


@pytest.mark.unit
def test_a_full_cache_is_a_warning_and_keeps_the_stored_entries(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("APPTUNE_BUILD_CACHE", str(tmp_path / "builds"))
    stage = tmp_path / "stage"
    stage.mkdir()
    for name in ("app", "provenance.json"):
        (stage / name).write_text(f"{name}\n" * 1000)
    inputs = {"plan": {"app": "toy", "variant": "tuned", "environment": "gnu"}}
    old = buildcache.store("a" * 64, inputs, stage, ["app", "provenance.json"])
    copy2 = buildcache.shutil.copy2

    def full(src, dst, **kw):
        if Path(src).name == "provenance.json":  # the disk fills up half-way through
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return copy2(src, dst, **kw)

    monkeypatch.setattr(buildcache.shutil, "copy2", full)
    key = "aa" + "b" * 62  # beside the stored entry, under the same prefix directory
    assert buildcache.store(key, inputs, stage, ["app", "provenance.json"]) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(
        f"apptune: warning: build not stored in the build cache {tmp_path / 'builds'} "
        "(No space left on device; "
    )
    assert " MiB free): the build is used as it is" in out[0]
    # no partial entry, and the entry stored before is whole
    assert sorted(p.name for p in (tmp_path / "builds" / "aa").iterdir()) == ["a" * 64]
    assert [e.key for e in buildcache.entries()] == [old.key] and buildcache.verify_all() == []


def _llvm(tc):
    return dataclasses.replace(tc, environment="llvm", family="llvm")


def _llvm_only_changes(root):
    """An llvm flag ladder, the recipe's flags for the llvm family and a template's llvm
    branch change; nothing a gnu build resolves to does."""
    ladders = root / "site-config/flag-ladders.yaml"
    data = yaml.safe_load(ladders.read_text())
    data["families"]["llvm"]["tuned"]["cflags"].append("-fvectorize")
    ladders.write_text(yaml.safe_dump(data))
    recipes._cached.cache_clear()  # the ladders are read once per process
    toy = root / "build-recipes/toy.yaml"
    toy.write_text(
        toy.read_text().replace(
            "  jobs: 1\n", "  jobs: 1\n  family_flags: {llvm: {cflags: [-fno-slp-vectorize]}}\n"
        )
    )
    tmpl = root / "build-recipes/templates/toy/config.mk.j2"
    tmpl.write_text(tmpl.read_text() + "{% if family == 'llvm' %}# clang\n{% endif %}")


@pytest.mark.unit
def test_a_change_to_one_environments_flags_keeps_the_keys_of_the_others(toy_root, gnu_toolchain):
    def keys():
        r = recipes.load_recipe("toy")
        out = {}
        for tc in (gnu_toolchain, _llvm(gnu_toolchain)):
            for variant in ("baseline", "tuned"):
                plan = recipes.resolve(r, variant, tc).to_dict()
                inputs = steps.cache_inputs(r, plan, "0" * 64, {"cc": "id"}, {})
                out[tc.environment, variant] = buildcache.key_of(inputs)
        return out

    before = keys()
    assert len(set(before.values())) == 4
    _llvm_only_changes(toy_root)
    after = keys()
    assert [after["gnu", v] == before["gnu", v] for v in ("baseline", "tuned")] == [True, True]
    assert [after["llvm", v] != before["llvm", v] for v in ("baseline", "tuned")] == [True, True]
    # and what a gnu build resolves to does change its key
    toy = toy_root / "build-recipes/toy.yaml"
    toy.write_text(toy.read_text().replace("{llvm: {", "{gnu: {cflags: [-g]}, llvm: {"))
    assert keys()["gnu", "tuned"] != before["gnu", "tuned"]


def test_an_llvm_only_change_restores_the_gnu_build_from_the_cache(toy, toy_root):
    p1, _ = toy("tuned", "a")
    _llvm_only_changes(toy_root)
    p2, s2 = toy("tuned", "b")
    assert p2["cache"]["hit"] is True and p2["cache"]["key"] == p1["cache"]["key"]
    assert (s2 / "toy").is_file()


# ------------------------------------------------------------- a build in progress, shared
def _build_held(args):
    """Another run's build of the toy (a process of its own) that holds the build's lock:
    it says so in ``started`` once its build begins, and goes on only once ``release``
    exists (``die``: it is killed meanwhile, as a run stopped by the user)."""
    root, cache, mirror, stage, started, release = args
    os.environ.update(APPTUNE_ROOT=root, APPTUNE_CACHE=cache, APPTUNE_SOURCE_MIRROR=mirror)
    import time as _time

    from apptune.core.data.recipes import Toolchain

    real = steps._build

    def slow(*a, **kw):
        Path(started).touch()
        while not Path(release).exists():
            _time.sleep(0.05)
        return real(*a, **kw)

    steps._build = slow
    tc = Toolchain("gnu", "gnu", "gcc", "g++", "gfortran", "none", "3.1", "openblas", ["gcc"])
    r = recipes.load_recipe("toy")
    os.makedirs(stage, exist_ok=True)
    steps.build(recipes.resolve(r, "tuned", tc).to_dict(), sources.fetch(r), Path(stage))


def _second_run(toy_root, tmp_path, monkeypatch, kill: bool):
    """A build of the toy while another process builds the same: (that process's id, what
    the second build said, its provenance)."""
    import threading
    import time as _time

    from apptune.core.data.recipes import Toolchain

    r = recipes.load_recipe("toy")
    sources.fetch(r)
    started, release = tmp_path / "started", tmp_path / "release"
    env = (os.environ["APPTUNE_CACHE"], os.environ["APPTUNE_SOURCE_MIRROR"])
    args = (str(toy_root), *env, str(tmp_path / "first"), str(started), str(release))
    first = multiprocessing.get_context("spawn").Process(target=_build_held, args=(args,))
    first.start()
    notices: list[tuple[str, str]] = []
    say = buildcost.say

    def heard(stage, line, kind, **data):
        notices.append((kind, line))
        say(stage, line, kind, **data)

    monkeypatch.setattr(buildcost, "say", heard)
    try:
        deadline = _time.monotonic() + 60
        while not started.exists() and _time.monotonic() < deadline:
            _time.sleep(0.05)
        assert started.exists(), "the first build did not start"
        stage = tmp_path / "second"
        stage.mkdir()
        tc = Toolchain("gnu", "gnu", "gcc", "g++", "gfortran", "none", "3.1", "openblas", ["gcc"])
        plan = recipes.resolve(r, "tuned", tc).to_dict()
        got = {}
        t = threading.Thread(
            target=lambda: got.update(prov=steps.build(plan, sources.fetch(r), stage))
        )
        t.start()
        while not notices and t.is_alive():
            _time.sleep(0.05)
        assert notices and notices[0][0] == buildcost.WAIT, notices
        if kill:
            first.kill()  # the first run dies with its build half done: its lock goes with it
        else:
            release.touch()
        t.join(timeout=120)
        assert not t.is_alive(), "the second build never got the lock"
        return first.pid, [line for _, line in notices], got["prov"]
    finally:
        if first.is_alive():
            first.kill()
        first.join()


def test_a_second_run_waits_for_the_same_build_in_progress_and_uses_it(
    toy_root, tmp_path, monkeypatch
):
    """Two runs at once that need the same build: the second says it waits for the first's
    build in progress, then uses what it stored (it built the same variant twice before)."""
    pid, said, prov = _second_run(toy_root, tmp_path, monkeypatch, kill=False)
    assert said[0].startswith(f"the build of toy gnu/tuned is in progress in pid {pid}, since ")
    assert said[0].endswith(": waiting for it, to use what it stores")
    assert said[1].startswith(f"the build of toy gnu/tuned in pid {pid}, since ")
    assert said[1].endswith(" ended: used here") and len(said) == 2
    assert prov["cache"]["hit"] is True and len(buildcache.entries()) == 1


def test_a_second_run_builds_itself_when_the_build_it_waited_for_dies(
    toy_root, tmp_path, monkeypatch
):
    """The run whose build the second waits for is killed: its lock goes with it, and the
    second builds (a lock file left by a dead process never blocks)."""
    pid, said, prov = _second_run(toy_root, tmp_path, monkeypatch, kill=True)
    assert said[1].startswith(f"the build of toy gnu/tuned in pid {pid}, since ")
    assert said[1].endswith(" ended: it stored nothing (it died or failed): building here")
    assert said[2].startswith("no cached build of toy gnu/tuned")
    assert prov["cache"]["hit"] is False and (tmp_path / "second" / "toy").is_file()
    assert len(buildcache.entries()) == 1


@pytest.mark.unit
def test_a_lock_held_by_a_process_that_dies_is_free_and_its_holder_was_named(tmp_path):
    """Who holds a lock is said to the process that waits for it; a holder killed with the
    lock held (no chance to clean up) leaves its lock file behind, and it blocks nobody."""
    import subprocess
    import sys
    import threading
    import time as _time

    from apptune import locks

    path = tmp_path / "locks" / "k.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from apptune import locks\n"
            f"with locks.locked({str(path)!r}, 'the build of toy gnu/tuned'):\n"
            "    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        told, got = [], threading.Event()

        def second():
            with locks.locked(path, "the same build", told.append):
                got.set()

        t = threading.Thread(target=second, daemon=True)
        t.start()
        _time.sleep(0.3)
        assert not got.is_set()  # it waits while the holder lives
        [h] = told
        assert (h.pid, h.what) == (holder.pid, "the build of toy gnu/tuned")
        assert h.describe().startswith(f"pid {holder.pid}, since ")
        holder.kill()
        assert got.wait(10), "the lock of a dead process still blocks"
        t.join(5)
        assert path.exists()  # the file stays; only the lock went
    finally:
        holder.kill()
        holder.wait()
