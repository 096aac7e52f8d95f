"""Adding an application: ``apptune new`` writes its files from the source tarball,
``apptune bless --new`` writes its first reference from a run without one.

Unit tests on small synthetic tarballs (file:// URLs, hermetic); two integration tests
follow the walk-throughs of docs/adding-an-application.md literally: one on a synthetic
autotools tarball, one on a real Debian source package (mbw)."""

import difflib
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import timeapp
import yaml
from conftest import TOY_ACC, TOY_MAIN, make_tarball, write_run
from test_sensitivity import LOOP_SHORT

from apptune import cli
from apptune.core.builds import buildcache
from apptune.core.validation import datachecks, validate
from apptune.core.verification import outputs, verify
from apptune.history import records
from apptune.models import OutputSpec, OwnCheck
from apptune.tools import scaffold

REPO = Path(__file__).resolve().parent.parent
GNU = [
    {
        "name": "gnu",
        "extras": {"family": "gnu", "mpi": "openmpi", "mpi_standard": "3.1", "blas": "openblas"},
    }
]
SKELETON = "app: toy\ntier: ci\nrecorded: not yet\nfields: {}\n"


def tarball_url(tmp_path, files: dict, top: str = "demo-2.1") -> tuple[str, str]:
    """A tarball of ``files`` under ``top/`` as a file:// URL, and its sha256."""
    data = make_tarball(files, top=top)
    f = tmp_path / "dist" / f"{top}.tar.gz"
    f.parent.mkdir(exist_ok=True)
    f.write_bytes(data)
    return f.as_uri(), hashlib.sha256(data).hexdigest()


def new(tmp_path, files: dict, *extra: str, app: str = "demo") -> int:
    url, sha = tarball_url(tmp_path, files)
    return cli.main(["new", app, "--url", url, "--sha256", sha, *extra])


def fill(text: str, key: str, value: str) -> str:
    """Replace the ``key: "FILL IN ..."`` line by ``key: value`` (value lines indented under it)."""
    pat = re.compile(r"(?m)^( *)" + re.escape(key) + r': "FILL IN[^\n]*$')
    assert pat.search(text), key
    return pat.sub(lambda m: m.group(1) + key + ": " + value.replace("\n", "\n" + m.group(1)), text)


def recipe_data(root, app="demo") -> dict:
    return yaml.safe_load((root / f"build-recipes/{app}.yaml").read_text())


C_APP = {"main.c": TOY_MAIN, "acc.c": TOY_ACC}


@pytest.fixture
def tree(toy_root, monkeypatch):
    """The toy tree as the current directory (messages name files relative to it)."""
    monkeypatch.chdir(toy_root)
    return toy_root


# --------------------------------------------------------------------------- apptune new
@pytest.mark.parametrize(
    "top, kind, system, first",
    [
        ({"CMakeLists.txt": ""}, "cmake", "cmake", "cmake"),
        ({"configure": "", "Makefile.in": ""}, "configure", "make", "./configure"),
        ({"configure.ac": "", "Makefile.am": ""}, "autoreconf", "make", "autoreconf"),
        ({"Makefile": ""}, "make", "make", None),
        # CMake wins over a configure script beside it (precedence of BUILD_FILES)
        ({"CMakeLists.txt": "", "configure": ""}, "cmake", "cmake", "cmake"),
    ],
)
def test_new_guesses_the_build_system_from_the_top_of_the_source(
    tree, tmp_path, capsys, top, kind, system, first
):
    assert new(tmp_path, {**C_APP, **top}) == 0
    out = capsys.readouterr().out
    assert f"build {kind} (guessed from " in out
    b = recipe_data(tree)["build"]
    assert b["system"] == system and b["languages"] == ["c"]
    if first is None:
        assert "CC={{ cc }}" in b["args"] and not b.get("steps")
    else:
        assert b["steps"][0]["command"][0] == first
        assert any("{{ cc }}" in w for s in b["steps"] for w in s.get("command") or [])
    if kind == "cmake":
        assert b["products"] == [{"src": "_build/demo", "name": "demo"}]


@pytest.mark.parametrize(
    "top", [{"CMakeLists.txt": ""}, {"configure": ""}, {"configure.ac": ""}, {"Makefile": ""}]
)
def test_a_scaffolded_recipe_survives_a_round_trip_edit_unchanged(tree, tmp_path, top):
    """A Fortran and C code's build words are long: written as a flow list over two lines,
    the first round-trip edit (tune, bless) joined them, and the committed recipes' test of
    that failed as soon as a scaffolded recipe was added."""
    from apptune.yamlio import edit_yaml_text

    assert new(tmp_path, {**C_APP, "k.f90": "", **top}) == 0
    text = (tree / "build-recipes/demo.yaml").read_text()
    assert recipe_data(tree)["build"]["languages"] == ["c", "fortran"]
    assert edit_yaml_text(text, lambda d: None) == text


