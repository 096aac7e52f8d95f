"""Installs: variants that are not compiled here (the distribution's packages, a site's
module). Their environment file is read without passing recipe words through a shell, their
programs are found on its PATH, their packages' versions are the build's provenance, a
missing package is named; and OpenFOAM's own fatal message is the verdict of a failed run."""

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
from conftest import toy_component

from apptune.core.builds import envfile, installed, syspackages
from apptune.core.data import recipes
from apptune.core.run import outcome
from apptune.core.validation import datachecks, validate
from apptune.core.verification import outputs
from apptune.errors import ApptuneError
from apptune.models import OutputSpec

REPO = Path(__file__).resolve().parent.parent


def _with_install(root: Path, install: str) -> None:
    """The toy recipe with an install named ``distro`` in its ci tier."""
    f = root / "build-recipes/toy.yaml"
    text = f.read_text()
    if "installs:\n" in text:  # the one a call before wrote
        head, _, rest = text.partition("installs:\n")
        text = head + "build:\n" + rest.partition("build:\n")[2]
    text = text.replace(
        "build:\n", "installs:\n  distro:\n" + textwrap.indent(install, "    ") + "build:\n", 1
    )
    f.write_text(text.replace("gnu: [baseline, tuned]", "gnu: [baseline, distro]"))


@pytest.fixture
def setup_file(tmp_path):
    """An environment file that sets a variable from its argument and puts a bin/ holding
    the toy program first on PATH."""
    bindir = tmp_path / "opt/bin"
    bindir.mkdir(parents=True)
    (bindir / "toy").write_text("#!/bin/sh\necho toy\n")
    (bindir / "toy").chmod(0o755)
    f = tmp_path / "opt/setup.sh"
    f.write_text(
        f'export TOY_HOME={tmp_path}/opt\nexport TOY_ARG="$1"\nexport PATH={bindir}:$PATH\n'
    )
    return f


def test_an_environment_file_argument_is_one_word_never_shell_code(tmp_path, setup_file):
    marker = tmp_path / "PWNED"
    arg = f"x; touch {marker}; $(touch {marker})"
    got = envfile.read(setup_file, [arg])
    assert got["TOY_ARG"] == arg
    assert got["TOY_HOME"] == str(tmp_path / "opt")
    assert not marker.exists()
    with pytest.raises(ApptuneError, match="environment file .*missing.sh not found"):
        envfile.read(tmp_path / "missing.sh")


def test_an_install_links_its_programs_and_records_its_environment(toy_root, setup_file):
    _with_install(
        toy_root, f"env_file: {{file: {setup_file}}}\nenv: {{TOY_MODE: fast}}\nprograms: [toy]\n"
    )
    recipe = recipes.load_recipe("toy")
    assert recipes.built_variants(recipe) == ["baseline"]
    assert recipes.installed_variants(recipe) == ["distro"]
    stage = toy_root.parent / "stage"
    stage.mkdir()
    prov = installed.build("toy", "distro", "gnu", stage)
    assert (stage / "toy").resolve() == (setup_file.parent / "bin/toy").resolve()
    assert prov["products"][0]["path"] == str(setup_file.parent / "bin/toy")
    env = installed.run_environment(stage)
    assert env["TOY_HOME"] == str(setup_file.parent) and env["TOY_MODE"] == "fast"
    assert json.loads((stage / "provenance.json").read_text())["install"]["env_file"]["sha256"]


def test_an_install_without_its_program_or_package_names_it(toy_root, setup_file):
    _with_install(toy_root, "env: {TOY_MODE: fast}\nprograms: [toy]\n")
    stage = toy_root.parent / "stage"
    stage.mkdir()
    with pytest.raises(ApptuneError, match=r"installs.distro.programs: toy not found"):
        installed.build("toy", "distro", "gnu", stage)
    _with_install(toy_root, "debian: [no-such-package-apptune]\nprograms: [toy]\n")
    with pytest.raises(
        ApptuneError,
        match=r"installs.distro.debian: Debian package no-such-package-apptune not installed",
    ):
        installed.build("toy", "distro", "gnu", stage)


