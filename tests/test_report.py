"""The report from a ReFrame run report: failures first, skip reasons, best variant."""

import json
import re

import pytest
from conftest import hpcc_ci_run, write_run

from apptune import report
from apptune.history import records
from apptune.report import files as report_files
from apptune.report import plots as report_plots


def _tc(
    tmp_path,
    name,
    env,
    result,
    variant,
    figures=None,
    ok=True,
    fixture=False,
    phase=None,
    reason=None,
    deps=(),
):
    d = tmp_path / name.replace(" ", "_") / env
    d.mkdir(parents=True)
    if figures is not None:
        (d / "apptune-result.json").write_text(
            json.dumps(
                {
                    "app": "hpcc",
                    "tier": "ci",
                    "variant": variant,
                    "environment": env,
                    "system": "local",
                    "partition": "default",
                    "figures": figures,
                    "verification": {
                        "ok": ok,
                        "summary": "ok" if ok else "HPL_Xnorm1 = nan, expected 3890.59 ± 0.39",
                    },
                    "energy": {"trust": "none", "reason": "no meter"},
                    "provenance": {},
                    "baseline": {},
                    "quality": {"grade": "clean"},  # ranked: the run-quality monitor saw it
                }
            )
        )
    return {
        "display_name": name,
        "unique_name": name,
        "environ": env,
        "result": result,
        "fixture": fixture,
        "fail_phase": phase,
        "fail_reason": reason,
        "outputdir": str(d),
        "stagedir": str(d),
        "dependencies_actual": list(deps),
    }


def test_report_orders_failures_first_and_marks_best(tmp_path):
    skip_build = _tc(tmp_path, "HPCCBuild oneapi", "oneapi", "skip", "tuned", fixture=True)
    (tmp_path / "HPCCBuild_oneapi" / "oneapi" / "apptune-skip.txt").write_text(
        "environment 'oneapi': compiler/tool icx not found on PATH\n"
    )
    cases = [
        _tc(
            tmp_path, "HPCCCheck base", "gnu", "pass", "baseline", {"HPL": 10.0, "wall_time": 20.0}
        ),
        _tc(tmp_path, "HPCCCheck tuned", "gnu", "pass", "tuned", {"HPL": 15.0, "wall_time": 18.0}),
        _tc(
            tmp_path,
            "HPCCCheck fast",
            "gnu",
            "fail",
            "aggressive",
            {"HPL": 99.0, "wall_time": 5.0},
            ok=False,
            phase="sanity",
            reason="sanity error",
        ),
        skip_build,
        _tc(
            tmp_path,
            "HPCCCheck one",
            "oneapi",
            "skip",
            "tuned",
            deps=[["HPCCBuild oneapi", "local:default", "oneapi"]],
        ),
    ]
    (tmp_path / "HPCCCheck_tuned" / "gnu" / "power-trace.csv").write_text(
        "t_s,power_W\n0.1,20\n0.2,58\n0.3,59\n"
    )
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps({"session_info": {"num_cases": 5}, "runs": [{"testcases": cases}]}))
    s = report.collect(rep)
    assert [f["test"] for f in s["failures"]] == ["HPCCCheck fast"]
    assert "HPL_Xnorm1 = nan" in s["failures"][0]["reason"]
    assert s["skipped"][0]["reason"].startswith("environment 'oneapi'")
    m = s["apps"][0]
    # the fast-but-wrong variant is never the best
    assert m["best"]["HPL"] == "gnu/tuned" and m["best"]["wall_time"] == "gnu/tuned"
    tuned = next(r for r in m["rows"] if r.variant == "tuned")
    assert tuned.speedup["HPL"] == 1.5
    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    assert md.index("## Failures") < md.index("## Skipped") < md.index("## hpcc")
    assert "**15**" in md and "| verified | ✗ | ✓ | ✓ |" in md
    assert (tmp_path / "plots" / "power-hpcc-ci.png").stat().st_size > 1000
    assert '<img class="power" src="plots/power-hpcc-ci.png"' in html
    assert 'class="bad"' in html and '<th class="variant">gnu/aggressive</th>' in html