def test_new_guesses_the_languages_and_the_tarballs_top_directory(tree, tmp_path, capsys):
    assert new(tmp_path, {**C_APP, "Makefile": "", "src/k.f90": "", "src/w.cpp": ""}) == 0
    d = recipe_data(tree)
    assert d["build"]["languages"] == ["c", "cxx", "fortran"]
    assert d["source"]["strip_components"] == 1 and d["version"] == "2.1"
    assert {"FC={{ ftn }}", "CXX={{ cxx }}"} <= set(d["build"]["args"])


def test_new_names_the_fortran_files_an_llvm_build_must_patch_for_mpi(tree, tmp_path, capsys):
    """flang-new cannot read the gfortran-built ``mpi`` module Debian's MPI ships: the files
    that ``use`` it are named, in the output and in the recipe, once; ``mpif.h`` is fine."""
    files = {
        "Makefile": "",
        "src/a.f90": "program a\n  use mpi\nend program\n",
        "src/b.F90": "module b\n   USE, INTRINSIC :: iso_c_binding\n   Use mpi_f08\nend module\n",
        "src/c.f90": "subroutine c\n  include 'mpif.h'\n  ! use mpi in a comment\nend\n",
        "src/mpi_use.c": "/* use mpi */\n",
    }
    assert new(tmp_path, files) == 0
    out = capsys.readouterr().out
    assert "2 Fortran file(s) `use mpi` (src/a.f90, src/b.F90)" in out
    assert (
        "An llvm variant: src/a.f90, src/b.F90 `use mpi`"
        in (tree / "build-recipes/demo.yaml").read_text()
    )


def test_new_without_a_build_file_says_what_the_top_holds(tree, tmp_path, capsys):
    assert new(tmp_path, {**C_APP, "README": ""}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "apptune: error: --build-system: none of CMakeLists.txt"
    )
    assert (
        "(it has: README, acc.c, main.c): give --build-system cmake|configure|autoreconf|make"
        in err
    )
    assert not (tree / "build-recipes/demo.yaml").exists()
    # --build-system decides where the guess cannot
    assert new(tmp_path, {**C_APP, "README": ""}, "--build-system", "make") == 0
    assert "build make (given with --build-system)" in capsys.readouterr().out


def test_new_refuses_to_overwrite_any_file(tree, tmp_path, capsys):
    ref = tree / "reference/demo/ci.yaml"
    ref.parent.mkdir(parents=True)
    ref.write_text("mine\n")
    assert new(tmp_path, {**C_APP, "Makefile": ""}) == 2
    err = capsys.readouterr().err
    assert (
        err == "apptune: error: reference/demo/ci.yaml: already exists: "
        "apptune new never overwrites a file\n"
    )
    assert ref.read_text() == "mine\n"
    assert (
        not (tree / "build-recipes/demo.yaml").exists()
        and not (tree / "reframe-checks/demo").exists()
    )
    ref.unlink()
    assert new(tmp_path, {**C_APP, "Makefile": ""}) == 0
    written = {f: f.read_text() for f in scaffold.targets("demo")}
    capsys.readouterr()
    assert new(tmp_path, {**C_APP, "Makefile": ""}) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("apptune: error: build-recipes/demo.yaml: already exists")
        and err.count("\n") == 1
    )
    assert (
        "also reframe-checks/demo/demo.py, inputs/demo/ci/input.yaml, reference/demo/ci.yaml, "
        "reference/demo/sensitivity/faults.yaml" in err
    )
    assert {f: f.read_text() for f in scaffold.targets("demo")} == written


