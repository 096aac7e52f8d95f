"""The report's first screen: a row per application and tier from small row data (ties,
modelled energy, nothing verified, regressions, the counts of expected failures and skips),
headings that say what is there, and the table as both files render it."""

import importlib
import re

import pytest

from apptune import report
from apptune.core.judge import baselines, changes
from apptune.models import BaselineVerdicts, EnergyRecord, RunQuality, RunRecord, RunVerification
from apptune.report import screen
from apptune.report.row import Row

collect = importlib.import_module("apptune.report.collect")  # report.collect: the function

pytestmark = pytest.mark.unit
CLEAN = {"grade": "clean"}


def row(variant, wall, env="gnu", app="toyapp", ok=True, energy=None, trust="modelled", **kw):
    """One variant's row as the report collects it (an app without a recipe ranks by
    wall_time, lower is better); ``kw``: more parts of its run record."""
    figures = {"wall_time": wall} | ({"energy_J": energy} if energy is not None else {})
    baseline = kw.pop("baseline", None)
    record = RunRecord(
        app=app,
        tier="ci",
        environment=env,
        variant=variant,
        system="local",
        partition="default",
        figures=kw.pop("figures", figures),
        energy=EnergyRecord(trust=trust),
        baseline=BaselineVerdicts.model_validate(baseline) if baseline else None,
        quality=RunQuality.model_validate(kw.pop("quality", CLEAN)),
        verification=RunVerification(ok=ok, summary=""),
        **kw,
    )
    return Row.of({"display_name": f"{app} {env}/{variant}"}, record, "pass" if ok else "fail")


def judged(*verdicts, found=True):
    """A row's baseline comparison: ``(figure, verdict, change)`` each."""
    return {
        "file": "reference/baselines/local/toyapp.yaml",
        "found": found,
        "why": None,
        "figures": {n: {"verdict": v, "change": c} for n, v, c in verdicts},
    }


def summarised(rows, xfail=(), skip=(), history=None):
    """What collect gives the first screen: the matrices and summaries of ``rows``."""
    apps = collect.matrices_of(rows)
    return {
        "apps": apps,
        "summary": [screen.app_summary(a) for a in apps],
        "expected_failures": list(xfail),
        "skipped": list(skip),
        "history_verdicts": history,
    }


def only_row(s):
    (r,) = screen.first_screen(s)["rows"]
    return r


def test_a_tie_at_the_top_is_said_and_the_speedup_is_over_the_reference():
    r = only_row(summarised([row("baseline", 10.0), row("tuned", 8.0), row("other", 8.1)]))
    assert (r["fastest"], r["tied"]) == ("gnu/tuned", ["gnu/other"])
    assert r["speedup"] == pytest.approx(1.25) and r["reference"] == "gnu/baseline"
    # 10 % apart is no tie
    r = only_row(summarised([row("baseline", 10.0), row("tuned", 8.0), row("other", 8.8)]))
    assert r["tied"] == []


def test_modelled_energy_is_never_the_greenest():
    r = only_row(summarised([row("baseline", 10.0, energy=50.0), row("tuned", 8, energy=40.0)]))
    assert r["greenest"] is None and r["greenest_why"] == "energy not measured here (modelled)"
    # a measured variant is the greenest even beside a lower modelled figure
    r = only_row(
        summarised(
            [
                row("baseline", 10.0, energy=50.0, trust="measured"),
                row("tuned", 8.0, energy=20.0),
                row("other", 9.0, energy=50.5, trust="measured"),
            ]
        )
    )
    assert (r["greenest"], r["greenest_tied"]) == ("gnu/baseline", ["gnu/other"])


def test_an_application_with_nothing_verified_has_no_fastest_and_no_verdict():
    r = only_row(summarised([row("baseline", 10.0, ok=False), row("tuned", 1.0, ok=False)]))
    assert (r["verified"], r["variants"]) == (0, 2)
    assert r["not_verified"] == ["gnu/baseline", "gnu/tuned"]
    assert r["fastest"] is None and r["greenest"] is None and r["verdict"] == "no verdict"


