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
