"""The search in its phases: the study opened (or resumed), the baseline measured, TPE and
the polish steps spending the budget (:class:`Search`), the best candidates confirmed
against the baseline, and the result written (:func:`tune`)."""

from __future__ import annotations

import datetime
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ... import paths
from ...core.data.spaces import load_space, space_path
from ...errors import ApptuneError
from ...yamlio import atomic_write_json, atomic_write_text
from .results import recommended_diff, report_md, trial_row
from .space import Config, fixed_build_params, medians, score, suggest, target_values
from .trials import (
    Tuner,
    best_built,
    config_args,
    enqueue_neighbour,
    ranked_trials,
    same_config,
    unseen_neighbour,
)


def _optuna():
    try:
        import optuna
    except ImportError:
        raise ApptuneError(None, "optuna", "apptune tune needs optuna (pip install -e .)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _checked_polish(budget, max_builds, repeats, confirm, top, polish) -> int:
    """The polish runs (default a third of the budget), once every count is checked."""
    for name, value in (
        ("budget", budget),
        ("max_builds", max_builds),
        ("repeats", repeats),
        ("confirm", confirm),
        ("top", top),
    ):
        if value < 1:
            raise ApptuneError(
                None, f"--{name.replace('_', '-')}", f"must be at least 1, not {value}"
            )
    polish = budget // 3 if polish is None else polish
    if not 0 <= polish <= budget:
        raise ApptuneError(
            None, "--polish", f"must be between 0 and the budget ({budget}), not {polish}"
        )
    return polish


def _open_study(optuna, t: Tuner, seed: int):
    """The search's study in ``WORK/tune.db``, created or resumed; a trial an interrupted
    search left running is marked failed."""
    name = f"{t.app}-{t.space.tier}-{t.objective}"
    with (
        warnings.catch_warnings()
    ):  # multivariate/group TPE: experimental in name only, since Optuna 2.2
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # a trial that failed verification has constraint 1 (infeasible): TPE learns from
        # it but never prefers it; ranked_trials() never crowns it
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=4, multivariate=True, group=True
        )
    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2)
    study = optuna.create_study(
        study_name=name,
        storage=f"sqlite:///{t.work / 'tune.db'}",
        direction="maximize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(tr.number, state=optuna.trial.TrialState.FAIL)
        t.log(f"apptune: tune: trial {tr.number} was interrupted: marked failed")
    return study


def _baseline(study, t: Tuner, repeats: int) -> dict:
    """The baseline, measured in this search (its medians are the scores' denominators);
    a resumed search keeps the one it measured."""
    base = study.user_attrs.get("baseline")
    if base is None:
        bc = t.baseline_config()
        t.log(f"apptune: tune: baseline {bc.label()}")
        stage = t.build(bc)
        runs = [t.run(bc, stage, f"baseline-{i}") for i in range(repeats)]
        bad = [r for r in runs if not r["ok"]]
        if bad:
            raise ApptuneError(
                space_path(t.app),
                "baseline",
                f"{bc.label()} fails verification: {bad[0]['summary']}",
            )
        base = {"config": bc.to_dict(), "medians": medians(runs), "runs": len(runs)}
        study.set_user_attr("baseline", base)
    return base


@dataclass
class Search:
    """The search phase: TPE, then the last ``polish`` runs step from the best trial one
    knob at a time (a noisy TPE score can leave the best build's other run knobs untried),
    until ``budget`` runs are used or nothing within reach is left unmeasured."""

    optuna: object
    study: object
    t: Tuner
    budget: int
    max_builds: int
    repeats: int
    polish: int
    #: The baseline's medians, the denominators of every score.
    base_med: dict
    #: Trials in a row that ran nothing (a measured or unbuildable configuration).
    stale: int = 0

    def runs_used(self) -> int:
        """Runs spent by every trial of the study (also those of earlier sessions)."""
        return sum(tr.user_attrs.get("runs", 0) for tr in self.study.get_trials(deepcopy=False))

    def run(self) -> None:
        """Spend the budget, a trial at a time."""
        polishing = self.polish > 0
        while self.runs_used() < self.budget:
            trial, c, polishing = self._ask(polishing)
            settled = self._settle_unrun(trial, c)
            if settled == "stop":
                break
            if settled:
                continue
            self.stale = 0
            self._measure(trial, c)

    def _ask(self, polishing: bool):
        """The next trial and its configuration: a polish step from the best trial, the best
        built configuration's build once the build budget is used up, else TPE's choice."""
        study, t, space = self.study, self.t, self.t.space
        step = centre = None
        if polishing and self.runs_used() >= self.budget - self.polish:
            step = unseen_neighbour(study, t, t.fresh_builds() < self.max_builds, best_only=True)
            if step is None:
                t.log(
                    "apptune: tune: polish: every neighbour of the best trial is measured: "
                    "sampling again"
                )
                polishing = False
            else:
                centre = ranked_trials(study)[0]
                study.enqueue_trial(step, skip_if_exists=False)
        if step is None and t.fresh_builds() >= self.max_builds:
            best = best_built(study, t)
            if best is not None:
                study.enqueue_trial(
                    fixed_build_params(best, space, t.recipe, t.site(best.environment).toolchain),
                    skip_if_exists=False,
                )
        trial = study.ask()
        c = suggest(
            trial, space, t.recipe, {e: t.site(e).toolchain for e in space.build.environments}
        )
        trial.set_user_attr("config", c.to_dict())
        trial.set_user_attr("label", c.label())
        # (a step's fixed knob that the configuration does not use, e.g. P x Q with one
        # rank, is not among the trial's parameters)
        if step is not None and all(trial.params.get(k, v) == v for k, v in step.items()):
            moved = ", ".join(
                f"{k.split('.', 1)[-1]} {centre.params.get(k) or '(unset)'} -> {v or '(unset)'}"
                for k, v in step.items()
                if centre.params.get(k) != v
            )
            trial.set_user_attr("note", f"polish: trial {centre.number} with {moved}")
        return trial, c, polishing

    def _settle_unrun(self, trial, c: Config) -> str | None:
        """Settle a trial that is not to be run: beyond the build budget, a build that
        failed before, or a configuration already measured. ``"stop"`` when nothing within
        reach is left, ``"settled"``, or None: the trial is to be run."""
        study, t, states = self.study, self.t, self.optuna.trial.TrialState
        key = c.build_id
        if key not in t.builds and t.fresh_builds() >= self.max_builds:
            self.stale += 1
            trial.set_user_attr("note", "build budget used up")
            study.tell(trial, state=states.PRUNED)
            if not enqueue_neighbour(study, t, self.max_builds) and self.stale > 20:
                t.log("apptune: tune: no built configuration left to sample: stopping")
                return "stop"
            return "settled"
        if key in t.builds and not t.builds[key]["ok"]:
            trial.set_user_attr("note", t.builds[key]["error"])
            study.tell(trial, state=states.FAIL)
            return "settled"
        same = same_config(study, c, trial.number)
        if same is None:
            return None
        # TPE proposed a configuration already measured: its result stands, no run spent
        self.stale += 1
        for k in ("verified", "summary", "skipped"):
            if k in same.user_attrs:
                trial.set_user_attr(k, same.user_attrs[k])
        trial.set_user_attr("note", f"same configuration as trial {same.number}: not run again")
        trial.set_constraint("verification", 0.0 if same.user_attrs.get("verified") else 1.0)
        if same.state == states.COMPLETE:
            study.tell(trial, same.value)
        else:
            study.tell(trial, state=states.PRUNED)
        if not enqueue_neighbour(study, t, self.max_builds) and self.stale > 20:
            t.log("apptune: tune: every configuration within reach has been measured: stopping")
            return "stop"
        return "settled"

    def _measure(self, trial, c: Config) -> None:
        """Build and run a trial up to ``repeats`` times, pruned by successive halving; an
        unverified run makes it infeasible."""
        study, t, states = self.study, self.t, self.optuna.trial.TrialState
        try:
            stage = t.build(c)
        except ApptuneError as e:
            t.log(f"apptune: tune: trial {trial.number}: {c.label()}: build failed: {e}")
            trial.set_user_attr("note", str(e))
            study.tell(trial, state=states.FAIL)
            return
        values, n = [], 0
        state = None
        try:
            for i in range(self.repeats):
                r = t.run(c, stage, f"trial-{trial.number:03d}-{i}")
                n += 1
                trial.set_user_attr("runs", n)
                if not r["ok"]:
                    trial.set_constraint("verification", 1.0)
                    trial.set_user_attr("verified", False)
                    trial.set_user_attr("summary", r["summary"])
                    state = "unverified"
                    values.append(score(r["figures"], self.base_med, t.figures, t.specs) or 0.0)
                    break
                s = score(r["figures"], self.base_med, t.figures, t.specs)
                if s is None:
                    trial.set_constraint("verification", 1.0)
                    trial.set_user_attr("summary", f"figure missing: {', '.join(t.figures)}")
                    state = "unverified"
                    values.append(0.0)
                    break
                values.append(s)
                trial.set_user_attr("skipped", r["skipped"])
                trial.report(statistics.median(values), i + 1)
                if i + 1 < self.repeats and trial.should_prune():
                    state = "pruned"
                    break
        except KeyboardInterrupt:
            study.tell(trial, state=states.FAIL)
            raise
        value = statistics.median(values)
        if state is None:
            trial.set_constraint("verification", 0.0)
            trial.set_user_attr("verified", True)
        if state == "pruned":
            trial.set_constraint("verification", 0.0)
            trial.set_user_attr("verified", True)
            study.tell(trial, state=states.PRUNED)
        else:
            study.tell(trial, value)
        t.log(
            f"apptune: tune: trial {trial.number}: {c.label()}: score {value:.3f} "
            f"({state or 'verified'}, {n} run{'s' if n > 1 else ''}; "
            f"{self.runs_used()}/{self.budget} runs, {t.cost.builds} builds)"
        )


def confirm_best(study, t: Tuner, top: int, confirm: int) -> tuple[list[dict], dict | None]:
    """The best ``top`` verified candidates and the baseline, run ``confirm`` times each,
    interleaved: their rows (best first, by the same-session medians) and the winner, the
    best verified row that is not the baseline (None: no candidate beat it)."""
    chosen = []
    for tr in ranked_trials(study):
        c = Config(**config_args(tr.user_attrs["config"]))
        if c not in chosen and len(chosen) < top:
            chosen.append(c)
    bc = t.baseline_config()
    confirm_runs = {bc.label(): []} | {c.label(): [] for c in chosen}
    configs = {bc.label(): bc} | {c.label(): c for c in chosen}
    stages = {lab: t.build(c) for lab, c in configs.items()}
    for i in range(confirm):
        for lab, c in configs.items():
            confirm_runs[lab].append(t.run(c, stages[lab], f"confirm-{paths.slug(lab)}-{i}"))
    base_conf = medians(confirm_runs[bc.label()])
    rows = []
    for lab, runs in confirm_runs.items():
        med = medians(runs)
        rows.append(
            {
                "label": lab,
                "config": configs[lab].to_dict(),
                "verified": all(r["ok"] for r in runs),
                "failures": [r["summary"] for r in runs if not r["ok"]],
                "medians": med,
                "score": score(med, base_conf, t.figures, t.specs),
                "targets": target_values(
                    t.space, runs, base_conf, configs[lab].ranks or t.ranks, t.specs
                ),
                "skipped": sorted(set().union(*(set(r["skipped"]) for r in runs))),
            }
        )
    rows.sort(key=lambda r: (r["verified"], r["score"] or 0), reverse=True)
    winner = next((r for r in rows if r["verified"] and r["label"] != bc.label()), None)
    return rows, winner


def tune(
    app: str,
    objective: str = "time",
    budget: int = 24,
    max_builds: int = 6,
    repeats: int = 2,
    confirm: int = 3,
    top: int = 2,
    work: Path | None = None,
    seed: int = 1,
    polish: int | None = None,
    config_file: str = paths.DEFAULT_CONFIG,
    sites: dict | None = None,
    space_file: Path | None = None,
    tier: str | None = None,
    log=None,
    on_trial=None,
) -> dict:
    """Run (or resume) the search; return the result written to ``tune.json``.
    ``on_trial`` is called with the run directory of each run once it ran."""
    optuna = _optuna()
    space = load_space(app, space_file, tier)
    polish = _checked_polish(budget, max_builds, repeats, confirm, top, polish)
    work = Path(
        work or paths.root() / "runs" / "tune" / f"{app}-{space.tier}-{objective}"
    ).resolve()
    t = Tuner(app, space, objective, work, dict(sites or {}), config_file, repeats, log, on_trial)
    study = _open_study(optuna, t, seed)
    t0 = time.monotonic()
    base = _baseline(study, t, repeats)
    search = Search(optuna, study, t, budget, max_builds, repeats, polish, base["medians"])
    search.run()
    search_seconds = time.monotonic() - t0
    rows, winner = confirm_best(study, t, top, confirm)
    result = {
        "app": app,
        "tier": space.tier,
        "objective": objective,
        "objective_figures": t.figures,
        "date": datetime.date.today().isoformat(),
        "budget": budget,
        "max_builds": max_builds,
        "repeats": repeats,
        "confirm": confirm,
        "polish": polish,
        "work": str(work),
        "trials": [trial_row(tr) for tr in study.get_trials(deepcopy=False)],
        "baseline": base,
        "confirmation": rows,
        "winner": winner,
        "cost": {
            "builds": t.cost.builds,
            "builds_from_cache": t.cost.builds_reused,
            "build_seconds": round(t.cost.build_seconds, 1),
            "runs": t.cost.runs,
            "run_seconds": round(t.cost.run_seconds, 1),
            "search_runs": search.runs_used(),
            "this_session_seconds": round(time.monotonic() - t0, 1),
            "search_seconds_this_session": round(search_seconds, 1),
            "trials": len(study.get_trials(deepcopy=False)),
        },
    }
    result["diff"], result["recommended_text"] = (
        recommended_diff(app, winner, result) if winner else ("", "")
    )
    atomic_write_json(work / "tune.json", result)
    atomic_write_text(work / "tune-report.md", report_md(result))
    return result
