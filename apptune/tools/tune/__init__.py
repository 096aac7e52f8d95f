"""``apptune tune``: a budgeted, resumable search for the fastest verified configuration.

The space (``tuning/APP.yaml``, schema :class:`apptune.models.TuningSpace`) is
environment × flag ladder × extra flags × library axes (BLAS, FFT) — the build —
and run-time environment variables (e.g. ``OPENBLAS_CORETYPE``) × input knobs
(e.g. HPL's N, NB, P×Q) — the run.

Method: Optuna's TPE sampler (Bayesian optimisation over the categorical space)
asks for candidates; each candidate is built (a build already made in this search
or in the build cache is reused: builds are the expensive part) and run on the
tier's input with its knobs, up to ``repeats`` times; after each repeat the
running median is reported and Optuna's successive-halving pruner stops
candidates that are already in the worse half at that many repeats. A candidate
that fails verification in any repeat violates the sampler's constraint and is
never a winner. The search stops at ``budget`` runs; when the build budget is
used up, new candidates reuse the best built configurations (their run knobs are
still sampled). When TPE proposes a configuration already measured (it does, once
a small space is mostly explored), the search steps instead to an unmeasured
neighbour of the best trials — one knob changed, run knobs before builds — and
stops early only when no such neighbour is left. Trials live in an SQLite study
under the work directory, so an interrupted search resumes where it stopped (its
unfinished trial is marked failed).

The score of a run is the geometric mean over the objective's figures of the
ratio to the baseline (inverted where lower is better), the baseline being run
first in the same search. At the end the best verified candidates and the
baseline are re-run interleaved (``confirm`` times each): the report's ranking,
speedups and targets are those same-session medians. Output: a Markdown report
and the winner as a diff of ``site-config/recommended.yaml``.

Four modules: :mod:`~apptune.tools.tune.space` (configurations and scores),
:mod:`~apptune.tools.tune.trials` (one trial built and run; the study's trials),
:mod:`~apptune.tools.tune.search` (the phases) and :mod:`~apptune.tools.tune.results`
(the report and the diff).
"""

from __future__ import annotations

from ...core.data.spaces import load_space, recommended_path, space_path
from .results import recommended_diff, report_md
from .search import Search, confirm_best, tune
from .space import (
    OBJECTIVE_DEFAULTS,
    Config,
    axis_defaults,
    fixed_build_params,
    medians,
    objective_figures,
    score,
    suggest,
    target_values,
)
from .trials import DISTURBED_RETRIES, Cost, Tuner, ranked_trials

__all__ = [
    "DISTURBED_RETRIES",
    "OBJECTIVE_DEFAULTS",
    "Config",
    "Cost",
    "Search",
    "Tuner",
    "axis_defaults",
    "confirm_best",
    "fixed_build_params",
    "load_space",
    "medians",
    "objective_figures",
    "ranked_trials",
    "recommended_diff",
    "recommended_path",
    "report_md",
    "score",
    "space_path",
    "suggest",
    "target_values",
    "tune",
]
