"""Strong scaling in the report: a variant run on several core counts is one table, in the
order of its cores, with the speed-up over the fewest cores that verified and the parallel
efficiency; unverified steps get neither; the run's variant name says its rank count."""

import pytest
from test_report_screen import _rendered, row, summarised

from apptune import placement
from apptune.models import PlacementLayout
from apptune.report import scaling

pytestmark = pytest.mark.unit


def step(ranks, wall, threads=1, variant="tuned", ok=True, env="gnu"):
    label = placement.label(None, threads, None, ranks if ranks != 2 else None)
    return row(
        f"{variant}@{label}" if label else variant,
        wall,
        env=env,
        ok=ok,
        ranks=ranks,
        placement_layout=PlacementLayout(ranks=ranks, threads_per_rank=threads),
    )


def test_a_series_is_ordered_by_cores_with_speedup_and_efficiency():
    rows = [step(2, 6.0), step(1, 10.0), step(4, 4.0, ok=False), step(2, 5.0, threads=2)]
    (t,) = scaling.scaling_tables(summarised(rows)["apps"])
    assert (t["environment"], t["variant"], t["reference"]) == ("gnu", "tuned", "1 core(s)")
    got = [(s["cores"], s["ranks"], s["threads_per_rank"]) for s in t["steps"]]
    assert got == [(1, 1, 1), (2, 2, 1), (4, 2, 2), (4, 4, 1)]
    by = {(s["ranks"], s["threads_per_rank"]): s for s in t["steps"]}
    # wall_time: lower is better, so the speed-up is t1 / tn
    assert by[2, 1]["speedup"] == pytest.approx(10 / 6)
    assert by[2, 1]["efficiency"] == pytest.approx(10 / 6 / 2)
    assert by[2, 2]["efficiency"] == pytest.approx(10 / 5 / 4)
    assert by[4, 1]["speedup"] is None and by[4, 1]["efficiency"] is None  # not verified


def test_the_reference_is_the_fewest_cores_that_verified_and_one_core_count_is_no_series():
    rows = [step(1, 10.0, ok=False), step(2, 6.0), step(4, 4.0)]
    (t,) = scaling.scaling_tables(summarised(rows)["apps"])
    assert t["reference"] == "2 core(s)" and t["steps"][0]["speedup"] is None
    assert t["steps"][2]["efficiency"] == pytest.approx(6 / 4 / 2)
    # other variants and environments are series of their own; one run each is none
    rows = [step(2, 6.0), step(2, 6.0, variant="baseline"), step(2, 5.0, env="llvm")]
    assert scaling.scaling_tables(summarised(rows)["apps"]) == []


def test_a_run_on_another_rank_count_than_its_tiers_says_so_in_its_variant():
    assert placement.run_variant("tuned", "default", None, 1, None, (), 1) == "tuned@ranks=1"
    assert (
        placement.run_variant("tuned", "bound", "half", 2, None, ["freq=low"], 4)
        == "tuned@bound@ranks=4,rpn=half,tpr=2,freq=low"
    )
    assert placement.run_variant("tuned", "default", None, 1, None) == "tuned"
    assert placement.without_labels("tuned@bound@ranks=4,tpr=2", scaling.SERIES_LABELS) == (
        "tuned@bound"
    )


def test_both_files_show_the_series_and_the_plot(tmp_path):
    rows = [step(1, 10.0), step(2, 6.0), step(2, 5.5, env="llvm"), step(1, 9.0, env="llvm")]
    s = summarised(rows)
    s["scaling"] = scaling.scaling_tables(s["apps"])
    md, html = _rendered(tmp_path, s, rows)
    assert "## Scaling" in md and "### toyapp/ci: gnu/tuned (against 1 core(s))" in md
    assert "| 2 | 2 × 1 | ✓ | 6 | ×1.67 | 83 % |\n" in md, md
    assert md.count("Speed-up and efficiency: [plots/scaling-toyapp-ci.png]") == 1
    assert (tmp_path / "plots/scaling-toyapp-ci.png").stat().st_size > 0
    assert html.count('<img src="plots/scaling-toyapp-ci.png"') == 1
