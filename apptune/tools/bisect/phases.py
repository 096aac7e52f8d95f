"""The bisection in its phases: the two ends built and run, the units that differ and the
relink checked, the file-level search, the ``per_file`` rule proposed, the function-level
search per culprit and the timing of good, bad and mixed (:func:`bisect`)."""

from __future__ import annotations

import datetime
import difflib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ... import paths, templating
from ...core.data import recipes
from ...core.data.site import Site
from ...core.run import localrun
from ...errors import ApptuneError
from ...figures import finite_median
from ...models import BuildPlan, Recipe
from ...yamlio import atomic_write_json, atomic_write_text
from .objects import (
    Mixer,
    defined_globals,
    module_differences,
    pretty_symbol,
    symbol_mix,
    units_of,
)
from .rules import add_per_file, covering_rule, good_flags, per_file_entries
from .search import BudgetExhausted, bisect_search


@dataclass
class Cycle:
    """One build+run cycle: an end, or a mixed build relinked, run and verified."""

    n: int
    what: str
    good_objects: int
    bad_objects: int
    ok: bool
    summary: str
    seconds: float


@dataclass
class BisectResult:
    """What a bisection found (``bisect.json``; the report renders it)."""

    app: str
    environment: str
    tier: str
    good: str
    bad: str
    ignore_per_file: bool
    units: int
    left_out: dict
    cycles: list[Cycle] = field(default_factory=list)
    culprits: list[dict] = field(default_factory=list)
    verified: bool = False
    one_minimal: bool = False
    already_covered: dict = field(default_factory=dict)
    entries: list[dict] = field(default_factory=list)
    diff: str = ""
    timing: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    relink_identical: bool | None = None
    method: str = ""
    modules_differing: list[str] = field(default_factory=list)
    #: per culprit object: the global functions that must come from the good build
    functions: list[dict] = field(default_factory=list)

    @property
    def n_cycles(self) -> int:
        return len(self.cycles)


@dataclass
class Bisection:
    """A bisection under way: what each phase needs, and its cycles counted against
    ``max_cycles`` in :attr:`res`."""

    recipe: Recipe
    site: Site
    tier: str
    bad: str
    work: Path
    ranks: int | None
    max_cycles: int
    res: BisectResult
    log: object
    on_trial: object = None
    #: Builds mixed from the good and the bad tree (set once the units are known).
    mixer: Mixer | None = None
    #: The differing objects, in the order of the search, and each one's unit.
    order: list[str] = field(default_factory=list)
    units_by: dict = field(default_factory=dict)
    #: Which sets of bad objects fail (the whole set is known to fail).
    memo: dict = field(default_factory=dict)

    def run_trial(self, build_dir: Path, name: str, variant: str) -> localrun.RunResult:
        """Run and verify one build on the tier."""
        r = localrun.run_tier(
            self.recipe,
            self.tier,
            build_dir,
            self.work / "runs" / name,
            self.site,
            ranks=self.ranks,
            variant=variant,
        )
        if self.on_trial:
            self.on_trial(r.run_dir)
        return r

    def cycle(self, what, n_good, n_bad, r, t0) -> Cycle:
        """Count and log one cycle."""
        res = self.res
        c = Cycle(
            len(res.cycles) + 1,
            what,
            n_good,
            n_bad,
            r.ok,
            r.summary,
            round(time.monotonic() - t0, 1),
        )
        res.cycles.append(c)
        self.log(
            f"apptune: bisect: cycle {c.n}: {what}: {'verified' if r.ok else 'FAILED'} "
            f"({c.seconds} s)" + ("" if r.ok else f": {r.summary[:160]}")
        )
        return c

    def candidate(self, goods: set[str], replace: dict, what: str, n_bad: int) -> bool:
        """Relink, run and verify one mixed build; True when it fails verification."""
        if len(self.res.cycles) >= self.max_cycles:
            raise BudgetExhausted()
        t0 = time.monotonic()
        n = len(self.res.cycles) + 1
        d = self.mixer.make(goods, self.work / f"mix-{n:02d}", replace)
        r = self.run_trial(d, f"mix-{n:02d}", f"{self.bad} with {len(goods)} good objects")
        self.cycle(what, len(goods), n_bad, r, t0)
        if r.ok:
            (d / "passed").touch()
        else:
            shutil.rmtree(d)
        return not r.ok

    def fails(self, bad_objs) -> bool:
        """Whether the build with exactly these objects bad (the others good) fails."""
        key = frozenset(bad_objs)
        if key not in self.memo:
            goods = set(self.order) - key
            what = (
                f"{len(key)} bad: " + ", ".join(self.units_by[o].source for o in sorted(key))
                if len(key) <= 3
                else f"{len(key)} bad objects, {len(goods)} good"
            )
            self.memo[key] = self.candidate(goods, {}, what, len(key))
        return self.memo[key]


