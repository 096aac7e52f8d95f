"""Recipes and variants: from ``build-recipes/APP.yaml`` and a variant name to a build plan."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ... import paths
from ...errors import ApptuneError, first_of
from ...models import BuildPlan, Figure, FlagLadders, Libraries, PlanPatch, PlanRule, Recipe
from ...yamlio import load_model


def recipe_path(app: str) -> Path:
    return paths.recipes_dir() / f"{app}.yaml"


#: Parsed recipes by path and content: a ReFrame run asks for each recipe many times per
#: test; the file is parsed and validated again only when its text changes.
_PARSED: dict[tuple[str, bytes], Recipe] = {}


def _parsed(p: Path) -> Recipe:
    try:
        key = (str(p.resolve()), hashlib.sha256(p.read_bytes()).digest())
    except OSError:
        return load_model(p, Recipe)  # the loader says what is wrong with the path
    if key not in _PARSED:
        _PARSED[key] = load_model(p, Recipe)
    # a copy: callers may change their recipe (tune and bisect add per-file rules)
    return _PARSED[key].model_copy(deep=True)


def load_recipe(app_or_path: str | os.PathLike) -> Recipe:
    p = Path(app_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = recipe_path(str(app_or_path))
        if not p.exists():
            known = ", ".join(list_recipes()) or "none"
            raise ApptuneError(
                p, None, f"no recipe for application '{app_or_path}' (known: {known})"
            )
    r = _parsed(p)
    problems = []
    if r.name != p.stem:
        problems.append(ApptuneError(p, "name", f"'{r.name}' must match the file name '{p.stem}'"))
    for patch in r.patches:
        pf = paths.patches_dir(r.name) / patch.file
        if not pf.is_file():
            problems.append(ApptuneError(p, f"patches.{patch.file}", f"patch file {pf} is missing"))
    for i, t in enumerate(r.build.templates):
        if not (paths.recipes_dir() / "templates" / t.src).is_file():
            problems.append(
                ApptuneError(
                    p,
                    f"build.templates[{i}].src",
                    f"template {t.src} not found under build-recipes/templates/",
                )
            )
    if problems:
        raise first_of(problems)
    return r


#: Figures every run may have besides the application's own: time and energy.
COMMON_FIGURES = {
    "wall_time": Figure(field="", unit="s", better="lower"),
    "energy_J": Figure(field="", unit="J", better="lower"),
    "avg_power_W": Figure(field="", unit="W", better="lower"),
    "peak_power_W": Figure(field="", unit="W", better="lower"),
    "edp_Js": Figure(field="", unit="J*s", better="lower"),
}
ENERGY_FIGURES = ("energy_J", "avg_power_W", "peak_power_W", "edp_Js")


def figure_specs(recipe: Recipe) -> dict[str, Figure]:
    """All figures of a run: the recipe's, wall time, energy ones and rates per watt."""
    grid = {
        n
        for o in recipe.run.outputs
        for n, d in o.derived.items()
        if d.op in ("x_at_fraction_of_max", "count")
    }
    out = {
        n: f.model_copy(update={"discrete": True}) if f.field in grid else f
        for n, f in recipe.run.figures.items()
    }
    out.update(COMMON_FIGURES)
    for n in recipe.run.per_watt:
        out[f"{n}_per_W"] = Figure(
            field="", unit=f"{recipe.run.figures[n].unit}/W", better="higher"
        )
    return out


def figure_values(recipe: Recipe, values: dict) -> dict:
    """The recipe's figures from extracted fields (``scale``, ``per``); None where missing."""
    out = {}
    for name, fig in recipe.run.figures.items():
        v = values.get(fig.field)
        if fig.per is not None:
            d = values.get(fig.per)
            v = v / d if isinstance(v, (int, float)) and isinstance(d, (int, float)) and d else None
        out[name] = v * fig.scale if isinstance(v, (int, float)) else None
    return out


def is_energy_figure(name: str) -> bool:
    return name in ENERGY_FIGURES or name.endswith("_per_W")


def time_limit_seconds(spec: str) -> float | None:
    """ReFrame's time limit words (``5m``, ``1h30m``, ``90s``, ``2d``, ``300``) in seconds;
    None when ReFrame would not accept them."""
    from ...models import duration_seconds

    try:
        return duration_seconds(spec)
    except ValueError:
        return None