def test_regressions_are_named_by_variant_largest_first_with_what_changed(tmp_path):
    def slower(variant, *changes, changed=None):
        b = judged(*((f"f{i}", "regression", c) for i, c in enumerate(changes)))
        return row(variant, 10.0, baseline=dict(b, changed=changed))

    rows = [
        slower("a", 0.2, -0.9, 0.5, 0.1, changed=["flags -O2 → -O1"]),
        slower("b", 0.3, changed=[]),
        slower("c", 2.0),
        slower("d", 0.05),
        # a variant that is not verified has no performance verdict
        slower("e", 9.0).merged(verified=False),
    ]
    r = only_row(summarised(rows))
    assert r["verdict"] == "regression" and r["judged"] == 7
    assert [(g["variant"], g["changed"]) for g in r["named"]] == [
        ("gnu/c", baselines.NO_PROVENANCE),
        ("gnu/a", "changed: flags -O2 → -O1"),
        ("gnu/b", changes.NOTHING),
    ]
    a = r["named"][1]
    assert [(f["figure"], f["change"]) for f in a["figures"]] == [("f1", -0.9), ("f2", 0.5)]
    assert a["more"] == 2 and r["more"] == 1 and not r["record_one"]
    assert "gnu/a f1 -90.0%, f2 +50.0%, f0 +20.0%, f3 +10.0% (changed: flags" in r["verdict_text"]
    # what changed, when the same for every variant, is said once
    r = only_row(summarised([slower("a", 0.2, changed=[]), slower("b", 0.3, changed=[])]))
    assert r["changed_all"] == changes.NOTHING and [g["changed"] for g in r["named"]] == [None] * 2
    s = summarised(rows)
    assert collect.outcome(no_cases(tmp_path), [], s["summary"]) == {
        "status": 1,
        "why": ["regression against this machine's baseline: toyapp/ci"],
    }


def test_without_a_regression_the_verdict_says_how_many_figures_were_judged_or_why_none():
    ok = only_row(
        summarised([row("baseline", 10.0, baseline=judged(("wall_time", "within noise", 0)))])
    )
    assert ok["verdict_text"].startswith("no regression (1 figure(s) judged")
    faster = judged(("wall_time", "unexplained", -0.4))
    text = only_row(summarised([row("baseline", 10.0, baseline=faster)]))["verdict_text"]
    assert "(unexplained: a regression, or an improvement, once 3 runs in a row hold it)" in text
    none = dict(judged(found=False), why="no baseline for this machine (baselines recorded on X)")
    r = only_row(summarised([row("baseline", 10.0, baseline=none)]))
    assert r["why"].startswith("no baseline for this machine") and not r["record_one"]
    # the link to how to record one, where the report says it
    r = only_row(summarised([row("baseline", 10.0, baseline=dict(none, advice="apptune …"))]))
    assert r["record_one"]


def test_expected_failures_and_skips_count_per_application_and_tier_builds_in_each_tier():
    xfail = [{"test": "ToyBuild llvm", "app": "toyapp", "tier": None}]
    skip = [
        {"test": "ToyCheck ci oneapi", "app": "toyapp", "tier": "ci"},
        {"test": "ToyCheck nightly oneapi", "app": "toyapp", "tier": "nightly"},
        {"test": "OtherCheck", "app": "other", "tier": "ci"},
    ]
    r = only_row(summarised([row("baseline", 10.0)], xfail, skip))
    assert (r["expected_failures"], r["skipped"]) == (1, 1)


def test_the_baseline_heading_says_whether_this_machine_has_one():
    def heading(*founds):
        rows = [
            row("baseline", 10.0, app=f"app{i}", baseline=judged(found=f))
            for i, f in enumerate(founds)
        ]
        return screen.first_screen(summarised(rows))["baseline_heading"]

    assert heading(False, False) == "No baseline for this machine"
    assert heading(True, True) == "Against this machine's baseline"
    assert heading(True, False) == "Against this machine's baseline: app0/ci (none for app1/ci)"
    assert screen.md_anchor("Against this machine's baseline") == "against-this-machines-baseline"


