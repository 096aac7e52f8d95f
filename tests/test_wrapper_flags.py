"""The flag proof sees what the compiler got: an MPI or site compiler wrapper is resolved to
the compiler behind it (``-show``, ``--showme``), the flags it adds are recorded, those the
variant decides are removed, and a per-file rule holds under every wrapper."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gnu_mpi_toolchain

from apptune.core.builds import buildid, compilelines, steps
from apptune.core.data import recipes
from apptune.errors import ApptuneError

# What Debian 12's wrappers show (`mpifort.mpich -show -c apptune-args-1 apptune-args-2`,
# `mpifort.openmpi --showme -c ...`), as recorded on the machines of this project
MPICH_FORT = (
    "gfortran -O2 -ffile-prefix-map=/build/mpich-1NaQGN/mpich-4.0.2=. "
    "-fstack-protector-strong -fallow-invalid-boz -fallow-argument-mismatch -c apptune-args-1 "
    "apptune-args-2 -I/usr/include/x86_64-linux-gnu/mpich -I/usr/include/x86_64-linux-gnu/mpich"
)
OPENMPI_FORT = (
    "gfortran -c apptune-args-1 apptune-args-2 "
    "-I/usr/lib/x86_64-linux-gnu/openmpi/lib/../../fortran/gfortran-mod-15/openmpi "
    "-I/usr/lib/x86_64-linux-gnu/openmpi/lib"
)

# A site's Fortran wrapper that adds -O2 (as Debian's MPICH does), a flag and an include
# directory of its own to every call, and shows that command when asked, its path quoted
# for a shell (as Intel MPI's -show does)
FAKE_WRAPPER = """#!/bin/sh
case "$1" in
  -show) shift; echo fakefc -O2 -fwrapper-own "$@" '-I"/opt/site/include"'; exit 0;;
esac
exec fakefc -O2 -fwrapper-own "$@" -I/opt/site/include
"""
# The compiler behind it: records the arguments it got
FAKE_COMPILER = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKEFC_LOG"
"""
TUNED = ["-O3", "-march=native", "-funroll-loops"]


def test_the_command_a_wrapper_shows_is_split_around_the_builds_arguments():
    runs, before, after = buildid.split_shown(MPICH_FORT.split(), ["-c"])
    assert runs == "gfortran" and before[0] == "-O2" and after[0].startswith("-I")
    assert buildid.split_shown(OPENMPI_FORT.split(), ["-c"])[1] == []
    # a compiler's error message, or the arguments moved apart: not a command shown
    assert buildid.split_shown("gfortran: error: unrecognized option".split(), ["-c"]) is None
    moved = "gfortran apptune-args-1 -c apptune-args-2".split()
    assert buildid.split_shown(moved, ["-c"]) is None


def test_the_flags_the_variant_decides_are_removed_from_what_a_wrapper_adds():
    owned = compilelines.owned_options("gnu")
    assert {"-O", "-march=", "-funroll-loops"} <= owned
    words = MPICH_FORT.split()[1:6] + ["-march=x86-64", "-fno-unroll-loops", "-Ofast"]
    kept, gone = compilelines.removable(words, owned)
    assert gone == ["-O2", "-march=x86-64", "-fno-unroll-loops", "-Ofast"]
    assert "-fstack-protector-strong" in kept and "-fallow-argument-mismatch" in kept
    # an option's separate value is the option's, not a flag of the compiler
    assert compilelines.removable(["-Xlinker", "-O1", "-O3"], owned) == (
        ["-Xlinker", "-O1"],
        ["-O3"],
    )
    assert compilelines.opt_level(["-O2", "-c", "x.f90", "-O0"]) == "-O0"
    assert compilelines.opt_level(["-O"]) == "-O1"
    assert compilelines.opt_level(["-c", "x.f90"]) == "no -O flag"


@pytest.fixture
def site_wrapper(tmp_path, monkeypatch):
    """``mpifort`` (:data:`FAKE_WRAPPER`) and ``fakefc`` first on PATH; the compiler's log."""
    bindir = tmp_path / "site-bin"
    bindir.mkdir()
    for name, text in (("mpifort", FAKE_WRAPPER), ("fakefc", FAKE_COMPILER)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    log = tmp_path / "fakefc.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKEFC_LOG", str(log))
    return log


def _plan_with_rule(toy_root) -> dict:
    """The toy's tuned plan in the gnu environment, with FLASH-IO's rule: PnetCDF's
    Fortran module compiled with ``flags: none``."""
    plan = recipes.resolve(recipes.load_recipe("toy"), "tuned", gnu_mpi_toolchain()).to_dict()
    plan["per_file"] = [{"files": ["pnetcdf.f90"], "ladder": "none", "cflags": [], "fflags": []}]
    return plan


