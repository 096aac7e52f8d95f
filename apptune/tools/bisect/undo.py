"""What changed since a baseline, and how each change is put back on this node.

A change is a *dimension* of ``bisect --between`` when its old value can be made here:

* a flag set of the build: rebuilt with the old flags;
* an environment variable of the run: its old value, or unset;
* an input parameter: the old value;
* a library axis of the recipe (``axis blas: openblas → blis``): rebuilt with the old
  axis value, which brings its library, its compile and link flags and the patches that
  apply with it (those changes are listed with the axis, not tested apart);
* a patch added since the baseline: left out; one removed: applied again when its file
  is still in the recipe's patch directory with the checksum the baseline recorded;
* the compilers' identity, when it changed (a new MPI behind the same wrappers, a new
  compiler): another ReFrame environment of the same partition and compiler family whose
  compilers answer as the baseline's did (e.g. ``gnu`` for Open MPI, ``gnu-mpich`` for
  MPICH). A candidate without that change is built and run in that environment
  (its wrappers, MPI, launcher and variables) with the other changes applied as chosen;
  the variables and modules that come with that environment are listed with it.

Everything else (a library's new version under the same name, an edited patch, the
source, the launcher, the machine) cannot be put back from a record: listed, not tested.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import yaml

from ... import paths
from ...core.builds import buildid
from ...core.data import recipes
from ...core.data.site import Site, load_reframe_config, load_site
from ...core.judge import changes
from ...core.run import envrecord, localrun, prepare
from ...errors import ApptuneError
from ...models import BuildPlan, PlanPatch


@dataclass
class Change:
    """One difference between the baseline's runs and the regressed run."""

    fact: str
    old: str | None
    new: str | None
    #: ``build`` or ``run`` when it can be undone here; None when it cannot (``why_not``)
    #: or when it comes with another change (``part_of``).
    where: str | None = None
    why_not: str | None = None
    #: The change this one comes with (an axis's library and link flags).
    part_of: str | None = None
    #: The environment that has the old compilers (a compiler/MPI change).
    environment: str | None = None

    @property
    def line(self) -> str:
        """The change in the words of the verdicts (``flags -O3 → -O0``)."""
        one = lambda v: {} if v is None else {self.fact: v}  # noqa: E731
        said = changes.describe(one(self.old), one(self.new))
        # a library loaded is compared only where both sides recorded the libraries: alone,
        # it is said as it is
        return said[0] if said else f"{self.fact}: {self.old or '(none)'} → {self.new or '(none)'}"


NOT_HERE = "cannot be put back from a record (the old one is not on this node)"


class Here:
    """What this node can build for the regressed result: its recipe and variant, the
    site it ran with, and the site's other environments on that partition."""

    def __init__(self, recipe, variant: str, site: Site, config):
        self.recipe, self.site, self.config = recipe, site, config
        self.variant = recipes.Variant.parse(variant, recipe)
        self.ladder = self.variant.ladder
        self.plan = localrun.plan_for(recipe, variant, site)
        self._sites: dict[str, Site] | None = None

    def plan_with(self, axes: dict[str, str], site: Site) -> BuildPlan:
        """The plan of the variant's ladder with these axis values, for ``site``, named as
        the variant with the axes that differ from the run's."""
        name = recipes.Variant(self.ladder, tuple(sorted(axes.items()))).name
        plan = localrun.plan_for(self.recipe, name, site)
        chosen = dict(self.variant.choices)
        chosen.update({a: v for a, v in axes.items() if v != self.plan.axes.get(a)})
        return plan.updated(
            variant=recipes.Variant(self.ladder, tuple(sorted(chosen.items()))).name
        )

    @staticmethod
    def plan_facts(plan: BuildPlan) -> dict[str, str]:
        """The facts a build of ``plan`` records about its flags, axes, libraries, patches
        (its provenance, made as the build step makes it from ``plan.json``)."""
        written = plan.to_dict()
        flags = {k: written[k] for k in changes.FLAG_SETS}
        prov = {
            "flags": dict(flags, per_file=written["per_file"]),
            "axes": written["axes"],
            "libraries": buildid.library_versions(written),
            "patches": written["patches"],
        }
        return changes.provenance_facts(prov)

    def site_facts(self, site: Site) -> dict[str, str]:
        """The facts of ``site``'s compilers (as they answer in its environment) and of the
        modules and variables it declares."""
        plan = self.plan_with(self.plan.axes, site).to_dict()  # as the build step reads it
        comp = buildid.compiler_identity(plan, self.recipe.build.languages, site.environ())
        decl = site.declared or {}
        launch = {"modules": decl.get("modules") or [], "env_vars": decl.get("env_vars") or {}}
        launch = prepare.recorded_launch(launch, site.extras.get("record_env") or ())
        return changes.provenance_facts({"compilers": comp, "launch": launch})

    def other_sites(self) -> dict[str, Site]:
        """The site's other environments on the same partition and compiler family whose
        tools are found (the ones a candidate can be built in)."""
        if self._sites is None:
            self._sites = {}
            cfg = load_reframe_config(paths.root() / self.config)
            where = f"{self.site.system}:{self.site.partition}"
            for env in cfg["environments"]:
                name = env["name"]
                if name == self.site.environment or name in self._sites:
                    continue
                try:
                    s = load_site(name, self.config, where, self.recipe.build.languages)
                except ApptuneError:
                    continue
                if s.toolchain.family == self.site.toolchain.family:
                    self._sites[name] = s
        return self._sites

    def patch_entry(self, file: str, sha: str) -> PlanPatch | None:
        """A plan's patch for the recipe's patch ``file`` when it is in the patch
        directory with the checksum ``sha`` (its first characters)."""
        pf = paths.patches_dir(self.recipe.name) / file
        if not pf.is_file():
            return None
        full = recipes.sha256_file(pf)
        if not full.startswith(sha):
            return None
        return PlanPatch(file=file, sha256=full, strip=1, reason="as the baseline's build")


