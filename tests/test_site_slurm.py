"""Unit tests: cluster YAML -> ReFrame config, Slurm job outcomes and their reasons,
runtime placement. The real Slurm is exercised in tests/test_slurm.py."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apptune import models, placement
from apptune.core.data import site
from apptune.core.run import quality, ranks, slurm
from apptune.errors import ApptuneError
from apptune.models.cluster import RunQualityLimits

REPO = Path(__file__).resolve().parent.parent
BASE_ENVS = [
    {"name": "gnu", "cc": "mpicc", "env_vars": [["OMPI_CC", "gcc"]], "extras": {"mpi": "openmpi"}},
    {"name": "gnu-mpich", "cc": "mpicc", "env_vars": [], "extras": {"mpi": "mpich"}},
]


def write(d: Path, name: str, text: str) -> Path:
    d.mkdir(exist_ok=True)
    f = d / f"{name}.yaml"
    f.write_text(text)
    return f


# ------------------------------------------------------------------ site config
def test_a_cluster_in_a_few_lines(tmp_path):
    write(
        tmp_path,
        "mycluster",
        """
hostnames: ['login[0-9]+']
modules_system: lmod
partitions:
  compute: {sbatch: [--partition=cpu, --account=proj42], cores_per_node: 128}
environments:
  gnu: {modules: [gcc/12.2, openmpi/4.1], env_vars: {SLURM_MPI_TYPE: pmix}}
