"""Run summary from ReFrame's run report plus apptune's per-test result files.

Writes ``summary.json`` (machine-readable), ``report.md`` (fits a GitHub job
summary) and ``report.html`` into the run directory.  The first screen is the exit
status with its reason and one table, a row per application and tier
(:mod:`~apptune.report.screen`); failures come next, with the one-line reason; then a
variant matrix per application with the correctness mark, the figures, the change
against baseline and the best correct variant per figure.

Three steps, a module each: :mod:`~apptune.report.collect` (what the report says, with
:mod:`~apptune.report.screen` its first screen), :mod:`~apptune.report.plots` (its figures)
and :mod:`~apptune.report.files` (its files, rendered).
"""

from __future__ import annotations

from .collect import (
    SKIPPED_RESULTS,
    baseline_advice,
    collect,
    history_verdicts,
    outcome,
    untested_apps,
)
from .files import printable_value, render, summary_line, write
from .matrices import TIE
from .plots import curve_plots, power_plots, trend_plots, variant_styles, write_figures
from .screen import app_summary, first_screen

__all__ = [
    "SKIPPED_RESULTS",
    "TIE",
    "app_summary",
    "baseline_advice",
    "collect",
    "curve_plots",
    "first_screen",
    "history_verdicts",
    "outcome",
    "power_plots",
    "printable_value",
    "render",
    "summary_line",
    "trend_plots",
    "untested_apps",
    "variant_styles",
    "write",
    "write_figures",
]
