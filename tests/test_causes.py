"""The cause a verdict names must be able to be the cause: the node's state is a candidate,
and each change is checked for the direction and the size it can move a figure."""

import pytest
from test_baselines import FIGS, result
from test_changes import record

from apptune.core.judge import baselines, causes, changes
from apptune.history import regressions
from apptune.history.regressions import Point, Verdict

pytestmark = pytest.mark.unit

BUSY = {"grade": "clean", "reasons": [], "steal_fraction": 0.0, "outside_cpu_fraction": 0.8}
BUSY |= {"cpus": 2, "load1": [15.2, 16.0]}
QUIET = dict(BUSY, outside_cpu_fraction=0.02, load1=[0.3, 1.1])


def _baseline(toy_root, quality, value=2.0, lat=50.0):
    """A baseline of three clean runs of HPCC gnu/tuned on a node in the state ``quality``."""
    rs = [
        record(**result(value * (1 + i / 100), r, quality=quality, lat=lat).data())
        for i, r in enumerate("abc")
    ]
    f, text, _ = baselines.merge("local", "hpcc", rs)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)


def test_a_node_gone_quiet_is_the_cause_of_a_24x_speedup_not_the_flags(toy_root):
    """Recorded on a node whose other processes used 80 % of its CPUs (clean under a shared
    node's limit); the run on a quiet node, with the ladder at -O1: HPL 24x faster. The
    node's state is named as what explains it, the flags as changed alongside; no
    improvement of the build is claimed."""
    _baseline(toy_root, BUSY)
    slip = {"cflags": ("-O1", "-march=native"), "fflags": ("-O1",)}
    run = record(**slip, **result(48.0, "d", quality=QUIET).data())
    v = baselines.verdicts("local", "hpcc", [run], FIGS)
    hpl = v.figures["HPL"]
    assert hpl.verdict == "unexplained" and hpl.direction == "improvement", hpl
    assert "the node's state explains it" in hpl.why and "an improvement once" in hpl.why
    node, flags = v.changed
    assert node == "node: other processes used 80% → 2% of its CPUs, load per CPU 7.6 → 0.1"
    assert flags.startswith("flags -O3 → -O1 (changed alongside, does not explain it: a flag")
    assert "a flag set moves a figure 10x at most, not 23.8x" in flags


def test_a_node_gone_busy_cannot_explain_a_faster_run(toy_root):
    """The node busier than when the baseline was recorded and the figure faster: the
    node's state changed alongside; the flag change that can explain 30 % is the cause."""
    _baseline(toy_root, QUIET)
    slip = {"cflags": ("-O2", "-march=native"), "fflags": ("-O2",)}
    run = record(**slip, **result(2.6, "d", quality=BUSY).data())
    v = baselines.verdicts("local", "hpcc", [run], FIGS)
    assert v.figures["HPL"].verdict == "improvement"
    flags, node = v.changed
    assert flags == "flags -O3 → -O2"
    assert node.endswith(
        "(changed alongside, does not explain it: the node was busier, and the figure got better)"
    )


def test_a_transport_variable_can_explain_a_50x_latency(toy_root):
    _baseline(toy_root, QUIET)
    launch = {
        "launcher": ["srun", "--cpu-bind=cores"],
        "env_vars": {"A": "1", "OMPI_MCA_btl": "tcp"},
    }
    run = record(launch=launch, **result(2.0, "d", quality=QUIET, lat=2500.0).data())
    v = baselines.verdicts("local", "hpcc", [run], FIGS)
    assert v.figures["lat"].verdict == "regression"
    assert v.changed == ["env OMPI_MCA_btl: (none) → tcp"]


def test_the_rules(toy_root):
    busy, quiet = causes.condition(BUSY), causes.condition(QUIET)
    assert busy == {"outside": 0.8, "steal": 0.0, "load": 7.6}
    assert causes.state_change(quiet, dict(quiet, outside=0.03)) is None  # not worth naming
    line = causes.state_change(busy, quiet)
    assert causes.can_explain(line, 20.0, "better", busy, quiet) is None
    assert "busier" in causes.can_explain(
        causes.state_change(quiet, busy), 2.0, "better", quiet, busy
    )
    a, b = dict(quiet, outside=0.02), dict(quiet, outside=0.12)  # a little busier
    assert causes.can_explain(causes.state_change(a, b), 1.2, "worse", a, b) is None
    assert "1.5x at most" in causes.can_explain(causes.state_change(a, b), 4.0, "worse", a, b)
    assert causes.can_explain("flags -O3 → -O1", 2.5, "worse", None, None) is None
    # a hot file at -O0: 3.8x slower in the timing test, a regression the flags explain
    assert causes.can_explain("per-file flags x.c: -O0", 3.8, "worse", None, None) is None
    assert causes.can_explain("per-file flags x.c: -O0", 24.0, "worse", None, None)
    same = "env LD_LIBRARY_PATH: (none) → /x" + changes.SAME_LIBRARIES
    assert (
        causes.can_explain(same, 1.1, "worse", None, None) == "no library the ranks loaded changed"
    )
    assert causes.can_explain("loaded libblas.so.3: a → b", 24.0, "better", None, None) is None
    assert causes.factor(48.0, 2.0, "higher") == (24.0, "better")
    assert causes.factor(10.0, 5.0, "lower") == (2.0, "worse")


def test_a_change_point_names_the_nodes_state_and_weighs_the_flags():
    """The history: 8 nights on a busy node, then 6 on a quiet one, 15x faster, the ladder
    changed at the same night: the step's cause is the node's state."""
    prov = record().provenance.data()
    o1 = record(cflags=("-O1", "-march=native"), fflags=("-O1",)).provenance.data()
    pts = []
    for i in range(14):
        after = i >= 8
        q = causes.condition(QUIET if after else BUSY)
        value = (15.0 if after else 1.0) * (1 + 0.01 * (i % 3))  # beyond any flag set
        pts.append(Point(f"r{i}", f"t{i}", None, value, None, 1, o1 if after else prov, q))
    v = regressions.analyse(
        Verdict("s", "hpcc", "ci", "gnu", "tuned", "HPL", "Gflop/s", "higher", pts)
    )
    assert v.verdict == "improvement" and v.first_bad.run == "r8", v.reason
    node, flags = v.provenance_diff
    assert node.startswith("node: other processes used 80% → 2% of its CPUs")
    assert "changed alongside, does not explain it: a flag set moves a figure 10x at most" in flags


def test_an_unexplained_improvement_is_said_as_one():
    """check-regressions and the run's last line: an improvement that no change explains is
    'an improvement once 3 runs in a row hold it', not 'a improvement' nor 'a regression'."""
    from apptune.models import BaselineFigure

    pts = [Point(f"r{i}", None, None, 100.0 + (i % 2), None, 1, None) for i in range(8)]
    pts.append(Point("r8", None, None, 150.0, None, 1, None))
    v = Verdict("s", "hpcc", "ci", "gnu", "tuned", "HPL", "Gflop/s", "higher", pts)
    v = regressions.analyse(v, BaselineFigure(value=100.0, noise=0.01, runs=12))
    assert v.verdict == "unexplained", v.reason
    assert "an improvement once 3 runs in a row hold it" in v.reason
    assert "a improvement" not in v.reason and "a regression" not in v.reason