""",
    )
    cfg = site.load_clusters(tmp_path, BASE_ENVS)
    (system,) = cfg["systems"]
    assert system["name"] == "mycluster" and system["hostnames"] == ["login[0-9]+"]
    assert system["modules_system"] == "lmod"
    (part,) = system["partitions"]
    assert part["scheduler"] == "squeue" and part["launcher"] == "srun"
    assert part["access"] == ["--partition=cpu", "--account=proj42", "--no-requeue"]
    assert part["processor"] == {"num_cpus": 128, "num_cpus_per_core": 1}
    assert part["environs"] == ["gnu"] and part["max_jobs"] == 8
    assert part["extras"]["exclusive_node"] is False
    assert part["extras"]["slurm_watch"] == {"slurmctld_timeout": 600, "down_node_wait": 300}
    # ReFrame reads sched_options per partition; node waits are apptune's (bounded), not ReFrame's
    assert part["sched_options"] == {
        "slurm_job_cancel_reasons": ["PartitionDown", "PartitionInactive"]
    }
    (env,) = cfg["environments"]
    assert env["target_systems"] == ["mycluster"] and env["modules"] == ["gcc/12.2", "openmpi/4.1"]
    assert env["env_vars"] == [["OMPI_CC", "gcc"], ["SLURM_MPI_TYPE", "pmix"]]
    assert env["extras"] == {"mpi": "openmpi"}
    modes = {m["name"]: m for m in cfg["modes"]}
    assert set(modes) == {"ci", "dev", "nightly", "placement", "nodes"}
    assert all(m["target_systems"] == ["mycluster"] for m in modes.values())
    assert "--distribute=idle" in modes["nodes"]["options"]
    assert "exclusive_access=true" in modes["nightly"]["options"]
    assert "ranks_per_node=full,half" in modes["placement"]["options"]


def test_exclusive_partition_and_no_hostnames(tmp_path):
    write(
        tmp_path, "c1", "partitions: {energy: {exclusive: true, launcher: mpirun}}\nrequeue: true\n"
    )
    (system,) = site.load_clusters(tmp_path, BASE_ENVS)["systems"]
    assert system["hostnames"] == [site.NEVER]
    (part,) = system["partitions"]
    assert part["access"] == ["--exclusive"] and part["extras"]["exclusive_node"] is True
    assert part["launcher"] == "mpirun" and "processor" not in part
    assert part["environs"] == ["gnu", "gnu-mpich"]


@pytest.mark.parametrize(
    "text, field",
    [
        ("partitions: {p: {launcher: aprun}}", "partitions.p.launcher"),
        ("partitions: {p: {sbtach: [-p, x]}}", "partitions.p.sbtach"),
        ("partitions: {p: {environs: [intel]}}", "partitions.p.environs"),
        ("partitions: {p: {cores_per_node: 0}}", "partitions.p.cores_per_node"),
        ("partitions: {p: {}}\nenvironments: {pgi: {modules: [pgi]}}", "environments.pgi"),
        ("partitions: {}", "partitions"),
        ("hostnames: ['login[']\npartitions: {p: {}}", "hostnames"),
        ("slurmctld_timeout: 5\npartitions: {p: {}}", "slurmctld_timeout"),
        ("down_node_wait: soon\npartitions: {p: {}}", "down_node_wait"),
        ("partitions: {p: {run_quality: {max_stael: 0.1}}}", "partitions.p.run_quality.max_stael"),
        (
            "partitions: {p: {run_quality: {max_outside_cpu: 30}}}",
            "partitions.p.run_quality.max_outside_cpu",
        ),
        ("partitions: {p: {run_quality: {max_steal: 0}}}", "partitions.p.run_quality.max_steal"),
        ("partitions: {p: {run_quality: 0.3}}", "partitions.p.run_quality"),
        ("partitions: {p: {quiet_wait_s: -5}}", "partitions.p.quiet_wait_s"),
        ("partitions: {p: {quiet_wait_s: a while}}", "partitions.p.quiet_wait_s"),
        ("partitions: {p: {extras: {run_quality: {}}}}", "partitions.p.extras"),
    ],
)
def test_bad_cluster_file_names_file_and_field(tmp_path, text, field):
    f = write(tmp_path, "bad", text)
    with pytest.raises(ApptuneError) as e:
        site.load_clusters(tmp_path, BASE_ENVS)
    assert e.value.file == str(f) and e.value.field == field, str(e.value)


def test_a_shared_partition_sets_its_run_quality_limits_and_quiet_wait(tmp_path):
    """Small or shared nodes that are never quiet enough for the defaults get wider limits
    (and a wait); ReFrame's own loader takes them as the partition's extras, which the
    runner reads."""
    cfg = tmp_path / "site-config"
    shutil.copytree(REPO / "site-config", cfg)
    write(
        cfg / "clusters",
        "shared",
        "partitions:\n  small:\n    run_quality: {max_outside_cpu: 0.25, max_steal: 0.05}\n"
        "    quiet_wait_s: 90\n  default: {}\n",
    )
    site_cfg = site.load_reframe_config(cfg / "settings.py")
    parts = {
        p["name"]: p for s in site_cfg["systems"] if s["name"] == "shared" for p in s["partitions"]
    }
    assert parts["small"]["extras"]["run_quality"] == {"max_steal": 0.05, "max_outside_cpu": 0.25}
    assert parts["small"]["extras"]["quiet_wait_s"] == 90
    assert "run_quality" not in parts["default"]["extras"]  # the defaults
    assert "quiet_wait_s" not in parts["default"]["extras"]
    assert quality.Limits.from_dict(parts["small"]["extras"]["run_quality"]).max_freq_spread == 0.1
    # the cluster's fields are the runner's limits, one for one
    assert set(RunQualityLimits.model_fields) == set(quality.Limits.__dataclass_fields__)
    bad = tmp_path / "bad"  # ReFrame loads a config file once per process
    shutil.copytree(REPO / "site-config", bad)
    write(bad / "clusters", "shared", "partitions: {small: {run_quality: {max_outside_cpu: 5}}}")
    with pytest.raises(ApptuneError) as e:
        site.load_reframe_config(bad / "settings.py")
    assert str(e.value).endswith(
        "clusters/shared.yaml: partitions.small.run_quality.max_outside_cpu: "
        "must be less than or equal to 1 (got 5)"
    )


def test_cluster_file_name_is_the_system_name(tmp_path):
    write(tmp_path, "my cluster", "partitions: {p: {}}")
    with pytest.raises(ApptuneError, match="file name is the ReFrame system name"):
        site.load_clusters(tmp_path, BASE_ENVS)


def test_shipped_site_config_lists_localslurm_with_plain_reframe(tmp_path):
    reframe = str(Path(sys.executable).with_name("reframe"))
    p = subprocess.run(
        [
            reframe,
            "-C",
            str(REPO / "site-config/settings.py"),
            "-c",
            str(REPO / "reframe-checks/hpcc"),
            "--system",
            "localslurm:batch",
            "--mode",
            "ci",
            "-S",
            "valid_prog_environs=gnu",
            "-n",
            "HPCCCheck%tier=ci%build.variant=tuned$",
            "-l",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "HPCCCheck %tier=ci %build.variant=tuned" in p.stdout
    assert "~localslurm:batch+gnu" in p.stdout


# ------------------------------------------------------------------ job outcomes
def test_squeue_line_and_explanations():
    text = "12|TIMEOUT|n1|TimeLimit|1:00\n13|COMPLETED|n2|None|5:00\n"
    o = slurm.parse_squeue(text, "12")
    assert (o.state, o.nodes, o.time_limit) == ("TIMEOUT", "n1", "1:00")
    assert (
        slurm.explain(o)
        == "job exceeded its time limit (1:00) (Slurm job 12: TIMEOUT, reason TimeLimit)"
    )
    assert slurm.explain(slurm.parse_squeue(text, "13")) is None
    assert slurm.parse_squeue(text, "14") is None
    nf = slurm.parse_squeue("7|NODE_FAIL|n2|NodeDown|5:00", "7")
    nodes = slurm.parse_sinfo("n2|down|apptune test: node failure\n")
    assert slurm.explain(nf, nodes) == (
        "node DOWN: n2 failed while the job ran; now n2 is down "
        "(apptune test: node failure) (Slurm job 7: NODE_FAIL, reason NodeDown)"
    )
    cancelled = slurm.parse_sacct("9|CANCELLED by 0|n1|None|10:00\n9.batch|CANCELLED|n1||\n", "9")
    assert cancelled.state == "CANCELLED" and cancelled.source == "sacct"
    assert slurm.explain(cancelled).startswith("job was cancelled (no reason given)")


def test_query_job_falls_back_to_sacct_and_tells_unreachable_from_unknown():
    calls = []

    def runner(cmd, timeout=30):
        calls.append(cmd[0])
        if cmd[0] == "squeue":
            return 1, "slurm_load_jobs error: Invalid job id specified"
        return 1, "Slurm accounting storage is disabled"

    o, why = slurm.query_job("5", run=runner)
    assert o is None and calls == ["squeue", "sacct"]
    assert "MinJobAge" in why
    # a failed squeue says nothing about the job: never "no longer known", never "completed"
    with pytest.raises(slurm.ControllerUnreachable, match="Unable to contact slurm controller"):
        slurm.query_job(
            "5",
            run=lambda cmd, timeout=30: (
                1,
                "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
            ),
        )
    o, _ = slurm.query_job("5", run=lambda cmd, timeout=30: (0, "5|RUNNING|n1|None|5:00|batch|\n"))
    assert (o.state, o.partition, o.requested_nodes) == ("RUNNING", "batch", "")


# ------------------------------------------------------------------ the job watch
UNREACHABLE = (1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
BLOCKED = (
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
)


class FakeSlurm:
    """squeue answers from a script (the last one repeats), sinfo from a node table,
    scancel recorded; time advances only by the watch's own sleeps and polls."""

    def __init__(self, squeue, nodes=None):
        self.squeue = list(squeue)
        self.nodes = dict(nodes or {})
        self.calls, self.cancelled, self.sleeps = [], [], []
        self.now = 1000.0

    def run(self, cmd, timeout=30):
        self.calls.append(cmd)
        if cmd[0] == "squeue":
            ans = self.squeue.pop(0) if len(self.squeue) > 1 else self.squeue[0]
            return (0, f"42|{ans}\n") if isinstance(ans, str) else ans
        if cmd[0] == "sinfo":
            want = cmd[cmd.index("-n") + 1].split(",") if "-n" in cmd else list(self.nodes)
            return 0, "".join(f"{n}|{s}|{r}\n" for n, (s, r) in self.nodes.items() if n in want)
        if cmd[0] == "scancel":
            self.cancelled.append(cmd[1])
            self.squeue = [f"CANCELLED||{BLOCKED}|5:00|batch|"]
            return 0, ""
        return 1, f"{cmd[0]}: not faked"

    def clock(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s

    def watch(self, status_file=None, **settings):
        return slurm.JobWatch(
            lambda: "42",
            slurm.WatchSettings(**settings),
            run=self.run,
            clock=self.clock,
            sleep=self.sleep,
            status_file=status_file,
        )


def test_a_job_stuck_completing_on_a_dead_node_is_shown_as_slurm_says(tmp_path):
    """A dead slurmd holds a job in COMPLETING for minutes: the run's progress line says
    so, with the node's state, instead of only the minutes elapsed."""
    from apptune.core.run import progress

    stage = tmp_path / "stage/cluster/compute/gnu/T0"
    stage.mkdir(parents=True)
    f = FakeSlurm(
        ["RUNNING|n1|None|5:00|batch|", "COMPLETING|n1|None|5:00|batch|"],
        nodes={"n1": ("down*", "Not responding")},
    )
    w = f.watch(status_file=stage / "slurm-state.txt")
    p = progress.Follower(tmp_path, clock=lambda: 0.0)
    assert w.step() is False and p.slurm_says() is None  # running: nothing to add
    assert w.step() is False
    said = p.slurm_says()
    assert said == "Slurm job 42 COMPLETING on n1; n1 is down* (Not responding)", said
    assert said in p.status()


def test_settle_waits_through_a_slurmctld_outage_for_the_real_end():
    # ReFrame's squeue backend counted the job as completed at the first failed squeue;
    # the job was still running, and slurmctld comes back after three unanswered polls
    f = FakeSlurm(
        [
            UNREACHABLE,
            UNREACHABLE,
            UNREACHABLE,
            "RUNNING|n1|None|5:00|batch|",
            "COMPLETED|n1|None|5:00|batch|",
        ]
    )
    w = f.watch(slurmctld_timeout=600)
    w.settle()
    assert w.done and w.verdict is None and w.outcome.state == "COMPLETED"
    assert f.sleeps == [2, 4, 8, 5]  # backoff while unreachable, then the poll pace
    info, verdict = w.record({"jobid": "42"})
    assert verdict is None and info["state"] == "COMPLETED" and info["nodes"] == "n1"
    assert not f.cancelled


def test_settle_gives_up_after_slurmctld_timeout_and_leaves_the_job():
    f = FakeSlurm(["RUNNING|n1|None|5:00|batch|", UNREACHABLE])
    w = f.watch(slurmctld_timeout=120, max_backoff=30)
    assert w.step() is False  # the watch thread saw it running
    w.settle()
    assert w.done and not f.cancelled
    assert max(f.sleeps) == 30 and f.now - 1000.0 == 120
    info, verdict = w.record({"jobid": "42"})
    assert verdict == (
        "slurmctld could not be reached for 120 s: Slurm job 42 (last seen RUNNING on n1) "
        "is left as it is (slurm_load_jobs error: Unable to contact slurm controller "
        "(connect failure))"
    )
    assert info["state"] == "RUNNING"


def test_job_pending_on_down_nodes_is_cancelled_after_the_wait_naming_them():
    f = FakeSlurm(
        [f"PENDING||{BLOCKED}|5:00|batch|"],
        nodes={"n1": ("idle", "none"), "n2": ("down", "disk failure"), "n3": ("drained", "none")},
    )
    w = f.watch(down_node_wait=60, poll=10)
    for _ in range(6):  # 50 s of polls: still waiting
        assert w.step() is False
        f.now += 10
    assert not f.cancelled
    assert w.step() is False and f.cancelled == ["42"]
    assert w.step() is True  # now CANCELLED
    info, verdict = w.record({"jobid": "42"})
    assert verdict == (
        "job cancelled after 60 s pending on unavailable nodes: n2 is down (disk failure), "
        f"n3 is drained (Slurm job 42, reason {BLOCKED})"
    )
    assert info["state"] == "CANCELLED"
    # sinfo asked about the job's partition (the job named no nodes)
    assert ["sinfo", "-h", "-N", "-o", "%N|%T|%E", "-p", "batch"] in f.calls


@pytest.mark.parametrize(
    "reason, nodes, cancelled",
    [
        # waiting for busy nodes is a normal wait
        ("Resources", {"n1": ("down", "dead")}, False),
        # the long reason also covers nodes reserved for other partitions: none is down here
        (BLOCKED, {"n1": ("allocated", "none"), "n2": ("idle", "none")}, False),
        # Slurm's backfill can report ReqNodeNotAvail for healthy nodes
        ("ReqNodeNotAvail, UnavailableNodes:n3", {"n3": ("idle", "none")}, False),
        ("ReqNodeNotAvail, UnavailableNodes:n3", {"n3": ("idle*", "none")}, True),  # not responding
        ("ReqNodeNotAvail, UnavailableNodes:n3", {"n3": ("down*", "Not responding")}, True),
    ],
)
def test_only_waits_on_unavailable_nodes_are_cancelled(reason, nodes, cancelled):
    f = FakeSlurm([f"PENDING||{reason}|5:00|batch|"], nodes=nodes)
    w = f.watch(down_node_wait=0)
    w.step()
    assert bool(f.cancelled) is cancelled
    assert (w.verdict is not None) is cancelled


def test_the_wait_restarts_when_the_nodes_come_back():
    f = FakeSlurm([f"PENDING||{BLOCKED}|5:00|batch|"], nodes={"n1": ("down", "reboot")})
    w = f.watch(down_node_wait=30)
    w.step()
    f.now += 20
    f.nodes["n1"] = ("idle", "none")  # back, but the job is not scheduled yet
    w.step()
    f.nodes["n1"] = ("down", "reboot")  # down again: a new 30 s
    f.now += 1
    w.step()
    f.now += 20
    w.step()
    assert not f.cancelled
    f.now += 10
    w.step()
    assert f.cancelled == ["42"]


def test_watch_thread_cancels_while_reframe_polls_and_settle_keeps_the_verdict():
    f = FakeSlurm(
        ["PENDING||ReqNodeNotAvail, UnavailableNodes:n2|5:00|batch|n2"],
        nodes={"n2": ("drained", "maintenance")},
    )
    jobid = []
    w = slurm.JobWatch(
        lambda: jobid[0] if jobid else None,
        slurm.WatchSettings(down_node_wait=0, poll=0.01),
        run=f.run,
    )
    w.start()
    jobid.append("42")  # ReFrame submitted the job
    w._thread.join(timeout=10)
    assert f.cancelled == ["42"]
    w.settle()
    info, verdict = w.record({})
    assert verdict.startswith(
        "job cancelled after 0 s pending on unavailable nodes: n2 is drained (maintenance)"
    )
    assert info["state"] == "CANCELLED"


def test_a_job_slurmctld_forgot_is_recorded_with_a_note():
    f = FakeSlurm([(1, "slurm_load_jobs error: Invalid job id specified")])
    w = f.watch()
    w.settle()
    info, verdict = w.record({"jobid": "42"})
    assert verdict is None and "MinJobAge" in info["note"]


@pytest.mark.parametrize(
    "fail_reason, expected",
    [
        (
            "spawned process error: command 'sbatch rfm_job.sh' failed with exit code 1:\n--- "
            "stdout ---\n"
            "--- stderr ---\nsbatch: error: Batch job submission failed: Unable to contact slurm "
            "controller "
            "(connect failure)\n\n--- stderr ---",
            "slurmctld unreachable at submit: Unable to contact slurm controller (connect failure)",
        ),
        (
            "job blocked: job cancelled because it was blocked due to reason: ReqNodeNotAvail, "
            "UnavailableNodes:n1",
            "job cancelled while pending, its nodes cannot run it: ReqNodeNotAvail, "
            "UnavailableNodes:n1",
        ),
        (
            "--- stderr ---\nsbatch: error: invalid partition specified: gpu\n"
            "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
            "sbatch refused the job: Batch job submission failed: Invalid partition name specified",
        ),
        ("sanity error: HPL_N = 3000, expected 3520", None),
        (None, None),
    ],
)
def test_reframe_scheduler_failures_get_a_clear_reason(fail_reason, expected):
    assert slurm.explain_reframe_failure(fail_reason) == expected


# ------------------------------------------------------------------ placement
def test_layouts():
    assert placement.layout(2, None, 1, None).to_dict() == {
        "ranks": 2,
        "ranks_per_node": None,
        "threads_per_rank": 1,
        "nodes": None,
    }
    full = placement.layout(256, "full", 1, 128)
    assert (full.ranks_per_node, full.nodes) == (128, 2)
    half = placement.layout(256, "half", 1, 128)
    assert (half.ranks_per_node, half.nodes) == (64, 4)
    hybrid = placement.layout(64, "full", 4, 128)
    assert (hybrid.ranks_per_node, hybrid.nodes) == (32, 2)
    assert placement.layout(2, "8", 1, None).ranks_per_node == 2  # never more per node than ranks
    assert placement.layout(3, 2, 1, None).nodes == 2


@pytest.mark.parametrize(
    "args, message",
    [
        ((2, "half", 1, None), "needs the cores of a node"),
        ((2, "half", 4, 4), "leaves no rank"),
        ((2, "most", 1, 8), "give full, half or a number"),
        ((2, None, 0, 8), "threads_per_rank=0"),
    ],
)
def test_bad_layouts(args, message):
    with pytest.raises(placement.PlacementError, match=message):
        placement.layout(*args)


def test_threads_per_rank_get_their_cores_and_every_pinned_pool():
    # Open MPI binds up to two ranks to one core each by default: a 2-thread rank
    # would run both threads on one core
    assert placement.binding_options(None, "mpirun", "openmpi", 2) == ["--map-by", "slot:PE=2"]
    assert placement.binding_options("core", "mpirun", "openmpi", 4) == [
        "--map-by",
        "slot:PE=4",
        "--bind-to",
        "core",
    ]
    assert placement.binding_options("none", "mpirun", "openmpi", 2) == ["--bind-to", "none"]
    assert placement.binding_options("core", "mpiexec", "mpich", 2) == ["-bind-to", "core:2"]
    assert placement.binding_options(None, "srun", "openmpi", 2) == []  # --cpus-per-task does it
    assert placement.binding_options(None, "local", "openmpi", 2) == []
    with pytest.raises(placement.PlacementError, match="no binding options known for MPI 'cray'"):
        placement.binding_options(None, "mpirun", "cray", 2)
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "FOO": "1"}
    assert placement.thread_env(env, 2) == {
        "MKL_NUM_THREADS": "2",
        "OMP_NUM_THREADS": "2",
        "OPENBLAS_NUM_THREADS": "2",
    }
    assert placement.thread_env({}, 3) == {"OMP_NUM_THREADS": "3"}


