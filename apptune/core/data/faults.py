"""An application's planted faults (``reference/APP/sensitivity/faults.yaml``) and what its
verification saw of them (``reference/APP/sensitivity/seen.yaml``): loaded, checked against
the recipe, the tier's input and the patch files, and turned into what a build's plan takes.

``apptune sensitivity APP`` (:mod:`apptune.tools.sensitivity`) runs them; ``apptune validate``
checks them with every other data file (:func:`problems`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ... import paths
from ...errors import ApptuneError, expand
from ...models import FaultsFile, PlanPatch, Recipe, SensitivityFile
from ...yamlio import load_model
from . import inputs, recipes
from .recipes import Variant, sha256_file

#: The folder of a fault's patch, under ``patches/APP/``.
PATCH_DIR = "faults"


#: The folder of an application's faults and what was seen of them, under ``reference/APP/``.
FOLDER = "sensitivity"


def faults_path(app: str) -> Path:
    return paths.root() / "reference" / app / FOLDER / "faults.yaml"


def seen_path(app: str) -> Path:
    return paths.root() / "reference" / app / FOLDER / "seen.yaml"


def patch_path(app: str, patch: str) -> Path:
    return paths.patches_dir(app) / PATCH_DIR / patch


def load(app: str) -> FaultsFile:
    f = faults_path(app)
    if not f.is_file():
        raise ApptuneError(f, None, f"no planted faults for {app} (write {paths.rel(f)})")
    data = load_model(f, FaultsFile)
    if data.app != app:
        raise ApptuneError(f, "app", f"file says {data.app}, expected {app}")
    return data


def load_seen(app: str) -> SensitivityFile | None:
    """What ``apptune sensitivity APP`` recorded, None when it has not run."""
    f = seen_path(app)
    return load_model(f, SensitivityFile) if f.is_file() else None


def patch_files(app: str) -> list[Path]:
    """The patches of ``app``'s faults ([] without a readable ``faults.yaml``: its problems
    are said by :func:`problems`)."""
    try:
        data = load(app) if faults_path(app).is_file() else None
    except ApptuneError:
        return []
    return [patch_path(app, f.patch) for f in (data.faults.values() if data else ()) if f.patch]


def apps_with_faults() -> list[str]:
    return sorted(
        p.parent.parent.name for p in (paths.root() / "reference").glob(f"*/{FOLDER}/faults.yaml")
    )


def digest(app: str, name: str, data: FaultsFile) -> str:
    """The sha256 of a fault's or a sweep's definition (with its patch's bytes and the clean
    build it is planted in): what it recorded is stale once this changes."""
    entry = data.faults.get(name) or data.sweeps[name]
    h = hashlib.sha256()
    what = {
        "name": name,
        "tier": data.tier,
        "environment": data.environment,
        "variant": data.variant,
        "entry": entry.model_dump(mode="json"),
    }
    h.update(json.dumps(what, sort_keys=True).encode())
    patch = getattr(entry, "patch", None)
    if patch:
        h.update(patch_path(app, patch).read_bytes())
    return h.hexdigest()


def plan_patch(app: str, name: str, patch: str) -> PlanPatch:
    """A fault's patch as a build plan's
    (:meth:`~apptune.models.BuildPlan.with_patch` applies it after the recipe's)."""
    return PlanPatch(
        file=f"{PATCH_DIR}/{patch}",
        sha256=sha256_file(patch_path(app, patch)),
        strip=1,
        reason=f"planted fault {name} (reference/{app}/{FOLDER}/faults.yaml)",
    )


def problems(app: str, recipe: Recipe) -> list[ApptuneError]:
    """Every problem of ``app``'s faults and of what was seen of them (none when it has no
    ``faults.yaml``)."""
    f = faults_path(app)
    if not f.is_file():
        return []
    try:
        data = load(app)
    except ApptuneError as e:
        return expand(e)
    found: list[ApptuneError] = []
    if data.tier not in recipe.tiers:
        return [ApptuneError(f, "tier", f"'{data.tier}' is no tier of {app}'s recipe")]
    listed = recipe.tiers[data.tier].variants.get(data.environment, [])
    names = [Variant.parse(v, recipe).name for v in listed]
    try:
        variant = Variant.parse(data.variant, recipe).name
    except ApptuneError as e:
        variant = None
        found.append(ApptuneError(f, "variant", e.message))
    if variant is not None and variant not in names:
        found.append(
            ApptuneError(
                f,
                "variant",
                f"{data.environment}/{data.variant} is not on tier {data.tier} "
                f"(it lists: {', '.join(listed) or 'nothing'} for {data.environment})",
            )
        )
    try:
        d, spec = inputs.load_input(app, data.tier)
    except ApptuneError as e:
        return [*found, e]
    params = spec.parameters
    install = variant is not None and recipes.install_of(recipe, variant) is not None
    for name, fault in data.faults.items():
        if fault.patch and install:
            found.append(
                ApptuneError(
                    f,
                    f"faults.{name}.patch",
                    f"{data.variant} is an install (installs.{data.variant}): it has no source "
                    "to patch; plant its faults in the input",
                )
            )
        if fault.patch and not patch_path(app, fault.patch).is_file():
            found.append(
                ApptuneError(
                    f,
                    f"faults.{name}.patch",
                    f"{paths.rel(patch_path(app, fault.patch))} is missing",
                )
            )
        for p in fault.set:
            if p not in params:
                found.append(_no_parameter(f, f"faults.{name}.set.{p}", d, params))
    for p in data.sweeps:
        if p not in params:
            found.append(_no_parameter(f, f"sweeps.{p}", d, params))
        elif isinstance(params[p], bool) or not isinstance(params[p], (int, float)):
            found.append(
                ApptuneError(
                    f,
                    f"sweeps.{p}",
                    f"{p} is {params[p]!r} in {paths.rel(d)}: a sweep needs a number",
                )
            )
    if seen_path(app).is_file():
        try:
            load_model(seen_path(app), SensitivityFile)
        except ApptuneError as e:
            found.append(e)
    return found


def _no_parameter(f: Path, field: str, d: Path, params: dict) -> ApptuneError:
    return ApptuneError(
        f,
        field,
        f"no such parameter in {paths.rel(d / 'input.yaml')} (it has: {', '.join(sorted(params))})",
    )
