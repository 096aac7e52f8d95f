"""One trial of the search: a configuration built (or its build reused) and run on the
tier's input (:class:`Tuner`), and the study's trials ranked, compared and stepped from
(the neighbours the search walks to once TPE repeats itself)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ... import paths
from ...core.data import recipes
from ...core.data import site as site_config
from ...core.data.site import Site
from ...core.run import localrun
from ...errors import ApptuneError
from ...models import TuningSpace
from ...yamlio import atomic_write_json
from .space import Config, objective_figures


# --------------------------------------------------------------------------- search
@dataclass
class Cost:
    builds: int = 0
    build_seconds: float = 0.0
    builds_reused: int = 0
    runs: int = 0
    run_seconds: float = 0.0

    def add_run(self, seconds: float):
        self.runs += 1
        self.run_seconds += seconds


@dataclass
class Tuner:
    app: str
    space: TuningSpace
    objective: str
    work: Path
    sites: dict = field(default_factory=dict)
    config_file: str = paths.DEFAULT_CONFIG
    repeats: int = 2
    log: object = None
    #: Called with each trial's run directory once it ran (the history's trial session).
    on_trial: object = None

    def __post_init__(self):
        self.recipe = recipes.load_recipe(self.app)
        self.figures = objective_figures(self.space, self.objective, self.recipe)
        self.specs = recipes.figure_specs(self.recipe)
        self.ranks = self.recipe.tiers[self.space.tier].ranks
        self.work.mkdir(parents=True, exist_ok=True)
        self.state_file = self.work / "tune-state.json"
        st = json.loads(self.state_file.read_text()) if self.state_file.is_file() else {}
        self.builds: dict[str, dict] = st.get("builds", {})
        self.cost = Cost(**st.get("cost", {}))
        self.log = self.log or (lambda m: print(m, flush=True))
        from ...core.data import inputs

        _, spec = inputs.load_input(self.app, self.space.tier)
        self.tier_params = dict(spec.parameters)

    def site(self, env: str) -> Site:
        if env not in self.sites:
            self.sites[env] = site_config.load_site(
                env, self.config_file, languages=self.recipe.build.languages
            )
        return self.sites[env]

    def save(self):
        from dataclasses import asdict

        atomic_write_json(self.state_file, {"builds": self.builds, "cost": asdict(self.cost)})

    def build(self, c: Config) -> Path:
        key = c.build_id
        stage = self.work / "builds" / key
        site = self.site(c.environment)
        plan = localrun.plan_for(
            self.recipe, c.variant, site, extra_cflags=c.extra, extra_fflags=c.extra
        )
        known = key in self.builds
        t0 = time.monotonic()
        try:
            prov = localrun.build_variant(self.recipe, plan, site, stage, use_cache=True)
        except ApptuneError as e:
            self.builds[key] = {"config": list(c.build_key), "ok": False, "error": str(e)}
            self.cost.builds += 1
            self.save()
            raise
        if not known:
            self.cost.builds += 1
            self.cost.build_seconds += time.monotonic() - t0
            hit = bool(prov.cache and prov.cache.hit)
            self.cost.builds_reused += hit
            self.builds[key] = {
                "config": list(c.build_key),
                "ok": True,
                "cache_hit": hit,
                "baseline": c.build_key == self.baseline_config().build_key,
            }
            self.save()
        return stage

    def fresh_builds(self) -> int:
        """Builds the search made itself (not the baseline's, not restored from the cache)."""
        return sum(
            1 for b in self.builds.values() if not b.get("cache_hit") and not b.get("baseline")
        )

    def run(self, c: Config, stage: Path, name: str) -> dict:
        overrides = dict(c.inputs)
        changed = {k for k, v in overrides.items() if self.tier_params.get(k) != v}
        if c.ranks is not None and c.ranks != self.ranks:
            changed.add("ranks")  # reference fields sized per process (depends_on: [ranks])
        # a run that other work disturbed (apptune/core/run/quality.py) is run again, at most twice:
        # its timing would rank the candidate by the load, not by its configuration
        for attempt in range(DISTURBED_RETRIES + 1):
            t0 = time.monotonic()
            r = localrun.run_tier(
                self.recipe,
                self.space.tier,
                stage,
                self.work / "runs" / (name if not attempt else f"{name}-again{attempt}"),
                self.site(c.environment),
                ranks=c.ranks,
                overrides=overrides,
                env=dict(c.env),
                variant=localrun.variant_label(c.variant, c.extra, c.extra),
                changed_inputs=changed,
                threads=c.threads,
                binding=c.binding or None,
            )
            self.cost.add_run(time.monotonic() - t0)
            self.save()
            if self.on_trial:
                self.on_trial(r.run_dir)
            grade = r.quality.grade if r.quality else None
            if not r.ok or grade in ("clean", None):
                break
        return {
            "ok": r.ok,
            "summary": r.summary,
            "figures": r.figures,
            "skipped": r.verification.skipped,
            "quality": grade,
            "attempts": attempt + 1,
        }

    def baseline_config(self) -> Config:
        b = self.space.baseline
        return Config(b.environment, recipes.Variant.parse(b.variant, self.recipe).name)


#: Runs of a candidate again when its run was disturbed by other work.
DISTURBED_RETRIES = 2


def config_args(d: dict) -> dict:
    rt = d.get("runtime") or {}
    return {
        "environment": d["environment"],
        "variant": d["variant"],
        "extra": tuple(d["extra_flags"]),
        "env": tuple(sorted(d["env"].items())),
        "inputs": tuple(sorted(d["inputs"].items())),
        "ranks": rt.get("ranks"),
        "threads": rt.get("threads", 1),
        "binding": rt.get("binding", ""),
    }


def same_config(study, c: Config, number: int):
    """An earlier finished trial with exactly this configuration, if any."""
    import optuna

    want = c.to_dict()
    for tr in study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ):
        if (
            tr.number != number
            and tr.user_attrs.get("config") == want
            and tr.user_attrs.get("runs")
        ):
            return tr
    return None


