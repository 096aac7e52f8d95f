"""``apptune check-regressions``: a verdict per figure over the history."""

from __future__ import annotations

from ..core.data import recipes
from ..errors import ApptuneError
from .options import RELATIVE, SIGNIFICANCE, history_option


def cmd_check_regressions(a) -> int:
    from ..history import changepoint, regressions, store

    with store.History(a.history, create=False) as h:
        known = set(recipes.list_recipes()) | set(h.stored("app"))
        if a.app and a.app not in known:
            raise ApptuneError(
                None, "--app", f"unknown application '{a.app}' (known: {', '.join(sorted(known))})"
            )
        runs = h.runs(mode=a.mode)
        verdicts = regressions.check(
            h,
            system=a.system,
            mode=a.mode,
            app=a.app,
            baseline_system=a.baseline_system,
            alpha=a.alpha,
            min_change=a.min_change,
        )
        path = h.path
        grades = h.grades(system=a.system, mode=a.mode, app=a.app)
        chosen = " ".join(
            f"--{k} {v}" for k, v in (("mode", a.mode), ("system", a.system), ("app", a.app)) if v
        )
        if not verdicts and grades["results"]:
            # results are stored but none can be judged yet: a new cluster's first nights
            print(
                f"apptune: check-regressions: nothing to judge yet: {grades['results']} "
                f"result(s) stored{' selected by ' + chosen if chosen else ''} in "
                f"{path.resolve()}: "
                f"{grades['disturbed']} disturbed (runs not graded clean are never judged), "
                f"{grades['unverified']} not verified, {grades['clean']} clean; a series needs "
                f"{changepoint.MIN_SIZE} clean verified runs before and after a change, and a "
                "baseline needs 3 (docs/regressions.md)"
            )
            if a.json:
                from ..yamlio import atomic_write_json

                atomic_write_json(a.json, [])
            return 0
        if not verdicts:  # a verdict over nothing is not a pass
            raise ApptuneError(
                path,
                None,
                f"no stored result to judge in {len(runs)} run(s)"
                + (f" selected by {chosen}" if chosen else "")
                + f" (stored: modes {', '.join(h.stored('mode')) or '-'}; "
                f"systems {', '.join(h.stored('system')) or '-'}; "
                f"apps {', '.join(h.stored('app')) or '-'})",
            )
    verdicts.sort(key=lambda v: (regressions.ORDER[v.verdict], v.name))
    count = {k: sum(v.verdict == k for v in verdicts) for k in regressions.ORDER}
    for v in verdicts:
        if v.verdict in ("regression", "improvement", "unexplained") or a.verbose:
            print(regressions.format_verdict(v))
    if a.json:
        from ..yamlio import atomic_write_json

        atomic_write_json(a.json, [v.to_dict() for v in verdicts])
    print(
        f"apptune: check-regressions: {count['regression']} regression(s), "
        f"{count['improvement']} improvement(s), {count['unexplained']} unexplained (a run "
        f"beyond noise, nothing changed), {count['unchanged']} unchanged, "
        f"{count['insufficient data']} with insufficient data; {len(verdicts)} series over "
        f"{len(runs)} run(s){' of mode ' + a.mode if a.mode else ''} in {path.resolve()}"
    )
    return 1 if count["regression"] else 0


def register(subparsers) -> None:
    """Add ``apptune check-regressions``."""
    cr = subparsers.add_parser(
        "check-regressions",
        help="verdict per figure over the history; exit 1 on a confirmed regression",
    )
    history_option(cr)
    cr.add_argument("--system", help="only this system (or system:partition)")
    cr.add_argument("--mode", help="only runs of this ReFrame mode (nightly.sh: nightly)")
    cr.add_argument("--app", help="only this application")
    cr.add_argument("--baseline-system", help="baselines of this system (default: the run's)")
    cr.add_argument(
        "--alpha",
        type=SIGNIFICANCE,
        default=0.01,
        help="significance of a change point (default 0.01)",
    )
    cr.add_argument(
        "--min-change",
        type=RELATIVE,
        default=0.0,
        help="smallest relative change reported, e.g. 0.02 (default 0: significance only)",
    )
    cr.add_argument("--json", help="also write every verdict to this JSON file")
    cr.add_argument("-v", "--verbose", action="store_true", help="print every series' verdict")
    cr.set_defaults(func=cmd_check_regressions)
