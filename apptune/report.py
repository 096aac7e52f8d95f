"""Run summary from ReFrame's run report plus apptune's per-test result files.

Writes ``summary.json`` (machine-readable), ``report.md`` (fits a GitHub job
summary) and ``report.html`` into the run directory.  Failures come first,
with the one-line reason; then a variant matrix per application with the
correctness mark, the figures, the change against baseline and the best
correct variant per figure.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import jinja2

from . import recipes, slurm
from .errors import ApptuneError, last_error_line
from .yamlio import atomic_write_json, atomic_write_text

from .constants import RESULT_FILE, SKIP_FILE, XFAIL_FILE


def _load_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _result_file(tc: dict) -> dict | None:
    for d in (tc.get("outputdir"), tc.get("stagedir")):
        if d:
            r = _load_json(Path(d) / RESULT_FILE)
            if r is not None:
                return r
    return None


def _skip_reason(tc: dict, by_name: dict, depth: int = 0) -> str:
    """The recorded reason of the test or of the skipped dependency that caused it."""
    skip_file = Path(tc.get("stagedir") or "/nonexistent") / SKIP_FILE
    if skip_file.is_file():
        return skip_file.read_text().strip()
    if depth < 5:
        for dep in tc.get("dependencies_actual") or []:
            d = by_name.get((dep[0], dep[2]) if len(dep) > 2 else dep[0])
            if d and d.get("result") == "xfail":
                return f"depends on {d['display_name']}, an expected failure: {_xfail_reason(d)}"
            if d and d.get("result") == "skip":
                return _skip_reason(d, by_name, depth + 1)
    return tc.get("fail_reason") or "skipped (no reason recorded)"


def _xfail_reason(tc: dict) -> str:
    """Why a test failed as expected: the build's record (reason and the compiler's own
    message) or ReFrame's message."""
    rec = next((r for d in (tc.get("outputdir"), tc.get("stagedir")) if d
                for r in [_load_json(Path(d) / XFAIL_FILE)] if r), None)
    if rec:
        return f"{rec['reason']} (compiler said: {rec['compiler_said']})"
    return " ".join(str(tc.get("fail_reason") or "expected failure").split())[:500]


def _testcases(report_file: Path) -> tuple[dict, list[dict], dict]:
    """The run report, its test cases, and the cases by unique name (and environment)."""
    rep = _load_json(report_file)
    if rep is None:
        raise ApptuneError(report_file, None, "not a readable ReFrame run report")
    cases = [tc for run in rep.get("runs", []) for tc in run.get("testcases", [])]
    by_name = {(tc["unique_name"], tc.get("environ")): tc for tc in cases}
    by_name.update({tc["unique_name"]: tc for tc in cases})
    return rep, cases, by_name


def collect(report_file: Path) -> dict:
    rep, cases, by_name = _testcases(report_file)
    rows, failures, skipped, xfailed = [], [], [], []
    for tc in cases:
        res = tc.get("result")
        if res == "xfail":
            xfailed.append({"test": tc["display_name"], "environment": tc.get("environ"),
                            "reason": _xfail_reason(tc)})
            continue
        if tc.get("fixture"):
            if res == "fail":
                failures.append(_row_failure(tc, None))
            continue
        r = _result_file(tc)
        if res == "skip":
            skipped.append({"test": tc["display_name"], "environment": tc.get("environ"),
                            "reason": _skip_reason(tc, by_name)})
            continue
        if r is None:
            failures.append(_row_failure(tc, None))
            continue
        row = {
            "test": tc["display_name"], "app": r["app"], "tier": r["tier"], "variant": r["variant"],
            "environment": r["environment"], "system": f"{r['system']}:{r['partition']}",
            "result": res, "fail_phase": tc.get("fail_phase"), "fail_reason": tc.get("fail_reason"),
            "verified": bool(r.get("verification", {}).get("ok")),
            "verification": r.get("verification", {}).get("summary", ""),
            "figures": r.get("figures", {}), "baseline": r.get("baseline", {}),
            "energy": r.get("energy", {}), "provenance": r.get("provenance", {}),
            "outputdir": tc.get("outputdir") if res == "pass" else tc.get("stagedir"),
            "ranks": r.get("ranks"), "input": r.get("input", {}), "curves": r.get("curves", {}),
            "job": r.get("job"), "placement_layout": r.get("placement_layout"),
        }
        rows.append(row)
        if res != "pass":
            failures.append(_row_failure(tc, row))
    si = rep.get("session_info", {})
    session = {k: si.get(k) for k in ("uuid", "time_start", "time_end", "time_elapsed", "cmdline",
                                      "hostname", "version", "num_cases", "num_failures", "num_skipped")}
    for k in ("time_start", "time_end"):
        session[k] = _readable_time(session[k])
    return {
        "session": session,
        "failures": failures, "expected_failures": xfailed, "skipped": skipped,
        "apps": _matrices(_merge_repeats(rows)), "results": rows,
    }