def test_a_run_record_that_fails_validation_is_a_failure_naming_its_file_and_field(tmp_path):
    """A test case whose record is not one has no row; it is a failure whose one line names
    the record file and the field, in the summary and in the report."""
    good = _tc(tmp_path, "HPCCCheck base", "gnu", "pass", "baseline", {"HPL": 10.0})
    bad = _tc(tmp_path, "HPCCCheck tuned", "gnu", "pass", "tuned", {"HPL": 15.0})
    f = tmp_path / "HPCCCheck_tuned" / "gnu" / "apptune-result.json"
    rec = json.loads(f.read_text())
    rec["verification"]["ok"] = "maybe"
    f.write_text(json.dumps(rec))
    rep = tmp_path / "report.json"
    rep.write_text(
        json.dumps({"session_info": {"num_cases": 2}, "runs": [{"testcases": [good, bad]}]})
    )
    s = report.collect(rep)
    assert [r.variant for r in s["results"]] == ["baseline"]
    (failed,) = s["failures"]
    assert failed["test"] == "HPCCCheck tuned"
    assert failed["reason"].startswith(f"{f}: verification.ok: ") and "\n" not in failed["reason"]
    assert s["outcome"]["status"] == 1
    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    assert f"| HPCCCheck tuned | gnu |  | {failed['reason']} |" in md
    assert f"{f}: verification.ok: " in html


# ---------------------------------------------------------------- verification messages


def _message(got, **tol):
    from apptune.core.verification.verify import compare_field
    from apptune.models import FieldTolerance

    return compare_field("x", FieldTolerance(**tol), got)


def test_a_value_off_by_less_than_six_digits_is_printed_with_the_digits_that_differ():
    e = 2.0**-53  # 1.11022e-16: off by 1.8 tolerances of 1e-6 relative
    r = _message(e - 1.8e-6 * e, value=e, rel=1e-6)
    assert not r.ok
    assert (
        r.message == "x = 1.110221e-16, expected 1.110223e-16 ± 1.11022e-22 "
        "(difference -2e-22, used 180% of tolerance)"
    )
    # the same with an absolute tolerance, on the other side
    assert (
        _message(e + 1.8e-22, value=e, abs=1e-22).message
        == "x = 1.110225e-16, expected 1.110223e-16 ± 1e-22 "
        "(difference +1.8e-22, used 180% of tolerance)"
    )
    # exact: six digits, no difference
    assert (
        _message(e, value=e, rel=1e-6).message
        == "x = 1.11022e-16, expected 1.11022e-16 ± 1.11022e-22"
    )


def test_large_values_exact_counts_and_bounds_show_their_difference():
    r = _message(1.2345679e12, value=1.2345678e12, rel=1e-9)
    assert (
        r.message == "x = 1234567900000, expected 1234567800000 ± 1234.57 "
        "(difference +1e+05, used 8100% of tolerance)"
    )
    r = _message(6.0221408e23, value=6.02214076e23, rel=1e-9)
    assert r.message.startswith("x = 6.0221408e+23, expected 6.02214076e+23 ± ")
    # a count compared exactly reads as a count, not 1e+06
    assert (
        _message(1000001, value=1000000, abs=0).message
        == "x = 1000001, expected 1000000 ± 0 (difference +1)"
    )
    assert _message(1000000, value=1000000, abs=0).message == "x = 1000000, expected 1000000 ± 0"
    assert (
        _message(102.0, value=100.0, rel=0.01).message
        == "x = 102, expected 100 ± 1 (difference +2, used 200% of tolerance)"
    )
    # just past a bound: the digits show it, and it is not "100 %" or "0 %" of the tolerance
    assert (
        _message(1.0000001e-14, max=1e-14).message
        == "x = 1.0000001e-14, expected ≤ 1e-14 (used more than 100% of tolerance)"
    )
    assert (
        _message(0.99999999, min=1.0).message
        == "x = 0.99999999, expected ≥ 1 (used more than 100% of tolerance)"
    )
    assert _message(0.5, min=1.0).message == "x = 0.5, expected ≥ 1 (used 200% of tolerance)"


