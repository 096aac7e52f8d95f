"""Integration: the HPCC ci tier through a real Slurm (sbatch, srun, squeue polling).

A private cluster of three nodes (one slurmd each, all on this host, with this
host's CPUs, no binding) and one of one node (binding on) are started by
``ci/slurm-local.sh`` for the module and torn down afterwards, also when a test fails.
No slurmdbd: ReFrame polls with squeue and apptune reads final job states from
slurmctld (docs/slurm.md).

The failures are real: slurmctld is stopped before a submission and in the middle
of a job, a job runs past its Slurm time limit, a node is set DOWN under a running
job, a job waits for nodes that are DOWN. Each must give its check the right
verdict while the other checks finish, and the run's summary.json must record it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from apptune.core.run import knobs
from apptune.history import records

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "ci" / "slurm-local.sh"
APPTUNE = [sys.executable, "-m", "apptune"]
REFRAME = str(Path(sys.executable).with_name("reframe"))
NODES = 3
SLURM_TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")

# with the node to themselves (make test's second pass): beside other CPU-bound tests, Open MPI
# started by srun crashed in PMIx (SIGSEGV, "pmixp_client_v2.c:211: Error handler invoked")
# and Slurm's timing changed which job a downed node took
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root: slurmd runs the jobs as their user"
    missing = [t for t in SLURM_TOOLS if shutil.which(t) is None]
    if missing:
        return (
            f"Slurm not installed ({', '.join(missing)} not found; "
            "bash ci/bootstrap.sh installs them)"
        )
    return None


def _start(tmp_path_factory, request, nodes: int) -> dict:
    why = _unavailable()
    if why:
        if os.environ.get(
            "CI"
        ):  # CI runs as root after the bootstrap: a skip there would hide a defect
            pytest.fail(f"real-Slurm test cannot run in CI: {why}")
        pytest.skip(why)
    d = tmp_path_factory.mktemp("slurm")
    request.addfinalizer(lambda: subprocess.run(["bash", str(SCRIPT), "stop", str(d)], timeout=120))
    p = subprocess.run(
        ["bash", str(SCRIPT), "start", str(d), str(nodes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    return {"dir": d, "env": env}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    """Three nodes sharing this host's CPUs, no task plugin (no binding)."""
    return _start(tmp_path_factory, request, NODES)


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, request):
    """One node with task/affinity: steps that ask for a binding get it."""
    return _start(tmp_path_factory, request, 1)