def test_generated_files_validate_once_the_run_command_and_figures_are_filled(
    tree, tmp_path, capsys
):
    assert new(tmp_path, {**C_APP, "Makefile": ""}) == 0
    out = capsys.readouterr().out
    for step in (
        "apptune run --mode dev -c reframe-checks/demo",
        "apptune bless --new runs/latest",
        "run.args:",
        "run.output.patterns:",
        "run.figures:",
    ):
        assert step in out
    site, _ = validate.load_site_facts(environments=GNU)
    # as generated: exactly the values a person must write, each one line naming its field
    got = [str(p) for p in datachecks.app_problems("demo", site)]
    assert [re.sub(r": not filled in yet: .*", "", g) for g in got] == [
        "build-recipes/demo.yaml: run.args",
        "build-recipes/demo.yaml: run.output.patterns",
        "build-recipes/demo.yaml: run.figures",
    ]
    f = tree / "build-recipes/demo.yaml"
    text = fill(f.read_text(), "args", '["1000"]')
    text = fill(
        text, "patterns", "\n  n: {pattern: '^n=(\\d+)'}\n  rate: {pattern: '^rate=(\\S+)'}"
    )
    f.write_text(text)
    got = [str(p) for p in datachecks.app_problems("demo", site)]
    assert got == [
        "build-recipes/demo.yaml: run.figures: not filled in yet: the measured numbers, one "
        "NAME: {field: FIELD, unit: UNIT, better: lower|higher} each (example below)"
    ]
    f.write_text(fill(text, "figures", "\n  rate: {field: rate, unit: op/s, better: higher}"))
    assert datachecks.app_problems("demo", site) == []
    # the planted fault is asked for too, and never keeps the application from running
    found = validate.check()
    assert "demo" not in found.bad_apps
    assert not [p for p in found.of_runs() if "demo" in str(p)]
    assert [str(p) for p in found.faults["demo"]] == [
        "reference/demo/sensitivity/faults.yaml: faults.planted.what: not filled in yet: what is "
        "planted and where, in a sentence (the docs' table names it so)",
        "reference/demo/sensitivity/faults.yaml: faults.planted.patch: not filled in yet: a "
        "patch under patches/demo/faults/ (or, instead of patch, set: {PARAMETER: VALUE} of the "
        "ci input)",
    ]
    faults_file = tree / "reference/demo/sensitivity/faults.yaml"
    text = fill(faults_file.read_text(), "what", "the sum's loop without its first term")
    faults_file.write_text(fill(text, "patch", "loop-short.patch"))
    assert [str(p) for p in datachecks.fault_problems("demo")] == [
        "reference/demo/sensitivity/faults.yaml: faults.planted.patch: "
        "patches/demo/faults/loop-short.patch is missing"
    ]
    (tree / "patches/demo/faults").mkdir(parents=True)
    (tree / "patches/demo/faults/loop-short.patch").write_text(LOOP_SHORT)
    assert datachecks.fault_problems("demo") == []
    # a figure naming a field no pattern gives is still caught after filling
    f.write_text(f.read_text().replace("field: rate", "field: speed"))
    assert [str(p) for p in datachecks.app_problems("demo", site)] == [
        "build-recipes/demo.yaml: run.figures.rate.field: 'speed': no output produces this field "
        "(run.output gives: n, rate)"
    ]


def test_the_check_has_exactly_the_shape_of_hpccs(tree, tmp_path):
    assert new(tmp_path, {**C_APP, "Makefile": ""}, app="my-app") == 0
    gen = (tree / "reframe-checks/my-app/my_app.py").read_text()
    hpcc = (
        (REPO / "reframe-checks/hpcc/hpcc.py")
        .read_text()
        .replace("HPCC", "MyApp")
        .replace('"hpcc"', '"my-app"')
    )
    assert 'RECIPE = load_app("my-app")' in gen
    assert buildcache.syntax_of(gen) == buildcache.syntax_of(hpcc)


def test_the_check_written_passes_make_lint(tree, tmp_path):
    """A new app's check is lint-clean and formatted as ruff (make lint) wants it."""
    assert new(tmp_path, {**C_APP, "Makefile": ""}, app="my-app") == 0
    check = tree / "reframe-checks/my-app/my_app.py"
    for args in (["check"], ["format", "--check", "--diff"]):
        cmd = [sys.executable, "-m", "ruff", *args, "--config", str(REPO / "pyproject.toml")]
        out = subprocess.run([*cmd, str(check)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


SHOWSRC = """\
Package: p4est
Binary: libp4est-dev
Version: 2.2-3
Files:
 daac5f9ae57ed97c376057c9deb18ced 625900 p4est_2.2.orig.tar.xz
Checksums-Sha256:
 1111111111111111111111111111111111111111111111111111111111111111 2000 p4est_2.2-3.dsc
 {sha} 625900 p4est_2.2.orig.tar.xz
 2222222222222222222222222222222222222222222222222222222222222222 9000 p4est_2.2-3.debian.tar.xz

Package: p4est
Version: 2.2-1
Checksums-Sha256:
 3333333333333333333333333333333333333333333333333333333333333333 625900 p4est_2.2.orig.tar.xz
"""


def test_showsrc_gives_the_newest_orig_tarball():
    d = scaffold.parse_showsrc(SHOWSRC.format(sha="a" * 64), "p4est")
    assert (d.package, d.version, d.file, d.sha256, d.upstream_version) == (
        "p4est",
        "2.2-3",
        "p4est_2.2.orig.tar.xz",
        "a" * 64,
        "2.2",
    )
    native = (
        "Package: tool\nVersion: 1:3.0\nChecksums-Sha256:\n " + "b" * 64 + " 10 tool_3.0.tar.xz\n"
    )
    d = scaffold.parse_showsrc(native, "tool")
    assert (d.file, d.upstream_version) == ("tool_3.0.tar.xz", "3.0")


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "--debian: no Debian source package 'p4est' (apt-cache showsrc found none"),
        (
            "Package: a\nVersion: 1-1\n\nPackage: b\nVersion: 1-1\n",
            "--debian: 'p4est' is no source package; binary packages of that name come from a, b: "
            "give one of them",
        ),
        (
            "Package: p4est\nVersion: 2.2-3\nChecksums-Sha256:\n "
            + "1" * 64
            + " 5 p4est_2.2-3.dsc\n",
            "--debian: Debian source p4est 2.2-3 lists no orig tarball (files: p4est_2.2-3.dsc)",
        ),
    ],
)
def test_showsrc_without_a_usable_tarball_is_one_line(text, words):
    with pytest.raises(Exception) as e:
        scaffold.parse_showsrc(text, "p4est")
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


