"""Recipes, variants and site data: every bad input is a one-line error naming file and field."""

import shutil

import pytest
from conftest import REPO

from apptune.core.data import recipes
from apptune.core.data.recipes import Toolchain, Variant
from apptune.errors import ApptuneError


def err(fn, *a, **k) -> str:
    with pytest.raises(ApptuneError) as e:
        fn(*a, **k)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_real_hpcc_recipe_loads_and_lists_its_variants():
    r = recipes.load_recipe("hpcc")
    assert r.source.debian.package == "hpcc"
    v = recipes.all_variants(r)
    assert {"baseline", "tuned", "tuned+fft=fftw3"} <= set(v)
    assert recipes.environments_for(r, "ci", "tuned") == ["gnu", "gnu-mkl", "oneapi"]
    assert "llvm" in recipes.environments_for(r, "nightly", "tuned")
    assert recipes.environments_for(r, "ci", "tuned+fft=fftw3") == ["gnu"]


def test_a_recipe_is_parsed_again_only_when_its_text_changes(toy_root):
    f = toy_root / "build-recipes/toy.yaml"
    first = recipes.load_recipe("toy")
    first.tiers["ci"].variants["gnu"].append("aggressive")  # a caller's change stays its own
    again = recipes.load_recipe("toy")
    assert again.tiers["ci"].variants["gnu"] == ["baseline", "tuned"]
    # an edit of the same length, within the file system's timestamp granularity
    text = f.read_text()
    f.write_text(text.replace("ranks: 1", "ranks: 3", 1))
    assert recipes.load_recipe("toy").tiers["ci"].ranks == 3


def test_malformed_yaml_names_file_and_line(toy_root):
    (toy_root / "build-recipes/toy.yaml").write_text("name: toy\nversion: [1.0\n")
    msg = err(recipes.load_recipe, "toy")
    assert "toy.yaml" in msg and "line" in msg and "malformed YAML" in msg


def test_unknown_field_is_named(toy_root):
    p = toy_root / "build-recipes/toy.yaml"
    p.write_text(p.read_text().replace("  jobs: 1", "  jobs: 1\n  jbos: 2"))
    msg = err(recipes.load_recipe, "toy")
    assert "build.jbos" in msg and "unknown field" in msg


def test_bad_build_system_lists_allowed_values(toy_root):
    p = toy_root / "build-recipes/toy.yaml"
    p.write_text(p.read_text().replace("system: make", "system: scons"))
    msg = err(recipes.load_recipe, "toy")
    assert "build.system: must be one of: make, cmake (got 'scons')" in msg


def test_bad_sha256_pattern(toy_root):
    p = toy_root / "build-recipes/toy.yaml"
    text = p.read_text()
    sha = text.split("sha256: ")[1].split()[0]
    p.write_text(text.replace(sha, "abc"))
    assert "source.sha256" in err(recipes.load_recipe, "toy")


def test_missing_patch_file(toy_root):
    (toy_root / "patches/toy/0001-comment.patch").unlink()
    msg = err(recipes.load_recipe, "toy")
    assert "patches.0001-comment.patch" in msg and "missing" in msg


def test_unknown_application():
    msg = err(recipes.load_recipe, "no-such-app")
    assert "no-such-app" in msg and "hpcc" in msg


@pytest.mark.parametrize(
    "spec, words",
    [
        ("tuned+fft", ["not axis=value"]),
        ("tuned+gpu=yes", ["unknown axis 'gpu'", "blas"]),
        ("tuned+blas=atlas", ["unknown blas 'atlas'", "openblas"]),
    ],
)
def test_unknown_variant_pieces(toy_root, spec, words):
    r = recipes.load_recipe("toy")
    msg = err(Variant.parse, spec, r)
    for w in words:
        assert w in msg


def test_unknown_ladder_lists_allowed(toy_root, gnu_toolchain):
    r = recipes.load_recipe("toy")
    msg = err(recipes.resolve, r, "ludicrous", gnu_toolchain)
    assert "unknown flag ladder 'ludicrous'" in msg and "tuned" in msg