def run(cmd, env, cwd=REPO, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def slurm(args, env) -> str:
    return subprocess.run(
        args, capture_output=True, text=True, env=env, timeout=30, check=True
    ).stdout


def results(run_dir: Path) -> list[dict]:
    found = {}
    for base in ("output", "stage"):
        for f in (run_dir / base).rglob("apptune-result.json"):
            r = records.load_record(f).data()
            found.setdefault(r["test"], dict(r, dir=str(f.parent)))
    return list(found.values())


def test_nodes_mode_distributes_over_every_idle_node(cluster, tmp_path):
    """`--mode nodes` (ReFrame's --distribute=idle) asks the real slurmctld for idle nodes."""
    rc, out = run(
        [
            REFRAME,
            "-C",
            str(REPO / "site-config/settings.py"),
            "-c",
            str(REPO / "reframe-checks/hpcc"),
            "--system",
            "localslurm:batch",
            "--mode",
            "nodes",
            "-S",
            "valid_prog_environs=gnu",
            "-n",
            "HPCCCheck%tier=ci%build.variant=tuned$",
            "-l",
        ],
        cluster["env"],
        cwd=tmp_path,
    )
    assert rc == 0, out[-3000:]
    for i in range(1, NODES + 1):
        assert f"%.nid=n{i} " in out, out[-3000:]


def test_slurmctld_down_at_submit_and_half_subscribed_placement(cluster, tmp_path):
    """slurmctld is down when the first check submits: that check fails saying so. It
    comes back, and the next check (the same ci input half-subscribed: 1 rank on each
    of 2 nodes, srun with PMIx across them) runs, verifies and records where it ran.
    NPB's class S: the ranks talk through TCP between these nodes, where HPCC's two
    random-access tests run up to their time bound of 60 s each."""
    env = dict(cluster["env"])
    sync = tmp_path / "sync"
    sync.mkdir()
    # sbatch as ReFrame calls it, plus one pause: after the first (real) failed submission
    # it waits until the test has restarted slurmctld, so the next check meets it up.
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sbatch").write_text(f"""#!/bin/bash
{shutil.which("sbatch")} "$@"; rc=$?
if [ $rc -ne 0 ] && [ ! -e {sync}/failed ]; then
  touch {sync}/failed
  for i in $(seq 600); do [ -e {sync}/up ] && break; sleep 0.2; done
fi
exit $rc
""")
    (shim / "sbatch").chmod(0o755)
    env["PATH"] = f"{shim}:{env['PATH']}"
    subprocess.run(["bash", str(SCRIPT), "ctld-stop", str(cluster["dir"])], check=True, timeout=60)

    def restart():
        deadline = time.time() + 300
        while not (sync / "failed").exists() and time.time() < deadline:
            time.sleep(0.2)
        subprocess.run(["bash", str(SCRIPT), "ctld-start", str(cluster["dir"])], timeout=60)
        (sync / "up").touch()

    t = threading.Thread(target=restart, daemon=True)
    t.start()
    run_dir = tmp_path / "run"
    try:
        rc, out = run(
            APPTUNE
            + [
                "run",
                "--mode",
                "dev",
                "--run-dir",
                str(run_dir),
                "-c",
                "reframe-checks/npb",
                "--",
                "--system",
                "localslurm:batch",
                "-S",
                "valid_prog_environs=gnu",
                "-n",
                "NPBCheck%tier=ci%build.variant=tuned$",
                "-P",
                "ranks_per_node=full,half",
                "--exec-order=name",
                "--exec-policy=serial",
            ],
            env,
        )
    finally:
        (sync / "failed").touch()
        t.join(timeout=120)
    assert rc != 0, out[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    (fail,) = summary["failures"]
    assert "ranks_per_node=full" in fail["test"] and fail["phase"] == "run", fail
    assert fail["reason"].startswith(
        "slurmctld unreachable at submit: Unable to contact slurm controller"
    ), fail
    (half,) = summary["results"]
    assert half["result"] == "pass" and half["verified"], half
    assert half["variant"] == "tuned@rpn=half" and half["system"] == "localslurm:batch"
    assert half["placement_layout"] == {
        "ranks": 2,
        "ranks_per_node": 1,
        "threads_per_rank": 1,
        "nodes": 2,
        "binding": None,
    }
    assert half["job"]["state"] == "COMPLETED" and half["job"]["scheduler"] == "squeue"
    nodes = slurm(["scontrol", "show", "hostnames", half["job"]["nodes"]], env).split()
    assert len(nodes) == 2, half["job"]
    # energy: the model meter ran as an agent on each of the job's nodes, summed into one record
    e = half["energy"]
    assert e["trust"] == "modelled" and e["energy_J"] > 0, e
    assert e["source"] == f"model (per-node agents on 2 node(s): {', '.join(sorted(nodes))})", e
    assert all(
        (Path(half["outputdir"]) / "energy-nodes" / n / "energy.json").is_file() for n in nodes
    )
    script = (Path(half["outputdir"]) / "rfm_job.sh").read_text()
    assert "#SBATCH --ntasks-per-node=1" in script and "#SBATCH --no-requeue" in script
    # the job script starts the energy agents and the runner; srun itself is a run step
    assert "srun --overlap" in script and "-m apptune.core.run.runner" in script
    steps = json.loads((Path(half["outputdir"]) / ".apptune-run-spec.json").read_text())["steps"]
    assert steps[-1]["argv"][0] == "srun"


def test_mpi_micro_placements_under_srun_get_the_binding_they_ask_for(one_node, tmp_path):
    """mpi-micro's bound and unbound placements launched by srun on localslurm:batch: srun
    gets the recipe's placement in its own options, each run verifies, and both the
    affinity the program reports and the CPUs the runner saw for each rank are the ones
    the placement asked for (one job at a time: the nodes share this host's CPUs)."""
    run_dir = tmp_path / "run"
    rc, out = run(
        APPTUNE
        + [
            "run",
            "--mode",
            "dev",
            "--run-dir",
            str(run_dir),
            "-c",
            "reframe-checks/mpi-micro",
            "--",
            "--system",
            "localslurm:batch",
            "-S",
            "valid_prog_environs=gnu",
            "-n",
            "MPIMicroCheck%tier=ci.*build.variant=tuned$",
            "--exec-policy=serial",
        ],
        one_node["env"],
    )
    assert rc == 0, out[-3000:]
    got = {r["placement"]: r for r in results(run_dir)}
    assert set(got) == {"bound", "unbound"}, out[-3000:]
    cpus = os.cpu_count()
    asked = {
        "bound": (["--cpu-bind=cores", "--distribution=block:block"], "core", "1", "1"),
        "unbound": (["--cpu-bind=none"], "none", "0", str(cpus)),
    }
    for name, (options, binding, bound, affinity) in asked.items():
        r = got[name]
        assert r["verification"]["ok"], (name, r["verification"]["summary"])
        assert r["job"]["scheduler"] == "squeue" and r["placement_layout"]["binding"] == binding
        spec = json.loads((Path(r["dir"]) / ".apptune-run-spec.json").read_text())
        argv = spec["steps"][-1]["argv"]
        assert argv[0] == "srun" and argv[1 : 1 + len(options)] == options, argv
        # what the program saw (sched_getaffinity in every rank)
        summary = dict(
            ln.split("=", 1)
            for ln in (Path(r["dir"]) / "mpi-micro.summary").read_text().splitlines()
        )
        assert (summary["bound"], summary["affinity_cpus_max"]) == (bound, affinity), summary
        # what the runner saw: each rank's CPUs on the job's node
        ranks = r["binding"]["ranks"]
        assert len(ranks) == 2, r["binding"]
        if name == "bound":
            assert all(x["cores"] == 1 for x in ranks) and len({x["cpus"] for x in ranks}) == 2
        else:
            assert all(x["cpus"] == r["binding"]["node_cpus"] for x in ranks), r["binding"]
        assert r["quality"]["grade"] in ("clean", "disturbed") and "others_cpu_s" in r["quality"]


def test_a_cpu_frequency_srun_accepts_is_judged_by_the_frequency_measured(one_node, tmp_path):
    """NPB's class S under srun with ``-S cpu_freq=low``: srun gets ``--cpu-freq=low`` and
    the record says who set it. Where the node has no cpufreq, Slurm accepts the option,
    says in slurmd's log that it cannot set it and runs the step at the node's own
    frequency: the check is skipped with that measured frequency, never passed; where it
    has cpufreq, the frequency measured on the ranks' CPUs is the lowest the node lists."""
    run_dir = tmp_path / "run"
    env = dict(one_node["env"], APPTUNE_HISTORY=str(tmp_path / "history"))
    rc, out = run(
        APPTUNE
        + ["run", "--mode", "ci", "--run-dir", str(run_dir), "-c", "reframe-checks/npb", "--"]
        + ["--system", "localslurm:batch", "-S", "valid_prog_environs=gnu", "-S", "cpu_freq=low"]
        + ["-n", "NPBCheck%tier=ci.*build.variant=tuned$"],
        env,
    )
    (r,) = results(run_dir)
    argv = json.loads((Path(r["dir"]) / ".apptune-run-spec.json").read_text())["steps"][-1]["argv"]
    assert argv[:2] == ["srun", "--cpu-freq=low"], argv
    k = r["knobs"]
    assert (r["variant"], r["cpu_freq"]) == ("tuned@freq=low", "low")
    assert k["set_by"] == {"cpu_freq": "srun --cpu-freq=low"} and k["observed"]["frequency"]
    summary = json.loads((run_dir / "summary.json").read_text())
    if knobs.node_state()["cpufreq"] is None:
        log = (one_node["dir"] / "log/slurmd-n1.log").read_text()
        assert "CPU frequency setting not configured for this node" in log
        mhz = k["observed"]["frequency"]["median_mhz"]
        why = (
            "cpu_freq=low: not in effect: the node has no cpufreq interface "
            "(/sys/devices/system/cpu/cpu0/cpufreq is missing); srun --cpu-freq=low was "
            f"accepted and the CPUs ran at {mhz:g} MHz"
        )
        assert k["problems"] == [why] and not r["verification"]["ok"]
        assert [s["reason"] for s in summary["skipped"]] == [why] and rc != 0, out[-3000:]
        # the report's knob table: the setting asked for, not measured, with the node's line
        ((col,),) = [t["columns"] for t in summary["knobs"] if t["knob"] == "cpu_freq"]
        assert col == {
            "setting": "freq=low",
            "not_measured": f"not measured: the node cannot set it ({why})",
        }
    else:
        low = knobs.target_khz("low", k["node"]["cpufreq"]) / 1000
        assert abs(k["observed"]["frequency"]["median_mhz"] - low) <= knobs.FREQ_TOLERANCE * low
        assert k["problems"] == [] and r["verification"]["ok"] and rc == 0, out[-3000:]


#: The pre-run step _tree gives HPCC: sleep N seconds, or hold the job until the file
#: named exists (the test releases it when what it does under the job is done).
PAUSE = (
    "import os, sys, time\n"
    "a = sys.argv[1]\n"
    "if a.isdigit():\n"
    "    time.sleep(int(a))\n"
    "else:\n"
    "    while not os.path.exists(a):\n"
    "        time.sleep(0.1)\n"
)


def pause_argv(pause: int | str | Path) -> list[str]:
    """The pre-run step of a tier of _tree with this pause, as it runs in the job."""
    return [sys.executable, "-c", PAUSE, str(pause)]


def _tree(
    tmp_path: Path,
    pauses: dict[str, tuple[str, int | Path]] | None = None,
    cluster: dict | None = None,
) -> Path:
    """A copy of the tree; ``pauses``: more HPCC tiers with the ci input, each a Slurm
    time limit and a pause before the run (seconds, or a file that releases the job);
    ``cluster``: fields set in its localslurm.yaml."""
    root = tmp_path / "tree"
    for d in ("build-recipes", "patches", "inputs", "reference", "site-config", "reframe-checks"):
        shutil.copytree(REPO / d, root / d)
    if pauses:
        f = root / "build-recipes/hpcc.yaml"
        recipe = yaml.safe_load(f.read_text())
        step = {"command": pause_argv("{{ pause | default(0) }}")}
        recipe["run"]["prerun"] = [step] + recipe["run"].get("prerun", [])
        for tier, (limit, pause) in pauses.items():
            recipe["tiers"][tier] = {
                "ranks": 2,
                "time_limit": limit,
                "variants": {"gnu": ["tuned"]},
            }
            shutil.copytree(root / "inputs/hpcc/ci", root / f"inputs/hpcc/{tier}")
            spec = root / f"inputs/hpcc/{tier}/input.yaml"
            data = yaml.safe_load(spec.read_text())
            data["parameters"]["pause"] = str(pause)
            spec.write_text(yaml.safe_dump(data))
            ref = yaml.safe_load((root / "reference/hpcc/ci.yaml").read_text())
            ref["tier"] = tier
            (root / f"reference/hpcc/{tier}.yaml").write_text(yaml.safe_dump(ref))
        f.write_text(yaml.safe_dump(recipe, sort_keys=False))
    if cluster:
        f = root / "site-config/clusters/localslurm.yaml"
        f.write_text(
            yaml.safe_dump(dict(yaml.safe_load(f.read_text()), **cluster), sort_keys=False)
        )
    return root


def reframe_session(
    root: Path, env: dict, run_dir: Path, name: str, *options: str
) -> tuple[int, str, dict]:
    """Plain ReFrame (no apptune CLI) on localslurm:batch in ``root``, then ``apptune
    report``: exit code, output and summary.json."""
    rc, out = run(
        [
            REFRAME,
            "-C",
            "site-config/settings.py",
            "-c",
            "reframe-checks/hpcc",
            "--system",
            "localslurm:batch",
            "-S",
            "valid_prog_environs=gnu",
            "-n",
            name,
            "--skip-performance-check",
            "-r",
            *options,
            "--report-file",
            str(run_dir / "report.json"),
            "--stage",
            str(run_dir / "stage"),
            "--output",
            str(run_dir / "output"),
            "--perflogdir",
            str(run_dir / "perflogs"),
        ],
        env,
        cwd=root,
    )
    rc2, out2 = run(APPTUNE + ["report", str(run_dir)], env, cwd=root)
    assert rc2 == 0, out2
    return rc, out, json.loads((run_dir / "summary.json").read_text())


def running_job(env, argv: list[str], timeout: float = 400) -> dict:
    """The running job one of whose run steps is ``argv`` (apptune's runner spec in its
    working directory), once a process with that command line runs there: {job, node,
    workdir}, or {} after ``timeout`` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in slurm(["squeue", "-h", "-t", "running", "-o", "%i|%N|%Z"], env).splitlines():
            jobid, node, workdir = line.split("|")
            spec = Path(workdir, ".apptune-run-spec.json")
            try:
                steps = json.loads(spec.read_text())["steps"]
            except (OSError, ValueError, KeyError):
                continue
            if any(st["argv"] == argv for st in steps) and _running_in(argv, workdir):
                return {"job": jobid, "node": node, "workdir": workdir}
        time.sleep(0.5)
    return {}


def _running_in(argv: list[str], workdir: str) -> bool:
    want = "\0".join(argv).encode()
    for d in Path("/proc").iterdir():
        try:
            if (
                d.name.isdigit()
                and (d / "cmdline").read_bytes().rstrip(b"\0") == want
                and os.readlink(d / "cwd") == str(Path(workdir).resolve())
            ):
                return True
        except OSError:
            continue
    return False


def reframe_counts_the_job_ended(log: Path, mark: int, timeout: float = 60) -> bool:
    """Whether ReFrame's debug log ``log`` (past byte ``mark``) says the check went on to
    wait for the end of its run: ReFrame counts its job as ended. Waits up to ``timeout`` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(log, "rb") as f:
            f.seek(mark)
            if b"Entering stage: run_wait" in f.read():
                return True
        time.sleep(0.2)
    return False


def test_slurmctld_stopped_mid_job_the_check_judges_the_real_end(cluster, tmp_path):
    """slurmctld stops while the job runs, so ReFrame's squeue polling fails (its
    squeue backend takes that for the job's end), and comes back before the job ends:
    the check waits for the job and verifies its output instead of failing 'run incomplete'.
    The job is held in its pre-run step until slurmctld is back."""
    env = dict(cluster["env"])
    release = tmp_path / "release"
    root = _tree(tmp_path, pauses={"slow": ("5m", release)})
    env["APPTUNE_ROOT"] = str(root)
    outage = {}

    def stop_slurmctld_under_the_job():
        job = running_job(env, pause_argv(release))
        if not job:
            return
        log = root / "reframe.log"  # ReFrame's debug log (site-config/settings.py)
        mark = log.stat().st_size
        subprocess.run(
            ["bash", str(SCRIPT), "ctld-stop", str(cluster["dir"])], check=True, timeout=60
        )
        p = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env, timeout=60)
        outage.update(job, squeue_rc=p.returncode, squeue_err=p.stderr)
        # ReFrame polls every 1-3 s: it meets the failing squeue and takes it for the job's
        # end (the job is held: it cannot have ended)
        outage["taken_for_the_end"] = reframe_counts_the_job_ended(log, mark)
        subprocess.run(
            ["bash", str(SCRIPT), "ctld-start", str(cluster["dir"])], check=True, timeout=60
        )
        outage["restarted"] = True
        release.touch()

    t = threading.Thread(target=stop_slurmctld_under_the_job, daemon=True)
    t.start()
    run_dir = tmp_path / "run"
    try:
        rc, out, summary = reframe_session(
            root, env, run_dir, "HPCCCheck%tier=slow%build.variant=tuned$"
        )
    finally:
        release.touch()
        t.join(timeout=120)
        if not outage.get("restarted"):
            subprocess.run(["bash", str(SCRIPT), "ctld-start", str(cluster["dir"])], timeout=60)
    assert outage.get("restarted"), "the job never reached its pause: " + out[-3000:]
    assert (
        outage["squeue_rc"] != 0 and "Unable to contact slurm controller" in outage["squeue_err"]
    ), outage
    assert outage["taken_for_the_end"], "ReFrame's squeue polling never met the outage"
    assert rc == 0, out[-3000:]
    (r,) = summary["results"]
    assert r["result"] == "pass" and r["verified"], (r, summary["failures"])
    assert r["job"]["jobid"] == outage["job"] and r["job"]["state"] == "COMPLETED", r["job"]


def test_one_night_of_one_application_under_slurm(one_node, tmp_path):
    """The main job as a cluster user drives it, short: ci/nightly.sh with NetPIPE (ci
    inputs, the bound placement under srun) on the private cluster, a fresh history. The
    first night verifies, judges nothing and says why, exits 0 as documented, and its
    advice records the baseline of this tier on this system and partition."""
    env = dict(
        one_node["env"],
        APPTUNE_HISTORY=str(tmp_path / "history"),
        APPTUNE_RUNS=str(tmp_path / "runs"),
        APPTUNE_NIGHTLY_MODE="ci",
        APPTUNE_NIGHTLY_REPEATS="1",
        APPTUNE_QUIET_WAIT="30",
        APPTUNE_NIGHTLY_SELECT="--app netpipe --env gnu --variant tuned --placement bound",
        APPTUNE_NIGHTLY_ARGS="--system localslurm:batch",
    )
    p = subprocess.run(
        ["bash", str(REPO / "ci/nightly.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "nightly: run " in out and "tests exit 0, check-regressions exit 0" in out
    (run_dir,) = [d for d in (tmp_path / "runs").iterdir() if not d.is_symlink()]  # not latest
    (r,) = results(run_dir)
    assert r["verification"]["ok"] and r["system"] == "localslurm" and r["placement"] == "bound"
    assert r["job"]["scheduler"] in ("slurm", "squeue") and r["job"]["state"], r["job"]
    assert (
        "record one with `apptune baseline record -c reframe-checks/netpipe --mode ci "
        "-- --system localslurm:batch`" in out
    ), out[-3000:]
    assert out.count("apptune baseline record") == 1  # said once per run
    assert "check-regressions: " in out and "REGRESSION" not in out
    # the documented query of ReFrame's own results database lists this night's figures
    doc = (REPO / "docs/regressions.md").read_text()
    (query,) = re.findall(r"--performance-compare='([^']+)'", doc)
    p = subprocess.run(
        [str(Path(sys.executable).parent / "reframe"), "-C", "site-config/settings.py"]
        + ["-c", "reframe-checks/netpipe", "--mode", "ci", "--system", "localslurm:batch"]
        + [f"--performance-compare={query}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(
            env,
            RFM_ENABLE_RESULTS_STORAGE="1",
            RFM_SQLITE_DB_FILE=str(tmp_path / "history" / "reframe-results.db"),
        ),
        timeout=120,
    )
    assert p.returncode == 0 and "NetPIPECheck" in p.stdout and "latency" in p.stdout, (
        p.stdout[-2000:] + p.stderr[-2000:]
    )
