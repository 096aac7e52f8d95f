"""Building and running a variant outside ReFrame (apptune/localrun.py): inputs with
overridden parameters, verification that skips fields of changed inputs, a real
build and run of the toy app, and bad inputs."""

import textwrap

import pytest
from conftest import REPO

from apptune import inputs, localrun, recipes, records, verify
from apptune.errors import ApptuneError


def test_time_limits_in_reframe_words():
    assert localrun.time_limit_seconds("5m") == 300
    assert localrun.time_limit_seconds("1h30m") == 5400
    assert localrun.time_limit_seconds("90s") == 90
    assert localrun.time_limit_seconds("soon") is None


def test_input_overrides_replace_parameters_and_unknown_ones_are_refused(toy_root, tmp_path):
    p = inputs.render("toy", "ci", tmp_path, 1, overrides={"n": 5})
    assert p["n"] == 5 and (tmp_path / "params.txt").read_text() == "n=5\n"
    with pytest.raises(ApptuneError) as e:
        inputs.render("toy", "ci", tmp_path, 1, overrides={"N": 5})
    assert "inputs/toy/ci/input.yaml: parameters.N: no such parameter to override" in str(e.value)


def test_fields_depending_on_a_changed_input_are_skipped_not_compared(toy_root):
    (toy_root / "reference/toy/ci.yaml").write_text(
        textwrap.dedent("""
        app: toy
        tier: ci
        recorded: test
        fields:
          sum: {value: 1.6449330668, rel: 1.0e-9}
          n: {value: 1000000, abs: 0, depends_on: [n]}
        """)
    )
    values = {"sum": 1.6449330668, "n": 5}
    assert not verify.verify("toy", "ci", values).ok
    v = verify.verify("toy", "ci", values, changed_inputs={"n"})
    assert v.ok and v.skipped == ["n"] and "1 not compared (inputs changed)" in v.summary()


def test_hpcc_reference_fails_the_epsilon_probes_fast_math_folds():
    """Measured: HPCC's src/noopt.c compiled with -Ofast prints dweps=0 and sweps=0."""
    v = verify.verify("hpcc", "ci", {"dweps": 0.0, "sweps": 0.0})
    assert any(m.startswith("dweps = 0, expected 1.11022e-16") for m in v.failures)
    assert any(m.startswith("sweps = 0, expected 5.96046e-08") for m in v.failures)


def test_load_site_bad_inputs(tmp_path):
    cfg = REPO / "site-config/settings.py"
    with pytest.raises(ApptuneError, match="settings.py: systems: unknown system 'mars'"):
        localrun.load_site("gnu", cfg, system="mars")
    bad = tmp_path / "settings.py"
    bad.write_text(
        "site_configuration = {'systems': [{'name': 'local', 'partitions': [{'name': 'p', "
        "'environs': ['e'], 'launcher': 'srun'}]}], 'environments': [{'name': 'e', "
        "'extras': {'family': 'gnu', 'mpi': 'x', 'mpi_standard': '3', 'blas': 'openblas'}}]}\n"
    )
    with pytest.raises(
        ApptuneError, match="launcher: 'srun': candidates run on this node with mpirun or local"
    ):
        localrun.load_site("e", bad)


@pytest.mark.slow
def test_toy_builds_runs_and_verifies_like_a_check(toy_root, tmp_path, gnu_toolchain):
    site = localrun.Site("gnu", gnu_toolchain, {}, "local", "test:local", {})
    r = recipes.load_recipe("toy")
    plan = localrun.plan_for(r, "tuned", site)
    prov = localrun.build_variant(r, plan, site, tmp_path / "b", use_cache=False)
    assert prov["variant"] == "tuned" and (tmp_path / "b/src/main.o").is_file()
    res = localrun.run_tier(r, "ci", tmp_path / "b", tmp_path / "run", site)
    assert res.ok, res.summary
    assert res.figures["rate"] == 123.5 and res.figures["wall_time"] > 0
    record = records.load_record(tmp_path / "run")
    assert record["trial"] and record["verification"]["ok"] and record["figures"] == res.figures
    # the same plan in the same stage is not built again
    (tmp_path / "b/marker").write_text("x")
    localrun.build_variant(r, plan, site, tmp_path / "b", use_cache=False)
    assert (tmp_path / "b/marker").is_file()


def test_ladder_everywhere_gives_rule_files_the_variants_flags(toy_root, gnu_toolchain):
    site = localrun.Site("gnu", gnu_toolchain, {}, "local", "test:local", {})
    r = recipes.load_recipe("toy")
    plan = localrun.plan_for(r, "tuned", site, ladder_everywhere=True)
    assert plan["per_file"][0]["files"] == ["acc.c"]
    assert plan["per_file"][0]["cflags"] == ["-O3", "-march=native", "-funroll-loops"]
    plan = localrun.plan_for(r, "tuned", site, extra_cflags=["-fno-math-errno"])
    assert plan["cflags"][-1] == "-fno-math-errno" and plan["variant"] == "tuned -fno-math-errno"


def test_a_failed_build_is_one_line_naming_its_log(toy_root, tmp_path, gnu_toolchain):
    (toy_root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ cflags | makeflags }} -Werror=this-is-not-a-flag\n"
    )
    site = localrun.Site("gnu", gnu_toolchain, {}, "local", "test:local", {})
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        localrun.build_variant(
            r, localrun.plan_for(r, "baseline", site), site, tmp_path / "b", use_cache=False
        )
    assert "build.log: baseline: build failed: " in str(e.value) and "make exited" in str(e.value)