def test_new_from_a_debian_package_pins_its_orig_tarball(tree, tmp_path, monkeypatch, capsys):
    """The orig tarball comes from the mirror here (the archive itself in real use)."""
    data = make_tarball({**C_APP, "configure": ""}, top="p4est-2.2")
    (tmp_path / "mirror" / "p4est_2.2.orig.tar.xz").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    monkeypatch.setattr(
        scaffold, "debian_orig", lambda p: scaffold.parse_showsrc(SHOWSRC.format(sha=sha), p)
    )
    assert cli.main(["new", "p4est", "--debian", "p4est"]) == 0
    d = recipe_data(tree, "p4est")
    assert d["source"] == {
        "debian": {"package": "p4est", "version": "2.2-3"},
        "file": "p4est_2.2.orig.tar.xz",
        "sha256": sha,
        "strip_components": 1,
    }
    assert d["version"] == "2.2" and d["build"]["steps"][0]["command"][0] == "./configure"


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["Demo", "--url", "file:///x.tar.gz", "--sha256", "0" * 64],
            "APP: 'Demo' must be lower case letters, digits, '_', '.', '-' (starting with a letter "
            "or digit)",
        ),
        (
            ["demo", "--url", "file:///x/demo-1.tar.gz"],
            "--sha256: give the sha256 of file:///x/demo-1.tar.gz (the pin every fetch is checked "
            "against; sha256sum prints it)",
        ),
        (
            ["demo", "--url", "file:///x/demo-1.tar.gz", "--sha256", "abc"],
            "--sha256: 'abc' is not a sha256 (64 hexadecimal digits)",
        ),
        (
            ["demo", "--url", "file:///x/demo.tar.gz", "--sha256", "0" * 64],
            "--version: no version in the file name demo.tar.gz: give --version",
        ),
        (
            ["demo", "--debian", "demo", "--sha256", "0" * 64],
            "--sha256: only with --url (a Debian source's file and sha256 come from apt-cache "
            "showsrc)",
        ),
        (["demo", "--path", "src/nothing"], "--path: directory {root}/src/nothing does not exist"),
        (
            ["demo", "--path", "/etc"],
            "--path: '/etc' must be a directory of this repository, relative to its "
            "root (e.g. src/NAME)",
        ),
        (
            ["demo", "--url", "file:///x/demo-1.tar.gz", "--sha256", "0" * 64, "--ranks", "0"],
            "--ranks: must be at least 1, not 0",
        ),
        (
            [
                "demo",
                "--url",
                "file:///x/demo-1.tar.gz",
                "--sha256",
                "0" * 64,
                "--build-system",
                "scons",
            ],
            "--build-system: must be one of cmake, configure, autoreconf, make",
        ),
    ],
)
def test_bad_arguments_of_new_are_one_line(tree, capsys, args, line):
    assert cli.main(["new", *args]) == 2
    err = capsys.readouterr().err
    assert err == f"apptune: error: {line.format(root=tree)}\n"


def test_a_tarball_that_does_not_match_its_sha256_is_refused(tree, tmp_path, capsys):
    """A local tarball (file://) is checked before it is copied: a wrong one is not copied,
    not even kept aside (the original is where it was)."""
    url, sha = tarball_url(tmp_path, {**C_APP, "Makefile": ""})
    assert cli.main(["new", "demo", "--url", url, "--sha256", "f" * 64]) == 2
    err = capsys.readouterr().err
    local = tmp_path / "dist/demo-2.1.tar.gz"
    assert err == (
        f"apptune: error: --sha256: {local} has sha256 {sha}, not the pinned {'f' * 64}: "
        "nothing copied\n"
    )
    assert not (tree / "build-recipes/demo.yaml").exists()
    assert not list((tmp_path / "cache").rglob("*.tar.gz"))


def test_new_from_a_directory_of_the_repository(tree, tmp_path, capsys):
    src = tree / "src/demo"
    src.mkdir(parents=True)
    for name, text in {**C_APP, "CMakeLists.txt": ""}.items():
        (src / name).write_text(text)
    assert cli.main(["new", "demo", "--path", "src/demo/"]) == 0
    d = recipe_data(tree)
    assert d["source"] == {"path": "src/demo", "strip_components": 1} and d["version"] == "1.0"
    assert d["build"]["system"] == "cmake"


def test_a_placeholder_in_any_data_file_names_its_field(tree):
    f = tree / "inputs/toy/ci/input.yaml"
    f.write_text(
        f.read_text().replace("parameters: {n: 1000000}", 'parameters: {n: "FILL IN: the size"}')
    )
    site, _ = validate.load_site_facts(environments=GNU)
    assert [str(p) for p in datachecks.app_problems("toy", site)] == [
        "inputs/toy/ci/input.yaml: parameters.n: not filled in yet: the size"
    ]