def test_unknown_compiler_family(toy_root, gnu_toolchain):
    r = recipes.load_recipe("toy")
    gnu_toolchain.family = "pgi"
    msg = err(recipes.resolve, r, "tuned", gnu_toolchain)
    assert "flag-ladders.yaml" in msg and "families.pgi" in msg


def test_missing_compiler_is_reported(gnu_toolchain):
    gnu_toolchain.requires = {"all": ["gcc", "icx-does-not-exist"]}
    assert gnu_toolchain.missing_tools() == ["icx-does-not-exist"]


def test_a_c_application_does_not_need_the_fortran_compiler(gnu_toolchain):
    gnu_toolchain.requires = {"c": ["gcc"], "fortran": ["gfortran-does-not-exist"]}
    assert gnu_toolchain.missing_tools(languages=["c"]) == []
    assert gnu_toolchain.missing_tools(languages=["c", "fortran"]) == ["gfortran-does-not-exist"]


def test_requires_are_looked_up_on_the_environments_own_path(tmp_path):
    """A compiler that only the environment's PATH holds (as a module or env_vars would
    provide it on a cluster) is found; one on no PATH of the environment is missing."""
    from apptune.rfm import missing_in_environment

    tool = tmp_path / "bin" / "mycc-only-here"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)

    class Env:  # what a ReFrame environment has
        env_vars = {"PATH": f"{tool.parent}:$PATH"}
        prepare_cmds = []
        modules_detailed = []

    assert missing_in_environment(Env, ["mycc-only-here", "gcc"]) == []
    Env.env_vars = {}
    assert missing_in_environment(Env, ["mycc-only-here", "gcc"]) == ["mycc-only-here"]


def test_resolve_selects_patches_and_per_file_flags():
    r = recipes.load_recipe("hpcc")
    tc = Toolchain("gnu", "gnu", "mpicc", "mpicxx", "mpifort", "openmpi", "3.1", "openblas")
    plan = recipes.resolve(r, "tuned+fft=fftw3", tc)
    assert [p.file for p in plan.patches] == [
        "0001-mpi3-get-address-create-struct.patch",
        "0002-fftw3-interface.patch",
    ]
    assert "-DUSING_FFTW3" in plan.cppflags and "-lfftw3_mpi" in plan.ldflags
    assert plan.cflags == ["-O3", "-march=native", "-funroll-loops"]
    assert plan.per_file[0].cflags == []
    old_mpi = Toolchain("old", "gnu", "mpicc", "mpicxx", "mpifort", "mpich1", "1.3", "mkl")
    plan = recipes.resolve(r, "baseline", old_mpi)
    assert plan.patches == [] and plan.axes == {"blas": "mkl", "fft": "ffte"}
    assert any("libmkl_core" in f for f in plan.ldflags)


def test_environment_blas_not_offered_by_recipe():
    r = recipes.load_recipe("hpcc")
    tc = Toolchain("odd", "gnu", "mpicc", "mpicxx", "mpifort", "openmpi", "3.1", "essl")
    msg = err(recipes.resolve, r, "tuned", tc)
    assert "defaults.blas" in msg and "essl" in msg


def test_a_check_file_loads_its_recipe_outside_a_reframe_session(toy_root):
    """``load_app`` (what every check file calls) checks the application's data against the
    site config file's environments when no ReFrame session is running (a check file
    imported by a tool or a test). On bad data the check file gets a recipe without tiers
    (its own classes define no test case) and a failing test naming the problems."""
    import sys

    from apptune.rfm import load_app

    shutil.copy(REPO / "site-config/settings.py", toy_root / "site-config/settings.py")
    assert load_app("toy").name == "toy"
    (toy_root / "reference/toy/ci.yaml").write_text("app: toy\ntier: ci\nfields: 3\n")
    got = load_app("toy")
    assert got.tiers == {} and recipes.all_variants(got) == ["unbuilt"]
    test = sys.modules[__name__].ToyDataProblems
    assert test.app == "toy" and list(test.problems) == [
        "tree/reference/toy/ci.yaml: recorded: required field is missing",
        "tree/reference/toy/ci.yaml: fields: must be a mapping (got 3)",
    ]
    # every execution mode selects it: they select tiers by tag (^ci$, ^nightly$)
    assert {"data", "ci", "nightly"} <= set(test.tags)