# ---------------------------------------------------------------- history, colours, verdicts


def _history_run_dirs(tmp_path, n=12):
    """``n`` nightly runs of hpcc: gnu/tuned's HPL drops 20 % half way; gnu/baseline has no
    StarFFT (it is missing from that panel)."""
    from conftest import write_run

    dirs = []
    for i in range(n):
        jitter = 1 + 0.002 * ((i * 7) % 5 - 2)
        results = [
            {
                "app": "hpcc",
                "tier": "nightly",
                "environment": "gnu",
                "variant": "baseline",
                "figures": {"HPL": 10.0 * jitter, "wall_time": 100.0 * jitter},
            },
            {
                "app": "hpcc",
                "tier": "nightly",
                "environment": "gnu",
                "variant": "tuned",
                "figures": {
                    "HPL": (12.0 if i < n // 2 else 9.6) * jitter,
                    "StarFFT": 3.0 * jitter,
                    "wall_time": 90.0 * jitter,
                },
            },
        ]
        uuid = f"5e55{i:04d}-0000-4000-8000-{i:012d}"
        dirs.append(write_run(tmp_path / uuid, uuid, 1796500000 + 86400 * i, results))
    return dirs


def _with_history(tmp_path):
    from apptune import cli

    dirs = _history_run_dirs(tmp_path)
    hdir = tmp_path / "history"
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    return dirs[-1], hdir


def _result_files(run_dir):
    return {
        (r["environment"], r["variant"]): (p, r)
        for p in (run_dir / "output").rglob("apptune-result.json")
        for r in [records.load_record(p).data()]
    }


def test_a_variant_has_one_colour_in_every_panel_and_plot(tmp_path, monkeypatch):
    from matplotlib.colors import to_hex

    run_dir, hdir = _with_history(tmp_path)
    # gnu/tuned alone has a power trace and a curve: alone in those plots, it keeps its colour
    p, r = _result_files(run_dir)[("gnu", "tuned")]
    (p.parent / "power-trace.csv").write_text("t_s,power_W\n0.0,21\n0.5,58\n1.0,60\n")
    (p.parent / "curves").mkdir()
    (p.parent / "curves/lat.csv").write_text("bytes,us\n8,1.0\n64,1.5\n")
    r["curves"] = {"lat": {"file": "curves/lat.csv", "plot": {"x": "bytes", "y": ["us"]}}}
    p.write_text(json.dumps(r))

    colours = []  # (plot file, panel title, {variant: colour}) for every line drawn
    save = report_plots._save_figure

    def record(fig, out):
        for ax in fig.axes:
            lines = {
                ln.get_label().split(" (")[0]: to_hex(ln.get_color())
                for ln in ax.get_lines()
                if not ln.get_label().startswith("_")
            }
            if lines:
                colours.append((out.name, ax.get_title(), lines))
                legend = ax.get_legend()
                if legend is not None:  # the legend's colours are the lines' colours
                    for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True):
                        colours.append(
                            (
                                out.name,
                                "legend",
                                {t.get_text().split(" (")[0]: to_hex(h.get_color())},
                            )
                        )
        return save(fig, out)

    monkeypatch.setattr(report_plots, "_save_figure", record)
    report.write(run_dir, history_dir=hdir)
    plots = {f for f, _, _ in colours}
    assert plots == {
        "trend-hpcc-nightly.png",
        "power-hpcc-nightly.png",
        "curve-hpcc-nightly-lat-us.png",
    }
    starfft = next(c for f, t, c in colours if t.startswith("StarFFT"))
    assert set(starfft) == {"gnu/tuned"}  # gnu/baseline is missing from this panel
    seen: dict[str, set] = {}
    for _, _, c in colours:
        for k, v in c.items():
            seen.setdefault(k, set()).add(v)
    assert {k: len(v) for k, v in seen.items()} == {"gnu/baseline": 1, "gnu/tuned": 1}, colours
    assert seen["gnu/baseline"] != seen["gnu/tuned"]
    assert seen == {
        k: {v["color"]} for k, v in report.variant_styles(["gnu/baseline", "gnu/tuned"]).items()
    }
    # the trend legend names every variant drawn in any panel
    assert {k for f, t, c in colours if t == "legend" and f.startswith("trend") for k in c} == {
        "gnu/baseline",
        "gnu/tuned",
    }