def test_binding_per_launcher_and_mpi():
    assert placement.binding_options("core", "srun", "openmpi") == ["--cpu-bind=cores"]
    assert placement.binding_options("socket", "mpirun", "openmpi") == ["--bind-to", "socket"]
    assert placement.binding_options("none", "mpiexec", "mpich") == ["-bind-to", "none"]
    assert placement.binding_options(None, "mpirun", "openmpi") == []
    with pytest.raises(placement.PlacementError, match="give one of core, socket, none"):
        placement.binding_options("cores", "srun", "openmpi")
    with pytest.raises(placement.PlacementError, match="launcher 'local' cannot bind"):
        placement.binding_options("core", "local", "openmpi")
    assert placement.label("half", 2, "core") == "rpn=half,tpr=2,bind=core"
    assert placement.label(None, 1, None) == ""


BOUND = models.Placement(bind="core", distribution="packed")
UNBOUND = models.Placement(bind="none")
HYBRID = models.Placement(bind="core", distribution="spread", threads_per_rank=2)


@pytest.mark.parametrize(
    "want, launcher, mpi, options",
    [
        (BOUND, "srun", "openmpi", ["--cpu-bind=cores", "--distribution=block:block"]),
        (BOUND, "srun", "mpich", ["--cpu-bind=cores", "--distribution=block:block"]),
        (BOUND, "mpirun", "openmpi", ["--map-by", "core", "--bind-to", "core"]),
        (BOUND, "mpiexec", "mpich", ["-bind-to", "core", "-map-by", "core"]),
        (
            BOUND,
            "mpirun",
            "intelmpi",
            ["-genv", "I_MPI_PIN_DOMAIN", "core", "-genv", "I_MPI_PIN_ORDER", "compact"],
        ),
        (UNBOUND, "srun", "openmpi", ["--cpu-bind=none"]),
        (UNBOUND, "mpirun", "openmpi", ["--bind-to", "none"]),
        (UNBOUND, "mpiexec", "mpich", ["-bind-to", "none"]),
        (UNBOUND, "mpirun", "intelmpi", ["-genv", "I_MPI_PIN", "0"]),
        (HYBRID, "srun", "openmpi", ["--cpu-bind=cores", "--distribution=block:cyclic"]),
        (HYBRID, "mpirun", "openmpi", ["--map-by", "socket:PE=2", "--bind-to", "core"]),
        (HYBRID, "mpiexec", "mpich", ["-bind-to", "core:2", "-map-by", "socket"]),
        (
            HYBRID,
            "mpirun",
            "intelmpi",
            ["-genv", "I_MPI_PIN_DOMAIN", "omp", "-genv", "I_MPI_PIN_ORDER", "scatter"],
        ),
    ],
)
def test_a_placement_is_spelled_for_each_launcher(want, launcher, mpi, options):
    assert placement.spell(want, launcher, mpi) == options
    p = placement.plan(2, launcher=launcher, mpi=mpi, placements={"p": want}, name="p")
    assert p.options == options and p.binding == want.bind
    assert p.num_cpus_per_task == (2 if want is HYBRID else None)


