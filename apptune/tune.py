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
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import localrun, paths, recipes, templating
from .errors import ApptuneError
from .figures import finite_median
from .models import TuningSpace
from .yamlio import atomic_write_json, atomic_write_text, edit_yaml_text, load_model

OBJECTIVE_DEFAULTS = {"energy": ["energy_J"], "edp": ["edp_Js"]}


def space_path(app: str) -> Path:
    return paths.root() / "tuning" / f"{app}.yaml"


def recommended_path() -> Path:
    return paths.site_dir() / "recommended.yaml"


def load_space(app: str, path: Path | None = None, tier: str | None = None) -> TuningSpace:
    """The tuning space of ``app`` (on ``tier`` instead of its own, if given), checked
    against the recipe, the flag ladders and the tier's input."""
    f = Path(path or space_path(app))
    if not f.is_file():
        raise ApptuneError(f, None, f"no tuning space for '{app}' (see tuning/hpcc.yaml)")
    s = load_model(f, TuningSpace)
    if tier is not None:
        s = s.model_copy(update={"tier": tier})
    r = recipes.load_recipe(app)
    if s.app != app:
        raise ApptuneError(f, "app", f"'{s.app}' but the file is for '{app}'")
    if s.tier not in r.tiers:
        raise ApptuneError(f, "tier", f"unknown tier '{s.tier}' (allowed: {', '.join(r.tiers)})")
    for axis, opts in s.build.axes.items():
        if axis not in r.axes:
            raise ApptuneError(
                f,
                f"build.axes.{axis}",
                f"unknown axis '{axis}' (the recipe has: {', '.join(r.axes) or 'none'})",
            )
        bad = [o for o in opts if o not in r.axes[axis]]
        if bad:
            raise ApptuneError(
                f,
                f"build.axes.{axis}",
                f"unknown {axis} '{bad[0]}' (allowed: {', '.join(r.axes[axis])})",
            )
    ladders = recipes.load_ladders()
    known = set().union(*(set(fam) for fam in ladders.families.values()))
    for lad in s.build.ladders:
        if lad not in known:
            raise ApptuneError(
                f,
                "build.ladders",
                f"unknown flag ladder '{lad}' (allowed: {', '.join(sorted(known))})",
            )
    recipes.Variant.parse(s.baseline.variant, r, "baseline.variant")
    conditions = set(r.axes) | {"ranks", "threads"}
    for where, whens in [(f"env.{n}.when", k.when) for n, k in s.env.items()] + [
        (f"inputs.{n}.when", k.when) for n, k in s.input_knobs().items()
    ]:
        for axis in whens:
            if axis not in conditions:
                raise ApptuneError(
                    f, where, f"unknown axis '{axis}' (allowed: {', '.join(sorted(conditions))})"
                )
    for i, lay in enumerate(s.runtime.layouts):
        for axis in lay.when:
            if axis not in r.axes:
                raise ApptuneError(
                    f,
                    f"runtime.layouts[{i}].when",
                    f"unknown axis '{axis}' (allowed: {', '.join(r.axes)})",
                )
    from .placement import BINDINGS

    for b in s.runtime.binding:
        if b not in ("", *BINDINGS):
            raise ApptuneError(
                f,
                "runtime.binding",
                f"unknown binding '{b}' (allowed: \"\", {', '.join(BINDINGS)})",
            )
    from . import inputs

    _, spec = inputs.load_input(app, s.tier)
    for name, knob in s.input_knobs().items():
        for v in knob.values:
            names = list(v) if isinstance(v, dict) else [name]
            for n in names:
                if n not in spec.parameters:
                    raise ApptuneError(
                        f,
                        f"inputs.{name}",
                        f"'{n}' is not a parameter of "
                        f"inputs/{app}/{s.tier}/input.yaml (it has: {', '.join(spec.parameters)})",
                    )
    figures = recipes.figure_specs(r)
    for obj, figs in s.objectives.items():
        for fig in figs:
            if fig not in figures:
                raise ApptuneError(
                    f,
                    f"objectives.{obj}",
                    f"unknown figure '{fig}' (allowed: {', '.join(figures)})",
                )
    for i, t in enumerate(s.targets):
        for fig in (t.figure, t.per):
            if fig is not None and fig not in figures:
                raise ApptuneError(f, f"targets[{i}]", f"unknown figure '{fig}'")
    return s


