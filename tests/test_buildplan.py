"""The build plan is typed from ``recipes.resolve`` until it is written
(:mod:`apptune.models.buildplan`), and it writes what a build has always read: ``plan.json``
byte for byte. The build step reads it, the build cache keys the build by it, and a stage
that holds the same plan is kept rather than built again.

``tests/data/plans/`` holds the ``plan.json`` that ``apptune sensitivity hpcc`` wrote for
HPCC's gnu baseline and for its planted fault ``stream-triad-bound`` when the plan was a dict
its callers edited. A change to HPCC's recipe or patches, to the gnu ladders or to the
fault's patch changes them: write them again (``plan.to_json()``) once the difference is
seen to be that change's."""

import json

import pytest
from conftest import REPO, gnu_mpi_toolchain
from pydantic import ValidationError

from apptune.core.builds import buildcache, sources, steps
from apptune.core.data import faults, recipes
from apptune.core.data import site as site_config
from apptune.tools.sensitivity import battery

PLANS = REPO / "tests" / "data" / "plans"
FAULT = "stream-triad-bound"


class _Fetched(Exception):
    """The build stops where it would fetch the source: plan.json is written by then."""


@pytest.fixture
def written(tmp_path, monkeypatch) -> dict[str, str]:
    """The ``plan.json`` the sensitivity battery of HPCC writes for its clean build and for
    one fault (gnu, baseline), through ``localrun.build_variant``."""

    def fetch(recipe):
        raise _Fetched

    monkeypatch.setattr(sources, "fetch", fetch)
    site = site_config.Site("gnu", gnu_mpi_toolchain(), {}, "local", "local", {}, system="test")
    b = battery.Battery("hpcc", work=tmp_path / "w", site=site, log=lambda m: None)
    for name, patch in (("clean", None), (FAULT, f"{FAULT}.patch")):
        with pytest.raises(_Fetched):
            b.build(name, patch)
    return {n: (tmp_path / "w/builds" / n / "plan.json").read_text() for n in ("clean", FAULT)}


def _key(text: str) -> str:
    """The build cache's key of a build of HPCC from the plan.json ``text``."""
    recipe = recipes.load_recipe("hpcc")
    return buildcache.key_of(steps.cache_inputs(recipe, json.loads(text), "0" * 64, {}, {}))


def test_a_typed_plan_writes_the_bytes_the_dict_plan_wrote(written):
    before = (PLANS / "hpcc-gnu-baseline.json").read_text()
    assert written["clean"] == before
    # the checks' build fixture writes resolve's plan as it is
    plan = recipes.resolve(recipes.load_recipe("hpcc"), "baseline", gnu_mpi_toolchain())
    assert plan.to_json() == before
    assert _key(written["clean"]) == _key(before)


def test_a_faulted_plan_differs_only_in_its_patches_and_variant(written):
    before = (PLANS / "hpcc-gnu-baseline-fault.json").read_text()
    assert written[FAULT] == before
    assert _key(written[FAULT]) == _key(before) != _key(written["clean"])
    clean, faulted = json.loads(written["clean"]), json.loads(written[FAULT])
    assert {k for k in clean if clean[k] != faulted[k]} == {"patches", "variant"}
    assert faulted["variant"] == f"baseline fault:{FAULT}"
    fault = faults.plan_patch("hpcc", FAULT, f"{FAULT}.patch").model_dump()
    assert faulted["patches"] == [*clean["patches"], fault]


def test_a_plan_changed_with_a_wrong_field_or_value_is_an_error():
    plan = recipes.resolve(recipes.load_recipe("hpcc"), "baseline", gnu_mpi_toolchain())
    with pytest.raises(ValidationError, match="cflag"):
        plan.updated(cflag=["-O0"])
    with pytest.raises(ValidationError, match="cflags"):
        plan.updated(cflags="-O0 -g")
    with pytest.raises(ValidationError):  # frozen: a change is a new plan
        plan.variant = "other"
    assert plan.updated(cflags=["-O0"]).cflags == ["-O0"] and plan.cflags == ["-O2"]
