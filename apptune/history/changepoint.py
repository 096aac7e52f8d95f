"""Change points in a performance series: E-divisive means with a permutation test.

The method of Matteson & James (2014, "A nonparametric approach for multiple
change point analysis of multivariate data"), which Apache Otava (formerly
Hunter) applies to performance histories: split a series where the energy
distance between the two sides, weighted by their sizes, is largest; keep the
split only if a permutation test says such a split is unlikely in a series
without a change (p < ``alpha``); repeat on both sides.  It makes no
assumption about the shape of the noise (timings on a shared machine are
skewed and have outliers), and its threshold comes from the series itself:
nothing is tuned per figure.

Pure numpy; deterministic (the permutations are seeded by the segment).
Why this and not a library: docs/regressions.md ("The detector").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Significance level of the permutation test.
ALPHA = 0.01
#: Permutations per test (the smallest p-value is 1 / (PERMUTATIONS + 1)).
PERMUTATIONS = 499
#: Fewest points on each side of a change point.
MIN_SIZE = 3
#: A step at the end of a series (:func:`tail_step`): the largest chance, over every
#: length of the tail tried, that runs without a change lie as far from the runs before
#: them, by Cantelli's inequality ...
STEP_ALPHA = 1e-3
#: ... the smallest relative step it names ...
STEP_MIN = 0.25
#: ... and the confidence of the upper bound of the noise before it (95 %: one-sided
#: normal quantile).
STEP_Z = 1.6449


@dataclass(frozen=True)
class ChangePoint:
    #: Index of the first point after the change.
    index: int
    #: Permutation-test p-value of the split when it was found.
    p_value: float
    #: Medians of the segments on either side (bounded by the neighbouring change points).
    before: float
    after: float
    n_before: int
    n_after: int

    @property
    def change(self) -> float | None:
        """Relative change of the median, (after - before) / before."""
        return (self.after - self.before) / abs(self.before) if self.before else None


def _q_stats(d: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau) for every split tau of a segment whose pairwise distances are ``d``
    (n x n, or a stack of them: ... x n x n).

    Q = m k / (m + k) * (2 mean|X-Y| - mean|X-X'| - mean|Y-Y'|), with X the first
    m = tau points and Y the other k; splits leaving fewer than ``min_size``
    points on a side are -inf.
    """
    n = d.shape[-1]
    p = np.zeros(d.shape[:-2] + (n + 1, n + 1))
    p[..., 1:, 1:] = d.cumsum(-2).cumsum(-1)
    tau = np.arange(n + 1)
    q = np.full(d.shape[:-2] + (n + 1,), -np.inf)
    ok = (tau >= min_size) & (n - tau >= min_size)
    t = tau[ok]
    m, k = t.astype(float), (n - t).astype(float)
    left = p[..., t, t]
    cross = p[..., t, n] - left
    right = p[..., n, n][..., None] - left - 2 * cross
    e = 2 * cross / (m * k) - left / (m * (m - 1)) - right / (k * (k - 1))
    q[..., ok] = m * k / n * e
    return q


def _best_split(
    x: np.ndarray, min_size: int, permutations: int, seed: int, alpha: float
) -> tuple[int, float]:
    """The best split of ``x`` and its permutation p-value.

    Permutations run in batches and stop early once the split cannot reach
    p < ``alpha`` (the p-value returned is then a lower bound, >= ``alpha``).
    """
    d = np.abs(x[:, None] - x[None, :])
    q = _q_stats(d, min_size)
    tau = int(np.argmax(q))
    observed = q[tau]
    if not np.isfinite(observed) or observed <= 0:
        return tau, 1.0
    rng = np.random.default_rng(seed)
    n = len(x)
    exceed = done = 0
    enough = alpha * (permutations + 1)
    while done < permutations and exceed < enough:
        batch = min(100, permutations - done)
        perms = np.argsort(rng.random((batch, n)), axis=1)
        dp = d[perms[:, :, None], perms[:, None, :]]
        exceed += int((_q_stats(dp, min_size).max(axis=1) >= observed * (1 - 1e-12)).sum())
        done += batch
    return tau, (exceed + 1) / (done + 1)