def test_the_history_column_names_its_regressions_or_says_why_it_has_none():
    rows = [row("baseline", 10.0, history_verdicts={"wall_time": "regression", "x": "unchanged"})]
    change = {
        "app": "toyapp",
        "tier": "ci",
        "environment": "gnu",
        "variant": "baseline",
        "figure": "wall_time",
        "verdict": "regression",
        "change": 0.3,
    }
    hist = {"runs": 12, "changes": [change], "counts": {"regression": 1}}
    h = only_row(summarised(rows, history=hist))["history"]
    assert h["verdict"] == "regression" and h["more"] == 0
    assert h["named"] == [
        {
            "variant": "gnu/baseline",
            "figures": [{"figure": "wall_time", "change": 0.3}],
            "more": 0,
            "changed": "no provenance change",
        }
    ]
    change["provenance_diff"] = ["flags -O2 → -O1"]
    h = only_row(summarised(rows, history=hist))["history"]
    assert h["named"][0]["changed"] == "changed: flags -O2 → -O1"
    rows[0].history_verdicts = {"wall_time": "insufficient data"}
    h = only_row(summarised(rows, history=dict(hist, changes=[])))["history"]
    assert h["text"].startswith("insufficient data")
    assert only_row(summarised(rows))["history"] is None  # the report was written without it


# ------------------------------------------------------------------ as the files render it


def no_cases(tmp_path):
    """A ReFrame run report of no test case (its cases are in the rows)."""
    (tmp_path / "report.json").write_text('{"runs": [{"testcases": []}]}')
    return tmp_path / "report.json"


def _rendered(tmp_path, s, rows):
    """report.md and report.html of the summarised ``s``."""
    s |= {
        "session": dict.fromkeys(("time_start", "time_end", "hostname", "version"), "")
        | {"uuid": "u1", "num_cases": len(rows)},
        "machines": {},
        "outcome": collect.outcome(no_cases(tmp_path), [], s["summary"]),
        "advice": collect.baseline_advice(rows),
        "failures": [],
        "baseline_verdicts": collect._baseline_verdicts(s["apps"], []),
        "results": rows,
    }
    return [p.read_text() for p in report.render(s, tmp_path)[1:]]


def _github_anchors(md: str) -> set[str]:
    return {screen.md_anchor(h) for h in re.findall(r"^#+ (.+)$", md, re.M)}


