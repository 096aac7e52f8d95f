"""`apptune new` takes a source only from where its help says (an https:// address, or
file:// for a tarball on this machine), its names as names; it writes what each compiler
family needs for the languages it finds; a Debian tarball that cannot be fetched names the
ways out; `apptune bless --new` writes no path of this machine into the reference."""

import hashlib
import textwrap
import urllib.request

import pytest
from conftest import TOY_ACC, TOY_MAIN, make_tarball
from test_new_app import C_APP, SHOWSRC, SKELETON, VALUES, first_run, new, recipe_data

from apptune import cli
from apptune.core.data import recipes
from apptune.core.data.recipes import Toolchain
from apptune.errors import ApptuneError
from apptune.tools import scaffold

SHA = "0" * 64


@pytest.fixture
def tree(toy_root, monkeypatch):
    """The toy tree as the current directory (messages name files relative to it)."""
    monkeypatch.chdir(toy_root)
    return toy_root


def cached(tmp_path) -> list:
    """The files in the download cache (its lock files aside)."""
    return [f for f in (tmp_path / "cache").rglob("*") if f.is_file() and f.suffix != ".lock"]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("nothing may be fetched")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--url", "http://example.org/demo-1.tar.gz", "--sha256", SHA],
            "--url: 'http://example.org/demo-1.tar.gz' must start with https:// (or file:// for "
            "a tarball on this machine): http:// travels unencrypted",
        ),
        (
            ["--url", "ftp://example.org/demo-1.tar.gz", "--sha256", SHA],
            "--url: 'ftp://example.org/demo-1.tar.gz' must start with https:// (or file:// for "
            "a tarball on this machine): ftp:// travels unencrypted",
        ),
        (
            ["--url", "https://example.org/demo-1.tar.gz", "--sha256", SHA, "--file", "../x"],
            "--file: '../x' must be a tarball's file name (no directory: no '/'), ending in "
            ".tar.gz, .tar.xz, .tar.bz2, .tar.zst, .tgz or .tar",
        ),
        (
            ["--url", "https://example.org/d.tar.gz", "--sha256", SHA, "--file", "../x.tar.gz"],
            "--file: '../x.tar.gz' must be a tarball's file name (no directory: no '/'), ending "
            "in .tar.gz, .tar.xz, .tar.bz2, .tar.zst, .tgz or .tar",
        ),
        (
            ["--url", "https://example.org/demo-1.tar.gz", "--sha256", SHA, "--version",
             "../../v"],
            "--version: '../../v' must be a version: letters, digits and . _ + ~ - (e.g. 2.1.0), "
            "starting with a letter or digit",
        ),
        (
            ["--url", "https://example.org/demo-1.tar.gz", "--sha256", SHA, "--version",
             "1\nname: evil"],
            "--version: '1\\nname: evil' must be a version: letters, digits and . _ + ~ - (e.g. "
            "2.1.0), starting with a letter or digit",
        ),
        (
            ["--url", "https://example.org/download?id=7", "--sha256", SHA],
            "--file: the URL's last part 'download' must be a tarball's file name (no "
            "directory: no '/'), ending in .tar.gz, .tar.xz, .tar.bz2, .tar.zst, .tgz or .tar: "
            "give it with --file",
        ),
    ],
)  # fmt: skip
def test_a_source_from_elsewhere_is_refused_naming_the_option(
    tree, tmp_path, capsys, no_network, args, line
):
    assert cli.main(["new", "demo", *args]) == 2
    assert capsys.readouterr().err == f"apptune: error: {line}\n"
    assert cached(tmp_path) == []
    assert not (tree / "build-recipes/demo.yaml").exists()


def test_a_local_file_that_is_not_a_tarball_is_not_copied(tree, tmp_path, capsys):
    """file:///etc/passwd with its own sha256 and a tarball's name: it is no tarball, and
    nothing of it reaches the download cache."""
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    sha = hashlib.sha256(passwd.read_bytes()).hexdigest()
    argv = ["new", "demo", "--url", passwd.as_uri(), "--sha256", sha, "--file", "d-1.tar.gz"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        f"apptune: error: --url: {passwd} is not a tarball: nothing copied\n"
    )
    assert cached(tmp_path) == []
    # and without --file: its name is no tarball's
    assert cli.main(["new", "demo", "--url", passwd.as_uri(), "--sha256", sha]) == 2
    assert "--file: the URL's last part 'passwd' must be a tarball's file name" in (
        capsys.readouterr().err
    )


def test_a_local_tarball_is_taken(tree, tmp_path, capsys):
    """file:// as its help and the docs say: a tarball on this machine, checked first."""
    assert new(tmp_path, {**C_APP, "Makefile": ""}) == 0
    assert recipe_data(tree)["source"]["url"].startswith("file://")