def test_variant_styles_are_sorted_and_do_not_depend_on_which_variants_are_drawn():
    a = report.variant_styles(["gnu/tuned", "clang/baseline", "gnu/baseline"])
    assert list(a) == ["clang/baseline", "gnu/baseline", "gnu/tuned"]
    assert a == report.variant_styles(["gnu/baseline", "clang/baseline", "gnu/tuned", "gnu/tuned"])
    assert len({s["color"] for s in a.values()}) == 3
    many = report.variant_styles([f"gnu/v{i:02d}" for i in range(25)])
    assert len({(s["color"], s["linestyle"]) for s in many.values()}) == 25


def test_committed_baseline_and_history_verdicts_are_kept_apart(tmp_path):
    run_dir, hdir = _with_history(tmp_path)
    # this run is within the committed baseline's threshold, while the history has a change point
    p, r = _result_files(run_dir)[("gnu", "tuned")]
    r["baseline"] = {
        "file": "reference/baselines/local/hpcc.yaml",
        "found": True,
        "figures": {
            n: {
                "value": v,
                "baseline": v,
                "change": 0.0,
                "threshold": 0.1,
                "verdict": "within threshold",
            }
            for n, v in r["figures"].items()
        },
    }
    p.write_text(json.dumps(r))
    report.write(run_dir, history_dir=hdir)
    s = json.loads((run_dir / "summary.json").read_text())
    assert "history" not in s and "regressions" not in s["apps"][0]["rows"][0]
    assert s["baseline_verdicts"]["counts"] == {"within threshold": 3}
    assert (
        s["baseline_verdicts"]["changes"] == []
        and s["baseline_verdicts"]["performance_failures"] == []
    )
    assert "apptune run" in s["baseline_verdicts"]["decides"]
    assert "apptune check-regressions" in s["history_verdicts"]["decides"]
    (hv,) = s["history_verdicts"]["changes"]
    assert (hv["variant"], hv["figure"], hv["verdict"]) == ("tuned", "HPL", "regression")
    tuned = next(r for r in s["apps"][0]["rows"] if r["variant"] == "tuned")
    assert tuned["baseline_verdicts"]["HPL"] == "within threshold"
    assert tuned["history_verdicts"]["HPL"] == "regression"

    md = (run_dir / "report.md").read_text()
    base = md[md.index("## Against this machine's baseline") : md.index("## Performance history")]
    hist = md[md.index("## Performance history") : md.index("## hpcc")]
    assert "decides `apptune run`'s exit code: **0** test case(s) failed it" in base
    assert "3 within threshold" in base and "regression" not in base.lower()
    assert "decide `apptune check-regressions`' exit code, not this run's" in hist
    assert "**regression** | hpcc/nightly gnu/tuned HPL" in hist
    # in the matrix, one row each
    assert "| vs committed baseline | no baseline | within threshold |" in md
    assert (
        "| history (change points) | unchanged | regression: HPL; unchanged: StarFFT, wall_time |"
        in md
    )

    html = (run_dir / "report.html").read_text()
    assert html.index('id="baseline"') < html.index('id="history"') < html.index('class="matrix"')
    cell = re.search(r'<td class="[^"]*" title="committed baseline 9\.6[^"]*">', html)
    assert cell and "history-regression" in cell.group(0) and " regression " not in cell.group(0), (
        cell
    )
    assert "within thresholds" not in html


