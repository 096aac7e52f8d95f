"""Sources (mirror, cache, checksum), patches, and a real build of the toy app."""

import hashlib
import io
import json
import os
import shutil
import tarfile

import pytest
from conftest import PATCH, toy_component

from apptune.core.builds import compilelines, patching, sources, steps
from apptune.core.data import inputs, recipes
from apptune.errors import ApptuneError


def test_mirror_then_cache(toy_root, tmp_path):
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    assert p.is_file() and p.parent == tmp_path / "cache" / "sources"
    # the cache is used when the mirror is gone
    shutil.rmtree(tmp_path / "mirror")
    assert sources.fetch(r) == p


def test_a_corrupted_cached_copy_is_kept_aside_and_fetched_again(toy_root, tmp_path, capsys):
    good = (tmp_path / "mirror" / "toy-1.0.tar.gz").read_bytes()
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    p.write_bytes(b"bit rot")
    rot = hashlib.sha256(b"bit rot").hexdigest()
    kept = tmp_path / "cache" / "sources" / "by-sha256" / rot / "toy-1.0.tar.gz"
    # no mirror, and the origin cannot be reached: the error says where the copy is kept
    (tmp_path / "mirror" / "toy-1.0.tar.gz").rename(tmp_path / "origin.tar.gz")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    assert not p.exists() and kept.read_bytes() == b"bit rot"
    assert "download of toy-1.0.tar.gz failed" in str(e.value)
    assert f"(the cached copy, sha256 {rot}, is kept as {kept})" in str(e.value)
    out = capsys.readouterr().out
    assert f"cached {p} has sha256 {rot}, not the pinned {r.source.sha256}" in out
    # with the origin reachable, the fetch heals the cache
    p.write_bytes(b"bit rot")
    r = r.model_copy(
        update={
            "source": r.source.model_copy(update={"url": (tmp_path / "origin.tar.gz").as_uri()})
        }
    )
    assert sources.fetch(r) == p and p.read_bytes() == good
    assert f"kept it as {kept}" in capsys.readouterr().out


def test_a_download_that_does_not_match_is_kept_and_named(toy_root, tmp_path, monkeypatch):
    shutil.rmtree(tmp_path / "mirror")
    # the origin serves another release (no network here: the download is the stand-in)
    monkeypatch.setattr(
        sources, "_download", lambda uri, dest: dest.write_bytes(b"another release")
    )
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    got = hashlib.sha256(b"another release").hexdigest()
    kept = tmp_path / "cache" / "sources" / "by-sha256" / got / "toy-1.0.tar.gz"
    assert str(e.value) == (
        f"tree/build-recipes/toy.yaml: source.sha256: the download of toy-1.0.tar.gz has "
        f"sha256 {got}, not the pinned {r.source.sha256}; kept it as {kept} (if the pin is "
        "mistyped, correct it: the kept copy is used)"
    )
    assert kept.read_bytes() == b"another release"
    assert not (tmp_path / "cache" / "sources" / "toy-1.0.tar.gz").exists()


def test_a_bad_mirror_copy_is_named_with_both_hashes_and_how_to_replace_it(toy_root, tmp_path):
    bad = tmp_path / "mirror" / "toy-1.0.tar.gz"
    bad.write_bytes(b"not the tarball")
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        sources.fetch(r)
    got = hashlib.sha256(b"not the tarball").hexdigest()
    assert str(e.value) == (  # the path shown relative to the working directory
        "mirror/toy-1.0.tar.gz: sha256: this copy (in $APPTUNE_SOURCE_MIRROR) is not the "
        f"tarball build-recipes/toy.yaml pins: expected {r.source.sha256}, got {got}; replace it "
        f"with the file whose sha256 is {r.source.sha256}, or remove it and apptune "
        "downloads it"
    )
    assert not (tmp_path / "cache" / "sources" / "toy-1.0.tar.gz").exists()
    assert bad.read_bytes() == b"not the tarball"  # the mirror is the user's: left alone


def test_a_bad_mirror_copy_does_not_block_a_good_cached_one(toy_root, tmp_path, capsys):
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    good = p.read_bytes()
    bad = tmp_path / "mirror" / "toy-1.0.tar.gz"
    bad.write_bytes(b"truncated")
    capsys.readouterr()
    assert sources.fetch(r) == p and p.read_bytes() == good
    out = capsys.readouterr().out.strip().splitlines()
    got = hashlib.sha256(b"truncated").hexdigest()
    assert out == [
        f"apptune: warning: mirror copy {bad} has sha256 {got}, not the pinned "
        f"{r.source.sha256}: using the good copy in the download cache; replace the "
        f"mirror's copy with it: cp {p} {bad}"
    ]