# --------------------------------------------------------------------------- bless --new
def test_a_reference_without_fields_fails_every_run_saying_what_to_do(tree):
    (tree / "reference/toy/ci.yaml").write_text(SKELETON)
    v = verify.verify("toy", "ci", {"sum": 1.6, "n": 1})
    assert not v.ok and v.summary() == (
        "reference/toy/ci.yaml has no fields yet: `apptune bless --new "
        "RUN_DIR` writes the first reference from this run's values"
    )


def first_run(tmp_path, values: dict, name="run", own_ok=True, variants=("baseline",)) -> Path:
    """A run against the reference skeleton, as ``apptune run`` leaves it: failed in
    sanity, its records holding the parsed values and the real verification."""
    run = write_run(
        tmp_path / name,
        f"uuid-{name}",
        1.0,
        [
            {
                "app": "toy",
                "tier": "ci",
                "environment": "gnu",
                "variant": v,
                "ok": False,
                "figures": {"rate": values.get("rate"), "wall_time": 1.0},
            }
            for v in variants
        ],
    )
    own = [] if own_ok else [OwnCheck(pattern="^converged", message="the solver converged")]
    for f in run.rglob("apptune-result.json"):
        rec = json.loads(f.read_text())
        rec["values"] = values
        rec["verification"] = verify.verify("toy", "ci", values, own, "chatter").to_dict()
        f.write_text(json.dumps(rec))
    return run


VALUES = {"sum": 1.6449330668, "n": 1000000, "rate": 123.5, "eps": 2.5e-14, "host": "node1"}


def test_bless_new_writes_every_field_with_the_default_tolerances(
    tree, tmp_path, capsys, monkeypatch
):
    ref = tree / "reference/toy/ci.yaml"
    ref.write_text(SKELETON)
    run = first_run(tmp_path, VALUES)
    # the plain bless refuses such a run and says what to use
    assert cli.main(["bless", str(run), "--yes"]) == 2
    assert "has no fields yet: `apptune bless --new RUN_DIR`" in capsys.readouterr().err
    # without --yes and a TTY: the diff only
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["bless", "--new", str(run)]) == 0
    cap = capsys.readouterr()
    assert (
        "-fields: {}" in cap.out
        and "+  n: {value: 1000000, abs: 0}" in cap.out
        and "nothing written" in cap.out
    )
    assert "toy/ci: rate left out: a measurement (figure rate), judged against baselines" in cap.err
    assert "toy/ci: host left out: 'node1' is not a number" in cap.err
    assert ref.read_text() == SKELETON
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 0
    text = ref.read_text()
    fields = text.split("fields:\n", 1)[1]
    assert fields == (
        "  sum: {value: 1.6449330668, rel: 1.0e-6}\n  n: {value: 1000000, abs: 0}\n"
        "  eps: {value: 2.5e-14, rel: 1.0e-6}\n"
    )
    assert "first reference from run" in text and "gnu/baseline" in text
    _, loaded = verify.load_reference("toy", "ci")
    assert loaded.fields["eps"].value == 2.5e-14 and loaded.fields["n"].abs == 0
    # the same numbers now verify; a float off by more than 1e-6 relative or a count off by
    # one does not
    assert verify.verify("toy", "ci", VALUES).ok
    assert not verify.verify("toy", "ci", dict(VALUES, sum=1.6449330668 * (1 + 2e-6))).ok
    assert not verify.verify("toy", "ci", dict(VALUES, n=1000001)).ok
    # a second --new is refused: the reference holds fields now
    capsys.readouterr()
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 2
    assert capsys.readouterr().err == (
        "apptune: error: reference/toy/ci.yaml: fields: already holds 3 "
        "field(s): --new writes only a first reference; `apptune bless "
        "RUN_DIR` updates their values\n"
    )


def test_bless_new_on_a_failed_run_names_the_test_and_the_fields(tree, tmp_path, capsys):
    ref = tree / "reference/toy/ci.yaml"
    ref.write_text(SKELETON)
    run = first_run(tmp_path, {"sum": math.nan, "n": 1000000}, own_ok=False)
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        "refused: 1 test(s) cannot give a first reference — TOYCheck %tier=ci "
        "%build.variant=baseline [gnu]: fail in sanity: fields failed: sum = nan (not a finite "
        "number); rate missing from the output (figure rate): own checks failed: expected "
        "“the solver converged”; no line of"
    ) in err
    assert ref.read_text() == SKELETON


def test_bless_new_on_a_run_whose_outputs_did_not_parse(tree, tmp_path, capsys):
    (tree / "reference/toy/ci.yaml").write_text(SKELETON)
    run = first_run(tmp_path, VALUES)
    for f in run.rglob("apptune-result.json"):
        rec = json.loads(f.read_text())
        del rec["values"]
        rec["verification"] = {
            "ok": False,
            "summary": "toy.out: output file was not written (did the run crash?)",
        }
        f.write_text(json.dumps(rec))
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 2
    assert (
        "[gnu]: fail in sanity: its outputs were not parsed: toy.out: output file was not written "
        "(did the run crash?)"
    ) in capsys.readouterr().err