def dimensions(base: dict[str, str], now: dict[str, str], here: Here | None = None) -> list[Change]:
    """Every fact that differs, with whether (and how) it can be undone here; without
    ``here`` only flag sets, variables and inputs can be."""
    out = []
    for k in sorted(set(base) | set(now)):
        old, new = base.get(k), now.get(k)
        if old == new or old == changes.VARIED:
            continue
        if k.startswith("env ") and envrecord.compare(old, new) == "unknown":
            continue
        c = Change(k, old, new)
        if k.startswith("flags ") and k.split(" ", 1)[1] in changes.FLAG_SETS:
            c.where = "build"
        elif k.startswith("env ") and envrecord.is_hidden(old):
            c.why_not = "its old value was recorded as a keyed hash only (not a value to put back)"
        elif k.startswith("env ") or k.startswith("input "):
            c.where = "run"
        else:
            c.why_not = NOT_HERE
        out.append(c)
    if here is not None:
        _unused_flags(out, here)
        _axes(out, here)
        _environment(out, here, base)
        _patches(out, here)
    return out


#: The languages whose compile lines carry a flag set (cppflags and ldflags: every build's).
FLAG_LANGUAGES = {"cflags": ("c", "cxx"), "fflags": ("fortran",)}


def _unused_flags(chs: list[Change], here: Here) -> None:
    """A flag set that no compile line of this build carries (Fortran flags of a C build)
    changed with the ladder, but changes nothing here: listed, not a dimension (a cycle of
    builds and runs that could only show noise)."""
    langs = set(here.recipe.build.languages)
    for c in chs:
        name = c.fact.split(" ", 1)[1] if c.fact.startswith("flags ") else None
        if c.where and name in FLAG_LANGUAGES and not langs & set(FLAG_LANGUAGES[name]):
            c.where = None
            c.why_not = (
                f"no compile line of this build carries {name} (it compiles "
                f"{', '.join(sorted(langs))})"
            )


def _fold(chs: list[Change], head: Change, old: dict, new: dict) -> None:
    """Mark the changes whose old and new values are those of ``old`` and ``new`` facts as
    coming with ``head``."""
    for c in chs:
        if c is head or c.part_of or c.fact not in set(old) | set(new):
            continue
        if old.get(c.fact) == c.old and new.get(c.fact) == c.new:
            c.part_of, c.where, c.why_not = head.fact, None, None


