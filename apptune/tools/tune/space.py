"""The search space as configurations: the objective's figures, a :class:`Config` per
point (build and run knobs), Optuna's suggestion of one, and the scores of runs against
the baseline."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from ...core.data import recipes
from ...core.data.spaces import space_path
from ...errors import ApptuneError
from ...figures import finite_median
from ...models import TuningSpace

OBJECTIVE_DEFAULTS = {"energy": ["energy_J"], "edp": ["edp_Js"]}


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