def detect(
    values,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> list[ChangePoint]:
    """Significant change points of a series, in order.

    Bisection: a segment is split at its best split when the permutation test
    gives p < ``alpha``; both sides are searched again.  Each change point then
    gets the medians of its neighbouring segments.
    """
    x = np.asarray(values, dtype=float)
    found: list[tuple[int, float]] = []
    todo = [(0, len(x))]
    while todo:
        a, b = todo.pop()
        if b - a < 2 * min_size:
            continue
        tau, p = _best_split(x[a:b], min_size, permutations, seed + 7919 * a + b, alpha)
        if p < alpha:
            found.append((a + tau, p))
            todo += [(a, a + tau), (a + tau, b)]
    found.sort()
    step = tail_step(x[found[-1][0] if found else 0 :], min_size, alpha)
    if step is not None:
        found.append(((found[-1][0] if found else 0) + step[0], step[1]))
    bounds = [0] + [i for i, _ in found] + [len(x)]
    out = []
    for j, (i, p) in enumerate(found):
        lo, hi = bounds[j], bounds[j + 2]
        out.append(
            ChangePoint(
                index=i,
                p_value=p,
                before=float(np.median(x[lo:i])),
                after=float(np.median(x[i:hi])),
                n_before=i - lo,
                n_after=hi - i,
            )
        )
    return out


def tail_step(x: np.ndarray, min_size: int = MIN_SIZE, alpha: float = ALPHA):
    """A large step at the end of ``x`` that the permutation test cannot show for want of
    runs after it: ``(index of its first run, bound of its p-value)``, or None.

    The permutation test cannot give p < ``alpha`` with few runs after a step, however
    large (with 4 of 12 it cannot go below 2 / C(12, 4) = 0.004, and its estimate
    scatters around that), so the runs after a step must be many. Here the number needed
    scales with the step's size: for each tail of ``k`` >= ``min_size`` runs, on logs, each
    of which lies beyond every run before it on the same side, the least distance ``g`` of
    them from the mean of the runs before, in units of their standard deviation (its upper
    95 % bound, at least 1 %), bounds the chance that ``k`` runs without a change all lie
    that far: ``(1 / (1 + g^2)) ** k`` (Cantelli's inequality, whatever the distribution of
    the noise). Over the tails tried (Bonferroni) it must stay below ``alpha`` x
    ``STEP_ALPHA`` / ``ALPHA``, and the step be at least ``STEP_MIN``: in a series of 12
    runs, 3 runs after it suffice when each lies beyond 4.3 such standard deviations, 4
    beyond 2.9, 5 beyond 2.2; a smaller step needs as many runs as the permutation test."""
    n = len(x)
    if n < 2 * min_size or np.any(x <= 0):
        return None
    y = np.log(x)
    tries = list(range(min_size, n - min_size + 1))
    best = None
    for k in tries:
        before, after = y[: n - k], y[n - k :]
        if not (after.min() > before.max() or after.max() < before.min()):
            continue
        m = len(before)
        chi2 = (m - 1) * (1 - 2 / (9 * (m - 1)) - STEP_Z * np.sqrt(2 / (9 * (m - 1)))) ** 3
        sd = max(float(np.std(before, ddof=1)) * np.sqrt((m - 1) / max(chi2, 1e-9)), 0.01)
        g = float(np.abs(after - before.mean()).min()) / sd
        p = (1 / (1 + g**2)) ** k * len(tries)
        big = abs(np.expm1(np.median(after) - np.median(before))) >= STEP_MIN
        if big and p < alpha * STEP_ALPHA / ALPHA and (best is None or p < best[1]):
            best = (n - k, p)
    return best


def robust_sigma(values) -> float:
    """Point-to-point noise of a series, insensitive to steps.

    1.4826 * median |x[i] - x[i-1]| / sqrt 2."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return float("nan")
    return float(1.4826 * np.median(np.abs(np.diff(x))) / np.sqrt(2))
