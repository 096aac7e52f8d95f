"""The planted-fault battery of one application: the clean build run and verified, then each
fault planted and judged, then each sweep's parameter changed until the reference sees it.

Every build and run goes through the machinery ``apptune tune`` and ``apptune bisect`` use
(:mod:`apptune.core.run.localrun`): the variant's plan with the fault's patch after the recipe's
(:func:`localrun.build_variant`: the build cache keeps each faulted build under its own key),
the tier's input with the fault's parameters (:func:`localrun.run_tier`), the run core's
verification against the tier's reference."""

from __future__ import annotations

import contextlib
import datetime
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ... import machine, paths
from ...core.data import faults, inputs, recipes
from ...core.data import site as site_config
from ...core.run import localrun
from ...errors import ApptuneError
from ...locks import locked
from ...models import FaultsFile, SensitivityFile, Sweep
from ...yamlio import atomic_write_text, dump_yaml_roundtrip
from .judge import seen as judged


@dataclass
class Battery:
    app: str
    work: Path
    config_file: str = paths.DEFAULT_CONFIG
    #: A lock file held for each build and each run (``flock``'s, shared with other work).
    lock: str | None = None
    #: The faults and sweeps to run (None: all); the others keep what was recorded.
    only: list[str] | None = None
    command: str = ""
    log: Callable[[str], None] = field(default=lambda m: print(m, flush=True))
    #: The site the faults are built and run on (None: the faults' environment, read from
    #: the ReFrame site config ``config_file``).
    site: object = None
    #: Where what was seen is written (None: ``reference/APP/sensitivity/seen.yaml``).
    out: Path | None = None

    def __post_init__(self):
        self.data: FaultsFile = faults.load(self.app)
        self.recipe = recipes.load_recipe(self.app)
        problems = faults.problems(self.app, self.recipe)
        if problems:
            raise problems[0]
        names = [*self.data.faults, *self.data.sweeps]
        unknown = [n for n in self.only or [] if n not in names]
        if unknown:
            raise ApptuneError(
                faults.faults_path(self.app),
                None,
                f"no fault or sweep '{unknown[0]}' (there are: {', '.join(names)})",
            )
        self.site = self.site or site_config.load_site(
            self.data.environment, self.config_file, languages=self.recipe.build.languages
        )
        _, spec = inputs.load_input(self.app, self.data.tier)
        self.params = dict(spec.parameters)
        self.machine = machine.machine_id(machine.fingerprint())
        self.today = datetime.date.today().isoformat()

    def held(self):
        return locked(self.lock) if self.lock else contextlib.nullcontext()

    # ------------------------------------------------------------------ builds and runs
    def build(self, name: str, patch: str | None = None) -> Path:
        stage = self.work / "builds" / name
        if recipes.install_of(self.recipe, self.data.variant) is not None:
            if patch:  # validated: an install has no source (faults.problems)
                raise ApptuneError(faults.faults_path(self.app), name, "an install has no source")
            self.log(f"apptune: sensitivity: the install {self.data.variant}")
            with self.held():
                localrun.install_variant(self.recipe, self.data.variant, self.site, stage)
            return stage
        plan = localrun.plan_for(self.recipe, self.data.variant, self.site)
        if patch:
            plan = plan.with_patch(faults.plan_patch(self.app, name, patch), self.label(name))
        self.log(f"apptune: sensitivity: building {plan.variant} ({self.data.environment})")
        with self.held():
            localrun.build_variant(self.recipe, plan, self.site, stage, use_cache=True)
        return stage

    def run(self, stage: Path, name: str, overrides: dict | None = None):
        with self.held():
            return localrun.run_tier(
                self.recipe,
                self.data.tier,
                stage,
                self.work / "runs" / name,
                self.site,
                overrides=overrides,
                variant=self.label(name) if name != "clean" else self.data.variant,
            )

    def label(self, name: str) -> str:
        return f"{self.data.variant} fault:{name}"

    # ------------------------------------------------------------------ the battery
    def go(self) -> SensitivityFile:
        old = faults.load_seen(self.app)
        keep = old.model_dump(mode="json") if old else {}
        clean = self.build("clean")
        r = self.run(clean, "clean")
        if not r.ok:
            raise ApptuneError(
                None,
                f"{self.app} {self.data.environment}/{self.data.variant}",
                f"the clean build does not verify, so no fault can be judged: {r.summary}",
            )
        self.log(f"apptune: sensitivity: clean: {r.summary}")
        out = {
            "app": self.app,
            "tier": self.data.tier,
            "environment": self.data.environment,
            "variant": self.data.variant,
            "command": self.command,
            "clean": r.summary,
            "date": self.today,
            "machine": r.machine_id or self.machine,
            "faults": {},
            "sweeps": {},
        }
        errors = []
        for name, fault in self.data.faults.items():
            if not self.wanted(name):
                if name in keep.get("faults", {}):
                    out["faults"][name] = keep["faults"][name]
                continue
            try:
                out["faults"][name] = self.fault(name, fault, clean).model_dump(mode="json")
            except ApptuneError as e:
                errors.append(e)
                self.log(f"apptune: sensitivity: {name}: {e}")
        for name, sw in self.data.sweeps.items():
            if not self.wanted(name):
                if name in keep.get("sweeps", {}):
                    out["sweeps"][name] = keep["sweeps"][name]
                continue
            out["sweeps"][name] = self.sweep(name, sw, clean)
        result = SensitivityFile.model_validate(out)
        write(self.app, result, self.out)
        if errors:
            raise errors[0]
        return result

    def wanted(self, name: str) -> bool:
        return self.only is None or name in self.only

    def fault(self, name: str, fault, clean: Path):
        digest = faults.digest(self.app, name, self.data)
        if fault.patch:
            stage = self.build(name, fault.patch)
            r = self.run(stage, name)
        else:
            r = self.run(clean, name, overrides=dict(fault.set))
        s = judged(self.recipe, r, digest, self.machine, self.today)
        self.log(f"apptune: sensitivity: {name}: {_said(s.caught, s.by, s.used, s.closest)}")
        return s

    def sweep(self, name: str, sw: Sweep, clean: Path) -> dict:
        base = self.params[name]
        tried: dict[float, tuple] = {}

        def attempt(change: float):
            value = _changed(base, change)
            if value == base:
                return None
            key = f"{name}-{change:+.4g}"
            r = self.run(clean, key, overrides={name: value})
            s = judged(self.recipe, r, "", self.machine, self.today)
            tried[change] = (value, s)
            self.log(
                f"apptune: sensitivity: {name} {change:+.4g} ({value!r}): "
                + _said(s.caught, s.by, s.used, s.closest)
            )
            return s

        lo, hi = None, None
        for change in sw.steps:
            s = attempt(change)
            if s is not None and s.caught:
                hi = change
                break
            lo = change
        if hi is not None and lo is not None:
            for _ in range(sw.bisect):
                mid = math.copysign(math.sqrt(abs(lo * hi)), hi)
                s = attempt(mid)
                if s is None:
                    break
                if s.caught:
                    hi = mid
                else:
                    lo = mid
        steps = [
            {
                "change": c,
                "value": v,
                "caught": s.caught,
                "by": s.by,
                "used": s.used,
                "closest": s.closest,
            }
            for c, (v, s) in sorted(tried.items(), key=lambda kv: abs(kv[0]))
        ]
        smallest = None
        if hi is not None:
            smallest = tried[hi][1].model_copy(
                update={"digest": faults.digest(self.app, name, self.data)}
            )
        return {
            "digest": faults.digest(self.app, name, self.data),
            "base": base,
            "steps": steps,
            "smallest": hi,
            "smallest_run": smallest.model_dump(mode="json") if smallest else None,
        }