def _with_component(root: Path, mirror: Path) -> str:
    """The toy recipe with a component (its regression tests' data) in the mirror; its
    sha256."""
    files = {"ref/a/expected.txt": "42\n", "ref/b/other.txt": "7\n"}
    return hashlib.sha256(toy_component(root, mirror, files)).hexdigest()


def test_an_install_unpacks_the_source_paths_its_run_reads_from_their_tarball_alone(
    toy_root, setup_file, tmp_path
):
    sha = _with_component(toy_root, tmp_path / "mirror")
    _with_install(
        toy_root,
        f"env_file: {{file: {setup_file}}}\nprograms: [toy]\nsource_paths: [tests/ref/a]\n",
    )
    stage = toy_root.parent / "stage"
    stage.mkdir()
    prov = installed.build("toy", "distro", "gnu", stage)
    assert (stage / "tree/tests/ref/a/expected.txt").read_text() == "42\n"
    assert not (stage / "tree/tests/ref/b").exists()
    assert [p.name for p in stage.iterdir() if p.name.startswith(".")] == []
    assert prov["source"] == {"components": [{"file": "toy-tests.tar.gz", "sha256": sha}]}
    assert prov["tree"] == {"paths": ["tests/ref/a"], "files": 1, "bytes": 3}
    # the component alone was fetched, not the main tarball
    cached = sorted(p.name for p in (tmp_path / "cache/sources").iterdir() if p.is_file())
    assert [n for n in cached if not n.startswith(".")] == ["toy-tests.tar.gz"]
    # a path outside the components comes from the main tarball (fetched then)
    _with_install(
        toy_root,
        f"env_file: {{file: {setup_file}}}\nprograms: [toy]\nsource_paths: [tests/ref/b, main.c]\n",
    )
    prov = installed.build("toy", "distro", "gnu", stage)
    assert (stage / "tree/main.c").is_file() and (stage / "tree/tests/ref/b/other.txt").is_file()
    assert not (stage / "tree/tests/ref/a").exists()  # the last build's tree is gone
    assert prov["source"]["file"] == "toy-1.0.tar.gz"


def test_a_source_path_that_is_not_there_or_leads_out_is_named(toy_root, setup_file, tmp_path):
    _with_component(toy_root, tmp_path / "mirror")
    _with_install(
        toy_root,
        f"env_file: {{file: {setup_file}}}\nprograms: [toy]\nsource_paths: [tests/ref/c]\n",
    )
    stage = toy_root.parent / "stage"
    stage.mkdir()
    with pytest.raises(ApptuneError) as e:
        installed.build("toy", "distro", "gnu", stage)
    assert str(e.value).endswith(
        "build-recipes/toy.yaml: installs.distro.source_paths[0]: tests/ref/c is not in "
        "toy-tests.tar.gz"
    )
    _with_install(
        toy_root,
        f"env_file: {{file: {setup_file}}}\nprograms: [toy]\nsource_paths: [tests/../../x]\n",
    )
    site, _ = validate.load_site_facts(environments=None)
    problems = [str(p) for p in datachecks.app_problems("toy", site)]
    assert any("installs.distro.source_paths" in p and "leads outside" in p for p in problems), (
        problems
    )


def test_package_versions_are_read_from_dpkg():
    got = installed.package_versions(["dpkg", "no-such-package-apptune"])
    assert got["no-such-package-apptune"] is None
    assert got["dpkg"] and got["dpkg"][0].isdigit()


def test_bootstrap_reads_the_install_packages_and_validate_refuses_another_form(toy_root):
    _with_install(toy_root, "debian: [openfoam, libopenfoam]\nprograms: [toy]\n")
    text = (toy_root / "build-recipes/toy.yaml").read_text()
    assert syspackages.install_packages(text) == {"distro": ["openfoam", "libopenfoam"]}
    assert "libopenfoam" in syspackages.recipes_packages(toy_root / "build-recipes")
    block = text.replace("debian: [openfoam, libopenfoam]", "debian:\n      - openfoam")
    assert syspackages.install_packages(block) is None


def test_openfoam_packages_reach_bootstrap():
    names = syspackages.recipes_packages(REPO / "build-recipes")
    assert {"openfoam", "libopenfoam", "flex", "libscotch-dev"} <= set(names)


