"""The build axes in the report: the variants that differ in one axis alone side by side, each
option's figures with their ratio to the recipe's default option; unverified runs get no
ratio, skipped options are not measured with their reason. GROMACS's recipe (its SIMD, FFT
and fault axes) is the example."""

import pytest
from test_report_screen import _rendered, row, summarised

from apptune.report import axes

pytestmark = pytest.mark.unit


def md_row(variant, ns_per_day, env="gnu", ok=True):
    r = row(variant, 100.0 / ns_per_day, env=env, app="gromacs", ok=ok)
    r.figures["ns_per_day"] = ns_per_day
    return r


def tables(rows, skip=()):
    s = summarised(rows, skip=skip)
    return {(t["axis"], t["context"]): t for t in axes.axis_tables(s["apps"], s["skipped"])}


def test_one_table_per_axis_with_ratios_over_the_default_option():
    rows = [
        md_row("tuned", 10.0),
        md_row("tuned+simd=AVX_512", 12.0),
        md_row("tuned+simd=None", 4.0),
        md_row("tuned+fft=fftpack", 8.0),
        md_row("tuned+fault=wrong_k", 10.0, ok=False),
        md_row("tuned+fft=mkl", 11.0, env="gnu-mkl"),  # alone in its environment
        md_row("tuned", 9.0, env="llvm"),
    ]
    t = tables(rows)
    assert sorted(t) == [("fault", "gnu/tuned"), ("fft", "gnu/tuned"), ("simd", "gnu/tuned")]
    simd = t["simd", "gnu/tuned"]
    assert [c["option"] for c in simd["columns"]] == ["AVX2_256", "AVX_512", "None"]
    assert simd["reference"] == "AVX2_256" == simd["default"]
    ratios = {c["option"]: c["ratios"] for c in simd["columns"]}
    assert ratios["AVX_512"]["ns_per_day"] == pytest.approx(1.2)  # higher is better
    assert ratios["None"]["wall_time"] == pytest.approx(0.4)  # lower is better: t0 / t
    assert ratios["AVX2_256"]["ns_per_day"] == pytest.approx(1.0)
    assert t["fft", "gnu/tuned"]["columns"][1]["ratios"]["ns_per_day"] == pytest.approx(0.8)
    # a wrong answer computed as fast is no ratio
    (_, wrong) = t["fault", "gnu/tuned"]["columns"]
    assert (wrong["option"], wrong["verified"], wrong["ratios"]) == ("wrong_k", False, {})


def test_the_other_axes_options_keep_tables_apart_and_an_unverified_default_is_no_reference():
    rows = [
        md_row("tuned", 10.0, ok=False),
        md_row("tuned+simd=None", 4.0),
        md_row("tuned+simd=AVX_512", 12.0),
        md_row("tuned+fft=fftpack+simd=None", 3.0),
        md_row("tuned+fft=fftpack", 8.0),
    ]
    t = tables(rows)
    simd = t["simd", "gnu/tuned"]
    assert simd["reference"] == "AVX_512"  # the first option that verified, in the axis's order
    assert [c["option"] for c in simd["columns"]] == ["AVX2_256", "AVX_512", "None"]
    assert simd["columns"][0]["ratios"] == {}
    assert simd["columns"][2]["ratios"]["ns_per_day"] == pytest.approx(4 / 12)
    # with fft=fftpack held: its own table
    other = t["simd", "gnu/tuned+fft=fftpack"]
    assert other["columns"][1]["ratios"]["ns_per_day"] == pytest.approx(3 / 8)
    # fft across simd=None: fftw3 (default) against fftpack
    assert t["fft", "gnu/tuned+simd=None"]["columns"][1]["ratios"]["ns_per_day"] == 0.75


def test_a_skipped_option_is_not_measured_with_its_reason_and_both_files_show_the_axes(tmp_path):
    why = "simd=AVX_512 needs CPU flag avx512f, which this node's CPU does not have"
    skip = [
        {
            "test": "GROMACSCheck %tier=ci %build.variant=tuned+simd=AVX_512",
            "environment": "gnu",
            "reason": why,
            "app": "gromacs",
            "tier": "ci",
        }
    ]
    rows = [md_row("tuned", 10.0), md_row("tuned+simd=None", 4.0)]
    t = tables(rows, skip)["simd", "gnu/tuned"]
    assert [c["option"] for c in t["columns"]] == ["AVX2_256", "AVX_512", "None"]
    assert t["columns"][1] == {"option": "AVX_512", "not_measured": why}
    s = summarised(rows, skip=skip)
    s["axes"] = axes.axis_tables(s["apps"], s["skipped"])
    md, html = _rendered(tmp_path, s, rows)
    assert "## Build axes" in md
    assert "### gromacs/ci: simd, gnu/tuned (ratios against simd=AVX2_256)" in md
    assert "| ns_per_day (ns/day, primary) | 10 ×1.00 | not measured | 4 ×0.40 |" in md, md
    assert f"- simd=AVX_512: not measured: {why}" in md
    assert 'id="build-axes"' in html and "simd=AVX_512" in html and "×0.40" in html


def test_installs_and_recipes_without_axes_give_no_table():
    rows = [row("baseline", 10.0), row("tuned", 8.0)]  # toyapp: no recipe, no axes
    assert axes.axis_tables(summarised(rows)["apps"]) == []
    of = [row("debian", 10.0, app="openfoam"), row("tuned", 8.0, app="openfoam")]
    assert axes.axis_tables(summarised(of)["apps"]) == []