def list_recipes() -> list[str]:
    return sorted(p.stem for p in paths.recipes_dir().glob("*.yaml"))


def load_ladders(path: str | None = None) -> FlagLadders:
    return _cached(str(path or paths.site_dir() / "flag-ladders.yaml"), FlagLadders)


def load_libraries(path: str | None = None) -> Libraries:
    return _cached(str(path or paths.site_dir() / "libraries.yaml"), Libraries)


@cache
def _cached(path: str, model):
    return load_model(path, model)


# --------------------------------------------------------------------------- variants
@dataclass(frozen=True)
class Variant:
    """``ladder[+axis=value...]``, e.g. ``tuned+fft=fftw3``."""

    ladder: str
    choices: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return "+".join([self.ladder, *(f"{a}={v}" for a, v in self.choices)])

    @classmethod
    def parse(cls, spec: str, recipe: Recipe, where: str = "variant") -> Variant:
        parts = spec.strip().split("+")
        ladder, choices = parts[0], []
        if ladder in recipe.installs and len(parts) > 1:
            raise ApptuneError(
                recipe_path(recipe.name),
                where,
                f"'{spec}': '{ladder}' is an install (installs.{ladder}): it has no axes",
            )
        if not ladder:
            raise ApptuneError(recipe_path(recipe.name), where, f"'{spec}': empty flag ladder name")
        for part in parts[1:]:
            axis, sep, value = part.partition("=")
            if not sep:
                raise ApptuneError(
                    recipe_path(recipe.name), where, f"'{spec}': '{part}' is not axis=value"
                )
            if axis not in recipe.axes:
                raise ApptuneError(
                    recipe_path(recipe.name),
                    where,
                    f"'{spec}': unknown axis '{axis}' (allowed: {', '.join(sorted(recipe.axes))})",
                )
            if value not in recipe.axes[axis]:
                raise ApptuneError(
                    recipe_path(recipe.name),
                    where,
                    f"'{spec}': unknown {axis} '{value}' (allowed: "
                    f"{', '.join(sorted(recipe.axes[axis]))})",
                )
            choices.append((axis, value))
        return cls(ladder, tuple(sorted(choices)))


def all_variants(recipe: Recipe) -> list[str]:
    """Every variant any tier of the recipe names (the build fixture's parameter). A recipe
    without tiers (what :func:`apptune.rfm.load_app` gives a check whose data has problems)
    has one variant, ``unbuilt``, that no test case uses: a fixture needs a value."""
    seen = []
    for tname, tier in recipe.tiers.items():
        for env, specs in tier.variants.items():
            for s in specs:
                name = Variant.parse(s, recipe, f"tiers.{tname}.variants.{env}").name
                if name not in seen:
                    seen.append(name)
    return seen or ["unbuilt"]


def cpu_missing(recipe: Recipe, variant: str, flags: set[str]) -> str | None:
    """Why ``variant`` cannot run on a node with CPU ``flags``: an axis option it chooses
    (or the default option) needs a flag the node lacks (``axes.AXIS.OPTION.cpu``)."""
    if variant in recipe.installs:
        return None
    chosen = dict(recipe.defaults, **dict(Variant.parse(variant, recipe).choices))
    for axis, option in chosen.items():
        opt = recipe.axes.get(axis, {}).get(option)
        lacking = [f for f in (opt.cpu if opt else []) if f not in flags]
        if lacking:
            return (
                f"{axis}={option} needs CPU flag {', '.join(lacking)}, which this node's CPU "
                f"does not have ({recipe_path(recipe.name).name}: axes.{axis}.{option}.cpu)"
            )
    return None


def install_of(recipe: Recipe, variant: str):
    """The recipe's install (``installs.NAME``) a variant names, None for a built one."""
    return recipe.installs.get(variant)


def built_variants(recipe: Recipe) -> list[str]:
    """The variants compiled here (the :class:`apptune.rfm.AppBuild` fixture's parameter)."""
    return [v for v in all_variants(recipe) if v not in recipe.installs] or ["unbuilt"]


def tiers_naming(recipe: Recipe, variants: list[str]) -> list[str]:
    """The tiers that name one of ``variants`` (a check's ``tier`` parameter when its build
    fixture holds only some kinds of build: a tier without one would be a test case with
    no environment to run in)."""
    return [
        tname
        for tname, tier in recipe.tiers.items()
        if any(
            Variant.parse(s, recipe).name in variants
            for specs in tier.variants.values()
            for s in specs
        )
    ]


