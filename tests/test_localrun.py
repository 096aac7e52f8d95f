"""Building and running a variant outside ReFrame (apptune/core/run/localrun.py): inputs with
overridden parameters, verification that skips fields of changed inputs, a real
build and run of the toy app, and bad inputs."""

import textwrap
from pathlib import Path

import pytest

from apptune.core.data import inputs, recipes
from apptune.core.data.site import Site, load_site
from apptune.core.run import localrun
from apptune.core.verification import verify
from apptune.errors import ApptuneError
from apptune.history import records


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


# --------------------------------------------------------------------------- the site
EXTRAS = {"family": "gnu", "mpi": "openmpi", "mpi_standard": "3.1", "blas": "openblas"}


def _config(
    tmp_path, partition=None, environment=None, system=None, more_envs=(), name="settings.py", **top
):
    """A ReFrame site config with system ``local``, partition ``p`` (local scheduler and
    launcher) and environment ``e``; a key given as None is left out."""
    env = {"name": "e", "cc": "gcc", "extras": EXTRAS, **(environment or {})}
    part = {"name": "p", "scheduler": "local", "launcher": "local", "environs": ["e"]}
    part = {k: v for k, v in {**part, **(partition or {})}.items() if v is not None}
    sysdef = {"name": "local", "hostnames": [".*"], "partitions": [part], **(system or {})}
    cfg = {"systems": [sysdef], "environments": [env, *more_envs], **top}
    f = tmp_path / name
    f.write_text(f"site_configuration = {cfg!r}\n")
    return f


@pytest.mark.parametrize(
    "partition, system, environment, message",
    [
        ({}, "mars", "e", "settings.py: systems: unknown system 'mars' (known: local, generic)"),
        ({}, "local", "x", "settings.py: environments: unknown environment 'x' (known: "),
        (
            {},
            "local:q",
            "e",
            "settings.py: systems.local.partitions: unknown partition 'q' of 'local' (known: p)",
        ),
        (
            {"scheduler": None},
            "local",
            "e",
            "settings.py: site_configuration: could not validate configuration files: ",
        ),
        (
            {"launcher": "teleport"},
            "local",
            "e",
            "settings.py: systems.local: failed to initialize partition 'local:p': "
            "no such launcher: 'teleport'",
        ),
        (
            {"scheduler": "squeue", "launcher": "srun"},
            "local",
            "e",
            "settings.py: systems.local.partitions.p.scheduler: 'squeue': this partition's jobs "
            "go to Slurm and a trial runs on this node: run it inside an allocation (salloc)",
        ),
        (
            {"scheduler": "pbs", "launcher": "mpiexec"},
            "local:p",
            "e",
            "settings.py: systems.local.partitions.p.scheduler: 'pbs' with launcher 'mpiexec': "
            "a trial runs on this node only with the local scheduler",
        ),
    ],
)
def test_load_site_bad_inputs_are_one_line(
    tmp_path, monkeypatch, partition, system, environment, message
):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    cfg = _config(tmp_path, partition)
    with pytest.raises(ApptuneError) as e:
        load_site(environment, cfg, system=system)
    assert f"{cfg.parent.name}/{message}" in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_inside_a_slurm_allocation_srun_gets_the_trials_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    cfg = _config(tmp_path, {"scheduler": "squeue", "launcher": "srun", "access": ["-pcpu"]})
    s = load_site("e", cfg, system="local:p")
    assert (s.launcher, s.scheduler, s.access) == ("srunalloc", "squeue", ["-pcpu"])


def test_the_site_config_is_read_by_reframe_per_system(tmp_path):
    """An environment redefined for another system (``target_systems``, as the cluster
    files add SLURM_MPI_TYPE) is that system's only; the partition's variables come
    first, then the environment's, expanded as the job script expands them."""
    elsewhere = {
        "name": "e",
        "target_systems": ["elsewhere"],
        "cc": "gcc",
        "env_vars": [["C", "elsewhere"]],
        "extras": dict(EXTRAS, mpi="mpich"),
    }
    cfg = _config(
        tmp_path,
        {"env_vars": [["A", "partition"], ["B", "partition"]]},
        {"env_vars": [["B", "environment"], ["C", "$A-$B"]]},
        more_envs=[elsewhere],
    )
    s = load_site("e", cfg)
    assert (s.system, s.partition, s.launcher, s.scheduler) == ("local", "p", "local", "local")
    assert s.env["A"] == "partition" and s.env["B"] == "environment"
    assert s.env["C"] == "partition-environment" and s.toolchain.mpi == "openmpi"


