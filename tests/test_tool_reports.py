"""The Markdown reports of apptune bisect and apptune tune (jinja2 templates in
apptune/templates/), on results with every part filled in and on bare ones."""

from apptune.tools import bisect, tune
from apptune.tools.bisect import BisectResult, Cycle


def _bisect_result(**kw) -> BisectResult:
    base = dict(
        app="synth",
        environment="gnu",
        tier="ci",
        good="baseline",
        bad="aggressive",
        ignore_per_file=False,
        units=12,
        left_out={"identical": 3},
    )
    return BisectResult(**{**base, **kw})


def test_a_full_bisect_report_names_culprits_functions_cycles_speed_and_the_diff():
    r = _bisect_result(
        ignore_per_file=True,
        cycles=[
            Cycle(1, "good", 12, 0, True, "ok | all fields", 1.5),
            Cycle(2, "bad", 0, 12, False, "x = 1, expected 2", 2.25),
        ],
        culprits=[{"source": "a.f90"}, {"source": "b.c"}],
        verified=True,
        method="ddmin",
        relink_identical=False,
        already_covered={"c.c": 0},
        entries=[{"files": ["a.f90"]}],
        diff="--- a/r\n+++ b/r\n+  - files: [a.f90]\n",
        notes=["the good build took 3 s"],
        functions=[
            {"source": "a.f90", "functions": ["f", "g"], "of": 9, "verified": True},
            {"source": "d.c", "functions": [], "of": 3, "verified": False, "note": "inlined"},
        ],
        timing={
            "repeats": 3,
            "figure": "time",
            "better": "lower",
            "unit": "s",
            "medians": {
                "good": {"primary": 2.0, "wall_time": 3.0},
                "bad": {"primary": 1.0, "wall_time": 2.0},
                "mixed": {"primary": 1.5, "wall_time": 2.5},
            },
        },
    )
    r.functions[0].update(cycles=1, note="")
    r.functions[1].update(cycles=2)
    md = bisect.report_md(r)
    assert md.startswith("# apptune bisect: synth baseline (good) vs aggressive (bad), gnu")
    assert "The bad build ignores the recipe's per_file rules" in md
    assert "- build+run cycles: **2** (2 ends + 0 mixed candidates)" in md
    assert "- relinking the bad objects reproduces the bad product byte for byte: no" in md
    assert "- culprit(s): `a.f90`, `b.c` (ddmin); verified: yes; 1-minimal: no" in md
    assert (
        "in `a.f90`, 2 of 9 global functions must keep the good flags: `f`, `g` (1 more cycle)\n"
        in md
    )
    assert "- function level: `d.c`: inlined\n" in md
    assert "- `c.c` is already covered by the recipe's per_file[0]" in md
    assert "| 1 | good | 12 | ✓ | 1.5 | ok / all fields |" in md  # a | in a cell is escaped
    assert "| mixed | 1.5 | 2.5 | 0.75 | 1.5 |" in md
    assert md.endswith("```diff\n--- a/r\n+++ b/r\n+  - files: [a.f90]\n```\n")


def test_a_bare_bisect_report_has_only_its_counts_and_table():
    md = bisect.report_md(_bisect_result(left_out={}))
    assert "- objects that differ: 12 (0 identical left out)" in md
    assert "culprit" not in md and "Speed" not in md and "```" not in md
    assert md.endswith("|---|---|---|---|---|---|\n")


def _tune_result(**kw) -> dict:
    base = {
        "app": "hpcc",
        "tier": "ci",
        "objective": "time",
        "objective_figures": ["HPL"],
        "cost": {
            "trials": 10,
            "search_runs": 20,
            "builds": 3,
            "builds_from_cache": 1,
            "build_seconds": 12.5,
            "runs": 30,
            "run_seconds": 99.0,
            "this_session_seconds": 120,
        },
        "budget": 24,
        "repeats": 2,
        "confirm": 3,
        "winner": {"config": {}},
        "confirmation": [
            {
                "label": "gnu/tuned",
                "verified": True,
                "failures": [],
                "score": 1.2345,
                "medians": {"HPL": 50.0},
                "targets": [{"name": "eff", "value": 0.95, "met": True, "goal": ">= 0.9"}],
                "skipped": ["n"],
            },
            {
                "label": "gnu/aggressive",
                "verified": False,
                "failures": ["dweps = 0, expected 1.11022e-16", "x" * 200],
                "score": None,
                "medians": {},
                "targets": [{"name": "eff", "value": 0.5, "met": False, "goal": ">= 0.9"}],
                "skipped": ["a", "n"],
            },
        ],
        "trials": [
            {
                "number": 0,
                "state": "COMPLETE",
                "label": "a|b",
                "runs": 2,
                "value": 1.5,
                "summary": "ok",
            },
            {
                "number": 1,
                "state": "PRUNED",
                "label": None,
                "runs": 1,
                "value": None,
                "summary": None,
            },
        ],
        "diff": "--- a\n+++ b\n+hpcc: {}\n",
    }
    return {**base, **kw}


def test_a_tune_report_ranks_the_confirmation_and_lists_every_trial():
    md = tune.report_md(_tune_result())
    assert md.startswith("# apptune tune: hpcc, tier ci, objective time (HPL)\n")
    assert "the last 0 runs of the budget a one-knob polish" in md  # no polish given
    assert (
        "| rank | configuration | verified | score | HPL | eff |\n|---|---|---|---|---|---|\n" in md
    )
    assert "| 1 | gnu/tuned | ✓ | 1.234 | 50 | 0.95 ✓ (goal >= 0.9) |" in md
    failed = next(ln for ln in md.splitlines() if ln.startswith("| 2 | gnu/aggressive"))
    assert "| ✗ dweps = 0, expected 1.11022e-16; xxx" in failed and "| n/a | n/a |" in failed
    assert len(failed.split(" | ")[2]) == 2 + 80  # the failures cut at 80 characters
    assert "(reference `depends_on`): a, n." in md
    assert "| 0 | complete | a|b | 2 | 1.5 | ok |" in md and "| 1 | pruned |  | 1 | n/a |  |" in md
    assert md.endswith("```diff\n--- a\n+++ b\n+hpcc: {}\n```\n")


def test_a_tune_without_a_winner_says_so():
    md = tune.report_md(_tune_result(winner=None, confirmation=[], diff=""))
    assert "**No verified candidate beat the baseline in the confirmation runs.**" in md
    assert "Not compared" not in md and "Winner" not in md