def test_verdict_cells_list_each_verdict_with_its_figures():
    assert report_files._verdicts({}) == "–"
    assert (
        report_files._verdicts({"HPL": "within threshold", "wall_time": "within threshold"})
        == "within threshold"
    )
    assert (
        report_files._verdicts(
            {
                "HPL": "regression",
                "a": "within threshold",
                "b": "within threshold",
                "c": "no verdict (node shared)",
            }
        )
        == "regression: HPL; within threshold: a, b; no verdict (node shared): c"
    )
    many = {"HPL": "regression", **{f"f{i}": "within threshold" for i in range(7)}}
    assert report_files._verdicts(many) == "regression: HPL; within threshold: the other 7"


# ---------------------------------------------------------------- skipped because of a dependency


def test_tests_whose_dependency_failed_skipped_or_xfailed_are_skipped_not_failed(tmp_path):
    """What ReFrame 4.10 writes (frontend/executors, reporting): a test whose dependency
    failed is ``fail_deps``, one whose dependency was skipped or an expected failure is
    ``skip``; neither has a fail_phase, fail_reason, output or stage directory."""
    build = tmp_path / "stage" / "HPCCBuild_gnu"
    build.mkdir(parents=True)
    (build / "rfm_build.err").write_text(
        "apptune: error: patches/hpcc/0002-fftw3-interface.patch: hunks: patch does not apply\n"
    )
    sk = tmp_path / "stage" / "HPCCBuild_oneapi"
    sk.mkdir(parents=True)
    (sk / "apptune-skip.txt").write_text(
        "environment 'oneapi': compiler/tool icx not found on PATH\n"
    )

    def case(name, env, result, fixture, deps=(), phase=None, reason=None, stagedir=None):
        return {
            "display_name": name,
            "unique_name": name.replace(" ", "_"),
            "environ": env,
            "system": "local",
            "partition": "default",
            "result": result,
            "fixture": fixture,
            "fail_phase": phase,
            "fail_reason": reason,
            "outputdir": None,
            "stagedir": str(stagedir) if stagedir else None,
            "dependencies_actual": [[d.replace(" ", "_"), "local:default", env] for d in deps],
        }

    cases = [
        case(
            "HPCCBuild gnu",
            "gnu",
            "fail",
            True,
            phase="compile",
            reason="build failed",
            stagedir=build,
        ),
        case("HPCCCheck %tier=ci gnu", "gnu", "fail_deps", False, deps=["HPCCBuild gnu"]),
        case("HPCCRun gnu", "gnu", "fail_deps", True, deps=["HPCCBuild gnu"]),
        case("HPCCCheck %tier=nightly gnu", "gnu", "fail_deps", False, deps=["HPCCRun gnu"]),
        case("HPCCBuild oneapi", "oneapi", "skip", True, stagedir=sk),
        case("HPCCCheck %tier=ci oneapi", "oneapi", "skip", False, deps=["HPCCBuild oneapi"]),
    ]
    rep = tmp_path / "report.json"
    rep.write_text(
        json.dumps(
            {
                "session_info": {"num_cases": 6, "num_failures": 1, "num_skipped": 5},
                "runs": [{"testcases": cases}],
            }
        )
    )
    s = report.collect(rep)
    assert [f["test"] for f in s["failures"]] == ["HPCCBuild gnu"]
    skipped = {x["test"]: x["reason"] for x in s["skipped"]}
    failed_build = (
        "depends on HPCCBuild gnu, which failed in compile: "
        "patches/hpcc/0002-fftw3-interface.patch: hunks: patch does not apply"
    )
    no_icx = "environment 'oneapi': compiler/tool icx not found on PATH"
    # as ReFrame counts them: the fixtures skipped too (its 5)
    assert skipped == {
        "HPCCCheck %tier=ci gnu": failed_build,
        "HPCCRun gnu": failed_build,
        "HPCCCheck %tier=nightly gnu": failed_build,
        "HPCCBuild oneapi": no_icx,
        "HPCCCheck %tier=ci oneapi": no_icx,
    }
    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    assert "**1** failed" in md and "**5** skipped" in md
    fails = md[md.index("## Failures") : md.index("## Skipped")]
    assert "HPCCCheck" not in fails
    assert f"| HPCCCheck %tier=nightly gnu | gnu | {failed_build} |" in md
    assert '<b id="n-failed">1</b>' in html and '<b id="n-skipped">5</b>' in html