def test_modules_are_loaded_as_the_job_script_loads_them(tmp_path):
    """The environment's modules are loaded by the modules system's own commands, after
    its prepare_cmds, so a tool only a module provides is found and used."""
    root = tmp_path / "modules"
    tool = root / "mytool/bin/mytool-cc"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    env = {
        # a stand-in for Spack's shell function: `spack load NAME` puts NAME's bin first
        "prepare_cmds": [f'spack() {{ export PATH="{root}/$2/bin:$PATH"; }}'],
        "modules": ["mytool"],
        "extras": dict(EXTRAS, requires={"all": ["mytool-cc"]}),
    }
    spack = {"modules_system": "spack"}
    general = [{"resolve_module_conflicts": False}]  # no Spack installation to ask
    cfg = _config(tmp_path, {}, env, spack, general=general)
    s = load_site("e", cfg)
    assert s.env["PATH"].startswith(f"{root}/mytool/bin:")
    assert s.environ()["PATH"] == s.env["PATH"]
    cfg = _config(tmp_path, {}, dict(env, modules=[]), spack, general=general, name="other.py")
    with pytest.raises(ApptuneError, match="extras.requires: compiler/tool mytool-cc not found"):
        load_site("e", cfg)


# --------------------------------------------------------------------------- the launch
SPREAD = (
    "  executable: toy\n  placements:\n"
    "    spread:\n"
    "      distribution: spread\n"
    "      unsupported: {mpich: Hydra maps this toy's ranks by itself}\n"
)


def _site(toolchain, launcher: str, mpi: str = "openmpi", scheduler="local", num_cpus=None):
    from dataclasses import replace

    tc = replace(toolchain, mpi=mpi)
    return Site("gnu", tc, {}, launcher, "p", {}, "test", scheduler, num_cpus)


@pytest.mark.parametrize(
    "launcher, mpi, kw, argv",
    [
        ("mpirun", "openmpi", {}, ["mpirun", "-np", "4"]),
        (
            "mpirun",
            "openmpi",
            {"threads": 2, "binding": "core"},
            ["mpirun", "-np", "4", "--map-by", "slot:PE=2", "--bind-to", "core"],
        ),
        ("mpiexec", "mpich", {"binding": "socket"}, ["mpiexec", "-n", "4", "-bind-to", "socket"]),
        (
            "mpirun",
            "intelmpi",
            {"placement": "spread"},
            ["mpirun", "-np", "4", "-genv", "I_MPI_PIN_ORDER", "scatter"],
        ),
        (
            "srunalloc",
            "openmpi",
            {"ranks_per_node": "half", "threads": 2, "binding": "core"},
            ["srun", "--ntasks=4", "--ntasks-per-node=1", "--cpus-per-task=2", "--cpu-bind=cores"],
        ),
        (
            "mpirun",
            "openmpi",
            {"placement": "spread", "binding": "none"},
            ["mpirun", "-np", "4", "--map-by", "socket", "--bind-to", "none"],
        ),
        (
            "srunalloc",
            "openmpi",
            {"placement": "spread"},
            ["srun", "--ntasks=4", "--distribution=block:cyclic"],
        ),
    ],
)
def test_a_trial_is_launched_by_reframes_launcher_with_the_checks_placement(
    toy_root, gnu_toolchain, launcher, mpi, kw, argv
):
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("  executable: toy\n", SPREAD))
    site = _site(gnu_toolchain, launcher, mpi, num_cpus=4)
    plan = _plan(recipes.load_recipe("toy"), site, toy_root, **kw)
    assert localrun.launch_line(site, plan) == argv
    if kw.get("threads"):
        assert plan.placement.env == {"OMP_NUM_THREADS": "2"}
        assert plan.placement.num_cpus_per_task == 2 and plan.env["OMP_NUM_THREADS"] == "2"


def _plan(recipe, site, root: Path, ranks=4, **kw):
    """A trial's run plan of the toy's ci tier with ``ranks`` ranks, staged in ``root``."""
    (root / "stage").mkdir(exist_ok=True)
    return localrun.plan_run(recipe, "ci", site, root / "stage", root, ranks, **kw)


def test_a_placement_a_trial_cannot_apply_is_one_line(toy_root, gnu_toolchain):
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("  executable: toy\n", SPREAD))
    r = recipes.load_recipe("toy")
    mpich = _site(gnu_toolchain, "mpiexec", "mpich")
    with pytest.raises(ApptuneError) as e:
        _plan(r, mpich, toy_root, 2, placement="spread")
    assert str(e.value).endswith(
        "toy.yaml: run.placements.spread: placement 'spread' does not run under MPI 'mpich': "
        "Hydra maps this toy's ranks by itself"
    )
    local = _site(gnu_toolchain, "local")
    with pytest.raises(ApptuneError, match="placement 'spread': launcher 'local' places no ranks"):
        _plan(r, local, toy_root, 2, placement="spread")
    with pytest.raises(ApptuneError, match="toy.yaml: run.placements: unknown placement 'near'"):
        _plan(r, mpich, toy_root, 2, placement="near")
    local = _site(gnu_toolchain, "local")
    with pytest.raises(ApptuneError, match="^placement: binding=core: launcher 'local' cannot"):
        _plan(r, local, toy_root, 2, binding="core")
    srun = _site(gnu_toolchain, "srunalloc", scheduler="squeue")  # a node's cores unknown
    with pytest.raises(ApptuneError, match="ranks_per_node=half needs the cores of a node"):
        _plan(r, srun, toy_root, 2, ranks_per_node="half")