def objective_figures(space: TuningSpace, objective: str, recipe) -> list[str]:
    if objective in space.objectives:
        return space.objectives[objective]
    if objective == "time":
        return [recipe.run.primary]
    if objective in OBJECTIVE_DEFAULTS:
        return OBJECTIVE_DEFAULTS[objective]
    if objective in recipes.figure_specs(recipe):
        return [objective]
    raise ApptuneError(
        space_path(space.app),
        "objectives",
        f"unknown objective '{objective}' "
        f"(allowed: time, energy, edp, {', '.join(space.objectives) or 'or a figure name'})",
    )


# ------------------------------------------------------------------ configurations
@dataclass(frozen=True)
class Config:
    environment: str
    variant: str
    extra: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    inputs: tuple[tuple[str, object], ...] = ()
    #: Runtime placement; ranks None = the tier's rank count, binding "" = the launcher's default.
    ranks: int | None = None
    threads: int = 1
    binding: str = ""

    @property
    def build_key(self) -> tuple:
        return (self.environment, self.variant, self.extra)

    @property
    def build_id(self) -> str:
        """A short stable name of the build (the key of the search's build table)."""
        return hashlib.sha256(json.dumps(self.build_key).encode()).hexdigest()[:16]

    def label(self) -> str:
        parts = [f"{self.environment}/{self.variant}"]
        if self.extra:
            parts.append(" ".join(self.extra))
        if self.ranks is not None:
            parts.append(f"{self.ranks}x{self.threads}")  # ranks x threads per rank
        if self.binding:
            parts.append(f"bind={self.binding}")
        parts += [f"{k}={v}" for k, v in self.env]
        parts += [f"{k}={v}" for k, v in self.inputs]
        return " ".join(parts)

    def to_dict(self) -> dict:
        d = {
            "environment": self.environment,
            "variant": self.variant,
            "extra_flags": list(self.extra),
            "env": dict(self.env),
            "inputs": dict(self.inputs),
        }
        if self.ranks is not None or self.binding:
            d["runtime"] = {"ranks": self.ranks, "threads": self.threads, "binding": self.binding}
        return d


def _knob_label(v) -> str:
    return " ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)


def axis_defaults(recipe, toolchain: recipes.Toolchain | None) -> dict:
    """What each axis is when a variant does not name it (``environment``: the toolchain's)."""
    out = {}
    for axis in recipe.axes:
        d = recipe.defaults.get(axis, "environment")
        out[axis] = getattr(toolchain, axis, None) if d == "environment" else d
    return out