def _plans(recipe, rfile: Path, good: str, bad: str, site, ignore_per_file: bool):
    """The build plans of the two ends: builds of the same source, patches and axes."""
    pg = localrun.plan_for(recipe, good, site)
    pb = localrun.plan_for(recipe, bad, site, ladder_everywhere=ignore_per_file)
    if pg.axes != pb.axes or pg.patches != pb.patches:
        diff = {a: (pg.axes[a], pb.axes[a]) for a in pg.axes if pg.axes[a] != pb.axes[a]}
        raise ApptuneError(
            rfile,
            "variant",
            f"--good {good} and --bad {bad} differ in more than flags "
            f"({diff or 'patches'}): bisect mixes objects of builds of the same source, "
            "patches and library axes",
        )
    if pg == pb:
        raise ApptuneError(rfile, "variant", f"--good {good} and --bad {bad} are the same build")
    return pg, pb


def _build_ends(b: Bisection, good: str, pg: BuildPlan, pb: BuildPlan) -> dict:
    """Build and run both ends: the good one must pass, the bad one fail."""
    ends = {}
    for name, variant, plan in (("good", good, pg), ("bad", b.bad, pb)):
        t0 = time.monotonic()
        b.log(f"apptune: bisect: building {name} end {plan.variant} with {b.site.environment}")
        localrun.build_variant(b.recipe, plan, b.site, b.work / name, use_cache=False)
        r = b.run_trial(b.work / name, name, variant)
        b.cycle(f"{name} build {variant}", 0, 0, r, t0)
        ends[name] = r
    if not ends["good"].ok:
        raise ApptuneError(
            None,
            "--good",
            f"{good} fails verification itself on tier {b.tier}: {ends['good'].summary}",
        )
    if ends["bad"].ok:
        raise ApptuneError(
            None, "--bad", f"{b.bad} passes verification on tier {b.tier}: nothing to bisect"
        )
    return ends


def _prepare_units(b: Bisection, pb: BuildPlan) -> None:
    """The objects that differ, the module files checked, and the relink of the bad
    build's own objects checked to give the bad product back."""
    res, work = b.res, b.work
    units, left = units_of(work / "good", work / "bad")
    res.units, res.left_out = len(units), left
    if not units:
        raise ApptuneError(
            work / "bad" / "compile-lines.jsonl",
            "compile lines",
            "no separately compiled object differs between the builds "
            "(a build that compiles and links in one command has no objects to mix)",
        )
    res.modules_differing = module_differences(work / "good", work / "bad")
    if res.modules_differing:
        res.notes.append(
            "Fortran module files differ between the builds (mixing objects assumes "
            f"identical interfaces): {', '.join(res.modules_differing[:5])}"
        )
    b.log(
        f"apptune: bisect: {len(units)} objects differ ({left['identical']} identical, "
        f"{len(left['missing'])} not in the tree)"
    )
    b.mixer = Mixer(b.recipe, pb, work / "good", work / "bad", units, b.site)
    # the relink replays the build: all-bad objects must give the bad build's product back
    check = b.mixer.make(set(), work / "mix-relink-check")
    exe = b.recipe.run.executable
    res.relink_identical = (check / exe).read_bytes() == (work / "bad" / exe).read_bytes()
    if not res.relink_identical:
        res.notes.append(
            f"relinking the bad build's own objects did not reproduce {exe} byte for byte"
        )
    shutil.rmtree(check)
    b.order = [u.obj for u in units]
    b.memo = {frozenset(b.order): True}
    b.units_by = {u.obj: u for u in units}


