"""Sources (mirror, cache, checksum), patches, and a real build of the toy app."""

import json
import shutil

import pytest
from conftest import PATCH

from apptune import build, recipes, sources
from apptune.errors import ApptuneError


def test_mirror_then_cache(toy_root, tmp_path):
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    assert p.is_file() and p.parent == tmp_path / "cache" / "sources"
    # the cache is used when the mirror is gone
    shutil.rmtree(tmp_path / "mirror")
    assert sources.fetch(r) == p


def test_wrong_checksum_is_refused(toy_root, tmp_path):
    (tmp_path / "mirror" / "toy-1.0.tar.gz").write_bytes(b"not the tarball")
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    msg = str(e.value)
    assert "toy.yaml" in msg and "source.sha256" in msg and "refusing" in msg
    assert not (tmp_path / "cache" / "sources" / "toy-1.0.tar.gz").exists()


def test_corrupted_cache_entry_is_removed_and_fetched_again(toy_root, tmp_path, capsys):
    good = (tmp_path / "mirror" / "toy-1.0.tar.gz").read_bytes()
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    p.write_bytes(b"bit rot")
    # no mirror, and the origin cannot be reached: the bad copy is gone, and the error says so
    (tmp_path / "mirror" / "toy-1.0.tar.gz").rename(tmp_path / "origin.tar.gz")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    assert not p.exists()
    assert "download of toy-1.0.tar.gz failed" in str(e.value) and f"{p}, was removed" in str(
        e.value
    )
    out = capsys.readouterr().out
    assert f"cached {p} does not match the recipe's sha256" in out and "removed it, fetching" in out
    # with the origin reachable, the fetch heals the cache
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"bit rot")
    r = r.model_copy(
        update={
            "source": r.source.model_copy(update={"url": (tmp_path / "origin.tar.gz").as_uri()})
        }
    )
    assert sources.fetch(r) == p and p.read_bytes() == good
    assert "removed it, fetching toy-1.0.tar.gz again" in capsys.readouterr().out


def test_missing_source_names_the_origin(toy_root, tmp_path):
    shutil.rmtree(tmp_path / "mirror")
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    assert "download of toy-1.0.tar.gz failed" in str(e.value)