def test_srun_gets_the_placement_through_reframes_launcher():
    """ReFrame's srun launcher: the job's cpus per task (--cpus-per-task), then the options."""
    from reframe.core.backends import getlauncher

    p = placement.plan(4, launcher="srun", mpi="openmpi", placements={"h": HYBRID}, name="h")
    lau = getlauncher("srun")()
    lau.use_cpus_per_task = True  # what it does with Slurm >= 22.05
    lau.options = p.options
    job = placement.JobSizes(num_tasks=4, num_cpus_per_task=p.num_cpus_per_task)
    assert placement.launch_argv(lau, job) == [
        "srun",
        "--cpus-per-task=2",
        "--cpu-bind=cores",
        "--distribution=block:cyclic",
    ]
    assert p.env == {"OMP_NUM_THREADS": "2"}


#: The launchers a site uses, with the MPI libraries of the shipped environments.
SHIPPED_LAUNCHES = [
    ("srun", "openmpi"),
    ("srun", "mpich"),
    ("srun", "intelmpi"),
    ("mpirun", "openmpi"),
    ("mpirun", "mpich"),
    ("mpiexec", "mpich"),
    ("mpirun", "intelmpi"),
]


@pytest.mark.parametrize("launcher, mpi", SHIPPED_LAUNCHES)
def test_every_shipped_placement_runs_under_every_launcher_or_says_why_not(launcher, mpi):
    from apptune.core.data import recipes

    found = 0
    for f in sorted((REPO / "build-recipes").glob("*.yaml")):
        r = recipes.load_recipe(f)
        for name, want in r.run.placements.items():
            found += 1
            why = want.unsupported.get(placement.target(launcher, mpi))
            if why:
                with pytest.raises(placement.NoLauncherOptions, match=why):
                    placement.plan(
                        2, launcher=launcher, mpi=mpi, placements=r.run.placements, name=name
                    )
                continue
            p = placement.plan(
                2, launcher=launcher, mpi=mpi, placements=r.run.placements, name=name
            )
            assert p.options and p.binding == want.bind, (f.name, name)
    assert found >= 4  # mpi-micro's and NetPIPE's bound and unbound