def test_a_mistyped_pin_keeps_the_good_copy_under_its_own_hash(toy_root, tmp_path, capsys):
    r = recipes.load_recipe("toy")
    p = sources.fetch(r)
    good, sha = p.read_bytes(), r.source.sha256
    shutil.rmtree(tmp_path / "mirror")  # a cluster without the mirror and without internet
    typo = r.model_copy(update={"source": r.source.model_copy(update={"sha256": "0" * 64})})
    with pytest.raises(ApptuneError) as e:
        sources.fetch(typo)
    kept = tmp_path / "cache" / "sources" / "by-sha256" / sha / "toy-1.0.tar.gz"
    assert kept.read_bytes() == good
    assert "download of toy-1.0.tar.gz failed" in str(e.value)
    assert f"(the cached copy, sha256 {sha}, is kept as {kept})" in str(e.value)
    assert f"kept it as {kept}" in capsys.readouterr().out
    # the pin corrected: the kept copy is used, nothing is downloaded
    assert sources.fetch(r) == p and p.read_bytes() == good and not kept.exists()


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
    prov = steps.build(_plan("tuned", gnu_toolchain), tarball, stage)
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
        compilelines.check_compile_lines(plan, log)
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
        steps.build(plan, tarball, stage)
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
        steps.build(plan, tarball, stage)
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
    assert patching.patch_failures(out) == [
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
    rc = steps.main(
        ["--plan", str(tmp_path / "plan.json"), "--source", str(tarball), "--stage", str(stage)]
    )
    assert rc == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("apptune: error: ") and "make exited" in last


def test_make_flags_quotes_for_make_and_shell():
    assert (
        steps.make_flags(["-O2", "-DNAME=a b", "-Wl,$ORIGIN"]) == "-O2 '-DNAME=a b' '-Wl,$$ORIGIN'"
    )


# ----------------------------------------------------------------------- hostile tarballs
def _tarball(path, members) -> None:
    """A tarball of (name, kind, text or link target) members, kind file/symlink/hardlink."""
    kinds = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE}
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, what in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = what.encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.type = kinds[kind]
                info.linkname = what
                tf.addfile(info)


def _links_out(tree) -> list[str]:
    top = os.path.realpath(tree)
    return [
        str(p)
        for p in tree.rglob("*")
        if p.is_symlink() and not os.path.realpath(p).startswith(top + os.sep)
    ]


def test_a_hard_link_to_a_left_out_symlink_writes_nothing_outside(
    toy_root, tmp_path, gnu_toolchain, capsys
):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    t = tmp_path / "evil.tar.gz"
    _tarball(
        t,
        [
            ("toy-1.0/main.c", "file", "int main(void) { return 0; }\n"),
            ("toy-1.0/evil", "symlink", str(victim)),
            # the build's template is rendered to config.mk: through the link, before
            ("toy-1.0/config.mk", "hardlink", "toy-1.0/evil"),
        ],
    )
    src = tmp_path / "stage" / "src"
    skipped = sources.unpack(t, src, 1)
    assert [s.split(" ->")[0] for s in skipped] == ["evil", "config.mk"]
    assert _links_out(src) == [] and not (src / "config.mk").exists()
    shims = {"cc": "cc", "cxx": "c++", "ftn": "gfortran"}
    steps.render_templates(recipes.load_recipe("toy"), _plan("baseline", gnu_toolchain), src, shims)
    assert victim.read_text() == "precious\n"
    assert not (src / "config.mk").is_symlink() and "CC = cc" in (src / "config.mk").read_text()


