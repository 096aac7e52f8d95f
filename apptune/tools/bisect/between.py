"""``apptune bisect --between RUN_DIR``: which change since the baseline carries a regression.

A run regressed against this machine's baseline, and its verdict names what changed since
the baseline's runs (:mod:`apptune.core.judge.changes`): often several things at once (a new flag
ladder and a new BLAS, a compiler module and an MPI setting). This finds the one that
carries the slowdown, as git bisect finds a commit:

1. The changes that can be undone here are the *dimensions*
   (:mod:`apptune.tools.bisect.undo`): each flag set of the build, each library axis
   (the old value built), each patch added or removed, the compilers and MPI (another
   environment of the partition that has the old ones), each environment variable of
   the run and each input parameter. A library's new version under the same name, an
   edited patch, the source, the launcher and the machine cannot be put back from a
   record: they are listed, not tested.
2. The *old* configuration (every dimension as the baseline's runs had it) and the *new*
   one (as the regressed run) are built and run ``repeats`` times interleaved: the new
   one must be slower than the old by more than the noise, or there is nothing to bisect
   here (what changed is then among what cannot be undone, or the machine).
3. A candidate applies a subset of the changes to the old configuration and runs
   interleaved with it; it "carries the regression" when it is slower than the old
   configuration by more than half of the new one's slowdown and more than the noise.
   The subsets are halved as :func:`apptune.tools.bisect.search.bisect_search` does (one
   build and run cycle per halving, then one to verify the culprit alone, then ddmin where
   only a set of changes together does it).
4. Every candidate is verified: one that computes wrong numbers is reported as such and
   never taken for a culprit by its time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ... import paths
from ...core.data import recipes
from ...core.data.site import load_site
from ...core.judge import baselines, changes
from ...core.run import localrun
from ...errors import ApptuneError
from ...figures import finite_median, fmt_pct
from ...history import records
from ...models import RunRecord
from .search import bisect_search
from .undo import Change, Here, dimensions
from .undo import config as undo_config

__all__ = ["Between", "Change", "between", "dimensions", "report_md"]

#: A candidate carries the regression when its slowdown against the old configuration is
#: beyond this share of the new configuration's slowdown.
SHARE = 0.5


@dataclass
class Between:
    """What ``bisect --between`` found."""

    app: str
    variant: str
    figure: str
    better: str
    changes: list[Change]
    #: Medians of the figure: old and new configurations, and each candidate measured.
    medians: dict = field(default_factory=dict)
    culprits: list[str] = field(default_factory=list)
    verdict: str = ""
    cycles: int = 0
    #: Distinct builds made (a configuration's build is kept and reused).
    builds: int = 0
    #: Wall time of the whole bisection, seconds (set by the command).
    seconds: float | None = None
    wrong: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _regressed(run_dir: Path, figure: str | None, test: str | None) -> tuple[RunRecord, str]:
    """The run record of ``run_dir`` that regressed (or the one named) and its figure."""
    found = []
    for c in records.cases(run_dir):
        r = c.record
        if not r or (test and test not in (c.test, r.variant, f"{r.environment}/{r.variant}")):
            continue
        figs = r.baseline.figures if r.baseline else {}
        bad = {n: j for n, j in figs.items() if j.verdict == "regression"}
        if figure and figure in figs:
            found.append((r, figure, 1e9))
        elif bad:
            n, j = max(bad.items(), key=lambda x: abs(x[1].change or 0))
            found.append((r, n, abs(j.change or 0)))
    if not found:
        raise ApptuneError(
            run_dir,
            None,
            "no result of this run regressed against its baseline"
            + (f" in figure {figure}" if figure else "")
            + (f" for {test}" if test else ""),
        )
    r, n, _ = max(found, key=lambda x: x[2])
    return r, n


def between(
    run_dir: Path,
    *,
    figure: str | None = None,
    test: str | None = None,
    repeats: int = 3,
    work: Path | None = None,
    config: str = paths.DEFAULT_CONFIG,
    max_cycles: int = 20,
    on_trial=None,
) -> Between:
    """Bisect the changes since the baseline of the run in ``run_dir`` (module docstring)."""
    run_dir = Path(run_dir)
    r, fig = _regressed(run_dir, figure, test)
    system = r.system or "local"
    _, b = baselines.load(system, r.app)
    entry = baselines.lookup(b, r.machine_id, r.environment, r.variant, r.tier)
    if entry is None or entry.provenance is None:
        raise ApptuneError(
            paths.baselines_file(system, r.app),
            "provenance",
            "no baseline entry with its runs' provenance for "
            f"{r.environment}/{r.variant} {r.tier}: "
            + (baselines.NO_PROVENANCE if entry else "record one first"),
        )
    recipe = recipes.load_recipe(r.app)
    site = load_site(r.environment, config, languages=recipe.build.languages)
    here = Here(recipe, r.build_variant or r.variant, site, config)
    chs = dimensions(entry.provenance, baselines.run_facts(r), here)
    spec = recipes.figure_specs(recipe).get(fig)
    better = spec.better if spec else "lower"
    res = Between(r.app, f"{r.environment}/{r.variant}", fig, better, chs)
    testable = [c.fact for c in chs if c.where]
    if not testable:
        res.verdict = "nothing that changed can be undone here: " + (
            changes.short([c.line for c in chs]) if chs else changes.NOTHING
        )
        return res
    work = Path(work or run_dir / "bisect-between")
    trial = _Trials(recipe, r, fig, chs, here, work, repeats, on_trial)
    new, old = trial.pair(set(), set(testable))
    res.medians = {"old": old, "new": new}
    res.cycles = trial.cycles
    gap = trial.slowdown(new, old)
    if gap is None or gap <= trial.noise(old):
        res.verdict = (
            "the new configuration is not slower than the old one here "
            f"({fmt_pct(gap, 'no figure')}): what carries the regression is not among the "
            "changes that can be undone"
        )
        res.notes, res.builds = trial.notes, len(trial.built)
        return res

    known: dict[frozenset, bool] = {}

    def carries(subset: list[str]) -> bool:
        if frozenset(subset) in known:  # the search may ask twice (its verification)
            return known[frozenset(subset)]
        if trial.cycles >= max_cycles:
            raise ApptuneError(None, "--max-cycles", f"{max_cycles} cycles spent")
        cand, base = trial.pair(set(), set(subset))
        res.medians[" + ".join(subset) or "(none)"] = cand
        s = trial.slowdown(cand, base)
        known[frozenset(subset)] = s is not None and s > max(SHARE * gap, trial.noise(base))
        return known[frozenset(subset)]

    try:
        found = bisect_search(testable, carries, noun="change")
        res.culprits = found["culprits"]
        res.notes += found["notes"]
        one = len(res.culprits) == 1
        lines = [c.line for c in chs if c.fact in res.culprits]
        res.verdict = (
            f"{lines[0]} carries the regression"
            if one
            else "no single change explains it; together: " + "; ".join(lines)
        )
    except ApptuneError as e:
        res.verdict = f"not found: {e}"
    res.cycles, res.wrong, res.notes = trial.cycles, trial.wrong, res.notes + trial.notes
    res.builds = len(trial.built)
    return res


class _Trials:
    """Builds (cached per plan) and interleaved runs of configurations."""

    def __init__(self, recipe, record, figure, chs, here: Here, work, repeats, on_trial):
        self.recipe, self.r, self.figure, self.chs = recipe, record, figure, chs
        self.here, self.work, self.repeats = here, Path(work), repeats
        self.on_trial, self.cycles, self.n = on_trial, 0, 0
        #: The builds made, by their directory (one per distinct plan and environment).
        self.built: set[Path] = set()
        self.wrong: list[str] = []
        self.notes: list[str] = []
        self.samples: dict[str, list[float]] = {}
        spec = recipes.figure_specs(recipe).get(figure)
        self.better = spec.better if spec else "lower"

    def _build(self, applied: set[str]):
        h = self.here
        plan, site, params = undo_config(self.chs, applied, h.plan, h.site, h)
        key = json.dumps([plan.to_dict(), site.environment], sort_keys=True).encode()
        stage = self.work / "builds" / hashlib.sha256(key).hexdigest()[:12]
        localrun.build_variant(self.recipe, plan, site, stage)
        self.built.add(stage)
        return stage, site, params

    def _run(self, label: str, built) -> float | None:
        stage, site, params = built
        self.n += 1
        ran = self.r.input
        changed = {k for k, v in params.items() if ran.get(k) != v}
        run = localrun.run_tier(
            self.recipe,
            self.r.tier,
            stage,
            self.work / "runs" / f"{self.n:03d}-{label}",
            site,
            overrides=params,
            changed_inputs=changed,
            placement=self.r.placement or "default",
        )
        if self.on_trial:
            self.on_trial(run.run_dir)
        if not run.ok:
            self.wrong.append(f"{label}: {run.summary}")
            return None
        v = run.figures.get(self.figure)
        self.samples.setdefault(label, []).append(v)
        return v

    def pair(self, base: set[str], cand: set[str]) -> tuple[float | None, float | None]:
        """Medians of ``cand`` and ``base`` (sets of changes made), runs interleaved."""
        self.cycles += 1
        label_c = "+".join(sorted(cand)).replace(" ", "_") or "old"
        label_b = "+".join(sorted(base)).replace(" ", "_") or "old"
        bc, bb = self._build(cand), self._build(base)
        xc, xb = [], []
        for _ in range(self.repeats):
            xb.append(self._run(label_b, bb))
            xc.append(self._run(label_c, bc))
        return finite_median(xc), finite_median(xb)

    def slowdown(self, x: float | None, ref: float | None) -> float | None:
        """How much worse ``x`` is than ``ref`` (positive: worse), relative."""
        if x is None or not ref:
            return None
        return (x - ref) / ref if self.better == "lower" else (ref - x) / ref

    def noise(self, ref: float | None) -> float:
        """The spread of the old configuration's runs so far, relative (at least 5 %)."""
        xs = [x for x in self.samples.get("old", []) if x is not None]
        if len(xs) < 2 or not ref:
            return baselines.FLOOR
        return max(baselines.FLOOR, (max(xs) - min(xs)) / abs(ref))


def report_md(res: Between) -> str:
    """What a person reads: the verdict, the changes tested and not, the medians."""
    unit = "" if res.better == "lower" else " (higher is better)"
    out = [
        f"# bisect --between: {res.app} {res.variant}, {res.figure}{unit}",
        "",
        f"**{res.verdict}** ({res.cycles} build+run cycle(s), {res.builds} build(s))",
        "",
        "| change since the baseline | tested |",
        "|---|---|",
    ]
    for c in res.changes:
        if c.part_of:
            tested = f"with {c.part_of}"
        elif not c.where:
            tested = c.why_not
        else:
            tested = "**carries it**" if c.fact in res.culprits else "yes"
            tested += f" (old: environment {c.environment})" if c.environment else ""
        out.append(f"| {c.line} | {tested} |")
    if res.medians:
        out += ["", "| configuration | median |", "|---|---|"]
        out += [f"| {k} | {v if v is not None else 'no value'} |" for k, v in res.medians.items()]
    if res.seconds is not None:
        out += ["", f"Took {res.seconds:.0f} s."]
    out += [f"- wrong numbers (never timed as a culprit): {w}" for w in res.wrong]
    out += [f"- {n}" for n in res.notes]
    return "\n".join(out)