def test_bless_new_only_passing_names_what_it_leaves_out(tree, tmp_path, capsys):
    (tree / "reference/toy/ci.yaml").write_text(SKELETON)
    run = first_run(tmp_path, VALUES, variants=("baseline", "tuned"))
    rec_file = next(
        f
        for f in run.rglob("apptune-result.json")
        if json.loads(f.read_text())["variant"] == "tuned"
    )
    rec = json.loads(rec_file.read_text())
    rec["values"]["n"] = 999999
    rec["values"]["sum"] = math.inf
    rec_file.write_text(json.dumps(rec))
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 2
    assert (
        "%build.variant=tuned [gnu]: fail in sanity: fields failed: sum = inf"
        in capsys.readouterr().err
    )
    assert cli.main(["bless", "--new", str(run), "--yes", "--only-passing"]) == 0
    err = capsys.readouterr().err
    assert (
        "left out: TOYCheck %tier=ci %build.variant=tuned [gnu]: fail in sanity: fields failed: "
        "sum = inf" in err
    )
    assert "n: {value: 1000000, abs: 0}" in (tree / "reference/toy/ci.yaml").read_text()


def test_bless_new_warns_of_variants_the_new_reference_would_fail(tree, tmp_path, capsys):
    (tree / "reference/toy/ci.yaml").write_text(SKELETON)
    run = first_run(tmp_path, VALUES, variants=("baseline", "tuned"))
    rec_file = next(
        f
        for f in run.rglob("apptune-result.json")
        if json.loads(f.read_text())["variant"] == "tuned"
    )
    rec = json.loads(rec_file.read_text())
    rec["values"]["sum"] = 1.6449
    rec_file.write_text(json.dumps(rec))
    assert cli.main(["bless", "--new", str(run), "--yes"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: TOYCheck %tier=ci %build.variant=tuned [gnu]: sum = 1.6449, expected 1.64493 ± "
        "1.64493e-06"
    ) in err and "this reference would fail it" in err
    assert "sum: {value: 1.6449330668, rel: 1.0e-6}" in (tree / "reference/toy/ci.yaml").read_text()


# --------------------------------------------------------------------------- the walk-through
CONFIGURE = """\
#!/bin/sh
# A configure script as autotools packages ship one: VAR=VALUE arguments (and the same
# variables from the environment) are written into config.mk, which the Makefile includes.
CC=${CC:-cc}; CFLAGS=${CFLAGS:--O2}; CPPFLAGS=${CPPFLAGS:-}; LDFLAGS=${LDFLAGS:-}
for a in "$@"; do
  case $a in
    CC=*) CC=${a#CC=} ;; CFLAGS=*) CFLAGS=${a#CFLAGS=} ;;
    CPPFLAGS=*) CPPFLAGS=${a#CPPFLAGS=} ;; LDFLAGS=*) LDFLAGS=${a#LDFLAGS=} ;;
    *=*) ;; *) echo "configure: unknown option $a" >&2; exit 1 ;;
  esac
done
printf 'CC = %s\\nCFLAGS = %s %s\\nLDFLAGS = %s\\n' \\
  "$CC" "$CPPFLAGS" "$CFLAGS" "$LDFLAGS" > config.mk
echo "configure: wrote config.mk"
"""


def _autotools_tarball(dest: Path) -> Path:
    """tests/timeapp.py's program as an autotools-style release tarball (an executable
    ``configure`` at the top, beside the Makefile that includes what it writes)."""
    f = dest / "timeapp-1.0.tar.gz"
    files = {**{k: textwrap.dedent(v) for k, v in timeapp.FILES.items()}, "configure": CONFIGURE}
    with tarfile.open(f, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"timeapp-1.0/{name}")
            info.size, info.mode = len(data), 0o755 if name == "configure" else 0o644
            tf.addfile(info, io.BytesIO(data))
    return f


def _empty_tree(tmp_path):
    """An apptune tree holding only the site config, and ``apptune(*args)`` run in it as a
    person runs it (a fresh download cache, no source mirror): (exit status, output)."""
    root = tmp_path / "tree"
    (root / "build-recipes").mkdir(parents=True)
    shutil.copytree(
        REPO / "site-config",
        root / "site-config",
        symlinks=True,
        ignore=shutil.ignore_patterns("recommended.yaml", "__pycache__"),
    )
    env = dict(os.environ, APPTUNE_ROOT=str(root), APPTUNE_CACHE=str(tmp_path / "cache"))
    env.pop("APPTUNE_SOURCE_MIRROR", None)
    env.pop("APPTUNE_BUILD_CACHE", None)

    def apptune(*args):
        p = subprocess.run(
            [sys.executable, "-m", "apptune", *args],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        return p.returncode, p.stdout + p.stderr

    return root, apptune


@pytest.mark.integration
def test_the_walk_through_adds_an_application_without_editing_its_check(tmp_path):
    """docs/adding-an-application.md, "In 15 minutes", literally: apptune new, fill the
    run command and figures, apptune run --mode dev (fails: no reference yet), apptune
    bless --new, apptune run again (passes)."""
    root, apptune = _empty_tree(tmp_path)
    tarball = _autotools_tarball(tmp_path)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()

    rc, out = apptune("new", "timeapp", "--url", tarball.as_uri(), "--sha256", sha, "--ranks", "1")
    assert rc == 0, out
    assert "build configure (guessed from configure at the top of the source)" in out
    check = root / "reframe-checks/timeapp/timeapp.py"
    check_text = check.read_text()
    rc, out = apptune("validate")
    assert rc == 1 and out.count("not filled in yet") == 5, out

    recipe = root / "build-recipes/timeapp.yaml"
    text = fill(recipe.read_text(), "args", '["1000000"]')
    text = text.replace("    file: stdout\n", "    file: timeapp.out\n")
    text = fill(
        text,
        "patterns",
        "\n  n: {pattern: '^n=(\\d+)'}\n  result: {pattern: '^result=(\\d+)'}\n"
        "  sum: {pattern: '^sum=(\\d+)'}\n  kernel_seconds: {pattern: '^kernel_seconds=(\\S+)'}",
    )
    recipe.write_text(
        fill(text, "figures", "\n  kernel_time: {field: kernel_seconds, unit: s, better: lower}")
    )
    rc, out = apptune("validate")
    assert rc == 1 and out.count("not filled in yet") == 2 and "faults.planted.what" in out, out
    # the planted fault: the recurrence's additive constant one off, as a patch of the source
    kernel = textwrap.dedent(timeapp.FILES["kernel.c"])
    faulted = kernel.replace("1442695040888963407ULL", "1442695040888963405ULL")
    diff = difflib.unified_diff(
        kernel.splitlines(True), faulted.splitlines(True), "a/kernel.c", "b/kernel.c"
    )
    (root / "patches/timeapp/faults").mkdir(parents=True)
    (root / "patches/timeapp/faults/increment.patch").write_text("".join(diff))
    faults_file = root / "reference/timeapp/sensitivity/faults.yaml"
    text = fill(faults_file.read_text(), "what", "the recurrence's increment 2 less (a constant)")
    faults_file.write_text(fill(text, "patch", "increment.patch"))
    rc, out = apptune("validate")
    assert rc == 0, out

    rc, out = apptune("run", "--mode", "dev", "-c", "reframe-checks/timeapp")
    assert rc != 0, out[-3000:]
    assert "reference/timeapp/ci.yaml has no fields yet: `apptune bless --new RUN_DIR`" in out, out[
        -3000:
    ]
    rc, out = apptune("bless", "--new", "runs/latest")
    assert rc == 0 and "+  n: {value: 1000000, abs: 0}" in out and "nothing written" in out, out
    rc, out = apptune("bless", "--new", "runs/latest", "--yes")
    assert rc == 0, out
    assert "kernel_seconds left out: a measurement (figure kernel_time)" in out
    ref = yaml.safe_load((root / "reference/timeapp/ci.yaml").read_text())
    assert (
        ref["fields"]
        == {
            "n": {"value": 1000000, "abs": 0},
            "result": {"value": timeapp.result_value(1000000), "abs": 0},
            "sum": ref["fields"]["sum"],
        }
        and ref["fields"]["sum"]["abs"] == 0
    )

    rc, out = apptune("run", "--mode", "dev", "-c", "reframe-checks/timeapp")
    assert rc == 0, out[-3000:]
    (case,) = [c for c in records.cases(root / "runs/latest") if not c.fixture]
    assert case.result == "pass" and case.verified
    assert len(case.record.verification.fields) == 3
    assert check.read_text() == check_text

    rc, out = apptune("sensitivity", "timeapp")
    assert rc == 0, out[-3000:]
    seen = yaml.safe_load((root / "reference/timeapp/sensitivity/seen.yaml").read_text())
    assert seen["faults"]["planted"]["caught"] and "result" in seen["faults"]["planted"]["by"], out


def doc_values(heading: str) -> dict:
    """The ``run`` values of the first YAML block under ``### heading`` in
    docs/adding-an-application.md: what the walk-through tells a person to fill in."""
    doc = (REPO / "docs/adding-an-application.md").read_text()
    section = doc.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))["run"]