def installed_variants(recipe: Recipe) -> list[str]:
    """The variants that are installs (the :class:`apptune.rfm.InstalledBuild` fixture's)."""
    return [v for v in all_variants(recipe) if v in recipe.installs] or ["unbuilt"]


def placements(recipe: Recipe) -> list[str]:
    """Values of a check's ``placement`` parameter (``default``: the launcher's own)."""
    return list(recipe.run.placements) or ["default"]


def expected_build_failure(recipe: Recipe, environment: str, variant: str):
    """The recipe's ``build.expected_failures`` entry for this build, if any."""
    import fnmatch

    for i, x in enumerate(recipe.build.expected_failures):
        if environment in x.environments and any(fnmatch.fnmatch(variant, g) for g in x.variants):
            return i, x
    return None


def environments_for(recipe: Recipe, tier: str, variant: str) -> list[str]:
    t = recipe.tiers[tier]
    return [
        env
        for env, specs in t.variants.items()
        if variant in (Variant.parse(s, recipe).name for s in specs)
    ]


# --------------------------------------------------------------------------- toolchains
@dataclass
class Toolchain:
    """What a ReFrame environment provides, from its ``extras``."""

    environment: str
    family: str
    cc: str
    cxx: str
    ftn: str
    mpi: str
    mpi_standard: str
    blas: str
    #: Executables that must exist for this environment to be usable, per language of the
    #: recipe (``c``, ``cxx``, ``fortran``) and for every recipe (``all``); a plain list in the
    #: site config means ``all``.
    requires: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_environ(cls, environ) -> Toolchain:
        ex = dict(getattr(environ, "extras", {}) or {})
        missing = [k for k in ("family", "mpi", "mpi_standard", "blas") if k not in ex]
        if missing:
            raise ApptuneError(
                paths.DEFAULT_CONFIG,
                f"environments.{environ.name}.extras",
                f"missing {', '.join(missing)}",
            )
        req = ex.get("requires", [])
        req = (
            {"all": list(req)}
            if isinstance(req, (list, tuple))
            else {k: list(v) for k, v in req.items()}
        )
        bad = sorted(set(req) - {"all", "c", "cxx", "fortran"})
        if bad:
            raise ApptuneError(
                paths.DEFAULT_CONFIG,
                f"environments.{environ.name}.extras.requires",
                f"unknown key(s) {', '.join(bad)} (allowed: all, c, cxx, fortran)",
            )
        return cls(
            environment=environ.name,
            family=ex["family"],
            cc=environ.cc,
            cxx=environ.cxx,
            ftn=environ.ftn,
            mpi=ex["mpi"],
            mpi_standard=str(ex["mpi_standard"]),
            blas=ex["blas"],
            requires=req,
        )

    def tools_for(self, languages: list[str] | None = None) -> list[str]:
        """The executables a recipe in ``languages`` needs (None: every language's)."""
        keys = ["all", *(languages if languages is not None else ("c", "cxx", "fortran"))]
        return list(dict.fromkeys(t for k in keys for t in self.requires.get(k, [])))

    def missing_tools(
        self, path: str | None = None, languages: list[str] | None = None
    ) -> list[str]:
        import shutil

        return [t for t in self.tools_for(languages) if shutil.which(t, path=path) is None]


def _version_tuple(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split("."))


def _expand(flags: list[str]) -> list[str]:
    """Expand ``{python_prefix}`` and ``${VAR}`` in library flags (data, never a shell)."""
    out = []
    for f in flags:
        f = f.replace("{python_prefix}", sys.prefix)
        out.append(os.path.expandvars(f))
    return out


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _patches(recipe: Recipe, tc: Toolchain, axes: dict[str, str]) -> list[PlanPatch]:
    """The recipe's patches that apply with this toolchain and these axes, each with its
    file's checksum."""
    patches = []
    for p in recipe.patches:
        if p.when.mpi_standard:
            need = _version_tuple(p.when.mpi_standard[2:])
            if _version_tuple(tc.mpi_standard) < need:
                continue
        if any(axes.get(a) not in vals for a, vals in p.when.axes.items()):
            continue
        pf = paths.patches_dir(recipe.name) / p.file
        patches.append(
            PlanPatch(file=p.file, sha256=sha256_file(pf), strip=p.strip, reason=p.reason)
        )
    return patches