def test_the_checks_variables_win_and_an_unsupported_placement_says_why():
    p = placement.plan(
        2, launcher="srun", mpi="openmpi", placements={"b": BOUND}, name="b", binding="none"
    )
    assert p.options == ["--cpu-bind=none", "--distribution=block:block"] and p.binding == "none"
    p = placement.plan(
        2, launcher="mpirun", mpi="openmpi", placements={"b": BOUND}, name="b", threads_per_rank=2
    )
    assert p.options == ["--map-by", "core:PE=2", "--bind-to", "core"]
    no = models.Placement(bind="core", unsupported={"srun": "needs Hydra's own pinning"})
    with pytest.raises(
        placement.NoLauncherOptions,
        match="placement 'x' does not run under the srun launcher: needs Hydra's own pinning",
    ):
        placement.plan(2, launcher="srun", mpi="mpich", placements={"x": no}, name="x")
    with pytest.raises(placement.NoLauncherOptions, match="no launcher options for MPI 'cray'"):
        placement.plan(2, launcher="mpirun", mpi="cray", placements={"x": BOUND}, name="x")


@pytest.mark.parametrize(
    "text, field, message",
    [
        (
            "{bound: {openmpi: [--bind-to, core], srun: [--cpu-bind=cores]}}",
            "run.placements.bound",
            "launcher options (openmpi, srun) are not a placement",
        ),
        ("{bound: {}}", "run.placements.bound", "give bind, distribution or threads_per_rank"),
        ("{bound: {bind: cores}}", "run.placements.bound.bind", "one of: core, socket, none"),
        ("{bound: {distribution: cyclic}}", "run.placements.bound.distribution", "packed, spread"),
        (
            "{bound: {threads_per_rank: 0}}",
            "run.placements.bound.threads_per_rank",
            "greater than or equal to 1",
        ),
        (
            "{bound: {bind: core, unsupported: {aprun: no}}}",
            "run.placements.bound.unsupported.aprun",
            "",
        ),
        (
            "{bound: {bind: core, unsupported: {srun: ' '}}}",
            "run.placements.bound.unsupported.srun",
            "say why it cannot run there",
        ),
    ],
)
def test_a_bad_placement_is_one_line_naming_the_recipe_and_field(toy_root, text, field, message):
    from apptune.core.data import recipes

    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(
        f.read_text().replace("  executable: toy\n", f"  executable: toy\n  placements: {text}\n")
    )
    with pytest.raises(ApptuneError) as e:
        recipes.load_recipe("toy")
    assert e.value.field == field and message in str(e.value), str(e.value)
    assert e.value.file.endswith("build-recipes/toy.yaml") and "\n" not in str(e.value)