def test_regex_min_max_and_curve_at_and_relative_range(tmp_path):
    (tmp_path / "log").write_text("a = -1e-5\na = 0.5\na = 2e-6\n")
    spec = OutputSpec.model_validate(
        {
            "file": "log",
            "format": "regex",
            "patterns": {
                "lo": {"pattern": r"^a = (\S+)", "occurrence": "min"},
                "hi": {"pattern": r"^a = (\S+)", "occurrence": "max"},
            },
        }
    )
    assert outputs.parse(spec, tmp_path) == {"lo": -1e-5, "hi": 0.5}
    (tmp_path / "v.dat").write_text("# Time v\n0.05 4.0\n0.1 4.2\n0.15 3.9\n")

    def curve(at: float) -> OutputSpec:
        derived = {
            "drift": {"op": "relative_range", "y": "v"},
            "v010": {"op": "at", "x": "t", "at": at, "y": "v"},
        }
        spec = {"file": "v.dat", "format": "curve", "name": "v", "columns": ["t", "v"]}
        return OutputSpec.model_validate(dict(spec, derived=derived))

    got = outputs.parse(curve(0.1), tmp_path)
    assert got["drift"] == pytest.approx((4.2 - 3.9) / 4.0) and got["v010"] == 4.2
    with pytest.raises(ApptuneError, match=r"v010: no row at 0.3 \(rows from 0.05 to 0.15\)"):
        outputs.parse(curve(0.3), tmp_path)


def test_until_keeps_the_rows_up_to_a_time(tmp_path):
    """Water is conserved until it splashes out: the drift of the rows up to a time."""
    (tmp_path / "v.dat").write_text("# Time v\n0.05 4.0\n0.1 4.2\n0.15 3.9\n0.2 1.0\n")

    def curve(**derived) -> OutputSpec:
        spec = {"file": "v.dat", "format": "curve", "name": "v", "columns": ["t", "v"]}
        return OutputSpec.model_validate(dict(spec, derived=derived))

    until = {"op": "relative_range", "x": "t", "y": "v", "until": 0.15}
    got = outputs.parse(curve(drift=until, whole={"op": "relative_range", "y": "v"}), tmp_path)
    assert got["drift"] == pytest.approx((4.2 - 3.9) / 4.0)
    assert got["whole"] == pytest.approx((4.2 - 1.0) / 4.0)
    assert (
        outputs.parse(curve(n={"op": "count", "x": "t", "y": "v", "until": 0.1}), tmp_path)["n"]
        == 2
    )
    with pytest.raises(ApptuneError, match=r"d: no row with t at most 0.01 \(rows from 0.05\)"):
        outputs.parse(curve(d=dict(until, until=0.01)), tmp_path)
    with pytest.raises(ValueError, match="'until' needs 'x'"):
        curve(d={"op": "max", "y": "v", "until": 0.1})


FATAL = """Create time

--> FOAM FATAL IO ERROR:{space}
Entry 'deltaT' not found in dictionary "{stage}/system/controlDict"


file: {stage}/system/controlDict from line 18 to line 50.

    From function bool Foam::dictionary::readEntry(...) const [with T = double]

FOAM exiting
"""


def test_a_missing_keyword_is_one_line_naming_the_dictionary_and_the_keyword(tmp_path):
    recipe = recipes.load_recipe(REPO / "build-recipes/openfoam.yaml")
    (tmp_path / "log.serial.blockMesh").write_text(FATAL.format(stage=tmp_path, space=" "))
    said = outcome.app_error(recipe, tmp_path, ["rfm_job.out", None])
    assert said == "system/controlDict: deltaT: keyword missing (FOAM FATAL IO ERROR)"
    (tmp_path / "log.serial.blockMesh").write_text("Create time\nEnd\n")
    assert outcome.app_error(recipe, tmp_path, ["rfm_job.out", None]) is None


def test_an_install_named_as_a_flag_ladder_is_refused(toy_root):
    _with_install(toy_root, "env: {TOY_MODE: fast}\nprograms: [toy]\n")
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("distro", "tuned"))
    site, _ = validate.load_site_facts(environments=None)
    problems = [str(p) for p in datachecks.app_problems("toy", site)]
    assert any("installs.tuned: is a flag ladder's name" in p for p in problems), problems