def suggest(trial, space: TuningSpace, recipe, toolchains: dict | None = None) -> Config:
    """Sample one configuration (define-by-run: env knobs only when their axes match).

    An axis value the environment gives anyway is left out of the variant name, so
    the build is the same build (and build-cache entry) as the checks' variant."""
    env_name = trial.suggest_categorical("environment", space.build.environments)
    ladder = trial.suggest_categorical("ladder", space.build.ladders)
    defaults = axis_defaults(recipe, (toolchains or {}).get(env_name))
    choices = []
    axes = {}
    for axis, opts in space.build.axes.items():
        v = trial.suggest_categorical(f"axis.{axis}", opts)
        axes[axis] = v
        if v != defaults.get(axis):
            choices.append(f"{axis}={v}")
    extras = [" ".join(x) for x in space.build.extra_flags]
    extra = trial.suggest_categorical("extra_flags", extras) if len(extras) > 1 else extras[0]
    variant = "+".join([ladder, *sorted(choices)])
    ranks, threads, binding = None, 1, ""
    built = {a: axes.get(a, defaults.get(a)) for a in set(axes) | set(defaults)}
    allowed = [
        lay
        for lay in space.runtime.layouts
        if all(str(built.get(a)) in {str(x) for x in vals} for a, vals in lay.when.items())
    ]
    layouts = [f"{lay.ranks}x{lay.threads}" for lay in allowed]
    if layouts:
        # a categorical's choices must not change between trials: a build that allows
        # fewer layouts samples them under its own parameter name
        pname = "runtime.layout" + (
            "" if len(allowed) == len(space.runtime.layouts) else "|" + ",".join(layouts)
        )
        lab = trial.suggest_categorical(pname, layouts) if len(layouts) > 1 else layouts[0]
        lay = allowed[layouts.index(lab)]
        ranks, threads = lay.ranks, lay.threads
    if space.runtime.binding:
        bs = space.runtime.binding
        binding = trial.suggest_categorical("runtime.binding", bs) if len(bs) > 1 else bs[0]
    # what a knob's `when` may name: the build's axes and the layout
    ctx = dict(built)
    ctx |= {
        "ranks": ranks if ranks is not None else (recipe.tiers[space.tier].ranks),
        "threads": threads,
    }

    def applies(when: dict) -> bool:
        return all(str(ctx.get(a)) in {str(x) for x in vals} for a, vals in when.items())

    env = []
    for name, knob in space.env.items():
        if applies(knob.when):
            v = trial.suggest_categorical(f"env.{name}", knob.values)
            if v != "":
                env.append((name, v))
    ins = []
    for name, knob in space.input_knobs().items():
        if not applies(knob.when):
            continue
        labels = [_knob_label(v) for v in knob.values]
        lab = trial.suggest_categorical(f"input.{name}", labels)
        v = knob.values[labels.index(lab)]
        ins += sorted(v.items()) if isinstance(v, dict) else [(name, v)]
    return Config(
        env_name, variant, tuple(extra.split()), tuple(env), tuple(ins), ranks, threads, binding
    )


def fixed_build_params(config: Config, space: TuningSpace, recipe, toolchain=None) -> dict:
    """Optuna parameters that pin a trial to an already built configuration."""
    v = recipes.Variant.parse(config.variant, recipe)
    chosen = dict(v.choices)
    defaults = axis_defaults(recipe, toolchain)
    p = {"environment": config.environment, "ladder": v.ladder}
    for axis in space.build.axes:
        p[f"axis.{axis}"] = chosen.get(axis, defaults.get(axis))
    if len(space.build.extra_flags) > 1:
        p["extra_flags"] = " ".join(config.extra)
    return p


# ------------------------------------------------------------------------ scoring
def score(figures: dict, base: dict, names: list[str], specs: dict) -> float | None:
    """Geometric mean of the ratios to the baseline (inverted where lower is better)."""
    logs = []
    for n in names:
        v, b = figures.get(n), base.get(n)
        if not (isinstance(v, (int, float)) and isinstance(b, (int, float))) or v <= 0 or b <= 0:
            return None
        r = v / b if specs[n].better == "higher" else b / v
        logs.append(math.log(r))
    return math.exp(sum(logs) / len(logs)) if logs else None


def medians(runs: list[dict]) -> dict:
    names = set().union(*(r["figures"] for r in runs)) if runs else set()
    return {n: finite_median([r["figures"].get(n) for r in runs]) for n in sorted(names)}


