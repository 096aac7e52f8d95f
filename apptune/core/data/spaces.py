"""Tuning spaces (``tuning/APP.yaml``, schema :class:`apptune.models.TuningSpace`): where
they are, and each loaded and checked against its recipe, the flag ladders and the tier's
input (``apptune validate`` and ``apptune tune`` read them through :func:`load_space`)."""

from __future__ import annotations

from pathlib import Path

from ... import paths
from ...errors import ApptuneError
from ...models import TuningSpace
from ...yamlio import load_model
from . import recipes


def space_path(app: str) -> Path:
    """The tuning space file of ``app``."""
    return paths.root() / "tuning" / f"{app}.yaml"


def recommended_path() -> Path:
    """``site-config/recommended.yaml``: the winner of each application's search."""
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
    from ...placement import BINDINGS

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