def _merge_repeats(rows: list[dict]) -> list[dict]:
    """Repeats of a test (``--repeat``) as one matrix column: the median of each figure,
    its spread ((max - min) / median), verified only when every repeat was."""
    import re
    import statistics
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["app"], r["tier"], r["environment"], r["variant"], r["system"]), []).append(r)
    out = []
    for (app, tier, env, variant, system), rs in groups.items():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        m = dict(rs[0], test=re.sub(r"\s*%\.repeat_no=\d+", "", rs[0]["test"]), repeats=len(rs),
                 verified=all(r["verified"] for r in rs), figures={}, spread={})
        for n in {n for r in rs for n in r["figures"]}:
            vals = [r["figures"][n] for r in rs if _num(r["figures"].get(n)) is not None]
            if vals:
                med = statistics.median(vals)
                m["figures"][n] = med
                m["spread"][n] = (max(vals) - min(vals)) / abs(med) if med else None
        bad = [r for r in rs if not r["verified"]]
        m["verification"] = (bad[0]["verification"] if bad else rs[0]["verification"]) + f" ({len(rs)} repeats)"
        if (rs[0].get("baseline") or {}).get("file"):   # the verdicts, again for the medians
            from . import baselines
            try:
                specs = recipes.figure_specs(recipes.load_recipe(app))
                b = baselines.load(system.split(":")[0], app)[1]
            except ApptuneError:
                b = None
            if b is not None:
                entry = baselines.lookup(b, env, variant, tier)
                m["baseline"] = dict(rs[0]["baseline"], found=entry is not None, figures=baselines.compare(
                    b, entry, specs, m["figures"], (rs[0].get("energy") or {}).get("trust")))
        out.append(m)
    return out


def _readable_time(stamp):
    """ReFrame's compact 20261121T220731+0000 as 2026-11-21 22:07:31 +0000."""
    import datetime
    try:
        return datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S%z").strftime("%Y-%m-%d %H:%M:%S %z")
    except (TypeError, ValueError):
        return stamp


def _row_failure(tc: dict, row: dict | None) -> dict:
    reason = tc.get("fail_reason") or "failed"
    phase = tc.get("fail_phase")
    if row and row.get("verification") and phase == "sanity":
        reason = row["verification"]
    elif phase in ("compile", "compile_wait") and tc.get("stagedir"):
        err = last_error_line(Path(tc["stagedir"]) / "rfm_build.err")
        reason = err or reason
    elif tc.get("stagedir"):
        err = last_error_line(Path(tc["stagedir"]) / (tc.get("job_stderr") or "rfm_job.err"))
        reason = err or reason
    # the scheduler's part (sbatch could not reach slurmctld, job blocked on down nodes)
    reason = slurm.explain_reframe_failure(tc.get("fail_reason")) or reason
    return {"test": tc["display_name"], "environment": tc.get("environ"), "phase": phase,
            "reason": " ".join(str(reason).split())[:500],
            "stagedir": tc.get("stagedir")}


def _matrices(rows: list[dict]) -> list[dict]:
    apps = []
    for (app, tier) in sorted({(r["app"], r["tier"]) for r in rows}):
        try:
            recipe = recipes.load_recipe(app)
            figures = recipes.figure_specs(recipe)
            primary = recipe.run.primary
        except ApptuneError:
            figures, primary = dict(recipes.COMMON_FIGURES), "wall_time"
        sel = sorted([r for r in rows if r["app"] == app and r["tier"] == tier],
                     key=lambda r: (r["environment"], r["variant"]))
        present = {n for r in sel for n, v in r["figures"].items() if v is not None}
        names = [n for n in figures if n in present] + sorted(present - set(figures))
        better = {n: (figures[n].better if n in figures else "higher") for n in names}
        units = {n: (figures[n].unit if n in figures else "") for n in names}
        ref = next((r for r in sel if r["verified"] and (r["environment"], r["variant"]) == ("gnu", "baseline")),
                   next((r for r in sel if r["verified"]), None))
        best = {}
        for n in names:
            cand = [r for r in sel if r["verified"] and _num(r["figures"].get(n)) is not None]
            if cand:
                pick = max if better[n] == "higher" else min
                best[n] = _key(pick(cand, key=lambda r: r["figures"][n]))
        for r in sel:
            r["speedup"] = {}
            for n in names:
                v, b = _num(r["figures"].get(n)), _num(ref["figures"].get(n)) if ref else None
                if v and b:
                    r["speedup"][n] = v / b if better[n] == "higher" else b / v
            r["regressions"] = [n for n, c in (r.get("baseline", {}).get("figures") or {}).items()
                                if c.get("verdict") == "regression"]
        apps.append({"app": app, "tier": tier, "figures": names, "units": units, "better": better,
                     "primary": primary, "rows": sel, "best": best,
                     "reference_variant": _key(ref) if ref else None})
    return apps


