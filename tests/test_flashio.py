"""FLASH-IO (build-recipes/flashio.yaml): its own fatal messages are one line, and the
inputs agree with the builds their tiers name."""

from pathlib import Path

import pytest
import yaml

from apptune.core import inputs, recipes, run

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.unit

# FLASH-IO's check() as it ran here: a scratch directory that vanished under the run (or a
# prefix longer than FLASH-IO's 128 characters, cut into a directory that does not exist)
ABORT = """--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode -1.
--------------------------------------------------------------------------
 nfmpi_createSpecified netCDF file does not exist.
 nfmpi_createSpecified netCDF file does not exist.
"""


def test_a_failed_create_is_one_line_naming_the_call_and_the_error(tmp_path):
    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    (tmp_path / "rfm_job.out").write_text(ABORT)
    said = run.app_error(recipe, tmp_path, ["rfm_job.out", "rfm_job.err"])
    assert said == "FLASH-IO: nfmpi_create: Specified netCDF file does not exist."


def test_a_failed_call_with_a_label_is_one_line(tmp_path):
    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    (tmp_path / "rfm_job.out").write_text(" In nfmpi_wait_all req 7NetCDF: Numeric conversion\n")
    said = run.app_error(recipe, tmp_path, ["rfm_job.out"])
    assert said == "FLASH-IO: In nfmpi_wait_all req 7NetCDF: Numeric conversion"
    (tmp_path / "rfm_job.out").write_text(" number of guards      :             4\n")
    assert run.app_error(recipe, tmp_path, ["rfm_job.out"]) is None


def test_each_tier_runs_the_block_size_its_input_says():
    """The input's zones (what the free-space check assumes, and what the reference's
    zones_x verifies) is the zones axis of every variant the tier builds."""
    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    for tier, spec in recipe.tiers.items():
        _, spec_in = inputs.load_input("flashio", tier)
        zones = spec_in.parameters["zones"]
        for variants in spec.variants.values():
            for v in variants:
                axes = dict(p.split("=", 1) for p in v.split("+")[1:] if "=" in p)
                assert axes.get("zones", recipe.defaults["zones"]) == str(zones), (tier, v)


def test_the_planted_tier_holds_the_ci_tiers_input_and_values():
    """The planted tier is the ci tier's input for another build: its reference and input
    may not drift from the ci tier's (re-bless both together)."""

    def load(path):
        return yaml.safe_load((REPO / path).read_text())

    ci, planted = load("reference/flashio/ci.yaml"), load("reference/flashio/planted.yaml")
    assert planted["fields"] == ci["fields"]
    assert list(planted["xfail"]) == ["gnu/baseline+data=planted"] and "xfail" not in ci
    ci_in, planted_in = (
        load("inputs/flashio/ci/input.yaml"),
        load("inputs/flashio/planted/input.yaml"),
    )
    assert planted_in == ci_in
