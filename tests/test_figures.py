"""The helpers tune, bisect and the report share for measured figures and file names."""

import math

from apptune import paths
from apptune.figures import finite_median, fmt_figure, fmt_seconds


def test_the_median_leaves_out_what_is_not_a_finite_number():
    assert finite_median([3.0, None, math.nan, 1.0, math.inf, 2.0, "x"]) == 2.0
    assert finite_median([None, math.nan]) is None


def test_a_figure_prints_with_four_significant_digits_or_the_missing_mark():
    assert fmt_figure(1234.5678) == "1235" and fmt_figure(0.000123456) == "0.0001235"
    assert fmt_figure(7) == "7" and fmt_figure(None) == "n/a" and fmt_figure(None, "–") == "–"


def test_a_slug_is_a_stable_prefix_of_the_texts_sha256():
    assert paths.slug("tuned+blas=mkl") == paths.slug("tuned+blas=mkl", 10)
    assert len(paths.slug("x", 8)) == 8 and paths.slug("a") != paths.slug("b")
    assert paths.slug("") == "e3b0c44298"  # sha256 of the empty text


def test_a_path_in_a_message_is_relative_to_the_tree_and_a_link_walks_up(tmp_path, monkeypatch):
    (tmp_path / "build-recipes").mkdir()
    monkeypatch.setenv("APPTUNE_ROOT", str(tmp_path))
    assert paths.rel(tmp_path / "reference" / "toy" / "ci.yaml") == "reference/toy/ci.yaml"
    assert paths.rel("/elsewhere/x.yaml") == "/elsewhere/x.yaml"
    assert paths.rel(None) == paths.rel("") == ""
    run, hist = tmp_path / "runs" / "r1", tmp_path / "history" / "t.png"
    assert paths.rel(hist, run, up=True) == "../../history/t.png"
    assert paths.rel(hist, run) == str(hist)


def test_a_duration_reads_in_at_most_two_units_an_estimate_to_the_minute():
    """The one way a duration is written: the plan's measured times, a build's estimate and
    the progress line's clock."""
    said = [fmt_seconds(s) for s in (None, 0, 0.53, 5.25, 40.4, 59.6, 60, 185, 300, 5460, 7200)]
    assert said == [
        "-", "0 s", "0.53 s", "5.25 s", "40 s", "1 min", "1 min", "3 min 05 s", "5 min",
        "1 h 31 min", "2 h",
    ]  # fmt: skip
    assert fmt_seconds(float("nan"), "n/a") == "n/a"
    estimates = [fmt_seconds(s, approx=True) for s in (5.2, 499, 3000, 3599, 9300)]
    assert estimates == ["~5 s", "~8 min", "~50 min", "~1 h", "~2 h 35 min"]