def flow_lines(mapping: dict) -> str:
    """``NAME: {...}`` lines (JSON flow mappings, which YAML reads as they are)."""
    return "".join(f"\n  {k}: {json.dumps(v)}" for k, v in mapping.items())


def test_the_documented_mbw_values_are_what_its_output_gives(tmp_path):
    """The mbw walk-through's patterns, parsed as a run parses them, give its numbers from
    its output as mbw 1.2.2 prints it (mbw.c's printf formats: tab-separated, each test's
    AVG line after its runs)."""
    run = doc_values("A real package: mbw")
    assert run["args"] == ["-n", "4", "64"] and set(run) == {"args", "output", "figures"}
    (tmp_path / "rfm_job.out").write_text(
        "Long uses 8 bytes. Allocating 2*8388608 elements = 134217728 bytes of memory.\n"
        "Using 262144 bytes as blocks for memcpy block copy test.\n"
        "Getting down to business... Doing 4 runs per test.\n"
        + "".join(
            f"{i}\tMethod: {m}\tElapsed: 0.01000\tMiB: 64.00000\tCopy: {r:.3f} MiB/s\n"
            for m, r in (("MEMCPY", 6400.0), ("DUMB", 3200.0), ("MCBLOCK", 6000.0))
            for i in [*range(4), "AVG"]
        )
    )
    spec = OutputSpec(file="stdout", format="regex", **run["output"])
    assert outputs.parse(spec, tmp_path) == {
        "elements": 8388608,
        "bytes": 134217728,
        "block_bytes": 262144,
        "runs": 4,
        "tests": 3,
        "memcpy_mib_s": 6400.0,
    }
    assert run["figures"] == {
        "memcpy_bandwidth": {"field": "memcpy_mib_s", "unit": "MiB/s", "better": "higher"}
    }


