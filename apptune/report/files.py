"""The report's files, rendered: ``summary.json`` (machine-readable), ``report.md`` (fits a GitHub
job summary) and ``report.html`` in the run directory, from :func:`~apptune.report.collect.collect`
and the plots.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .. import paths, templating
from ..core.run import quality, scratch
from ..errors import printable
from ..figures import fmt_figure, fmt_pct
from ..models import as_data
from ..yamlio import atomic_write_json, atomic_write_text
from .collect import collect, history_verdicts
from .plots import (
    curve_plots,
    power_plots,
    scaling_plots,
    trend_plots,
    variant_styles,
    write_figures,
)
from .screen import app_anchor, app_heading, first_screen
from .values import variant_key


def summary_line(s: dict) -> str:
    """One line per application for a terminal or a job summary (control characters of
    program output escaped)."""
    return printable(_summary_line(s))


def _summary_line(s: dict) -> str:
    if s.get("nothing_verified"):
        return f"{s['app']}: nothing verified: {s['nothing_verified']}"
    head = f"{s['app']}/{s['tier']}: {s['verified']} of {s['variants']} variant(s) verified"
    if s["not_verified"]:
        head += f" (NOT verified: {', '.join(s['not_verified'])})"
    if s.get("aborted"):
        head += f" ({s['aborted']} test case(s) aborted: the run was stopped)"
    if s["fastest"]:
        head += f"; fastest correct by {s['primary']}: {s['fastest']}"
        if s.get("tied"):
            head += f" (a tie, within noise, with {', '.join(s['tied'])})"
        if s["speedup"] and s["fastest"] != s["reference"]:
            head += f" (x{s['speedup']:.2f} over {s['reference']})"
        if s.get("unranked"):
            head += f" [not ranked: {'; '.join(s['unranked'])}]"
    elif s.get("no_ranking"):
        head += f"; {s['no_ranking']}"
    head += "; greenest: " + (s["greenest"] or s["greenest_why"])
    return f"{head}; performance: {s['verdict_text']}"


def _verdicts(by_figure: dict) -> str:
    """``{figure: verdict}`` as one line: each verdict with its figures; the commonest one,
    when it has more than 3, last as a count
    (``regression: HPL; within noise: the other 7``)."""
    groups: dict[str, list[str]] = {}
    for n, v in by_figure.items():
        groups.setdefault(str(v), []).append(n)
    if len(groups) <= 1:
        return next(iter(groups), "–")
    common = max(groups, key=lambda v: len(groups[v]))
    if len(groups[common]) <= 3:
        return "; ".join(f"{v}: {', '.join(ns)}" for v, ns in groups.items())
    return "; ".join(
        [f"{v}: {', '.join(ns)}" for v, ns in groups.items() if v != common]
        + [f"{common}: the other {len(groups[common])}"]
    )


def render(
    summary: dict, run_dir: Path, history_dir: Path | None = None
) -> tuple[Path, Path, Path]:
    env = templating.environment(keep_trailing_newline=False, finalize=printable_value)
    env.filters.update(
        quality=quality.summary,
        filesystem=scratch.describe,
        wrote_files=lambda rows: any(r.scratch for r in rows),
        summary_line=summary_line,
        fmt=functools.partial(fmt_figure, missing="–"),
        pct=fmt_pct,
        key=variant_key,
        verdicts=_verdicts,
        cell=_md_cell,
    )
    env.globals.update(
        relpath=lambda p: paths.rel(p, run_dir, up=True),
        app_anchor=app_anchor,
        app_heading=app_heading,
    )
    summary["history_verdicts"] = None
    verdicts, order = (
        history_verdicts(summary, Path(history_dir)) if history_dir is not None else ([], {})
    )
    summary["first_screen"] = first_screen(summary)  # now with the history's verdicts
    for a in summary["apps"]:  # one style per variant, for this run's variants and the history's
        a["variant_styles"] = variant_styles(
            [variant_key(r) for r in a["rows"]]
            + [v.label for v in verdicts if (v.app, v.tier) == (a["app"], a["tier"])]
        )
    try:
        power_plots(summary, run_dir)
        curve_plots(summary, run_dir)
        scaling_plots(summary, run_dir)
        if history_dir is not None:
            trend_plots(summary, run_dir, verdicts, order)
    finally:
        write_figures()
    md = env.get_template("report.md.j2").render(**summary)
    html = env.get_template("report.html.j2").render(**summary)
    files = (run_dir / "summary.json", run_dir / "report.md", run_dir / "report.html")
    atomic_write_json(files[0], as_data(summary))  # the run record's parts as it holds them
    atomic_write_text(files[1], md)
    atomic_write_text(files[2], html)
    return files


def printable_value(value):
    """A template's value as the report shows it: text with control characters escaped (a
    terminal that shows report.md runs no escape sequence from a program's output)."""
    if hasattr(value, "__html__"):  # jinja2's Markup (an SVG plot, `| safe`): stays Markup
        return type(value)(printable(str(value)))
    return printable(value) if isinstance(value, str) else value


def _md_cell(text) -> str:
    """Text as one cell of a Markdown table: on one line, its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def write(
    run_dir: Path, report_file: Path | None = None, history_dir: Path | None = None
) -> tuple[Path, Path, Path]:
    run_dir = Path(run_dir)
    summary = collect(report_file or run_dir / "report.json")
    return render(summary, run_dir, history_dir)