def _key(r: dict) -> str:
    return f"{r['environment']}/{r['variant']}"


def _num(v):
    return v if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else None


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _pct(v) -> str:
    return "–" if v is None else f"{v:+.1%}"


def _save_figure(fig, out: Path) -> Path:
    """Write a matplotlib figure atomically (a reader never sees half a PNG) and close it."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(out)
    return out


def power_plots(summary: dict, run_dir: Path) -> None:
    """One power-over-time plot per application and tier, a line per variant."""
    from .energy import TRACE_FILE, read_trace
    for a in summary["apps"]:
        traces = []
        for r in a["rows"]:
            f = Path(r["outputdir"] or "") / TRACE_FILE
            if r.get("outputdir") and f.is_file():
                try:
                    traces.append((_key(r), r["energy"].get("trust", "?"), read_trace(f)))
                except (OSError, ValueError, KeyError):
                    continue
        a["power_plot"] = None
        if not traces:
            continue
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
        for label, trust, pts in traces:
            ax.plot([t for t, _ in pts], [p for _, p in pts], label=f"{label} ({trust})", linewidth=1.2)
        grades = sorted({t for _, t, _ in traces})
        ax.set_title(f"{a['app']} — tier {a['tier']}: power over time ({', '.join(grades)})")
        ax.set_xlabel("time since job start (s)")
        ax.set_ylabel("power (W)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        out = _save_figure(fig, run_dir / "plots" / f"power-{a['app']}-{a['tier']}.png")
        a["power_plot"] = str(out.relative_to(run_dir))


def _read_curve(f: Path) -> dict[str, list[float]]:
    lines = f.read_text().splitlines()
    cols = lines[0].split(",")
    rows = [[float(x) for x in l.split(",")] for l in lines[1:] if l.strip()]
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


def curve_plots(summary: dict, run_dir: Path) -> None:
    """Curves (NetPIPE, micro-benchmarks): one plot per curve and y column, a line per variant."""
    for a in summary["apps"]:
        a["curve_plots"] = []
        found: dict[tuple[str, str], list] = {}
        for r in a["rows"]:
            for name, c in (r.get("curves") or {}).items():
                plot = c.get("plot")
                f = Path(r.get("outputdir") or "") / c["file"]
                if not plot or not r.get("outputdir") or not f.is_file():
                    continue
                try:
                    data = _read_curve(f)
                except (OSError, ValueError, IndexError):
                    continue
                for y in plot["y"]:
                    # a column with no finite value (a placement class this system lacks)
                    # would be empty axes
                    if any(math.isfinite(v) for v in data.get(y, [])):
                        found.setdefault((name, y), []).append((_key(r), r["verified"], plot, data))
        if not found:
            continue
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for (name, y), lines in found.items():
            plot = lines[0][2]
            fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
            for label, ok, _, data in lines:
                ax.plot(data[plot["x"]], data[y], label=label + ("" if ok else " (NOT verified)"),
                        linewidth=1.2, marker=".", markersize=3)
            if plot.get("xlog"):
                ax.set_xscale("log", base=2)
            if plot.get("ylog"):
                ax.set_yscale("log")
            ax.set_title(f"{a['app']} — tier {a['tier']}: {name} {y} vs {plot['x']}")
            ax.set_xlabel(plot["x"])
            ax.set_ylabel(y)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            out = _save_figure(fig, run_dir / "plots" / f"curve-{a['app']}-{a['tier']}-{name}-{y}.png")
            a["curve_plots"].append({"name": name, "y": y, "x": plot["x"],
                                     "file": str(out.relative_to(run_dir))})


def trend_plots(summary: dict, run_dir: Path, history_dir: Path) -> None:
    """Verdicts over the history (runs of this run's mode) and, per application and tier,
    one trend plot: a panel per figure, a line per variant, change points marked."""
    from . import history, regressions
    with history.History(history_dir) as h:
        uuid = summary["session"].get("uuid")
        row = h.db.execute("SELECT mode FROM runs WHERE session_uuid = ?", (uuid,)).fetchone()
        mode = row["mode"] if row else None
        order = {r["session_uuid"]: i for i, r in enumerate(h.runs(mode=mode))}
        verdicts = []
        for system, app in sorted({(r["system"], r["app"]) for r in summary["results"]}):
            verdicts += regressions.check(h, system=system, mode=mode, app=app)
    verdicts.sort(key=lambda v: (regressions.ORDER[v.verdict], v.name))
    summary["history"] = {
        "dir": str(history_dir), "mode": mode, "runs": len(order), "this_run_stored": uuid in order,
        "counts": {k: sum(v.verdict == k for v in verdicts) for k in regressions.ORDER},
        "changes": [v.to_dict() for v in verdicts if v.verdict in ("regression", "improvement")],
    }
    for a in summary["apps"]:
        a["trend_plot"] = None
        vs = [v for v in verdicts if (v.app, v.tier) == (a["app"], a["tier"]) and len(v.points) >= 2]
        for r in a["rows"]:
            r["history_verdicts"] = {v.figure: v.verdict for v in vs
                                     if (v.environment, v.variant) == (r["environment"], r["variant"])}
        names = [n for n in a["figures"] if any(v.figure == n for v in vs)]
        if not names:
            continue
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
        cols = min(3, len(names))
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.4 * rows), dpi=80, squeeze=False)
        for ax in axes.flat[len(names):]:
            ax.set_visible(False)
        for ax, n in zip(axes.flat, names):
            for v in (v for v in vs if v.figure == n):
                xs = [order.get(p.run, i) for i, p in enumerate(v.points)]
                ax.plot(xs, [p.value for p in v.points], marker=".", markersize=3, linewidth=1,
                        label=f"{v.environment}/{v.variant}")
                for c in v.change_points:
                    bad = c["direction"] == "regression"
                    ax.axvline(order.get(c["run"], c["index"]) - 0.5, color="#b00020" if bad else "#1b7a1b",
                               linestyle="--", linewidth=1)
                    if c["change"] is not None:
                        ax.annotate(f"{c['change']:+.1%}", (order.get(c["run"], c["index"]) - 0.5, c["after"]),
                                    fontsize=6, color="#b00020" if bad else "#1b7a1b")
            ax.set_title(f"{n} ({a['units'].get(n, '')}, {a['better'].get(n, 'higher')} is better)", fontsize=8)
            ax.tick_params(labelsize=6)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        axes.flat[0].legend(fontsize=6)
        out = _save_figure(fig, run_dir / "plots" / f"trend-{a['app']}-{a['tier']}.png")
        a["trend_plot"] = str(out.relative_to(run_dir))


def render(summary: dict, run_dir: Path, history_dir: Path | None = None) -> tuple[Path, Path, Path]:
    env = jinja2.Environment(loader=jinja2.PackageLoader("apptune", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=_fmt, pct=_pct, key=_key)
    env.globals["relpath"] = lambda p: _rel(p, run_dir)
    power_plots(summary, run_dir)
    curve_plots(summary, run_dir)
    summary["history"] = None
    if history_dir is not None:
        trend_plots(summary, run_dir, Path(history_dir))
    md = env.get_template("report.md.j2").render(**summary)
    html = env.get_template("report.html.j2").render(**summary)
    paths = (run_dir / "summary.json", run_dir / "report.md", run_dir / "report.html")
    atomic_write_json(paths[0], summary)
    atomic_write_text(paths[1], md)
    atomic_write_text(paths[2], html)
    return paths


def _rel(p, base: Path) -> str:
    import os
    if not p:
        return ""
    try:
        return os.path.relpath(p, base)
    except ValueError:
        return str(p)


def write(run_dir: Path, report_file: Path | None = None,
          history_dir: Path | None = None) -> tuple[Path, Path, Path]:
    run_dir = Path(run_dir)
    summary = collect(report_file or run_dir / "report.json")
    return render(summary, run_dir, history_dir)


def untested_apps(report_file: Path) -> dict[str, list[str]]:
    """Applications of which nothing was tested in a run, with the reasons: every test case
    skipped (e.g. a tool of the only environment missing) and no build attempted.  A run
    that tested some environments of an application and skipped others does not count."""
    _, cases, by_name = _testcases(report_file)
    tested, reasons = set(), {}
    for tc in cases:
        app = tc.get("app")  # the checks' `app` variable (ReFrame: "<undefined>" when unset)
        if not isinstance(app, str) or app == "<undefined>":  # a plain ReFrame check
            continue
        res = tc.get("result")
        # a fixture's pass (a source fetched, a build made) tests nothing by itself;
        # a failed or expected-to-fail build is a result
        if res != "skip" and not (tc.get("fixture") and res == "pass"):
            tested.add(app)
        elif res == "skip" and not tc.get("fixture"):
            r = _skip_reason(tc, by_name)
            if r not in reasons.setdefault(app, []):
                reasons[app].append(r)
        else:
            reasons.setdefault(app, [])
    return {app: rs or ["only its fixtures ran"] for app, rs in reasons.items() if app not in tested}