def _axes(chs: list[Change], here: Here) -> None:
    """Each axis whose old value is one of the recipe's, with what comes with it: the
    facts that reverting it alone puts back, and those that only reverting all of them
    does (link flags of two libraries), named with every axis that moves them."""
    axes = here.recipe.axes
    now_facts = here.plan_facts(here.plan)
    olds, moved = dict(here.plan.axes), {}
    for c in chs:
        name = c.fact.split(" ", 1)[1] if c.fact.startswith("axis ") else None
        if name is None or c.part_of:
            continue
        if name not in axes or c.old not in axes[name] or c.new != here.plan.axes.get(name):
            c.why_not = f"{c.old} is not a value of the recipe's axis {name}"
            continue
        back = here.plan_facts(here.plan_with(dict(here.plan.axes, **{name: c.old}), here.site))
        c.where, c.why_not, olds[name] = "build", None, c.old
        _fold(chs, c, back, now_facts)
        moved[c.fact] = {k for k in set(back) | set(now_facts) if back.get(k) != now_facts.get(k)}
    if len(moved) < 2:
        return
    back = here.plan_facts(here.plan_with(olds, here.site))
    for c in chs:
        if (
            c.part_of
            or c.fact in moved
            or (back.get(c.fact), now_facts.get(c.fact))
            != (
                c.old,
                c.new,
            )
        ):
            continue
        c.part_of = " + ".join(a for a, facts in moved.items() if c.fact in facts)
        c.where = c.why_not = None


def _environment(chs: list[Change], here: Here, base: dict[str, str]) -> None:
    """The compilers' change: another environment whose compilers answer as the
    baseline's did."""
    comp = [c for c in chs if c.fact.startswith("compiler ") and c.old and c.new]
    if not comp:
        return
    mine = None
    for name, site in here.other_sites().items():
        try:
            theirs = here.site_facts(site)
        except ApptuneError:  # the variant cannot be planned there (an axis it lacks)
            continue
        if all(theirs.get(c.fact) == c.old for c in comp):
            mine = mine or here.site_facts(here.site)
            head = comp[0]
            head.where, head.why_not, head.environment = "build", None, name
            _fold(chs, head, theirs, mine)
            return
    for c in comp:
        c.why_not = "no environment of this partition has the old compilers"


def _patches(chs: list[Change], here: Here) -> None:
    for c in chs:
        if not c.fact.startswith("patch ") or c.part_of:
            continue
        file = c.fact.split(" ", 1)[1]
        if c.old is None:
            c.where, c.why_not = "build", None
        elif c.new is None and here.patch_entry(file, c.old):
            c.where, c.why_not = "build", None
        elif c.new is None:
            c.why_not = "the old patch file is not in the patch directory"
        else:
            c.why_not = "the old text of the patch is not here (only its checksum)"


def config(
    chs: list[Change], applied: set[str], plan: BuildPlan, site: Site, here: Here | None = None
) -> tuple[BuildPlan, Site, dict]:
    """The old configuration with the changes in ``applied`` made: (plan, site, the input
    parameters it sets)."""
    testable = [c for c in chs if c.where]
    if here is not None:
        axes = dict(here.plan.axes)
        for c in testable:
            if c.environment and c.fact not in applied:
                site = here.other_sites()[c.environment]
            elif c.fact.startswith("axis "):
                axes[c.fact.split(" ", 1)[1]] = c.new if c.fact in applied else c.old
        plan = here.plan_with(axes, site)
    env, unset, params = dict(site.env), list(site.unset), {}
    for c in testable:
        value = c.new if c.fact in applied else c.old
        kind, name = c.fact.split(" ", 1)
        if kind == "flags":
            plan = plan.updated(**{name: (value or "").split()})
        elif kind == "env":
            if value is None:
                env.pop(name, None)
                unset.append(name)
            else:
                env[name] = value
        elif kind == "input" and value is not None:
            params[name] = yaml.safe_load(value)
        elif kind == "patch" and here is not None:
            plan = _patch(plan, name, value, here)
    return plan, dataclasses.replace(site, env=env, unset=unset), params


def _patch(plan: BuildPlan, file: str, sha: str | None, here: Here) -> BuildPlan:
    """``plan`` with ``file`` applied (with checksum ``sha``) or left out."""
    kept = [p for p in plan.patches if p.file != file]
    if sha is not None:
        entry = next((p for p in plan.patches if p.file == file), None)
        entry = entry or here.patch_entry(file, sha)
        after = [p for p in kept if p.file > file]
        at = kept.index(after[0]) if after else len(kept)
        kept.insert(at, entry)
    return plan.updated(patches=kept)
