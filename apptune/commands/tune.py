"""``apptune tune``: a budgeted, resumable search for the fastest verified configuration."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import paths
from .options import COUNT, COUNT0, trial_history_options
from .workflow import trials_in_history


def cmd_tune(a) -> int:
    from ..tools import tune

    try:
        with trials_in_history(
            "tune", store=not a.no_history, history=a.history, argv=a.argv
        ) as trials:
            res = tune.tune(
                a.app,
                objective=a.objective,
                budget=a.budget,
                max_builds=a.max_builds,
                repeats=a.repeats,
                confirm=a.confirm,
                top=a.top,
                work=a.work_dir,
                seed=a.seed,
                polish=a.polish,
                config_file=a.config,
                tier=a.input,
                on_trial=trials.add,
            )
    except KeyboardInterrupt:
        print("apptune: tune: interrupted; the same command resumes the search", file=sys.stderr)
        return 130
    print(tune.report_md(res))
    print(f"apptune: tune: report {Path(res['work']) / 'tune-report.md'}")
    if res["winner"] is None:
        print("apptune: tune: no verified configuration beat the baseline", file=sys.stderr)
        return 1
    if a.write:
        from ..yamlio import atomic_write_text

        atomic_write_text(tune.recommended_path(), res["recommended_text"])
        print(f"apptune: tune: wrote {tune.recommended_path()}")
    else:
        print(
            f"apptune: tune: {tune.recommended_path().name} not changed (--write applies the diff "
            "above)"
        )
    return trials.status(0)


def register(subparsers) -> None:
    """Add ``apptune tune``."""
    tu = subparsers.add_parser(
        "tune",
        help="budgeted, resumable search for the fastest verified "
        "configuration (tuning/APP.yaml; docs/tuning.md)",
    )
    tu.add_argument("app")
    tu.add_argument("--input", metavar="TIER", help="input tier (default: the tuning space's, ci)")
    tu.add_argument(
        "--objective",
        default="time",
        help="time, energy, edp (figures per tuning/APP.yaml) or a figure name (default time)",
    )
    tu.add_argument("--budget", type=COUNT, default=24, help="runs the search may use (default 24)")
    tu.add_argument(
        "--max-builds",
        type=COUNT,
        default=6,
        help="builds the search may compile (besides the baseline's; "
        "build-cache restores are free; default 6)",
    )
    tu.add_argument(
        "--repeats", type=COUNT, default=2, help="runs per candidate at most (default 2)"
    )
    tu.add_argument(
        "--confirm",
        type=COUNT,
        default=3,
        help="interleaved runs of the best candidates and the baseline at the end (default 3)",
    )
    tu.add_argument(
        "--top", type=COUNT, default=2, help="candidates confirmed at the end (default 2)"
    )
    tu.add_argument("--seed", type=COUNT0, default=1, help="sampler seed (default 1)")
    tu.add_argument(
        "--polish",
        type=COUNT0,
        help="the last runs of the budget step from the best trial one "
        "knob at a time (default a third of the budget; 0: TPE only)",
    )
    tu.add_argument(
        "--work-dir",
        type=Path,
        help="trials (tune.db), builds, runs, report "
        "(default runs/tune/APP-TIER-OBJECTIVE); the same directory resumes the search",
    )
    tu.add_argument(
        "--write", action="store_true", help="write the winner into site-config/recommended.yaml"
    )
    tu.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    tu.set_defaults(func=cmd_tune)
    trial_history_options(tu)
