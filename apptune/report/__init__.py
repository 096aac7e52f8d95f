"""Run summary from ReFrame's run report plus apptune's per-test result files.

Writes ``summary.json`` (machine-readable), ``report.md`` (fits a GitHub job
summary) and ``report.html`` into the run directory.  Failures come first,
with the one-line reason; then a variant matrix per application with the
correctness mark, the figures, the change against baseline and the best
correct variant per figure.

Three steps, a module each: :mod:`~apptune.report.collect` (what the report says),
:mod:`~apptune.report.plots` (its figures) and :mod:`~apptune.report.files` (its files, rendered).
"""

from __future__ import annotations

from .collect import (
    SKIPPED_RESULTS,
    app_summary,
    baseline_advice,
    collect,
    history_verdicts,
    outcome,
    untested_apps,
)
from .files import render, summary_line, write
from .plots import curve_plots, power_plots, trend_plots, variant_styles, write_figures

__all__ = [
    "SKIPPED_RESULTS",
    "app_summary",
    "baseline_advice",
    "collect",
    "curve_plots",
    "history_verdicts",
    "outcome",
    "power_plots",
    "render",
    "summary_line",
    "trend_plots",
    "untested_apps",
    "variant_styles",
    "write",
    "write_figures",
]