def _compile(shim: str, src: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shim, *args], cwd=src, capture_output=True, text=True, check=True, timeout=60
    )


def test_a_wrapper_that_adds_O2_does_not_reach_a_file_under_flags_none(
    toy_root, tmp_path, site_wrapper
):
    plan = _plan_with_rule(toy_root)
    assert plan["ftn"] == "mpifort" and plan["fflags"] == TUNED
    compilers = buildid.compiler_identity(plan, ["c", "fortran"])
    site_wrapper.write_text("")  # what the compiler got asked for its version, cleared
    wrapper = compilers["ftn"]["wrapper"]
    assert wrapper["runs"] == "fakefc" and wrapper["compile"]["removed"] == ["-O2"]
    assert wrapper["compile"]["before"] == ["-fwrapper-own"]
    assert wrapper["said"] == (
        "mpifort runs fakefc; added by mpifort to compiles: -fwrapper-own "
        "-I/opt/site/include; to links: -fwrapper-own -I/opt/site/include; to -E: "
        "-fwrapper-own -I/opt/site/include; removed: -O2 (mpifort adds it to compiles, "
        "links, -E; the variant's flags decide it)"
    )
    stage, src = tmp_path / "stage", tmp_path / "stage" / "src"
    src.mkdir(parents=True)
    shims = steps.write_wrappers(plan, stage, src, compilers)
    _compile(shims["ftn"], src, *TUNED, "-c", "pnetcdf.f90", "-o", "pnetcdf.o")
    _compile(shims["ftn"], src, *TUNED, "-c", "flash.f90")
    _compile(shims["ftn"], src, *TUNED, "-o", "flash", "flash.o", "pnetcdf.o")
    got = site_wrapper.read_text().splitlines()
    # what the compiler got: the rule's none (no -O at all), the ladder elsewhere, and
    # the wrapper's own flag and include directory everywhere
    assert got == [
        "-fwrapper-own -c pnetcdf.f90 -o pnetcdf.o -I/opt/site/include",
        "-fwrapper-own -O3 -march=native -funroll-loops -c flash.f90 -I/opt/site/include",
        "-fwrapper-own -O3 -march=native -funroll-loops -o flash flash.o pnetcdf.o "
        "-I/opt/site/include",
    ]
    log = stage / "compile-lines.jsonl"
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert [ln["argv"][0] for ln in lines] == ["fakefc"] * 3
    assert lines[0]["added"] == ["-fwrapper-own", "-I/opt/site/include"]
    assert lines[0]["wrapper"] == "mpifort" and lines[0]["rule"] == "none"
    summary = compilelines.check_compile_lines(plan, log)
    assert summary["compiles"] == 2 and summary["links"] == 1
    assert summary["overridden"] == ["pnetcdf.f90"] and summary["added_unknown"] == 0
    prov = {"compilers": compilers}
    assert steps.removed_said(prov) == "; removed from what the wrappers add: -O2 (mpifort)"


def test_a_call_that_asks_the_wrapper_is_answered_by_the_wrapper(toy_root, tmp_path, site_wrapper):
    plan = _plan_with_rule(toy_root)
    compilers = buildid.compiler_identity(plan, ["c", "fortran"])
    site_wrapper.write_text("")
    stage = tmp_path / "stage"
    (stage / "src").mkdir(parents=True)
    shims = steps.write_wrappers(plan, stage, stage / "src", compilers)
    out = _compile(shims["ftn"], stage / "src", "-show", "-c", "x.f90").stdout
    assert out.split() == ["fakefc", "-O2", "-fwrapper-own", "-c", "x.f90", '-I"/opt/site/include"']
    _compile(shims["ftn"], stage / "src", "--version")
    assert site_wrapper.read_text() == "-O2 -fwrapper-own --version -I/opt/site/include\n"
    lines = [json.loads(ln) for ln in (stage / "compile-lines.jsonl").read_text().splitlines()]
    assert [(ln["kind"], ln["argv"][0], ln["added"]) for ln in lines] == [
        ("query", "mpifort", None),
        ("query", "mpifort", None),
    ]