@pytest.mark.parametrize("target", ["/etc/passwd", "../etc/passwd", "toy-1.0/no-such-file"])
def test_a_hard_link_to_no_file_of_the_archive_is_one_error(tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    t = tmp_path / "evil.tar.gz"
    _tarball(t, [("toy-1.0/a.c", "file", "x\n"), ("toy-1.0/b.c", "hardlink", target)])
    with pytest.raises(ApptuneError) as e:
        sources.unpack(t, tmp_path / "src", 1)
    assert str(e.value) == (
        f"evil.tar.gz: toy-1.0/b.c: a hard link to {target}, which is not a file unpacked "
        "before it inside the source tree: refusing to unpack"
    )


def test_links_the_extraction_filter_let_through_are_caught_in_the_tree(tmp_path, monkeypatch):
    """Whatever the Python's tarfile lets through, the unpacked tree is checked itself."""
    monkeypatch.chdir(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    t = tmp_path / "app.tar.gz"
    _tarball(t, [("app-1/a.c", "file", "x\n")])
    extractall = tarfile.TarFile.extractall
    sneak = {"symlink": True}

    def leaky(self, path=".", members=None, *, numeric_owner=False, filter=None):
        extractall(self, path, members, numeric_owner=numeric_owner, filter=filter)
        if sneak["symlink"]:
            os.symlink(outside, os.path.join(path, "Make.inc"))
        else:
            os.link(outside, os.path.join(path, "Make.inc"))

    monkeypatch.setattr(tarfile.TarFile, "extractall", leaky)
    skipped = sources.unpack(t, tmp_path / "src", 1)
    assert skipped == [f"Make.inc -> {outside}"] and _links_out(tmp_path / "src") == []
    sneak["symlink"] = False
    with pytest.raises(ApptuneError) as e:
        sources.unpack(t, tmp_path / "src2", 1)
    assert str(e.value) == (
        "app.tar.gz: Make.inc: unpacked as a hard link to a file outside the source tree: "
        "refusing to build from it"
    )
    assert not (tmp_path / "src2" / "Make.inc").exists() and outside.read_text() == "precious\n"


def test_generated_files_replace_links_and_stay_inside_the_tree(toy_root, tmp_path, gnu_toolchain):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.mk").symlink_to(victim)
    shims = {"cc": "cc", "cxx": "c++", "ftn": "gfortran"}
    recipe, plan = recipes.load_recipe("toy"), _plan("baseline", gnu_toolchain)
    steps.render_templates(recipe, plan, src, shims)
    assert victim.read_text() == "precious\n" and not (src / "config.mk").is_symlink()
    # a template's destination whose directory leads out of the tree is refused
    (src / "conf").symlink_to(tmp_path)
    t = recipe.build.templates[0].model_copy(update={"dest": "conf/victim"})
    recipe.build.templates[0] = t
    with pytest.raises(ApptuneError) as e:
        steps.render_templates(recipe, plan, src, shims)
    assert str(e.value) == (
        "tree/build-recipes/toy.yaml: build.templates[0].dest: conf/victim leads outside the "
        "source tree (an absolute path, '..' or a symbolic link on the way)"
    )
    assert victim.read_text() == "precious\n"
    # an input file is written into the run's directory the same way
    run = tmp_path / "run"
    run.mkdir()
    (run / "params.txt").symlink_to(victim)
    inputs.render("toy", "ci", run, ranks=1)
    assert victim.read_text() == "precious\n" and (run / "params.txt").read_text() == "n=1000000\n"


def test_a_python_without_the_extraction_filter_unpacks_with_apptunes_own(tmp_path, monkeypatch):
    """Debian 12's python3 is 3.11.2, before tarfile's data filter: apptune's own filter
    does its work (links and paths leading out, devices), and the tree check after it."""
    monkeypatch.delattr(tarfile, "data_filter")
    t = tmp_path / "app.tar.gz"
    _tarball(
        t,
        [
            ("app-1/a.c", "file", "x\n"),
            ("app-1/ok", "symlink", "a.c"),
            ("app-1/out", "symlink", "/etc/passwd"),
            ("app-1/up", "symlink", "../../victim"),
            ("app-1/via", "hardlink", "app-1/out"),
        ],
    )
    skipped = sources.unpack(t, tmp_path / "src", 1)
    src = tmp_path / "src"
    assert (src / "a.c").read_text() == "x\n" and os.readlink(src / "ok") == "a.c"
    assert sorted(skipped) == [
        "out -> /etc/passwd",
        "up -> ../../victim",
        "via -> out (a hard link to it)",
    ]
    assert _links_out(src) == [] and not (src / "via").exists()
    bad = tmp_path / "bad.tar.gz"
    _tarball(bad, [("app-1/../../escaped", "file", "x\n")])
    with pytest.raises(ApptuneError, match="a path outside the source tree"):
        sources.unpack(bad, tmp_path / "src2", 1)
    assert not (tmp_path / "escaped").exists()


def test_a_sources_components_are_fetched_pinned_and_unpacked_into_their_directory(
    toy_root, tmp_path
):
    extra = toy_component(toy_root, tmp_path / "mirror", {"ref/expected.txt": "42\n"})
    sha = hashlib.sha256(extra).hexdigest()
    r = recipes.load_recipe("toy")
    main = sources.fetch(r)
    assert (main.parent / "toy-tests.tar.gz").is_file()
    src = tmp_path / "src"
    sources.unpack(main, src, 1)
    got = steps.unpack_components(r, main, src)
    assert (src / "tests/ref/expected.txt").read_text() == "42\n"
    assert got == [{"file": "toy-tests.tar.gz", "sha256": sha}]
    ident = steps.source_identity(r, main)
    assert ident.endswith(";" + sha) and ident.startswith(recipes.sha256_file(main))
    # a component that does not match its pin is named by its field
    (tmp_path / "mirror" / "toy-tests.tar.gz").write_bytes(extra + b"x")
    (main.parent / "toy-tests.tar.gz").unlink()
    with pytest.raises(ApptuneError, match="is not the tarball"):
        sources.fetch(r)