def _per_file(recipe: Recipe, fam: dict, rfile) -> list[PlanRule]:
    """The recipe's per-file rules with their flags (a ladder of the compiler family, or
    the recipe's own)."""
    per_file = []
    for i, o in enumerate(recipe.per_file):
        if o.flags is None:  # explicit flags from the recipe (e.g. upstream's -O1 for one file)
            per_file.append(
                PlanRule(
                    files=list(o.files),
                    cflags=list(o.cflags or []),
                    fflags=list(o.fflags or []),
                    ladder="recipe",
                    reason=o.reason,
                )
            )
            continue
        if o.flags not in fam:
            raise ApptuneError(
                rfile,
                f"per_file[{i}].flags",
                f"unknown flag ladder '{o.flags}' (allowed: {', '.join(sorted(fam))})",
            )
        per_file.append(
            PlanRule(
                files=list(o.files),
                cflags=list(fam[o.flags].cflags),
                fflags=list(fam[o.flags].fflags),
                ladder=o.flags,
                reason=o.reason,
            )
        )
    return per_file


def resolve(
    recipe: Recipe,
    variant: str,
    tc: Toolchain,
    ladders: FlagLadders | None = None,
    libraries: Libraries | None = None,
) -> BuildPlan:
    """Everything the build needs, decided before any command runs."""
    ladders = ladders or load_ladders()
    libraries = libraries or load_libraries()
    rfile = recipe_path(recipe.name)
    v = Variant.parse(variant, recipe)
    fam = ladders.families.get(tc.family)
    if fam is None:
        raise ApptuneError(
            paths.site_dir() / "flag-ladders.yaml",
            f"families.{tc.family}",
            f"no flag ladders for compiler family '{tc.family}' "
            f"(known: {', '.join(sorted(ladders.families))})",
        )
    if v.ladder not in fam:
        raise ApptuneError(
            rfile,
            "variant",
            f"'{variant}': unknown flag ladder '{v.ladder}' for "
            f"{tc.family} (allowed: {', '.join(sorted(fam))})",
        )
    ladder = fam[v.ladder]

    axes: dict[str, str] = {}
    for axis in recipe.axes:
        chosen = dict(v.choices).get(axis, recipe.defaults.get(axis, "environment"))
        if chosen == "environment":
            chosen = getattr(tc, axis, None)
            if chosen not in recipe.axes[axis]:
                raise ApptuneError(
                    rfile,
                    f"defaults.{axis}",
                    f"environment '{tc.environment}' provides {axis} '{chosen}', "
                    f"not one of {sorted(recipe.axes[axis])}",
                )
        axes[axis] = chosen

    cppflags, ldflags, libs, tvars, axis_cflags = [], [], {}, {}, []
    for axis, choice in axes.items():
        opt = recipe.axes[axis][choice]
        tvars.update(opt.vars)
        cppflags += opt.cppflags
        axis_cflags += opt.cflags
        if opt.library:
            lib = libraries.libraries.get(opt.library)
            if lib is None:
                raise ApptuneError(
                    paths.site_dir() / "libraries.yaml",
                    f"libraries.{opt.library}",
                    f"library '{opt.library}' (needed by {axis}={choice}) is not defined",
                )
            cppflags += _expand(lib.cppflags)
            ldflags += _expand(lib.ldflags)
            libs[axis] = opt.library

    patches = _patches(recipe, tc, axes)
    per_file = _per_file(recipe, fam, rfile)
    fam_flags = recipe.build.family_flags.get(tc.family)
    return BuildPlan(
        app=recipe.name,
        version=recipe.version,
        variant=v.name,
        environment=tc.environment,
        family=tc.family,
        cc=tc.cc,
        cxx=tc.cxx,
        ftn=tc.ftn,
        cflags=list(ladder.cflags),
        fflags=list(ladder.fflags),
        app_cflags=list(recipe.build.cflags)
        + (fam_flags.cflags if fam_flags else [])
        + axis_cflags,
        app_fflags=list(recipe.build.fflags) + (fam_flags.fflags if fam_flags else []),
        app_ldflags=list(fam_flags.ldflags) if fam_flags else [],
        cppflags=cppflags,
        ldflags=ldflags,
        axes=axes,
        libraries=libs,
        patches=patches,
        per_file=per_file,
        make_args=list(recipe.build.args),
        vars=tvars,
    )