def test_sources_main_reports_one_line(toy_root, tmp_path, capsys):
    (tmp_path / "mirror" / "toy-1.0.tar.gz").write_bytes(b"x")
    assert sources.main(["toy"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("apptune: error: ") and "sha256" in err[0]


def _plan(variant, tc):
    r = recipes.load_recipe("toy")
    return recipes.resolve(r, variant, tc).to_dict()


@pytest.mark.slow
def test_build_applies_patch_overrides_flags_and_records_provenance(
    toy_root, tmp_path, gnu_toolchain
):
    tarball = sources.fetch(recipes.load_recipe("toy"))
    stage = tmp_path / "stage"
    stage.mkdir()
    prov = build.build(_plan("tuned", gnu_toolchain), tarball, stage)
    assert (stage / "toy").is_file()
    assert "patched by apptune" in (stage / "src" / "main.c").read_text()
    assert prov["patches"][0]["file"] == "0001-comment.patch"
    lines = [json.loads(ln) for ln in (stage / "compile-lines.jsonl").read_text().splitlines()]
    by_src = {ln["source"]: ln for ln in lines if ln["kind"] == "compile"}
    assert "-O3" in by_src["main.c"]["argv"] and "-march=native" in by_src["main.c"]["argv"]
    acc = by_src["acc.c"]["argv"]
    assert "-O2" in acc and "-O3" not in acc and "-march=native" not in acc
    assert prov["compile_lines"]["overridden"] == ["acc.c"]
    assert prov["compilers"]["cc"]["version"].startswith("gcc")
    saved = json.loads((stage / "provenance.json").read_text())
    assert saved["source"]["sha256"] == recipes.load_recipe("toy").source.sha256


def test_flags_that_did_not_reach_the_compiler_fail(toy_root, tmp_path, gnu_toolchain):
    plan = _plan("tuned", gnu_toolchain)
    log = tmp_path / "compile-lines.jsonl"
    log.write_text(
        json.dumps(
            {
                "cwd": ".",
                "lang": "cc",
                "kind": "compile",
                "source": "main.c",
                "rule": None,
                "argv": ["gcc", "-O3", "-c", "main.c"],
            }
        )
        + "\n"
    )
    with pytest.raises(ApptuneError) as e:
        build.check_compile_lines(plan, log)
    assert "main.c" in str(e.value) and "missing -march=native -funroll-loops" in str(e.value)


@pytest.mark.slow
def test_patch_that_does_not_apply(toy_root, tmp_path, gnu_toolchain):
    (toy_root / "patches/toy/0001-comment.patch").write_text(
        "--- a/main.c\n+++ b/main.c\n@@ -1,2 +1,3 @@\n+x\n no such line\n no such line either\n"
    )
    plan = _plan("baseline", gnu_toolchain)
    tarball = sources.fetch(recipes.load_recipe("toy"))
    stage = tmp_path / "stage"
    stage.mkdir()
    with pytest.raises(ApptuneError) as e:
        build.build(plan, tarball, stage)
    # the file inside the patch that failed is the field
    assert str(e.value) == (
        "tree/patches/toy/0001-comment.patch: main.c: hunk #1 does not apply at line 1 "
        "(the patch does not apply to toy 1.0)"
    )
    assert not (stage / "provenance.json").exists()


@pytest.mark.slow
def test_patch_for_a_file_the_source_lacks_names_it(toy_root, tmp_path, gnu_toolchain):
    (toy_root / "patches/toy/0001-comment.patch").write_text(
        PATCH + "--- a/util/extra.c\n+++ b/util/extra.c\n@@ -1,1 +1,1 @@\n-old\n+new\n"
    )
    plan = _plan("baseline", gnu_toolchain)
    tarball = sources.fetch(recipes.load_recipe("toy"))
    stage = tmp_path / "stage"
    stage.mkdir()
    with pytest.raises(ApptuneError) as e:
        build.build(plan, tarball, stage)
    assert str(e.value).startswith(
        "tree/patches/toy/0001-comment.patch: util/extra.c: file to patch not found"
    )


def test_patch_failures_are_read_from_patchs_output():
    out = (
        "checking file a.c\nHunk #1 FAILED at 1.\nHunk #3 FAILED at 40.\n2 out of 3 hunks FAILED\n"
        "checking file b.c\nReversed (or previously applied) patch detected!  Skipping patch.\n"
        "can't find file to patch at input line 16\nPerhaps you used the wrong -p or --strip "
        "option?\n"
        "The text leading up to this was:\n--------------------------\n|--- a/src/c.c\t2020-01-01\n"
        "|+++ b/src/c.c\t2020-01-02\n--------------------------\nNo file to patch.  Skipping "
        "patch.\n"
    )
    assert build.patch_failures(out) == [
        ("a.c", "hunk #1 does not apply at line 1"),
        ("a.c", "hunk #3 does not apply at line 40"),
        ("b.c", "already applied (or reversed)"),
        ("src/c.c", "file to patch not found (a wrong 'strip', or not in this version)"),
    ]


@pytest.mark.slow
def test_build_failure_is_one_line(toy_root, tmp_path, gnu_toolchain, capsys):
    (toy_root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ cflags | makeflags }} -Werror=this-is-not-a-flag\n"
    )
    plan = _plan("baseline", gnu_toolchain)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    tarball = sources.fetch(recipes.load_recipe("toy"))
    stage = tmp_path / "stage"
    stage.mkdir()
    rc = build.main(
        ["--plan", str(tmp_path / "plan.json"), "--source", str(tarball), "--stage", str(stage)]
    )
    assert rc == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("apptune: error: ") and "make exited" in last


def test_make_flags_quotes_for_make_and_shell():
    assert (
        build.make_flags(["-O2", "-DNAME=a b", "-Wl,$ORIGIN"]) == "-O2 '-DNAME=a b' '-Wl,$$ORIGIN'"
    )