@pytest.mark.parametrize("url", ["http://example.org/toy-1.0.tar.gz", "ftp://x/toy-1.0.tar.gz"])
def test_a_recipe_with_an_unencrypted_url_is_a_data_problem(tree, url):
    f = tree / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("https://example.invalid/toy-1.0.tar.gz", url))
    with pytest.raises(ApptuneError) as e:
        recipes.load_recipe("toy")
    assert e.value.field == "source.url" and "must start with https://" in e.value.message


# ------------------------------------------------------------------ compiler families
LLVM = Toolchain("llvm", "llvm", "mpicc", "mpicxx", "mpifort", "openmpi", "3.1", "openblas")
FILLED = """\
run:
  executable: demo
  args: []
  output: {file: stdout, format: regex, patterns: {x: {pattern: 'x=(\\S+)'}}}
  figures: {t: {field: x, unit: s, better: lower}}
"""


def _filled(tree):
    """The scaffolded recipe with its FILL IN values written, loaded."""
    f = tree / "build-recipes/demo.yaml"
    head = f.read_text().split("\nrun:\n", 1)[0]
    tail = f.read_text().split("\ntiers:\n", 1)[1]
    f.write_text(head + "\n" + FILLED + "tiers:\n" + tail)
    return recipes.load_recipe("demo")


@pytest.mark.parametrize(
    "sources, where",
    [
        ({"main.f90": "", "Makefile": ""}, "ldflags"),
        ({"main.f90": "", "acc.c": TOY_ACC, "Makefile": ""}, "fflags"),
        ({"main.F90": "", "CMakeLists.txt": ""}, "ldflags"),
    ],
)
def test_fortran_gets_flangs_link_flag_under_llvm(tree, tmp_path, capsys, sources, where):
    """flang-new 16 links executables only with -flang-experimental-exec (an llvm build of a
    scaffolded Fortran code stopped at `cannot find -lFortran_main`): written as every
    shipped Fortran recipe has it, with the Fortran flags where clang links C beside it."""
    assert new(tmp_path, sources) == 0
    d = recipe_data(tree)
    assert d["build"]["family_flags"] == {"llvm": {where: ["-flang-experimental-exec"]}}
    plan = recipes.resolve(_filled(tree), "baseline", LLVM).to_dict()
    key = "app_ldflags" if where == "ldflags" else "app_fflags"
    assert "-flang-experimental-exec" in plan[key], plan


def test_c_alone_gets_no_family_flags(tree, tmp_path, capsys):
    assert new(tmp_path, {"main.c": TOY_MAIN, "acc.c": TOY_ACC, "Makefile": ""}) == 0
    assert "family_flags" not in recipe_data(tree)["build"]


# ------------------------------------------------------------------ a Debian tarball
def test_a_debian_tarball_apt_cannot_fetch_says_the_ways_out(tree, tmp_path, monkeypatch, capsys):
    """The archive lacks the orig tarball (a 404): the line names the way with --url and the
    pinned sha256, and the local mirror directory."""
    from apptune.core.builds import sources

    sha = hashlib.sha256(make_tarball({"configure": ""}, top="p4est-2.2")).hexdigest()
    monkeypatch.setattr(
        scaffold, "debian_orig", lambda p: scaffold.parse_showsrc(SHOWSRC.format(sha=sha), p)
    )
    monkeypatch.setattr(
        sources,
        "debian_orig_uri",
        lambda r, f=None: "https://deb.example/pool/main/p/p4est/p4est_2.2.orig.tar.xz",
    )

    def not_found(uri, *a, **k):
        raise OSError("HTTP Error 404: Not Found")

    monkeypatch.setattr(urllib.request, "urlopen", not_found)
    assert cli.main(["new", "p4est", "--debian", "p4est"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "apptune: error: --debian: download of p4est_2.2.orig.tar.xz failed: HTTP Error 404"
    )
    assert f"ways out: give another copy of it with --url URL --sha256 {sha}" in line
    mirror = tmp_path / "mirror"
    assert (
        "put p4est_2.2.orig.tar.xz in the local mirror directory $APPTUNE_SOURCE_MIRROR "
        f"(now {mirror})" in line
    )


# ------------------------------------------------------------------ bless --new
def test_bless_new_writes_no_path_of_this_machine(tree, tmp_path, monkeypatch, capsys):
    ref = tree / "reference/toy/ci.yaml"
    ref.write_text(SKELETON)
    run = first_run(tmp_path, VALUES)
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 0
    text = ref.read_text()
    assert str(tmp_path) not in text and "/tmp" not in text
    recorded = next(ln for ln in text.splitlines() if ln.startswith("recorded:"))
    assert "first reference from run run on m-" in recorded, recorded
    assert textwrap.dedent(text).count("\n#") >= 1  # the template's comments kept