@pytest.mark.unit
def test_an_application_whose_source_failed_has_its_summary_line(tmp_path):
    """Nothing of it reached a result: the run's last lines still name it, with the cause."""
    run_dir = hpcc_ci_run(tmp_path / "run")
    rep = json.loads((run_dir / "report.json").read_text())
    rep["runs"][0]["testcases"] += [
        {
            "display_name": "ExaMLSource",
            "unique_name": "S1",
            "app": "examl",
            "environ": "gnu",
            "result": "fail",
            "fixture": True,
            "fail_phase": "sanity",
            "stagedir": None,
            "fail_reason": "sanity error: examl: source was not fetched",
        },
        {
            "display_name": "ExaMLCheck %tier=ci",
            "unique_name": "S2",
            "app": "examl",
            "environ": "gnu",
            "result": "fail",
            "fixture": False,
            "fail_phase": "startup",
            "stagedir": None,
            "fail_reason": "dependencies failed",
        },
    ]
    (run_dir / "report.json").write_text(json.dumps(rep))
    s = report.collect(run_dir / "report.json")
    lines = [report.summary_line(x) for x in s["summary"]]
    assert lines[0].startswith("hpcc/ci: 1 of 1 variant(s) verified")
    assert lines[1] == (
        "examl: nothing verified: ExaMLSource: sanity error: examl: source was not fetched"
    )
    # the first screen says the run's exit status and why
    assert s["outcome"] == {"status": 1, "why": ["2 test case(s) failed"]}
    (run_dir / "apptune-run.json").write_text('{"left_out": ["qe"]}')
    html = report.write(run_dir)[2].read_text()
    assert (
        '<p id="outcome" class="bad"><b>Exit status 2</b>: left out for problems in their '
        "data: qe; 2 test case(s) failed.</p>"
    ) in html


@pytest.mark.unit
def test_a_ranking_says_when_its_top_is_a_tie_and_modelled_energy_ranks_nothing(tmp_path):
    def row(env, variant, hpl):
        return {
            "app": "hpcc",
            "tier": "ci",
            "environment": env,
            "variant": variant,
            "figures": {"HPL": hpl, "wall_time": 9.0, "energy_J": 100.0 / hpl},
            "energy": {"trust": "modelled"},
        }

    run_dir = write_run(
        tmp_path / "run",
        "u1",
        1.7e9,
        [row("gnu", "baseline", 30.0), row("gnu", "tuned", 40.3), row("llvm", "tuned", 40.0)],
        mode="ci",
    )
    s = report.collect(run_dir / "report.json")
    (a,) = s["apps"]
    assert a["best"]["HPL"] == "gnu/tuned" and a["ties"]["HPL"] == ["llvm/tuned"]
    assert "energy_J" not in a["best"]  # modelled: never shaded as the best
    assert a["primary"] == "HPL"  # build-recipes/hpcc.yaml
    line = report.summary_line(s["summary"][0])
    assert "HPL: gnu/tuned (a tie, within noise, with llvm/tuned)" in line, line
    # 10 % apart is no tie
    run2 = write_run(
        tmp_path / "run2",
        "u2",
        1.7e9,
        [row("gnu", "tuned", 44.0), row("llvm", "tuned", 40.0)],
        mode="ci",
    )
    (a2,) = report.collect(run2 / "report.json")["apps"]
    assert a2["best"]["HPL"] == "gnu/tuned" and "HPL" not in a2["ties"]


