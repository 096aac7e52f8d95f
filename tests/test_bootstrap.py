"""ci/bootstrap.sh: deb-src entries derived from the machine's own Debian entries
(ci/derive_deb_src.py), and the Debian packages it installs: its own list and those the
recipes name (apptune/core/builds/syspackages.py), which skip an application where one is
missing."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "ci" / "derive_deb_src.py"


def derive(etc: Path, out: Path):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), str(etc)], capture_output=True, text=True
    )


def test_deb822_and_one_line_entries(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    (etc / "sources.list.d" / "vendor.sources").write_text(
        "Types: deb\nURIs: https://vendor.example/apt\nSuites: stable\nComponents: main\n"
    )
    (etc / "sources.list").write_text(
        "deb http://mirror.example/debian-security bookworm-security main\n"
    )
    out = tmp_path / "out.sources"
    p = derive(etc, out)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.count("Types: deb-src") == 2
    assert "mirror.example/debian\n" in text and "debian-security" in text
    assert "vendor.example" not in text


def test_no_debian_entry_is_a_clear_error(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    p = derive(etc, tmp_path / "out.sources")
    assert p.returncode != 0 and "no Debian 'deb' entry" in p.stderr


# ------------------------------------------------- the Debian packages the recipes name
REPO = SCRIPT.parent.parent


def test_bootstrap_installs_its_own_list_and_every_package_a_recipe_names():
    import yaml

    p = subprocess.run(
        ["bash", str(REPO / "ci/bootstrap.sh"), "--print-apt-packages"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    own = {
        ln.strip()
        for ln in (REPO / "ci/apt-packages.txt").read_text().splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    }
    named = {
        pkg
        for f in (REPO / "build-recipes").glob("*.yaml")
        for pkg in (yaml.safe_load(f.read_text()).get("requires") or {}).get("debian", [])
    } | {  # and the packages of the recipes' installs (the distribution's builds)
        pkg
        for f in (REPO / "build-recipes").glob("*.yaml")
        for install in (yaml.safe_load(f.read_text()).get("installs") or {}).values()
        for pkg in install.get("debian", [])
    }
    assert named, "no recipe names a Debian package"
    # one list each: an application's package is in its recipe, not also in the harness's
    assert own & named == set()
    assert p.stdout.splitlines() == sorted(own | named)


def test_the_recipes_packages_are_read_without_any_third_party_module():
    # -S: no site-packages (no PyYAML, no pydantic), as on a machine before bootstrap
    p = subprocess.run(
        [sys.executable, "-S", "-m", "apptune.core.builds.syspackages", "build-recipes"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "libscalapack-openmpi-dev" in p.stdout.splitlines()


@pytest.mark.parametrize(
    "text,packages",
    [
        ("name: x\nbuild: {}\n", []),
        (
            "requires:\n  debian: [libfoo-dev, 'libbar2+x']  # why\nbuild:\n",
            ["libfoo-dev", "libbar2+x"],
        ),
        ("requires: {debian: [a1, b2]}\n", ["a1", "b2"]),
        (
            "requires:\n  debian:\n    # a comment\n    - liba-dev\n\n"
            "    - libb-dev  # why\nbuild:\n",
            ["liba-dev", "libb-dev"],
        ),
        ("requires:\n  debian:\n  - liba-dev\nbuild:\n  debian: [no]\n", ["liba-dev"]),
        ("requires:\n  debian: []\n", []),
        ("requires: {}\n", []),
        # forms the reader does not know: validate refuses them
        ("requires:\n  debian: [a,\n    b]\n", None),
        ("requires:\n  debian: &pk [a]\n", None),
        ("requires: {debian: [a], other: 1}\n", None),
        ("requires:\n  debian:\n    - {name: a}\n", None),
    ],
)
def test_the_reader_of_requires_debian(text, packages):
    from apptune.core.builds.syspackages import debian_packages

    assert debian_packages(text) == packages


def test_a_missing_package_skips_the_build_where_the_partition_uses_debian_packages(toy_root):
    from apptune.core.builds import syspackages
    from apptune.core.data import recipes

    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(
        f.read_text().replace(
            "\nbuild:\n", "\nrequires:\n  debian: [dpkg, apptune-no-such-package]\nbuild:\n"
        )
    )
    r, where = recipes.load_recipe("toy"), recipes.recipe_path("toy")
    # a cluster's partition: its environments' modules provide the libraries
    assert syspackages.missing(r, where, {}) is None
    assert syspackages.missing(r, where, {"debian_packages": True}) == (
        "tree/build-recipes/toy.yaml: requires.debian: Debian package apptune-no-such-package "
        "not installed (ci/bootstrap.sh installs it)"
    )
