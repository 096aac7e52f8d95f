"""ReFrame's ``reference`` of a check from its figures' verdicts against the baseline."""

from __future__ import annotations

from ..models import Figure, FigureVerdict


def reframe_reference(judged: dict[str, FigureVerdict], figures: dict[str, Figure]) -> dict:
    """``{'*': {fig: (value, lower, upper, unit)}}`` for the figures that get a verdict: a
    regression fails ReFrame's performance stage, an ``unexplained`` one is shown with no
    bounds (it fails nothing until the history confirms it)."""
    ref = {}
    for name, j in judged.items():
        if j.verdict == "no verdict" or name not in figures:
            continue
        t = j.threshold
        # a rate regresses below baseline / (1 + t) (apptune.figures.worse_better)
        bounds = (-t / (1 + t), None) if figures[name].better == "higher" else (None, t)
        if j.verdict == "unexplained":
            bounds = (None, None)
        ref[name] = (j.baseline, *bounds, figures[name].unit)
    return {"*": ref} if ref else {}