@pytest.mark.unit
def test_repeats_are_judged_on_their_medians_from_their_run_records(tmp_path, toy_root):
    """The report judges repeated runs again from their run records: no crash, and an
    unverified repeat is left out of the medians."""
    rows = [
        {
            "app": "toy",
            "tier": "ci",
            "environment": "gnu",
            "variant": "tuned",
            "repeat": i,
            "figures": {"rate": v, "wall_time": 9.0},
            "ok": ok,
        }
        for i, (v, ok) in enumerate([(40.0, True), (41.0, True), (5.0, False)])
    ]
    run_dir = write_run(tmp_path / "run", "u1", 1.7e9, rows, mode="ci")
    for rec in run_dir.rglob("apptune-result.json"):
        data = json.loads(rec.read_text())
        data["baseline"] = {"file": "reference/baselines/local/toy.yaml", "found": False}
        rec.write_text(json.dumps(data))
    (a,) = report.collect(run_dir / "report.json")["apps"]
    (row,) = a["rows"]
    assert row.baseline.why.startswith("no baseline file"), row.baseline
    assert row.baseline.repeats == 2  # the two verified (and clean) repeats


@pytest.mark.unit
def test_the_exit_status_counts_a_regression_of_the_medians(tmp_path):
    """With repeats ReFrame judges no single repeat and every test case passes; the medians'
    regression fails ``apptune run`` after it, and the report's first screen says so."""
    run_dir = hpcc_ci_run(tmp_path / "run")
    summaries = [{"app": "hpcc", "tier": "ci", "verdict": "regression"}]
    assert report.outcome(run_dir / "report.json", [], summaries) == {
        "status": 1,
        "why": ["regression against this machine's baseline: hpcc/ci"],
    }


@pytest.mark.unit
def test_summary_json_holds_each_row_as_the_record_holds_its_parts(tmp_path):
    """summary.json keeps a row's keys (the history and other tools read it): the test
    case's fields, the run record's parts as the record holds them, and what the report
    added; merged repeats also their count and spread."""
    base = {"app": "hpcc", "tier": "ci", "environment": "gnu", "energy": {"trust": "modelled"}}
    rows = [
        dict(base, variant="baseline", repeat=i, figures={"HPL": 30.0 + i, "wall_time": 9.0})
        for i in range(2)
    ] + [dict(base, variant="tuned", figures={"HPL": 40.0, "wall_time": 8.0})]
    run_dir = write_run(tmp_path / "run", "u1", 1.7e9, rows, mode="ci")
    report.render(report.collect(run_dir / "report.json"), run_dir)
    s = json.loads((run_dir / "summary.json").read_text())
    record = {"test", "app", "tier", "variant", "environment", "system", "result", "verified"}
    record |= {"fail_phase", "fail_reason", "verification", "figures", "baseline", "energy"}
    record |= {"provenance", "outputdir", "ranks", "input", "values", "curves", "job"}
    record |= {"placement_layout", "launch", "quality", "machine_id", "machine", "run"}
    record |= {"scratch", "knobs"}
    added = {"scratch_reads", "speedup", "baseline_verdicts", "input_own"}
    single = next(r for r in s["apps"][0]["rows"] if r["variant"] == "tuned")
    assert set(single) == record | added, set(single) ^ (record | added)
    assert single["energy"] == {"trust": "modelled"} and single["values"] == {}
    assert single["system"] == "local:default" and single["figures"]["HPL"] == 40.0
    merged = next(r for r in s["apps"][0]["rows"] if r["variant"] == "baseline")
    assert set(merged) == record | added | {"repeats", "spread"}
    assert merged["repeats"] == 2 and merged["figures"]["HPL"] == 30.5
    assert merged["spread"]["HPL"] == pytest.approx(1 / 30.5)
    assert "%.repeat_no" not in merged["test"]
    assert [set(r) for r in s["results"]] == [record] * 2 + [record | added]