def test_the_first_table_follows_the_outcome_and_its_links_resolve_in_both_files(tmp_path):
    none = dict(
        judged(found=False), why="no baseline file (x.yaml)", advice="apptune baseline record …"
    )
    rows = [
        row("baseline", 10.0, baseline=none),
        row("tuned", 8.0, baseline=none),
        row("fast", 1.0, ok=False, env="x|y", baseline=none),
    ]
    xfail = [
        {
            "test": "ToyBuild llvm",
            "environment": "llvm",
            "reason": "r",
            "app": "toyapp",
            "tier": None,
        }
    ]
    skip = [
        {"test": "ToyCheck", "environment": "oneapi", "reason": "r", "app": "toyapp", "tier": "ci"}
    ]
    md, html = _rendered(tmp_path, summarised(rows, xfail, skip), rows)

    first = md[md.index("**Exit status") :].split("\n\n")[1]
    assert first == "## Per application and tier", md[:800]
    table = md[md.index("| application |") :].split("\n\n")[0]
    (line,) = [ln for ln in table.splitlines() if ln.startswith("| [toyapp/ci]")]
    assert "**gnu/tuned** by wall_time, ×1.25 over gnu/baseline" in line
    assert "NOT verified: x\\|y/fast" in line  # a name's pipe stays in its cell
    assert "[1](#expected-failures) | [1](#skipped) |" in line
    assert "## Against" not in md
    assert (
        "## No baseline for this machine\n\nNo baseline of this machine for toyapp (ci tier on "
        "local:default): record one with `apptune baseline record -c reframe-checks/toyapp "
        "--mode ci` (it runs 5 sessions now; with `--from-history 5` after `--mode ci` it "
        "records from the last 5 stored sessions of that mode instead, running nothing)\n"
    ) in md
    links = re.findall(r"\]\(#([^)]+)\)", table)
    assert len(links) == 4 and set(links) <= _github_anchors(md), (links, _github_anchors(md))

    top = html[html.index('id="outcome"') :]
    assert re.match(
        r'id="outcome"[^\n]*\n\n<h2 id="at-a-glance">[^<]*</h2>\n<table id="first-screen">', top
    )
    table = html[
        html.index('<table id="first-screen">') : html.index("</table>", html.index("first-screen"))
    ]
    hrefs = re.findall(r'href="#([^"]+)"', table)
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert sorted(hrefs) == sorted(["app-toyapp-ci", "baseline", "expected-failures", "skipped"])
    assert set(hrefs) <= ids
    assert "x|y/fast" in table and '<h2 id="baseline">No baseline for this machine</h2>' in html


def test_an_application_of_which_nothing_was_tested_has_its_row(tmp_path):
    rows = [row("baseline", 10.0)]
    s = summarised(rows)
    s["summary"] += collect_untested()
    r = screen.first_screen(s)["rows"][1]
    assert r["anchor"] is None and r["fastest"] is None
    md, html = _rendered(tmp_path, s, rows)
    assert "| examl | nothing verified: ExaMLSource: source was not fetched | – |" in md
    assert "nothing verified</span>: ExaMLSource: source was not fetched" in html


def collect_untested():
    cases = [{"app": "examl", "display_name": "ExaMLSource"}]
    failures = [{"test": "ExaMLSource", "reason": "source was not fetched"}]
    return screen.untested_summaries(cases, [], failures)


def test_variants_are_ratios_to_the_distributions_build_when_there_is_no_gnu_baseline(
    monkeypatch,
):
    """An install (``installs`` of the recipe: the distribution's build) is the reference
    every tuned build is a ratio to, even where another variant sorts first."""
    from types import SimpleNamespace

    recipe = SimpleNamespace(installs={"zz-distro": None}, run=SimpleNamespace(primary="wall_time"))
    monkeypatch.setattr(collect.recipes, "load_recipe", lambda app: recipe)
    monkeypatch.setattr(
        collect.recipes, "figure_specs", lambda r: dict(collect.recipes.COMMON_FIGURES)
    )
    rows = [row("tuned", 8.0), row("zz-distro", 10.0), row("tuned", 5.0, env="llvm")]
    (a,) = collect.matrices_of(rows)
    assert a["reference_variant"] == "gnu/zz-distro"
    ratios = {(r.environment, r.variant): r.speedup["wall_time"] for r in a["rows"]}
    assert ratios[("gnu", "tuned")] == pytest.approx(10.0 / 8.0)
    assert ratios[("llvm", "tuned")] == pytest.approx(2.0)


def test_an_application_whose_only_run_was_an_expected_failure_says_so():
    """Only the planted variant run (XFAIL): the last line gives its reason, not 'no test
    case ran'."""
    cases = [{"app": "gromacs", "display_name": "GromacsCheck %variant=tuned+fault=wrong_k"}]
    xfailed = [
        {
            "test": "GromacsCheck %variant=tuned+fault=wrong_k",
            "reason": "known-wrong result: the planted fault",
        }
    ]
    (s,) = screen.untested_summaries(cases, [], [], xfailed)
    assert s["nothing_verified"] == (
        "GromacsCheck %variant=tuned+fault=wrong_k: "
        "expected failure: known-wrong result: the planted fault"
    )
