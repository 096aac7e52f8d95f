"""Inputs, malformed data files and atomic writes (baselines: tests/test_baselines.py)."""

import os

import pytest

from apptune import yamlio
from apptune.core.data import inputs
from apptune.core.judge import baselines
from apptune.errors import ApptuneError


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


def test_malformed_baseline_and_ladder_files(toy_root):
    from apptune.core.data import recipes

    (toy_root / "reference/baselines/local/toy.yaml").write_text(
        "app: toy\nsystem: local\nthresholds:\n\t- x\n"
    )
    with pytest.raises(ApptuneError) as e:
        baselines.load("local", "toy")
    assert "baselines/local/toy.yaml" in str(e.value) and "malformed YAML" in str(e.value)
    (toy_root / "site-config/flag-ladders.yaml").write_text(
        "families:\n  gnu:\n    tuned: {cflags: -O3}\n"
    )
    with pytest.raises(ApptuneError) as e:
        recipes.load_ladders()
    assert "flag-ladders.yaml" in str(e.value) and "families.gnu.tuned.cflags" in str(e.value)