def test_the_run_variant_is_spelled_as_a_checks():
    assert localrun.pl.run_variant("tuned", "default", None, 1, None) == "tuned"
    assert localrun.pl.run_variant("tuned", "bound", "half", 2, "core") == (
        "tuned@bound@rpn=half,tpr=2,bind=core"
    )


@pytest.mark.slow
def test_toy_builds_runs_and_verifies_like_a_check(toy_root, tmp_path, gnu_toolchain):
    site = Site("gnu", gnu_toolchain, {}, "local", "default", {}, "test")
    r = recipes.load_recipe("toy")
    plan = localrun.plan_for(r, "tuned", site)
    prov = localrun.build_variant(r, plan, site, tmp_path / "b", use_cache=False)
    assert prov.variant == "tuned" and (tmp_path / "b/src/main.o").is_file()
    res = localrun.run_tier(r, "ci", tmp_path / "b", tmp_path / "run", site)
    assert res.ok, res.summary
    assert res.figures["rate"] == 123.5 and res.figures["wall_time"] > 0
    record = records.load_record(tmp_path / "run").data()
    assert record["trial"] and record["verification"]["ok"] and record["figures"] == res.figures
    # named as a check of this build on partition test:default would be
    assert (record["system"], record["partition"], record["test"]) == ("test", "default", "trial")
    assert (record["variant"], record["build_variant"], record["placement"]) == (
        "tuned",
        "tuned",
        "default",
    )
    job = record["job"]
    assert job["scheduler"] == "local" and job["state"] == "SUCCESS" and job["jobid"].isdigit()
    assert record["placement_layout"] == {
        "ranks": 1,
        "ranks_per_node": None,
        "threads_per_rank": 1,
        "nodes": None,
        "binding": None,
    }
    assert "sum=1.6449330668" in (tmp_path / "run/toy.out").read_text()
    # the same plan in the same stage is not built again
    (tmp_path / "b/marker").write_text("x")
    localrun.build_variant(r, plan, site, tmp_path / "b", use_cache=False)
    assert (tmp_path / "b/marker").is_file()


def test_a_stage_relative_to_the_working_directory_builds(
    toy_root, tmp_path, gnu_toolchain, monkeypatch
):
    """``bisect --between --work-dir runs/b``: the build runs in its stage directory, so the
    paths it is given are absolute."""
    site = Site("gnu", gnu_toolchain, {}, "local", "default", {}, "test")
    r = recipes.load_recipe("toy")
    monkeypatch.chdir(tmp_path)
    plan = localrun.plan_for(r, "baseline", site)
    localrun.build_variant(r, plan, site, Path("rel/b"), use_cache=False)
    assert (tmp_path / "rel/b/provenance.json").is_file()


def test_ladder_everywhere_gives_rule_files_the_variants_flags(toy_root, gnu_toolchain):
    site = Site("gnu", gnu_toolchain, {}, "local", "default", {}, "test")
    r = recipes.load_recipe("toy")
    plan = localrun.plan_for(r, "tuned", site, ladder_everywhere=True)
    assert plan.per_file[0].files == ["acc.c"]
    assert plan.per_file[0].cflags == ["-O3", "-march=native", "-funroll-loops"]
    plan = localrun.plan_for(r, "tuned", site, extra_cflags=["-fno-math-errno"])
    assert plan.cflags[-1] == "-fno-math-errno" and plan.variant == "tuned -fno-math-errno"


def test_a_failed_build_is_one_line_naming_its_log(toy_root, tmp_path, gnu_toolchain):
    (toy_root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ cflags | makeflags }} -Werror=this-is-not-a-flag\n"
    )
    site = Site("gnu", gnu_toolchain, {}, "local", "default", {}, "test")
    r = recipes.load_recipe("toy")
    with pytest.raises(ApptuneError) as e:
        localrun.build_variant(
            r, localrun.plan_for(r, "baseline", site), site, tmp_path / "b", use_cache=False
        )
    assert "build.log: baseline: build failed: " in str(e.value) and "make exited" in str(e.value)
