"""A build's install tree (``build.tree``): kept with its links beside the products, stored in
and restored from the build cache, and the run's environment read again where it lands."""

import hashlib
import json
import os

import pytest
from conftest import TOY_ACC, TOY_MAIN, TOY_MAKEFILE, make_tarball, toy_recipe

from apptune import cli
from apptune.core.builds import buildcache, buildtree, installed, sources, steps
from apptune.core.data import recipes
from apptune.errors import ApptuneError

# the toy's own environment file: where it lies decides the paths it exports
ENV_SH = 'TOY_HOME=$(cd "$(dirname "$0")/.." && pwd)\nexport TOY_HOME\n'
TREE = """
  tree:
    paths: [etc, lib]
    env_file: {file: etc/env.sh}
    env: {TOY_DATA: "{{ tree }}/lib/data.txt"}
"""


@pytest.fixture
def toy_tree(toy_root, tmp_path, gnu_toolchain):
    """The toy with an install tree: etc/env.sh and lib/ (a data file and a link to it)."""
    makefile = TOY_MAKEFILE + "\tln -sf data.txt lib/current\n"
    files = {"main.c": TOY_MAIN, "acc.c": TOY_ACC, "Makefile": makefile}
    files |= {"etc/env.sh": ENV_SH, "lib/data.txt": "tabulated data\n"}
    tarball = make_tarball(files)
    (tmp_path / "mirror/toy-1.0.tar.gz").write_bytes(tarball)
    text = toy_recipe(hashlib.sha256(tarball).hexdigest())
    assert "\n  products: [toy]\n" in text
    text = text.replace("\n  products: [toy]\n", "\n  products: [toy]" + TREE)
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    src = sources.fetch(recipes.load_recipe("toy"))

    def do(name):
        stage = tmp_path / name
        stage.mkdir()
        plan = recipes.resolve(recipes.load_recipe("toy"), "tuned", gnu_toolchain).to_dict()
        return steps.build(plan, src, stage), stage

    return do


@pytest.mark.slow
def test_a_tree_is_built_cached_and_restored_with_its_environment_where_it_lands(toy_tree, capsys):
    p1, s1 = toy_tree("a")
    assert (s1 / "tree/lib/data.txt").read_text() == "tabulated data\n"
    assert os.readlink(s1 / "tree/lib/current") == "data.txt"
    env1 = installed.run_environment(s1)
    assert env1["TOY_HOME"] == str((s1 / "tree").resolve())
    assert env1["TOY_DATA"] == str((s1 / "tree/lib/data.txt").resolve())
    assert p1["tree"]["files"] == 3 and p1["tree"]["paths"] == ["etc", "lib"]
    assert "no cached build of toy gnu/tuned" in capsys.readouterr().out

    p2, s2 = toy_tree("b")
    assert p2["cache"]["hit"] and not (s2 / "src").exists()
    assert os.readlink(s2 / "tree/lib/current") == "data.txt"
    assert (s2 / "tree/lib/current").read_text() == "tabulated data\n"
    # the environment names the tree it restored, not the stage it was built in
    assert installed.run_environment(s2)["TOY_HOME"] == str((s2 / "tree").resolve())
    assert "an install tree of 3 files" in capsys.readouterr().out


@pytest.mark.slow
def test_a_changed_link_in_the_cache_is_a_corrupted_entry(toy_tree, capsys):
    p1, _ = toy_tree("a")
    link = buildcache.entry_dir(p1["cache"]["key"]) / "files/tree/lib/current"
    link.unlink()
    link.symlink_to("/etc/passwd")
    assert cli.main(["cache", "verify"]) == 1
    assert "tree/lib/current is not the link to data.txt" in capsys.readouterr().out
    p2, _ = toy_tree("b")
    assert not p2["cache"]["hit"]


def test_a_link_out_of_the_tree_is_refused(toy_root, tmp_path):
    src, stage = tmp_path / "src", tmp_path / "stage"
    (src / "lib").mkdir(parents=True)
    stage.mkdir()
    (src / "lib/libx.so").symlink_to("../../outside.so")
    with pytest.raises(ApptuneError, match="libx.so is a symbolic link to ../../outside.so"):
        buildtree.copy_tree(["lib"], src, stage, "toy")
    (src / "lib/libx.so").unlink()
    (src / "lib/libx.so.1").write_text("x")
    (src / "lib/libx.so").symlink_to("libx.so.1")
    buildtree.copy_tree(["lib"], src, stage, "toy")
    assert buildtree.tree_entries(stage) == [
        {"file": "tree/lib/libx.so", "link": "libx.so.1"},
        {"file": "tree/lib/libx.so.1"},
    ]


def test_a_declared_path_the_build_did_not_make_names_it(toy_root, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "stage").mkdir()
    with pytest.raises(ApptuneError, match=r"build.tree.paths\[0\]: platforms/lib was not built"):
        buildtree.copy_tree(["platforms/lib"], tmp_path / "src", tmp_path / "stage", "toy")


def test_a_build_without_a_tree_gives_its_run_no_environment(toy_root, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / installed.ENV_FILE).write_text(json.dumps({"STALE": "1"}))
    assert buildtree.run_environment(recipes.load_recipe("toy"), stage) == {}
    assert installed.run_environment(stage) == {}