RANKS = {
    "bound": [
        {"pid": 1, "cpus": "0", "cores": 1, "sockets": 1},
        {"pid": 2, "cpus": "1", "cores": 1, "sockets": 1},
    ],
    "unbound": [{"pid": 1, "cpus": "0-1", "cores": 2, "sockets": 1}] * 2,
}


@pytest.mark.parametrize(
    "got, binding, threads, problem",
    [
        ("bound", "core", 1, None),
        ("unbound", "none", 1, None),
        ("unbound", "core", 2, None),  # two cores per rank: all of this node
        ("bound", None, 1, None),  # nothing asked
        ("unbound", "socket", 1, None),
        (
            "unbound",
            "core",
            1,
            "asked for ranks bound to 1 core(s) each, but 2 of the 2 rank(s) seen on the "
            "job's first node could run on CPUs 0-1",
        ),
        ("bound", "none", 1, "asked for ranks unbound (each on all CPUs the job has there, 0-1)"),
    ],
)
def test_the_binding_the_ranks_got_against_the_one_asked_for(got, binding, threads, problem):
    observed = {"program": "NPmpi", "node_cpus": "0-1", "ranks": RANKS[got]}
    found = ranks.binding_problem(models.RunBinding(**observed), binding, threads)
    assert (found is None) == (problem is None) and (problem is None or problem in found), found
    assert ranks.binding_problem(models.RunBinding(), "core") is None  # no rank seen: not judged


