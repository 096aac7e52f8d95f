"""Integration: Slurm's limits on a private cluster of three nodes (ci/slurm-local.sh),
through plain ReFrame: a job past its time limit and a node set DOWN under a job; a job that
waits for nodes that are DOWN.

Unlike the rest of tests/test_slurm.py these need no node to themselves: their jobs are held
in their pre-run pause or never start (no MPI runs, nothing is timed), so ``make test`` runs
them in its first pass, beside the other tests, where their waiting for Slurm costs no one
anything.
That a failing check does not stop a passing one in the same session is
tests/test_slurm.py's ``test_slurmctld_down_at_submit_and_half_subscribed_placement``.
"""

import re
import threading
import time

import pytest
from test_slurm import _start, _tree, pause_argv, reframe_session, running_job, slurm

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    return _start(tmp_path_factory, request, 3)


def test_time_limit_and_node_down_give_clear_verdicts(cluster, tmp_path):
    """'hang' is killed by Slurm at its time limit, 'down' loses its node: each fails with
    Slurm's reason, and the report says both."""
    env = dict(cluster["env"])
    # 'hang' sleeps past its 1-minute Slurm limit, 'down' long enough to lose its node
    root = _tree(tmp_path, pauses={"hang": ("1m", 300), "down": ("5m", 120)})
    env["APPTUNE_ROOT"] = str(root)
    downed = {}

    def take_node_down():
        job = running_job(env, pause_argv(120))
        if job:
            time.sleep(2)
            slurm(
                [
                    "scontrol",
                    "update",
                    f"nodename={job['node']}",
                    "state=down",
                    "reason=apptune test: node failure",
                ],
                env,
            )
            downed.update(job)

    t = threading.Thread(target=take_node_down, daemon=True)
    t.start()
    run_dir = tmp_path / "run"
    t0 = time.time()
    try:
        rc, out, summary = reframe_session(
            root,
            env,
            run_dir,
            "HPCCCheck%tier=(hang|down)%build.variant=tuned$",
            "--exec-policy=async",
        )
    finally:
        t.join(timeout=30)
        if downed:
            slurm(["scontrol", "update", f"nodename={downed['node']}", "state=resume"], env)
    elapsed = time.time() - t0
    assert rc != 0, out[-3000:]
    assert downed, "the 'down' job never ran: " + out[-3000:]
    by_tier = {r["tier"]: r for r in summary["results"]}
    assert sorted(by_tier) == ["down", "hang"], summary["results"]
    fails = {f["test"]: f["reason"] for f in summary["failures"]}

    hang = by_tier["hang"]
    assert hang["result"] == "fail" and hang["job"]["state"] == "TIMEOUT", hang["job"]
    assert fails[hang["test"]].startswith("job exceeded its time limit (1:00)"), fails

    down = by_tier["down"]
    assert down["job"]["state"] == "NODE_FAIL" and down["job"]["nodes"] == downed["node"], down[
        "job"
    ]
    reason = fails[down["test"]]
    assert reason.startswith(f"node DOWN: {downed['node']} failed while the job ran"), reason
    assert "apptune test: node failure" in reason, reason
    md = (run_dir / "report.md").read_text()
    assert "job exceeded its time limit" in md and "node DOWN" in md
    print(f"time-limit/node-down session: {elapsed:.0f} s")


def test_job_pending_on_down_nodes_is_cancelled_after_the_bounded_wait(cluster, tmp_path):
    """Two of the three nodes are DOWN and the check needs two nodes (one rank on each):
    Slurm keeps the job pending, with the reason 'ReqNodeNotAvail, UnavailableNodes:...'
    or 'Nodes required for job are DOWN, DRAINED or reserved ...' (which ReFrame's squeue
    backend never cancels on), depending on which of its schedulers looked last. After
    the cluster's down_node_wait the job is cancelled and the verdict names the nodes
    and their reason."""
    env = dict(cluster["env"])
    wait = 5  # s; the watch polls every 2.5 s (half of it), so it cancels at its third poll
    root = _tree(tmp_path, cluster={"down_node_wait": wait})
    env["APPTUNE_ROOT"] = str(root)
    down = ["n2", "n3"]
    for n in down:
        slurm(
            [
                "scontrol",
                "update",
                f"nodename={n}",
                "state=down",
                "reason=apptune test: PSU failed",
            ],
            env,
        )
    run_dir = tmp_path / "run"
    try:
        rc, out, summary = reframe_session(
            root,
            env,
            run_dir,
            "HPCCCheck%tier=ci%build.variant=tuned$",
            "-S",
            "ranks_per_node=half",
        )
    finally:
        for n in down:
            slurm(["scontrol", "update", f"nodename={n}", "state=resume"], env)
    assert rc != 0, out[-3000:]
    (fail,) = summary["failures"]
    reason = fail["reason"]
    waited = re.match(r"job cancelled after (\d+) s pending on unavailable nodes: ", reason)
    assert waited and int(waited.group(1)) >= wait, fail
    assert (
        "n2 is down (apptune test: PSU failed), n3 is down (apptune test: PSU failed)" in reason
    ), reason
    assert re.search(
        r"\(Slurm job \d+, reason (ReqNodeNotAvail|Nodes required for job are DOWN)", reason
    ), reason
    (r,) = summary["results"]
    assert r["job"]["state"] == "CANCELLED" and r["result"] == "fail", r["job"]
