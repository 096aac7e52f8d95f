"""E-divisive means with a permutation test, on deterministic synthetic series."""

import numpy as np

from apptune.history import changepoint


def _noise(n, seed, sd=0.01):
    return np.random.default_rng(seed).normal(0.0, sd, n)


def test_a_step_is_found_where_it_is():
    x = 100 * (1 + _noise(30, 1))
    x[18:] *= 0.95
    cps = changepoint.detect(x)
    assert [c.index for c in cps] == [18]
    c = cps[0]
    assert c.p_value < changepoint.ALPHA and c.n_before == 18 and c.n_after == 12
    assert -0.07 < c.change < -0.03


def test_noise_alone_rarely_has_a_change_point():
    # alpha = 0.01 per test: about 1 noise-only series in 100 gets a (false) change point
    alarms = [seed for seed in range(50) if changepoint.detect(100 * (1 + _noise(30, seed)))]
    assert len(alarms) <= 2, alarms


def test_two_steps_and_segment_medians():
    x = np.r_[np.full(8, 10.0), np.full(8, 12.0), np.full(8, 9.0)] + _noise(24, 3, 0.05)
    cps = changepoint.detect(x)
    assert [c.index for c in cps] == [8, 16]
    assert (
        abs(cps[0].before - 10) < 0.1
        and abs(cps[0].after - 12) < 0.1
        and abs(cps[1].after - 9) < 0.1
    )


def test_short_or_flat_series_and_outliers():
    assert changepoint.detect([1.0] * 5) == []
    assert changepoint.detect([1.0] * 20) == []
    # one wild value (a neighbour's job) is not a change point
    x = 100 * (1 + _noise(25, 4))
    x[12] = 160
    assert changepoint.detect(x) == []


def test_deterministic():
    x = 100 * (1 + _noise(30, 5, 0.02))
    x[15:] *= 1.04
    assert changepoint.detect(x) == changepoint.detect(x)


def test_robust_sigma_ignores_a_step():
    x = np.r_[np.full(20, 1.0), np.full(20, 2.0)] + _noise(40, 6, 0.01)
    assert 0.005 < changepoint.robust_sigma(x) < 0.02


def test_a_large_step_needs_fewer_runs_after_it_than_a_small_one():
    """The permutation test cannot show a step with 4 runs after it in 12 (its p-value
    cannot go below 2 / C(12, 4)); a step that large needs fewer runs: the runs after it
    must each lie far beyond the noise before it, and the farther they lie, the fewer."""
    before = 1.0 + 0.05 * np.array([0.3, -1.0, 0.8, -0.2, 1.2, -0.6, 0.1, -0.9])
    for after in (4, 3):
        x = np.r_[before, np.full(after, 15.0) * (1 + 0.01 * np.arange(after))]
        (c,) = changepoint.detect(x)
        assert (c.index, c.n_after) == (8, after) and c.p_value < changepoint.ALPHA
        assert 13 < c.after / c.before < 16
    # two runs are not a step, however far (a night or two at another level)
    assert changepoint.detect(np.r_[before, 15.0, 15.1]) == []
    # runs 30 % up: 3 are not enough, 4 are
    assert changepoint.detect(np.r_[before, np.full(3, 1.3)]) == []
    assert [c.index for c in changepoint.detect(np.r_[before, np.full(4, 1.3)])] == [8]
    # a step smaller than STEP_MIN is left to the permutation test
    assert changepoint.tail_step(np.r_[before, np.full(5, 1.2)]) is None


def test_noise_alone_has_no_large_step_at_its_end():
    """Heavy-tailed noise (a VM's stalled runs) without a step: no series of 12 gets a
    step at its end, whatever its noise."""
    rng = np.random.default_rng(7)
    alarms = 0
    for sd in (0.02, 0.3, 1.0):
        for _ in range(300):
            x = np.exp(sd * rng.standard_t(3, 12))
            alarms += changepoint.tail_step(x) is not None
    assert alarms <= 2, alarms
