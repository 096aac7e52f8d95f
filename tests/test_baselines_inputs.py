"""Baselines (ReFrame references, verdicts, atomic update), inputs and atomic writes."""
import os

import pytest

from apptune import baselines, inputs, yamlio
from apptune.errors import ApptuneError
from apptune.models import BaselineFile, Figure

FIGS = {"HPL": Figure(field="HPL_Tflops", unit="Gflop/s", better="higher", scale=1000),
        "lat": Figure(field="lat", unit="us", better="lower")}


def bfile(**over):
    data = {"app": "hpcc", "system": "local",
            "thresholds": {"default": {"regression": 0.2}, "lat": {"regression": 0.5}},
            "entries": [{"environment": "gnu", "variant": "tuned", "tier": "ci", "recorded": "t",
                         "figures": {"HPL": 40.0, "lat": 1.0}}]}
    data.update(over)
    return BaselineFile.model_validate(data)


def test_reframe_reference_bounds_follow_direction():
    b = bfile()
    e = baselines.lookup(b, "gnu", "tuned", "ci")
    ref = baselines.reframe_reference(b, e, FIGS)
    assert ref == {"*": {"HPL": (40.0, -0.2, None, "Gflop/s"), "lat": (1.0, None, 0.5, "us")}}
    assert baselines.reframe_reference(b, baselines.lookup(b, "llvm", "tuned", "ci"), FIGS) == {}


def test_verdicts():
    b = bfile()
    e = baselines.lookup(b, "gnu", "tuned", "ci")
    c = baselines.compare(b, e, FIGS, {"HPL": 30.0, "lat": 1.2})
    assert c["HPL"]["verdict"] == "regression" and c["HPL"]["change"] == pytest.approx(-0.25)
    assert c["lat"]["verdict"] == "within threshold"
    c = baselines.compare(b, e, FIGS, {"HPL": 50.0, "lat": 2.0})
    assert c["HPL"]["verdict"] == "improvement" and c["lat"]["verdict"] == "regression"


def test_threshold_file_needs_default(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text("app: hpcc\nsystem: local\nthresholds: {HPL: {regression: 0.1}}\n")
    with pytest.raises(ApptuneError) as e:
        yamlio.load_model(f, BaselineFile)
    assert "thresholds" in str(e.value) and "default" in str(e.value)


def test_update_merges_only_verified_results(toy_root):
    results = [
        {"app": "toy", "environment": "gnu", "variant": "tuned", "tier": "ci",
         "verification": {"ok": True}, "figures": {"rate": 10.0, "wall_time": 1.0}},
        {"app": "toy", "environment": "gnu", "variant": "baseline", "tier": "ci",
         "verification": {"ok": False}, "figures": {"rate": 99.0}},
    ]
    f = baselines.update("local", "toy", results)
    _, b = baselines.load("local", "toy")
    assert [(e.variant, e.figures["rate"]) for e in b.entries] == [("tuned", 10.0)]
    results[0]["figures"]["rate"] = 11.0
    baselines.update("local", "toy", results)
    _, b = baselines.load("local", "toy")
    assert len(b.entries) == 1 and b.entries[0].figures["rate"] == 11.0
    assert f.read_text().startswith("# Performance baselines")


def test_atomic_write_keeps_old_content_on_failure(tmp_path, monkeypatch):
    f = tmp_path / "ref.yaml"
    yamlio.atomic_write_text(f, "old\n")

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        yamlio.atomic_write_text(f, "new\n")
    assert f.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["ref.yaml"]


def test_nightly_n_is_computed_from_memory():
    _, spec = inputs.load_input("hpcc", "nightly")
    p = inputs.resolve_parameters(spec, ranks=4, mem_per_node=16 * 2**30)
    # 25 % of 16 GiB as N*N doubles, rounded down to a multiple of NB=192
    assert p["N"] == 23040 and p["N"] % 192 == 0
    assert (p["P"], p["Q"]) == (2, 2)
    p = inputs.resolve_parameters(spec, ranks=6, mem_per_node=64 * 2**30)
    assert p["N"] > 40000 and (p["P"], p["Q"]) == (2, 3)


def test_missing_input_tier():
    with pytest.raises(ApptuneError) as e:
        inputs.load_input("hpcc", "weekly")
    assert "input.yaml" in str(e.value) and "weekly" in str(e.value)


def test_update_takes_median_of_repeats_and_widens_noisy_thresholds(toy_root):
    def res(rate, run):
        return {"app": "toy", "environment": "gnu", "variant": "tuned", "tier": "ci", "run_id": run,
                "verification": {"ok": True}, "figures": {"rate": rate, "wall_time": 2.0}}
    baselines.update("local", "toy", [res(10.0, "a"), res(14.0, "b"), res(11.0, "c")])
    _, b = baselines.load("local", "toy")
    assert b.entries[0].figures["rate"] == 11.0
    # spread (14-10)/11 = 36 % -> threshold 3 x 0.36 = 1.09, capped at 0.8; wall_time had no spread
    assert b.thresholds["rate"].regression == 0.8
    assert "wall_time" not in b.thresholds
    assert "median of 3 run(s)" in b.entries[0].recorded


def test_update_leaves_out_figures_that_are_zero_at_the_outputs_resolution(toy_root):
    res = {"app": "toy", "environment": "gnu", "variant": "tuned", "tier": "ci", "run_id": "a",
           "verification": {"ok": True}, "figures": {"rate": 10.0, "fft": 0.0}}
    baselines.update("local", "toy", [res, dict(res, run_id="b")])
    _, b = baselines.load("local", "toy")
    assert b.entries[0].figures == {"rate": 10.0}


def test_malformed_baseline_and_ladder_files(toy_root):
    from apptune import recipes
    (toy_root / "reference/baselines/local/toy.yaml").write_text("app: toy\nsystem: local\nthresholds:\n\t- x\n")
    with pytest.raises(ApptuneError) as e:
        baselines.load("local", "toy")
    assert "baselines/local/toy.yaml" in str(e.value) and "malformed YAML" in str(e.value)
    (toy_root / "site-config/flag-ladders.yaml").write_text("families:\n  gnu:\n    tuned: {cflags: -O3}\n")
    with pytest.raises(ApptuneError) as e:
        recipes.load_ladders()
    assert "flag-ladders.yaml" in str(e.value) and "families.gnu.tuned.cflags" in str(e.value)


def test_lower_is_better_thresholds_may_exceed_100_percent(toy_root):
    def res(lat, run):
        return {"app": "toy", "environment": "gnu", "variant": "tuned", "tier": "ci", "run_id": run,
                "verification": {"ok": True}, "figures": {"rate": 10.0, "lat": lat}}
    baselines.update("local", "toy", [res(0.3, "a"), res(0.6, "b"), res(0.35, "c")], figures=FIGS)
    _, b = baselines.load("local", "toy")
    # spread (0.6-0.3)/0.35 = 0.86 -> 3 x 0.86 = 2.57 (< cap 3.0 for lower-is-better)
    assert b.thresholds["lat"].regression == 2.57