def _propose_rule(b: Bisection, rfile: Path, pg: BuildPlan, found: dict, bad_summary: str) -> None:
    """The culprits with their good flags, and the ``per_file`` rule for those no rule
    covers yet, as a diff of the recipe."""
    res = b.res
    res.notes += found["notes"]
    res.method = found["method"]
    res.verified, res.one_minimal = found["verified"], found["one_minimal"]
    culprit_sources = sorted({b.units_by[o].source for o in found["culprits"]})
    res.culprits = [
        {
            "object": o,
            "source": b.units_by[o].source,
            "good_flags": good_flags(pg, b.units_by[o].source),
        }
        for o in found["culprits"]
    ]
    reason = (
        f"apptune bisect ({datetime.date.today()}): with {b.bad}'s flags these files fail "
        f"verification on tier {b.tier} ({bad_summary[:120]}); "
        f"{len(res.cycles)} build+run cycles"
    )
    new_sources = []
    for s in culprit_sources:
        i = covering_rule(b.recipe, s)
        if i is not None:
            res.already_covered[s] = i
        else:
            new_sources.append(s)
    res.entries = per_file_entries(pg, new_sources, reason)
    if res.entries:
        text = rfile.read_text()
        new = add_per_file(text, res.entries, str(rfile))
        rel = str(rfile.relative_to(paths.root()))
        res.diff = "".join(
            difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"
            )
        )


def _function_levels(b: Bisection, culprits: list[str]) -> None:
    """The function-level search of each culprit object, as far as the budget goes."""
    res = b.res
    for obj in culprits:
        source = b.units_by[obj].source
        try:
            res.functions.append(
                _function_level(obj, source, set(culprits), b.work, b.mixer, b.candidate, b.log)
            )
        except BudgetExhausted:
            res.notes.append(
                f"function-level search of {source} stopped: the budget "
                f"of {b.max_cycles} build+run cycles is used up"
            )
            break
        except ApptuneError as e:  # the file-level result stands
            res.functions.append(
                {
                    "object": obj,
                    "source": source,
                    "of": 0,
                    "functions": [],
                    "verified": False,
                    "cycles": 0,
                    "note": f"not searched at function level: {e}",
                }
            )


def _timing(b: Bisection, culprits: list[str], repeats: int) -> None:
    """Good, bad and the mixed build of the override run ``repeats`` times, interleaved,
    in the same session."""
    res, work, figure = b.res, b.work, b.recipe.run.primary
    mixed = work / "mix-final"
    b.mixer.make(set(culprits), mixed)
    builds = {"good": work / "good", "bad": work / "bad", "mixed": mixed}
    samples = {k: {"primary": [], "wall_time": []} for k in builds}
    for i in range(repeats):
        for k, d in builds.items():
            r = b.run_trial(d, f"time-{k}-{i}", k)
            if k == "mixed" and not r.ok:
                res.notes.append(
                    f"timing repeat {i + 1}: the mixed build failed verification: {r.summary}"
                )
            samples[k]["primary"].append(r.figures.get(figure))
            samples[k]["wall_time"].append(r.wall_time)
            b.log(
                f"apptune: bisect: timing {k} {i + 1}/{repeats}: {figure} = {r.figures.get(figure)}"
            )
    res.timing = timing_table(samples, figure, b.recipe.run.figures.get(figure), repeats)


def bisect(
    app: str,
    good: str,
    bad: str,
    site: Site,
    tier: str = "ci",
    work: Path | None = None,
    ignore_per_file: bool = False,
    repeats: int = 3,
    max_cycles: int = 40,
    ranks: int | None = None,
    functions: bool = True,
    log=None,
    on_trial=None,
) -> BisectResult:
    """Bisect ``bad`` against ``good`` on ``tier``; ``on_trial`` is called with the run
    directory of each run once it ran."""
    log = log or (lambda m: print(m, flush=True))
    recipe = recipes.load_recipe(app)
    rfile = recipes.recipe_path(app)
    if tier not in recipe.tiers:
        raise ApptuneError(
            rfile, "tiers", f"unknown tier '{tier}' (allowed: {', '.join(recipe.tiers)})"
        )
    pg, pb = _plans(recipe, rfile, good, bad, site, ignore_per_file)
    work = Path(
        work
        or paths.root()
        / "runs"
        / "bisect"
        / f"{app}-{site.environment}-{good}-vs-{bad}{'-ignore-per-file' if ignore_per_file else ''}"
    )
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    res = BisectResult(
        app=app,
        environment=site.environment,
        tier=tier,
        good=good,
        bad=bad,
        ignore_per_file=ignore_per_file,
        units=0,
        left_out={},
    )
    b = Bisection(recipe, site, tier, bad, work, ranks, max_cycles, res, log, on_trial)
    ends = _build_ends(b, good, pg, pb)
    _prepare_units(b, pb)
    try:
        found = bisect_search(b.order, b.fails)
    except BudgetExhausted:
        res.notes.append(f"stopped: the budget of {max_cycles} build+run cycles is used up")
        _save(res, work)
        return res
    _propose_rule(b, rfile, pg, found, ends["bad"].summary)
    if not res.verified:
        res.notes.append("no set of good objects was found that passes: no rule proposed")
        _save(res, work)
        return res
    if functions:
        _function_levels(b, found["culprits"])
    _timing(b, found["culprits"], repeats)
    _save(res, work)
    return res