# ------------------------------------------------------------------ what a green ci proves
def test_every_ci_input_names_the_nightly_input_it_stands_for(tmp_path, monkeypatch, capsys):
    import shutil

    from apptune import cli

    root = tmp_path / "tree"
    for d in ("build-recipes", "patches", "inputs", "reference", "site-config"):
        shutil.copytree(REPO / d, root / d)
    monkeypatch.setenv("APPTUNE_ROOT", str(root))
    assert cli.main(["list"]) == 0
    assert (
        "tier ci (2 ranks), stands for nightly (N from 25 % of node memory"
        in capsys.readouterr().out
    )
    spec = root / "inputs/hpcc/ci/input.yaml"
    text = spec.read_text()
    spec.write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("stands_for:")) + "\n"
    )
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err
    assert (
        "inputs/hpcc/ci/input.yaml: stands_for: a ci input must name the input it stands for" in err
    )
    spec.write_text(text.replace("stands_for: nightly", "stands_for: weekly"))
    assert cli.main(["validate"]) == 1
    assert (
        "stands_for: must start with another tier of hpcc (nightly), not 'weekly'"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("wait, poll", [(300, 10), (5, 2.5), (0.5, 1.0)])
def test_a_short_down_node_wait_is_polled_within_half_of_it(wait, poll):
    """A cluster that cancels after 5 s on dead nodes is not left to a 10 s poll."""
    assert slurm.WatchSettings(down_node_wait=wait).poll == poll
