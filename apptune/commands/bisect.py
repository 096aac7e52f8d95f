"""``apptune bisect``: the source files that must keep the good variant's flags."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import paths
from ..core.data import recipes
from ..errors import ApptuneError
from .options import COUNT, trial_history_options
from .workflow import trials_in_history


def cmd_bisect(a) -> int:
    from ..core.data.site import load_site
    from ..tools import bisect

    if a.between:
        return cmd_between(a)
    if not a.app or not a.good or not a.bad:
        raise ApptuneError(
            None, "bisect", "give APP --good VARIANT --bad VARIANT, or --between RUN_DIR"
        )

    site = load_site(a.environment, a.config, languages=recipes.load_recipe(a.app).build.languages)
    with trials_in_history(
        "bisect", store=not a.no_history, history=a.history, argv=a.argv
    ) as trials:
        res = bisect.bisect(
            a.app,
            a.good,
            a.bad,
            site,
            tier=a.tier,
            work=a.work_dir,
            ignore_per_file=a.ignore_per_file,
            repeats=a.repeats,
            max_cycles=a.max_cycles,
            ranks=a.ranks,
            functions=a.functions,
            on_trial=trials.add,
        )
    print(bisect.report_md(res))
    if not res.verified:
        print(
            f"apptune: bisect: no verified per-file override after {res.n_cycles} cycles",
            file=sys.stderr,
        )
        return 1
    if res.entries and a.write:
        f = recipes.recipe_path(a.app)
        from ..yamlio import atomic_write_text

        atomic_write_text(f, bisect.add_per_file(f.read_text(), res.entries, str(f)))
        print(f"apptune: bisect: wrote the per_file rule into {f}")
    elif res.entries:
        print("apptune: bisect: recipe not changed (--write applies the diff above)")
    return trials.status(0)


def cmd_between(a) -> int:
    """``apptune bisect --between RUN_DIR``: which change since the baseline did it."""
    from ..tools.bisect import between
    from ..yamlio import atomic_write_json

    t0 = time.monotonic()
    with trials_in_history(
        "bisect", store=not a.no_history, history=a.history, argv=a.argv
    ) as trials:
        res = between.between(
            Path(a.between),
            figure=a.figure,
            test=a.test,
            repeats=a.repeats,
            work=a.work_dir,
            config=a.config,
            max_cycles=a.max_cycles,
            on_trial=trials.add,
        )
    res.seconds = round(time.monotonic() - t0, 1)
    md = between.report_md(res)
    work = Path(a.work_dir or Path(a.between) / "bisect-between")
    work.mkdir(parents=True, exist_ok=True)
    (work / "between.md").write_text(md + "\n")
    atomic_write_json(work / "between.json", res.to_dict())
    print(md)
    print(f"apptune: bisect --between: report in {work / 'between.md'}")
    return trials.status(0 if res.culprits else 1)


def register(subparsers) -> None:
    """Add ``apptune bisect``."""
    bi = subparsers.add_parser(
        "bisect",
        help="find the source files that must keep the good variant's "
        "flags for the bad variant to pass verification; with --between RUN_DIR, the "
        "change since the baseline that carries a regression (docs/tuning.md, "
        "docs/regressions.md)",
    )
    bi.add_argument("app", nargs="?")
    bi.add_argument("--good", metavar="VARIANT", help="a variant that passes, e.g. tuned")
    bi.add_argument("--bad", metavar="VARIANT", help="a variant that fails, e.g. aggressive")
    bi.add_argument(
        "--between",
        metavar="RUN_DIR",
        help="a run that regressed against its baseline: build and run the changes since "
        "the baseline one group at a time until the one that carries it is found",
    )
    bi.add_argument("--figure", help="with --between: the figure (default the largest regression)")
    bi.add_argument("--test", help="with --between: the test or run variant (default: any)")
    bi.add_argument("-e", "--environment", default="gnu", help="ReFrame environment (default gnu)")
    bi.add_argument("--tier", default="ci", help="input tier whose reference verifies (default ci)")
    bi.add_argument("--ranks", type=COUNT, help="MPI ranks (default: the tier's)")
    bi.add_argument(
        "--ignore-per-file",
        action="store_true",
        help="build the bad variant with its ladder for every file, also those the "
        "recipe's per_file rules exempt (to find out whether a rule is needed)",
    )
    bi.add_argument(
        "--work-dir",
        type=Path,
        help="builds, mixed builds and runs "
        "(default runs/bisect/APP-ENV-GOOD-vs-BAD); the ends are reused when unchanged",
    )
    bi.add_argument(
        "--repeats", type=COUNT, default=3, help="timing runs of good, bad and mixed (default 3)"
    )
    bi.add_argument(
        "--max-cycles", type=COUNT, default=40, help="budget of build+run cycles (default 40)"
    )
    bi.add_argument(
        "--no-functions",
        dest="functions",
        action="store_false",
        help="stop at files: skip the search for the global functions of each culprit "
        "file that must keep the good flags",
    )
    bi.add_argument("--write", action="store_true", help="write the per_file rule into the recipe")
    bi.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    bi.set_defaults(func=cmd_bisect)
    trial_history_options(bi)