@pytest.mark.integration
def test_the_walk_through_adds_a_debian_package_the_project_does_not_use(tmp_path):
    """The walk-through of docs/adding-an-application.md ("A real package: mbw") on a
    real Debian 12 source package: ``apptune new mbw --debian mbw`` finds, fetches and
    pins its orig tarball through the machine's deb-src (ci/bootstrap.sh derives it),
    guesses its build; only the run command and the figures are filled in; the first
    run fails for want of a reference, ``bless --new`` writes it, the next run passes,
    and the check file stays as ``apptune new`` wrote it.

    Why mbw: a memory-bandwidth benchmark (the STREAM kind of figure the project
    measures) in one C file with a plain Makefile, so that the guess of ``apptune new``
    (make, C, the program ``mbw`` at the top of the source) is right as it stands; it
    builds in a second with nothing beyond ci/apt-packages.txt, runs in under a second,
    prints to standard output, and besides its timings prints numbers it computes from
    its arguments (array elements, bytes, runs, tests), which must come out exactly.
    It computes no checksum of the copied data: those counts are what it can verify."""
    root, apptune = _empty_tree(tmp_path)
    rc, out = apptune("new", "mbw", "--debian", "mbw", "--ranks", "1")
    assert rc == 0, out
    assert "build make (guessed from Makefile at the top of the source)" in out, out
    recipe = root / "build-recipes/mbw.yaml"
    source = yaml.safe_load(recipe.read_text())["source"]
    assert source["debian"]["package"] == "mbw" and source["file"].startswith("mbw_")
    assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"]) and source["strip_components"] == 1
    tarball = tmp_path / "cache/sources" / source["file"]
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == source["sha256"]
    check = root / "reframe-checks/mbw/mbw.py"
    check_bytes = check.read_bytes()
    rc, out = apptune("validate")
    assert rc == 1 and out.count("not filled in yet") == 5, out

    # the values the docs give: 64 MiB of longs, 4 runs of each of mbw's three tests
    run = doc_values("A real package: mbw")
    text = fill(recipe.read_text(), "args", json.dumps(run["args"]))
    text = fill(text, "patterns", flow_lines(run["output"]["patterns"]))
    recipe.write_text(fill(text, "figures", flow_lines(run["figures"])))
    rc, out = apptune("validate")
    # the planted fault is left to fill: it never keeps the application from running
    assert rc == 1 and out.count("not filled in yet") == 2 and "faults.planted.what" in out, out

    rc, out = apptune("run", "--mode", "dev", "-c", "reframe-checks/mbw")
    assert rc != 0, out[-3000:]
    assert "reference/mbw/ci.yaml has no fields yet: `apptune bless --new RUN_DIR`" in out, out[
        -3000:
    ]
    rc, out = apptune("bless", "--new", "runs/latest")
    assert (
        rc == 0 and "+  elements: {value: 8388608, abs: 0}" in out and "nothing written" in out
    ), out
    rc, out = apptune("bless", "--new", "runs/latest", "--yes")
    assert rc == 0, out
    assert "memcpy_mib_s left out: a measurement (figure memcpy_bandwidth)" in out, out
    elements = 64 * 2**20 // 8
    assert yaml.safe_load((root / "reference/mbw/ci.yaml").read_text())["fields"] == {
        "elements": {"value": elements, "abs": 0},
        "bytes": {"value": 2 * elements * 8, "abs": 0},
        "block_bytes": {"value": 262144, "abs": 0},
        "runs": {"value": 4, "abs": 0},
        "tests": {"value": 3, "abs": 0},
    }

    rc, out = apptune("run", "--mode", "dev", "-c", "reframe-checks/mbw")
    assert rc == 0, out[-3000:]
    (case,) = [c for c in records.cases(root / "runs/latest") if not c.fixture]
    assert case.result == "pass" and case.verified
    assert len(case.record.verification.fields) == 5
    assert case.record.figures["memcpy_bandwidth"] > 0
    assert check.read_bytes() == check_bytes
