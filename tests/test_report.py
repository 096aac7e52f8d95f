"""The report from a ReFrame run report: failures first, skip reasons, best variant."""
import json

from apptune import report


def _tc(tmp_path, name, env, result, variant, figures=None, ok=True, fixture=False, phase=None,
        reason=None, deps=()):
    d = tmp_path / name.replace(" ", "_") / env
    d.mkdir(parents=True)
    if figures is not None:
        (d / "apptune-result.json").write_text(json.dumps({
            "app": "hpcc", "tier": "ci", "variant": variant, "environment": env, "system": "local",
            "partition": "default", "figures": figures,
            "verification": {"ok": ok, "summary": "ok" if ok else "HPL_Xnorm1 = nan, expected 3890.59 ± 0.39"},
            "energy": {"trust": "none", "reason": "no meter"}, "provenance": {}, "baseline": {}}))
    return {"display_name": name, "unique_name": name, "environ": env, "result": result,
            "fixture": fixture, "fail_phase": phase, "fail_reason": reason, "outputdir": str(d),
            "stagedir": str(d), "dependencies_actual": list(deps)}


def test_report_orders_failures_first_and_marks_best(tmp_path):
    skip_build = _tc(tmp_path, "HPCCBuild oneapi", "oneapi", "skip", "tuned", fixture=True)
    (tmp_path / "HPCCBuild_oneapi" / "oneapi" / "apptune-skip.txt").write_text(
        "environment 'oneapi': compiler/tool icx not found on PATH\n")
    cases = [
        _tc(tmp_path, "HPCCCheck base", "gnu", "pass", "baseline", {"HPL": 10.0, "wall_time": 20.0}),
        _tc(tmp_path, "HPCCCheck tuned", "gnu", "pass", "tuned", {"HPL": 15.0, "wall_time": 18.0}),
        _tc(tmp_path, "HPCCCheck fast", "gnu", "fail", "aggressive", {"HPL": 99.0, "wall_time": 5.0},
            ok=False, phase="sanity", reason="sanity error"),
        skip_build,
        _tc(tmp_path, "HPCCCheck one", "oneapi", "skip", "tuned",
            deps=[["HPCCBuild oneapi", "local:default", "oneapi"]]),
    ]
    (tmp_path / "HPCCCheck_tuned" / "gnu" / "power-trace.csv").write_text("t_s,power_W\n0.1,20\n0.2,58\n0.3,59\n")
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps({"session_info": {"num_cases": 5}, "runs": [{"testcases": cases}]}))
    s = report.collect(rep)
    assert [f["test"] for f in s["failures"]] == ["HPCCCheck fast"]
    assert "HPL_Xnorm1 = nan" in s["failures"][0]["reason"]
    assert s["skipped"][0]["reason"].startswith("environment 'oneapi'")
    m = s["apps"][0]
    # the fast-but-wrong variant is never the best
    assert m["best"]["HPL"] == "gnu/tuned" and m["best"]["wall_time"] == "gnu/tuned"
    tuned = next(r for r in m["rows"] if r["variant"] == "tuned")
    assert tuned["speedup"]["HPL"] == 1.5
    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    assert md.index("## Failures") < md.index("## Skipped") < md.index("## hpcc")
    assert "**15**" in md and "| verified | ✗ | ✓ | ✓ |" in md
    assert (tmp_path / "plots" / "power-hpcc-ci.png").stat().st_size > 1000
    assert '<img class="power" src="plots/power-hpcc-ci.png"' in html
    assert 'class="bad"' in html and "<th class=\"variant\">gnu/aggressive</th>" in html


# ---------------------------------------------------------------- verification messages

def _message(got, **tol):
    from apptune.models import FieldTolerance
    from apptune.verify import compare_field
    return compare_field("x", FieldTolerance(**tol), got)


def test_a_value_off_by_less_than_six_digits_is_printed_with_the_digits_that_differ():
    e = 2.0 ** -53                  # 1.11022e-16: off by 1.8 tolerances of 1e-6 relative
    r = _message(e - 1.8e-6 * e, value=e, rel=1e-6)
    assert not r.ok
    assert r.message == "x = 1.110221e-16, expected 1.110223e-16 ± 1.11022e-22 " \
                        "(difference -2e-22, used 180% of tolerance)"
    # the same with an absolute tolerance, on the other side
    assert _message(e + 1.8e-22, value=e, abs=1e-22).message == \
        "x = 1.110225e-16, expected 1.110223e-16 ± 1e-22 (difference +1.8e-22, used 180% of tolerance)"
    # exact: six digits, no difference
    assert _message(e, value=e, rel=1e-6).message == "x = 1.11022e-16, expected 1.11022e-16 ± 1.11022e-22"


def test_large_values_exact_counts_and_bounds_show_their_difference():
    r = _message(1.2345679e12, value=1.2345678e12, rel=1e-9)
    assert r.message == "x = 1234567900000, expected 1234567800000 ± 1234.57 " \
                        "(difference +1e+05, used 8100% of tolerance)"
    r = _message(6.0221408e23, value=6.02214076e23, rel=1e-9)
    assert r.message.startswith("x = 6.0221408e+23, expected 6.02214076e+23 ± ")
    # a count compared exactly reads as a count, not 1e+06
    assert _message(1000001, value=1000000, abs=0).message == "x = 1000001, expected 1000000 ± 0 (difference +1)"
    assert _message(1000000, value=1000000, abs=0).message == "x = 1000000, expected 1000000 ± 0"
    assert _message(102.0, value=100.0, rel=0.01).message == \
        "x = 102, expected 100 ± 1 (difference +2, used 200% of tolerance)"
    # just past a bound: the digits show it, and it is not "100 %" or "0 %" of the tolerance
    assert _message(1.0000001e-14, max=1e-14).message == \
        "x = 1.0000001e-14, expected ≤ 1e-14 (used more than 100% of tolerance)"
    assert _message(0.99999999, min=1.0).message == \
        "x = 0.99999999, expected ≥ 1 (used more than 100% of tolerance)"
    assert _message(0.5, min=1.0).message == "x = 0.5, expected ≥ 1 (used 200% of tolerance)"
