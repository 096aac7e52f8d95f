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