def _function_level(
    obj: str, source: str, culprits: set[str], work: Path, mixer: Mixer, candidate, log
) -> dict:
    """Which global functions of the culprit object ``obj`` must come from the good build
    (the other culprit objects good, every other object bad)."""
    g, b = mixer.good / "src" / obj, mixer.bad / "src" / obj
    gf, bf = defined_globals(g)[0], defined_globals(b)[0]
    funcs = sorted(set(gf) & set(bf))
    out = {
        "object": obj,
        "source": source,
        "of": len(funcs),
        "functions": [],
        "verified": False,
        "cycles": 0,
        "note": "",
    }
    notes = []
    if set(gf) ^ set(bf):
        notes.append(
            "defined in one build only, left as built: "
            + ", ".join(pretty_symbol(x) for x in sorted(set(gf) ^ set(bf)))
        )
    if len(funcs) < 2:
        notes.append(f"{len(funcs)} global function(s): nothing to narrow at function level")
        return out | {
            "functions": [pretty_symbol(x) for x in funcs],
            "verified": len(funcs) == 1,
            "note": "; ".join(notes),
        }
    others = culprits - {obj}
    memo: dict[frozenset, bool] = {frozenset(funcs): True}  # the whole object bad: known to fail
    counter = [0]
    logf = open(work / f"symbols-{paths.slug(obj, 8)}.log", "a")

    def fails(bad_funcs) -> bool:
        key = frozenset(bad_funcs)
        if key not in memo:
            counter[0] += 1
            mixed = symbol_mix(
                g,
                b,
                set(funcs) - key,
                funcs,
                work / "symbols" / f"{paths.slug(obj, 8)}-{counter[0]:02d}" / Path(obj).name,
                mixer.site.environ(),
                logf,
            )
            names = ", ".join(pretty_symbol(x) for x in sorted(key))
            what = f"{source}: {len(key)} of {len(funcs)} functions bad" + (
                f": {names}" if 0 < len(key) <= 3 else ""
            )
            memo[key] = candidate(others, {obj: mixed}, what, len(key))
        return memo[key]

    try:
        found = bisect_search(funcs, fails, noun="global function")
    except ApptuneError as e:
        notes.append(f"not separable at function level: {e.message}")
        return out | {"cycles": counter[0], "note": "; ".join(notes)}
    finally:
        logf.close()
    out.update(
        functions=[pretty_symbol(x) for x in found["culprits"]],
        symbols=found["culprits"],
        verified=found["verified"],
        method=found["method"],
        cycles=counter[0],
        note="; ".join(notes),
    )
    log(
        f"apptune: bisect: {source}: {len(found['culprits'])} of {len(funcs)} global functions "
        f"must keep the good flags: {', '.join(out['functions'])} ({counter[0]} cycles)"
    )
    return out


def timing_table(samples: dict, figure: str, spec, repeats: int) -> dict:
    """Medians of the timing runs of good, bad and mixed, and the mixed build's ratios."""
    better = spec.better if spec is not None else "lower"
    unit = spec.unit if spec is not None else "s"
    med = {k: {m: finite_median(v[m]) for m in v} for k, v in samples.items()}
    out = {
        "figure": figure,
        "unit": unit,
        "better": better,
        "repeats": repeats,
        "medians": med,
        "samples": samples,
        "ratios": {},
    }
    for m in ("primary", "wall_time"):
        mx, g, b = med["mixed"][m], med["good"][m], med["bad"][m]
        out["ratios"][m] = {
            "mixed/good": mx / g if mx and g else None,
            "mixed/bad": mx / b if mx and b else None,
        }
    return out


def _save(res: BisectResult, work: Path) -> None:
    from dataclasses import asdict

    atomic_write_json(work / "bisect.json", asdict(res) | {"n_cycles": res.n_cycles})
    atomic_write_text(work / "bisect-report.md", report_md(res))


def report_md(res: BisectResult) -> str:
    """The bisect's report (apptune/templates/bisect-report.md.j2)."""
    return templating.environment().get_template("bisect-report.md.j2").render(r=res)