BUILD_PARAMS = ("environment", "ladder", "extra_flags")


def _is_build_param(name: str) -> bool:
    return name in BUILD_PARAMS or name.startswith("axis.")


def enqueue_neighbour(study, t: Tuner, max_builds: int) -> bool:
    """TPE concentrates on what it has seen: when it proposes a measured or unbuildable
    configuration, queue an unmeasured neighbour of the best trials instead (one knob
    changed), so a small space is walked to the end rather than abandoned while budget
    is left. False when no such neighbour is left."""
    nb = unseen_neighbour(study, t, fresh_builds_left=t.fresh_builds() < max_builds)
    if nb is not None:
        study.enqueue_trial(nb, skip_if_exists=False)
    return nb is not None


def unseen_neighbour(
    study, t: Tuner, fresh_builds_left: bool, best_only: bool = False
) -> dict | None:
    """Parameters one categorical step away from a measured trial, never asked before.

    Neighbours of the best verified trials come first, run-knob steps before
    build steps; a step that needs a build not yet made is offered only while
    the build budget lasts. ``None`` when every such neighbour has been asked.
    With ``best_only`` (the polish phase) only the best trial's neighbours count,
    and an input knob, whose values the space lists in order (N, NB), steps to an
    adjacent value only.
    """
    trials = study.get_trials(deepcopy=False)
    asked = {tuple(sorted(tr.params.items())) for tr in trials}
    # an enqueued trial keeps the parameters it was enqueued with, even those its
    # configuration did not use: counting them too means no neighbour is offered twice
    asked |= {
        tuple(sorted(tr.system_attrs["fixed_params"].items()))
        for tr in trials
        if "fixed_params" in tr.system_attrs
    }
    built = set()
    for tr in trials:
        cfg = tr.user_attrs.get("config")
        if cfg and tr.user_attrs.get("runs"):
            key = Config(**config_args(cfg)).build_id
            if t.builds.get(key, {}).get("ok"):
                built.add(tuple(sorted((k, v) for k, v in tr.params.items() if _is_build_param(k))))
    ranked = ranked_trials(study)
    seeds = (
        ranked[:1]
        if best_only
        else ranked + [tr for tr in trials if tr.user_attrs.get("runs") and tr not in ranked]
    )
    for run_first in (True, False):
        for tr in seeds:
            for name, dist in tr.distributions.items():
                if _is_build_param(name) == run_first or not hasattr(dist, "choices"):
                    continue
                here = dist.choices.index(tr.params[name])
                for i, choice in enumerate(dist.choices):
                    if i == here or (best_only and name.startswith("input.") and abs(i - here) > 1):
                        continue
                    cand = dict(tr.params, **{name: choice})
                    if tuple(sorted(cand.items())) in asked:
                        continue
                    bkey = tuple(sorted((k, v) for k, v in cand.items() if _is_build_param(k)))
                    if bkey not in built and not fresh_builds_left:
                        continue
                    return cand
    return None


def best_built(study, t: Tuner) -> Config | None:
    best = None
    for tr in ranked_trials(study):
        c = Config(**config_args(tr.user_attrs["config"]))
        key = c.build_id
        if t.builds.get(key, {}).get("ok"):
            best = c
            break
    return best


def ranked_trials(study) -> list:
    """Verified, completed trials, best first (pruned ones are not ranked)."""
    import optuna

    done = [
        tr
        for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if tr.user_attrs.get("verified") and tr.value is not None
    ]
    return sorted(done, key=lambda tr: tr.value, reverse=True)