def test_a_compiler_that_shows_no_command_is_run_as_given(toy_root, tmp_path, site_wrapper):
    plan = _plan_with_rule(toy_root)
    plan["ftn"] = "fakefc"  # a compiler itself: no -show, no --showme
    compilers = buildid.compiler_identity(plan, ["c", "fortran"])
    assert compilers["ftn"]["wrapper"] == {
        "runs": None,
        "said": "fakefc shows no command (neither -show nor --showme): it is run as given, "
        "and the flags it adds, if any, are not known",
    }
    stage = tmp_path / "stage"
    (stage / "src").mkdir(parents=True)
    shims = steps.write_wrappers(plan, stage, stage / "src", compilers)
    _compile(shims["ftn"], stage / "src", *TUNED, "-c", "flash.f90")
    line = json.loads((stage / "compile-lines.jsonl").read_text())
    assert line["argv"] == ["fakefc", *TUNED, "-c", "flash.f90"] and line["added"] is None
    # and so is a call with an option of the wrapper's own (MPICH's -static adds libraries)
    plan["ftn"] = "mpifort"
    compilers = buildid.compiler_identity(plan, ["c", "fortran"])
    shims = steps.write_wrappers(plan, stage, stage / "src", compilers)
    _compile(shims["ftn"], stage / "src", *TUNED, "-static", "-o", "flash", "flash.f90")
    line = json.loads((stage / "compile-lines.jsonl").read_text())
    assert line["kind"] == "compile" and line["added"] is None
    assert line["argv"] == ["mpifort", *TUNED, "-static", "-o", "flash", "flash.f90"]
    summary = compilelines.check_compile_lines(plan, stage / "compile-lines.jsonl")
    assert summary["added_unknown"] == 1


def _line(source: str, argv: list[str], added=None, rule=None) -> dict:
    return {
        "cwd": ".",
        "lang": "ftn",
        "kind": "compile",
        "source": source,
        "sources": [source],
        "rule": rule,
        "argv": argv,
        "wrapper": "mpifort",
        "added": added,
    }


def _check(plan: dict, tmp_path: Path, *lines: dict) -> dict:
    log = tmp_path / "compile-lines.jsonl"
    log.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    return compilelines.check_compile_lines(plan, log)


def test_the_flag_proof_fails_on_a_wrapper_flag_the_variant_decides(toy_root, tmp_path):
    plan = _plan_with_rule(toy_root)
    mpich = MPICH_FORT.split()[1:6]  # -O2 and what Debian's MPICH adds beside it
    # before wrappers were resolved, the rule's file got MPICH's -O2 behind the log's back:
    # the compiler's real line fails the proof, naming the file and the level
    with pytest.raises(ApptuneError) as e:
        _check(plan, tmp_path, _line("pnetcdf.f90", ["gfortran", *mpich, "-c", "pnetcdf.f90"]))
    assert str(e.value) == (
        "pnetcdf.f90: flags: flags did not reach the compiler: the compiler got -O2 where "
        "the per-file rule (none) has no -O flag"
    )
    # the ladder's -O3 comes after the wrapper's -O2 and wins; the proof still names it
    with pytest.raises(ApptuneError) as e:
        _check(plan, tmp_path, _line("flash.f90", ["gfortran", *mpich, *TUNED, "-c"], mpich))
    assert "-O2 added by mpifort (the variant's flags decide it)" in str(e.value)
    # what the wrapper adds without deciding anything the variant decides passes
    kept = mpich[1:]
    assert (
        _check(
            plan,
            tmp_path,
            _line("pnetcdf.f90", ["gfortran", *kept, "-c", "pnetcdf.f90"], kept, "none"),
            _line("flash.f90", ["gfortran", *kept, *TUNED, "-c", "flash.f90"], kept),
        )["compiles"]
        == 2
    )


@pytest.mark.parametrize(
    ("lang", "name"), [("ftn", "old.f77"), ("ftn", "OLD.F77"), ("cxx", "x.c++")]
)
def test_a_per_file_rule_applies_to_every_source_suffix_new_recognises(tmp_path, lang, name):
    """The wrapper and ``apptune new`` read one list of source suffixes: a file whose suffix
    names a language to one is a source to the other, so its per-file rule is applied."""
    from apptune.core.builds import ccwrap
    from apptune.tools.scaffold import guess_languages

    assert guess_languages([name]) == ["fortran" if lang == "ftn" else "cxx"]
    (tmp_path / name).write_text("")
    cfg = {
        "real": {lang: "true"},
        "log": str(tmp_path / "lines.jsonl"),
        "source_root": str(tmp_path),
        "ladder": {lang: ["-O3"]},
        "per_file": [{"files": [name], "flags": {lang: ["-O0"]}, "ladder": "none"}],
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    subprocess.run(
        [sys.executable, "-S", ccwrap.__file__, lang, "-O3", "-c", name],
        cwd=tmp_path,
        env={**os.environ, "APPTUNE_CCWRAP_CONFIG": str(tmp_path / "cfg.json")},
        check=True,
        timeout=60,
    )
    (line,) = [json.loads(x) for x in (tmp_path / "lines.jsonl").read_text().splitlines()]
    assert (line["source"], line["rule"], line["argv"]) == (
        name,
        "none",
        ["true", "-c", name, "-O0"],
    )