def _changed(base, change: float):
    """``base`` changed by the relative amount ``change`` (an integer stays one)."""
    v = base * (1 + change)
    return int(round(v)) if isinstance(base, int) else float(f"{v:.12g}")


def _said(caught: bool, by: list[str], used, closest) -> str:
    if caught:
        more = f" and {len(by) - 4} more" if len(by) > 4 else ""
        return f"caught by {', '.join(by[:4])}{more}"
    near = f" (most tolerance used: {closest} {used:.0%})" if used is not None else ""
    return f"not seen{near}"


def write(app: str, result: SensitivityFile, path: Path | None = None) -> Path:
    """Write what was seen, atomically, beside the faults (or to ``path``)."""
    f = path or faults.seen_path(app)
    head = (
        f"# What {app}'s verification saw of each planted fault (faults.yaml beside this file),\n"
        "# written by `apptune sensitivity`: do not edit. Each caught fault's values are judged\n"
        "# again by the test suite against the current reference (tests/test_sensitivity.py).\n"
    )
    atomic_write_text(f, head + dump_yaml_roundtrip(result.model_dump(mode="json")))
    return f


def default_work(app: str) -> Path:
    """Where the battery's builds and runs go (the same directory resumes its builds)."""
    return paths.root() / "runs" / "sensitivity" / app
