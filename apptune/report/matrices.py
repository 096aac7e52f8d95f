"""The variant matrix of each application and tier: its figures per variant, the ratios
to the reference variant and the best correct variant per figure, ranked only from runs
that can be ranked (graded clean, and timed over long enough to time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.data import recipes
from ..errors import ApptuneError
from .values import number_or_none, variant_key

if TYPE_CHECKING:
    from .row import Row

__all__ = ["MIN_TIMED_S", "TIE", "matrices_of", "unrankable"]


def matrices_of(rows: list[Row]) -> list[dict]:
    apps = []
    for app, tier in sorted({(r.app, r.tier) for r in rows}):
        try:
            recipe = recipes.load_recipe(app)
            figures = recipes.figure_specs(recipe)
            primary, installs = recipe.run.primary, set(recipe.installs)
            scratch = getattr(recipe.run, "scratch", None)
            reads = scratch.reads if scratch else True
        except ApptuneError:
            figures, primary, installs = dict(recipes.COMMON_FIGURES), "wall_time", set()
            reads = True
        sel = sorted(
            [r for r in rows if r.app == app and r.tier == tier],
            key=lambda r: (r.environment, r.variant),
        )
        present = {n for r in sel for n, v in r.figures.items() if v is not None}
        names = [n for n in figures if n in present] + sorted(present - set(figures))
        better = {n: (figures[n].better if n in figures else "higher") for n in names}
        units = {n: (figures[n].unit if n in figures else "") for n in names}
        # ratios are over gnu/baseline, else over the distribution's build (an install: the
        # build every tuned one must beat), else over the first verified row
        verified = [r for r in sel if r.verified]
        ref = next(
            (r for r in verified if (r.environment, r.variant) == ("gnu", "baseline")),
            next((r for r in verified if r.variant in installs), next(iter(verified), None)),
        )
        best, ties, unranked = {}, {}, {}
        for n in names:
            cand = [r for r in sel if r.verified and number_or_none(r.figures.get(n)) is not None]
            if recipes.is_energy_figure(n):  # modelled energy ranks nothing
                cand = [r for r in cand if _measured(r)]
            why = {variant_key(r): w for r in cand if (w := unrankable(r, n, figures.get(n)))}
            cand = [r for r in cand if variant_key(r) not in why]
            if why:
                unranked[n] = why
            if cand:
                pick = max if better[n] == "higher" else min
                top = pick(cand, key=lambda r: r.figures[n])
                best[n] = variant_key(top)
                tied = [variant_key(r) for r in cand if r is not top and _tied(top, r, n)]
                if tied:
                    ties[n] = tied
        for r in sel:
            r.scratch_reads = reads  # what the file system line may say of its reads
            r.speedup = {}
            for n in names:
                v, b = (
                    number_or_none(r.figures.get(n)),
                    number_or_none(ref.figures.get(n)) if ref else None,
                )
                # a ratio only between runs that can be ranked: clean, and long enough to time
                comparable = not any(variant_key(x) in unranked.get(n, {}) for x in (r, ref) if x)
                if v and b and comparable:
                    r.speedup[n] = v / b if better[n] == "higher" else b / v
            r.baseline_verdicts = (
                {n: c.verdict for n, c in r.baseline.figures.items()} if r.baseline else {}
            )
        # the input parameters: those every variant shares once, each variant's own in its column
        given = [r.input or {} for r in sel]
        common = {
            k: v for k, v in given[0].items() if all(g.get(k, v) == v and k in g for g in given)
        }
        for r, g in zip(sel, given, strict=True):
            r.input_own = {k: v for k, v in g.items() if k not in common}
        # energy figures that no meter measured here: shown, labelled, never judged
        modelled = sorted(
            n for n in names if recipes.is_energy_figure(n) and not all(_measured(r) for r in sel)
        )
        apps.append(
            {
                "app": app,
                "tier": tier,
                "figures": names,
                "units": units,
                "better": better,
                "modelled": modelled,
                "primary": primary,
                "rows": sel,
                "best": best,
                "ties": ties,
                "unranked": unranked,
                "input": common,
                "inputs_differ": any(r.input_own for r in sel),
                "reference_variant": variant_key(ref) if ref else None,
            }
        )
    return apps


#: A figure timed over less than this ranks nothing: at a few milliseconds the clock, the
#: scheduler and the page cache decide more of it than the build does.
MIN_TIMED_S = 0.1


def unrankable(row: Row, n: str, spec) -> str | None:
    """Why a verified row's figure ``n`` ranks nothing (None: it ranks): its run was not
    graded clean (other work on the machine), or the figure was timed over less than
    :data:`MIN_TIMED_S` (the recipe's ``timed_over`` field; a time figure's own value)."""
    q = row.quality
    if not (q and q.grade == "clean"):
        return (q.grade if q and q.grade else "unmeasured") + " run"
    timed = None
    if spec is not None and getattr(spec, "timed_over", None):
        timed = number_or_none((row.values or {}).get(spec.timed_over))
    elif spec is not None and spec.unit == "s" and not getattr(spec, "per", None):
        timed = number_or_none(row.figures.get(n))
    if timed is not None and timed < MIN_TIMED_S:
        return f"timed over {timed:.2g} s (less than {MIN_TIMED_S:g} s)"
    return None


def _measured(row: Row) -> bool:
    """Whether a row's energy was measured (modelled energy is shown, never ranked)."""
    return row.energy is not None and row.energy.trust == "measured"


#: Two variants whose figures differ by less than this (or than twice the larger noise of
#: the two: its baseline's noise, or half the spread of its repeats) share the top.
TIE = 0.02


def _noise_of(r: Row, n: str) -> float:
    base = r.baseline.figures.get(n) if r.baseline else None
    spread = (r.spread or {}).get(n)
    return max((base.noise if base else None) or 0.0, (spread or 0.0) / 2)


def _tied(a: Row, b: Row, n: str) -> bool:
    """Whether b's figure ``n`` is within the noise of a's (a ranking cannot tell them apart)."""
    va, vb = number_or_none(a.figures.get(n)), number_or_none(b.figures.get(n))
    if not va or vb is None:
        return False
    tol = max(TIE, 2 * max(_noise_of(a, n), _noise_of(b, n)))
    return abs(va - vb) / abs(va) < tol