def target_values(
    space: TuningSpace, runs: list[dict], base_medians: dict, ranks: int, specs: dict | None = None
) -> list[dict]:
    """Each target as the median over repeats of the per-run ratio (a ratio to the
    baseline is inverted for figures where lower is better: > 1 is always better).

    ``per_ranks`` multiplies the divisor by the run's rank count: with threads per
    rank, a rank's figure (e.g. SingleDGEMM) is measured with all its threads, so
    the divisor is still the rate of the run's whole allocation."""
    out = []
    for t in space.targets:
        vals = []
        for r in runs:
            v = r["figures"].get(t.figure)
            if not isinstance(v, (int, float)):
                continue
            if t.per:
                d = r["figures"].get(t.per)
                if isinstance(d, (int, float)) and d > 0:
                    vals.append(v / (d * (ranks if t.per_ranks else 1)))
            else:
                b = base_medians.get(t.figure)
                lower = specs is not None and specs[t.figure].better == "lower"
                if b and v:
                    vals.append(b / v if lower else v / b)
        m = finite_median(vals)
        out.append(
            {"name": t.name, "value": m, "goal": t.goal, "met": m is not None and m >= t.goal}
        )
    return out


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
        from . import inputs

        _, spec = inputs.load_input(self.app, self.space.tier)
        self.tier_params = dict(spec.parameters)

    def site(self, env: str) -> localrun.Site:
        if env not in self.sites:
            self.sites[env] = localrun.load_site(
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
            self.cost.builds_reused += bool(prov.get("cache", {}).get("hit"))
            self.builds[key] = {
                "config": list(c.build_key),
                "ok": True,
                "cache_hit": bool(prov.get("cache", {}).get("hit")),
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
        # a run that other work disturbed (apptune/quality.py) is run again, at most twice: its
        # timing would rank the candidate by the load, not by its configuration
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
            if not r.ok or (getattr(r, "quality", None) or {}).get("grade") in ("clean", None):
                break
        return {
            "ok": r.ok,
            "summary": r.summary,
            "figures": r.figures,
            "skipped": r.verification.get("skipped", []),
            "quality": (getattr(r, "quality", None) or {}).get("grade"),
            "attempts": attempt + 1,
        }

    def baseline_config(self) -> Config:
        b = self.space.baseline
        return Config(b.environment, recipes.Variant.parse(b.variant, self.recipe).name)


#: Runs of a candidate again when its run was disturbed by other work.
DISTURBED_RETRIES = 2


def _optuna():
    try:
        import optuna
    except ImportError:
        raise ApptuneError(None, "optuna", "apptune tune needs optuna (pip install -e .)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


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
    work = Path(
        work or paths.root() / "runs" / "tune" / f"{app}-{space.tier}-{objective}"
    ).resolve()
    t = Tuner(app, space, objective, work, dict(sites or {}), config_file, repeats, log, on_trial)
    log = t.log
    storage = f"sqlite:///{work / 'tune.db'}"
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
        study_name=f"{app}-{space.tier}-{objective}",
        storage=storage,
        direction="maximize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    for tr in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(tr.number, state=optuna.trial.TrialState.FAIL)
        log(f"apptune: tune: trial {tr.number} was interrupted: marked failed")
    t0 = time.monotonic()
    # 1. the baseline, measured in this search (its medians are the scores' denominators)
    base = study.user_attrs.get("baseline")
    if base is None:
        bc = t.baseline_config()
        log(f"apptune: tune: baseline {bc.label()}")
        stage = t.build(bc)
        runs = [t.run(bc, stage, f"baseline-{i}") for i in range(repeats)]
        bad = [r for r in runs if not r["ok"]]
        if bad:
            raise ApptuneError(
                space_path(app), "baseline", f"{bc.label()} fails verification: {bad[0]['summary']}"
            )
        base = {"config": bc.to_dict(), "medians": medians(runs), "runs": len(runs)}
        study.set_user_attr("baseline", base)
    base_med = base["medians"]

    def runs_used() -> int:
        return sum(tr.user_attrs.get("runs", 0) for tr in study.get_trials(deepcopy=False))

    # 2. the search: TPE, then the last `polish` runs step from the best trial one knob
    # at a time (a noisy TPE score can leave the best build's other run knobs untried)
    stale = 0
    polishing = polish > 0
    while runs_used() < budget:
        step = None
        if polishing and runs_used() >= budget - polish:
            step = _unseen_neighbour(study, t, t.fresh_builds() < max_builds, best_only=True)
            if step is None:
                log(
                    "apptune: tune: polish: every neighbour of the best trial is measured: "
                    "sampling again"
                )
                polishing = False
            else:
                centre = ranked_trials(study)[0]
                study.enqueue_trial(step, skip_if_exists=False)
        if step is None and t.fresh_builds() >= max_builds:
            best = _best_built(study, t)
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
        key = c.build_id
        if key not in t.builds and t.fresh_builds() >= max_builds:
            stale += 1
            trial.set_user_attr("note", "build budget used up")
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            if not _enqueue_neighbour(study, t, max_builds) and stale > 20:
                log("apptune: tune: no built configuration left to sample: stopping")
                break
            continue
        if key in t.builds and not t.builds[key]["ok"]:
            trial.set_user_attr("note", t.builds[key]["error"])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        same = _same_config(study, c, trial.number)
        if same is not None:
            # TPE proposed a configuration already measured: its result stands, no run spent
            stale += 1
            for k in ("verified", "summary", "skipped"):
                if k in same.user_attrs:
                    trial.set_user_attr(k, same.user_attrs[k])
            trial.set_user_attr("note", f"same configuration as trial {same.number}: not run again")
            trial.set_constraint("verification", 0.0 if same.user_attrs.get("verified") else 1.0)
            if same.state == optuna.trial.TrialState.COMPLETE:
                study.tell(trial, same.value)
            else:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            if not _enqueue_neighbour(study, t, max_builds) and stale > 20:
                log("apptune: tune: every configuration within reach has been measured: stopping")
                break
            continue
        stale = 0
        try:
            stage = t.build(c)
        except ApptuneError as e:
            log(f"apptune: tune: trial {trial.number}: {c.label()}: build failed: {e}")
            trial.set_user_attr("note", str(e))
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        values, n = [], 0
        state, summary = None, ""
        try:
            for i in range(repeats):
                r = t.run(c, stage, f"trial-{trial.number:03d}-{i}")
                n += 1
                trial.set_user_attr("runs", n)
                if not r["ok"]:
                    trial.set_constraint("verification", 1.0)
                    trial.set_user_attr("verified", False)
                    summary = r["summary"]
                    trial.set_user_attr("summary", summary)
                    state = "unverified"
                    values.append(score(r["figures"], base_med, t.figures, t.specs) or 0.0)
                    break
                s = score(r["figures"], base_med, t.figures, t.specs)
                if s is None:
                    trial.set_constraint("verification", 1.0)
                    trial.set_user_attr("summary", f"figure missing: {', '.join(t.figures)}")
                    state = "unverified"
                    values.append(0.0)
                    break
                values.append(s)
                trial.set_user_attr("skipped", r["skipped"])
                trial.report(statistics.median(values), i + 1)
                if i + 1 < repeats and trial.should_prune():
                    state = "pruned"
                    break
        except KeyboardInterrupt:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        value = statistics.median(values)
        if state is None:
            trial.set_constraint("verification", 0.0)
            trial.set_user_attr("verified", True)
        if state == "pruned":
            trial.set_constraint("verification", 0.0)
            trial.set_user_attr("verified", True)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, value)
        log(
            f"apptune: tune: trial {trial.number}: {c.label()}: score {value:.3f} "
            f"({state or 'verified'}, {n} run{'s' if n > 1 else ''}; {runs_used()}/{budget} runs, "
            f"{t.cost.builds} builds)"
        )
    search_seconds = time.monotonic() - t0
    # 3. confirmation: the best verified candidates and the baseline, interleaved
    chosen = []
    for tr in ranked_trials(study):
        c = Config(**_cfg_args(tr.user_attrs["config"]))
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
                    space, runs, base_conf, configs[lab].ranks or t.ranks, t.specs
                ),
                "skipped": sorted(set().union(*(set(r["skipped"]) for r in runs))),
            }
        )
    rows.sort(key=lambda r: (r["verified"], r["score"] or 0), reverse=True)
    winner = next((r for r in rows if r["verified"] and r["label"] != bc.label()), None)
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
        "trials": [_trial_row(tr) for tr in study.get_trials(deepcopy=False)],
        "baseline": base,
        "confirmation": rows,
        "winner": winner,
        "cost": {
            "builds": t.cost.builds,
            "builds_from_cache": t.cost.builds_reused,
            "build_seconds": round(t.cost.build_seconds, 1),
            "runs": t.cost.runs,
            "run_seconds": round(t.cost.run_seconds, 1),
            "search_runs": runs_used(),
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


def _cfg_args(d: dict) -> dict:
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


def _same_config(study, c: Config, number: int):
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


def _enqueue_neighbour(study, t: Tuner, max_builds: int) -> bool:
    """TPE concentrates on what it has seen: when it proposes a measured or unbuildable
    configuration, queue an unmeasured neighbour of the best trials instead (one knob
    changed), so a small space is walked to the end rather than abandoned while budget
    is left. False when no such neighbour is left."""
    nb = _unseen_neighbour(study, t, fresh_builds_left=t.fresh_builds() < max_builds)
    if nb is not None:
        study.enqueue_trial(nb, skip_if_exists=False)
    return nb is not None


def _unseen_neighbour(
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
            key = Config(**_cfg_args(cfg)).build_id
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


def _best_built(study, t: Tuner) -> Config | None:
    best = None
    for tr in ranked_trials(study):
        c = Config(**_cfg_args(tr.user_attrs["config"]))
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


def _trial_row(tr) -> dict:
    return {
        "number": tr.number,
        "state": tr.state.name,
        "value": tr.value,
        "label": tr.user_attrs.get("label"),
        "verified": tr.user_attrs.get("verified"),
        "runs": tr.user_attrs.get("runs", 0),
        "summary": tr.user_attrs.get("summary") or tr.user_attrs.get("note", ""),
    }


# --------------------------------------------------------------------------- output
def recommended_diff(app: str, winner: dict, result: dict) -> tuple[str, str]:
    """The winner as a diff of site-config/recommended.yaml (one entry per application)."""
    f = recommended_path()
    old = (
        f.read_text()
        if f.is_file()
        else (
            "# Recommended configuration per application on this site, written by\n"
            "# `apptune tune APP --write` (docs/tuning.md). Review it as a diff.\n"
        )
    )
    entry = dict(winner["config"])
    entry["tier"] = result["tier"]
    entry["evidence"] = {
        "date": result["date"],
        "objective": f"{result['objective']} ({', '.join(result['objective_figures'])})",
        "score_vs_baseline": round(winner["score"], 3) if winner["score"] else None,
        "medians": {k: _round(winner["medians"].get(k)) for k in result["objective_figures"]},
        "targets": {t["name"]: _round(t["value"]) for t in winner["targets"]},
        "verified": f"{result['confirm']} confirmation runs",
        "search": f"{result['cost']['trials']} trials, {result['cost']['builds']} builds, "
        f"{result['cost']['runs']} runs",
    }

    def change(data):
        data[app] = entry  # the other applications' entries and every comment stay

    # a file of comments only is an empty mapping to edit
    new = edit_yaml_text(old if yaml.safe_load(old) else old + "{}\n", change)
    rel = str(f.relative_to(paths.root()))
    diff = "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}")
    )
    return diff, new


def _round(v):
    return round(v, 4) if isinstance(v, float) else v


def report_md(res: dict) -> str:
    """The search's report (apptune/templates/tune-report.md.j2)."""
    return templating.environment().get_template("tune-report.md.j2").render(r=res)
