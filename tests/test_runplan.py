"""One run plan for both ways a variant runs (apptune/core/run/runplan.py): a check and a tune
or bisect trial make it with the same function, so what an install's environment sets
follows the placement in both."""

import json
from types import SimpleNamespace

import pytest

from apptune import placement as pl
from apptune.core.builds.buildtree import ENV_FILE
from apptune.core.data import recipes
from apptune.core.run import knobs, localrun, runner, runplan

#: An install's environment (its environment file): thread pools pinned to one thread.
INSTALL_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "LD_LIBRARY_PATH": "/opt/x"}


def _install(build, env=INSTALL_ENV):
    build.mkdir(parents=True, exist_ok=True)
    (build / ENV_FILE).write_text(json.dumps(env))
    return build


def _follows(env: dict, threads: int):
    """The install's thread counts follow the placement's; its other variables stay."""
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == str(threads), env
    assert env["LD_LIBRARY_PATH"] == "/opt/x"


@pytest.fixture
def calls(monkeypatch):
    """Every run plan made, through :func:`apptune.core.run.runplan.make` (the one way)."""
    made = []
    real = runplan.make

    def make(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(runplan, "make", make)
    return made


def _make(tmp_path, build_variant="tuned", **kw):
    """The toy's ci tier planned on 8-core nodes under mpirun, its build an install's."""
    build = _install(tmp_path / "b")
    (tmp_path / "s").mkdir(exist_ok=True)
    part = runplan.Partition("mpirun", "openmpi", 8, "squeue")
    r = recipes.load_recipe("toy")
    return runplan.make(
        r, "ci", part, stage=tmp_path / "s", build_dir=build, build_variant=build_variant, **kw
    )


def test_an_installs_thread_counts_follow_the_placement(toy_root, tmp_path):
    p = _make(tmp_path, ranks=4, ranks_per_node="half", threads=2, env={"EXTRA": "1"})
    _follows(p.env, 2)
    assert p.env["EXTRA"] == "1" and p.params["n"] == 1000000
    assert p.run_variant == "tuned@ranks=4,rpn=half,tpr=2"
    # 8 cores, 2 threads a rank, half of them: 2 ranks a node, 4 ranks on 2 nodes
    assert (p.layout.ranks_per_node, p.nodes) == (2, 2)
    # one thread a rank: the install's variables as they are, the scheduler packs the ranks
    p = _make(tmp_path, build_variant=None)
    assert p.env == INSTALL_ENV and p.nodes == 1 and p.run_variant is None and p.ranks == 1


def test_node_count_is_the_layouts_and_one_when_the_scheduler_packs():
    assert runplan.node_count(pl.layout(5, 2, 1, None)) == 3
    assert runplan.node_count(pl.layout(5, None, 1, None)) == 1
    assert runplan.node_count(pl.layout(4, "full", 2, 8)) == 1


def test_a_trial_runs_with_the_installs_thread_counts_following(
    toy_root, tmp_path, fake_trials, calls
):
    r = recipes.load_recipe("toy")
    site = fake_trials.site
    localrun.build_variant(r, localrun.plan_for(r, "tuned", site), site, tmp_path / "b")
    _install(tmp_path / "b")
    res = localrun.run_tier(r, "ci", tmp_path / "b", tmp_path / "run", site, threads=2)
    assert res.ok, res.summary
    (made,) = calls
    _follows(made.env, 2)
    spec = json.loads((tmp_path / "run" / runner.SPEC_FILE).read_text())
    _follows(spec["env"], 2)


def _check(tmp_path, build):
    """An application check of the toy's ci tier, as far as its placement needs it."""
    environ = SimpleNamespace(
        name="gnu",
        extras={"family": "gnu", "mpi": "openmpi", "mpi_standard": "3.1", "blas": "openblas"},
        cc="gcc",
        cxx="g++",
        ftn="gfortran",
    )
    partition = SimpleNamespace(
        launcher_type=SimpleNamespace(registered_name="mpirun"),
        processor=SimpleNamespace(num_cpus=4),
        scheduler=SimpleNamespace(registered_name="local"),
    )
    (tmp_path / "stage").mkdir()
    return SimpleNamespace(
        app="toy",
        recipe=recipes.load_recipe("toy"),
        tier="ci",
        unique_name="ToyCheck",
        stagedir=str(tmp_path / "stage"),
        build=SimpleNamespace(stagedir=str(build)),
        build_variant="tuned",
        num_ranks=None,
        ranks_per_node=None,
        threads_per_rank=2,
        binding=None,
        num_tasks_per_node=None,
        num_cpus_per_task=None,
        asked_knobs=knobs.Asked.of(),
        current_partition=partition,
        current_environ=environ,
        job=SimpleNamespace(launcher=SimpleNamespace(options=[])),
    )


def test_a_check_runs_with_the_installs_thread_counts_following(toy_root, tmp_path, calls):
    from apptune.rfm.check import AppRun

    check = _check(tmp_path, _install(tmp_path / "b"))
    AppRun.apply_placement(check)
    (made,) = calls
    assert check.run_plan is made
    _follows(check.run_plan.env, 2)
    assert (check.num_tasks, check.num_cpus_per_task) == (1, 2)
    assert check.job.launcher.options == ["--map-by", "slot:PE=2"]
    assert check.run_plan.run_variant == "tuned@tpr=2"
