"""FLASH-IO (build-recipes/flashio.yaml): its own fatal messages are one line, and the
inputs agree with the builds their tiers name."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from apptune.core.data import inputs, recipes
from apptune.core.run import outcome
from apptune.core.verification import netcdf

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
    said = outcome.app_error(recipe, tmp_path, ["rfm_job.out", "rfm_job.err"])
    assert said == "FLASH-IO: nfmpi_create: Specified netCDF file does not exist."


def test_a_failed_call_with_a_label_is_one_line(tmp_path):
    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    (tmp_path / "rfm_job.out").write_text(" In nfmpi_wait_all req 7NetCDF: Numeric conversion\n")
    said = outcome.app_error(recipe, tmp_path, ["rfm_job.out"])
    assert said == "FLASH-IO: In nfmpi_wait_all req 7NetCDF: Numeric conversion"
    (tmp_path / "rfm_job.out").write_text(" number of guards      :             4\n")
    assert outcome.app_error(recipe, tmp_path, ["rfm_job.out"]) is None


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


# ------------------------------------------------------------- the zone-dependent fill
GUARDS, ZONES, VARS = 4, 4, 3


def _unk(nblocks: int) -> np.ndarray:
    """FLASH-IO's unk(var, i, j, k, block) as patch 0004 fills it, guard cells included, in
    the order (block, k, j, i, var) a C array is indexed: Fortran's layout reversed."""
    n = ZONES + 2 * GUARDS
    ib, k, j, i, v = np.meshgrid(
        np.arange(1, nblocks + 1),
        *(np.arange(1, n + 1),) * 3,
        np.arange(1, VARS + 1),
        indexing="ij",
    )
    return v + np.mod(7 * i + 13 * j + 31 * k + 17 * ib, 64) / 64


def _centres(unk, var: int, shift: int = 0) -> np.ndarray:
    """A plot file's variable: the interior zones, as FLASH-IO's plot routine slices them;
    ``shift`` moves the slice along i (-1: one zone into the guard cells)."""
    lo = GUARDS + shift
    inner = slice(GUARDS, GUARDS + ZONES)
    return unk[:, inner, inner, lo : lo + ZONES, var - 1].astype(">f4")


def _corners(unk, var: int) -> np.ndarray:
    """The corner file's variable: each corner the mean of the eight zones around it."""
    u = unk[..., var - 1]
    lo, hi = GUARDS - 1, GUARDS + ZONES  # the zones around corners 0..ZONES
    s = sum(
        u[:, lo + dk : hi + dk, lo + dj : hi + dj, lo + di : hi + di]
        for di in (0, 1)
        for dj in (0, 1)
        for dk in (0, 1)
    )
    return (s / 8).astype(">f4")


def _fill(corners=False):
    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    spec = next(f for f in recipe.run.scratch.files if f.fill and f.fill.corners == corners)
    return netcdf.ZoneFill(**spec.fill.model_dump())


def _write(path, arrays: dict):
    from test_scratch import write_cdf

    def dims(a):
        return [(d, n) for d, n in zip(("blocks", "z", "y", "x"), a.shape, strict=True)]

    write_cdf(path, 5, {name: (dims(a), a) for name, a in arrays.items()})


def test_every_zone_of_a_plot_file_is_checked_against_the_fill(tmp_path):
    """The blind spot upstream's fill left: a plot file's slice shifted one zone into the
    guard cells holds the right variable and count, and (as upstream fills) the same
    bytes. With the zone-dependent fill the shift changes every value, and fill_errors
    names the file's variable with how many zones are off."""
    unk = _unk(nblocks=5)
    f = tmp_path / "plt.nc"
    _write(f, {"dens": _centres(unk, 1), "velx": _centres(unk, 2)})
    good = netcdf.checksums(f, _fill())
    assert good["dens"]["fill_errors"] == good["velx"]["fill_errors"] == 0
    _write(f, {"dens": _centres(unk, 1, shift=-1), "velx": _centres(unk, 2)})
    bad = netcdf.checksums(f, _fill())
    assert bad["dens"]["count"] == good["dens"]["count"]
    assert bad["dens"]["fill_errors"] == good["dens"]["count"]  # every zone is off
    assert bad["velx"] == good["velx"]
    # upstream's fill: the same shift writes the same bytes, every checksum passes
    flat = np.ones_like(unk)
    assert (_centres(flat, 1, shift=-1) == _centres(flat, 1)).all()


def test_the_corner_file_and_a_block_out_of_place(tmp_path):
    unk = _unk(nblocks=4)
    f = tmp_path / "crn.nc"
    _write(f, {"dens": _corners(unk, 1), "pres": _corners(unk, 3)})
    sums = netcdf.checksums(f, _fill(corners=True))
    assert sums["dens"]["fill_errors"] == sums["pres"]["fill_errors"] == 0
    swapped = _corners(unk, 1)[[1, 0, 2, 3]]  # blocks 1 and 2 written in each other's place
    _write(f, {"dens": swapped})
    assert netcdf.checksums(f, _fill(corners=True))["dens"]["fill_errors"] > 0


def test_one_wrong_value_is_one_fill_error(tmp_path):
    unk = _unk(nblocks=3)
    dens = _centres(unk, 1).copy()
    dens[0, 0, 0, 0] = -dens[0, 0, 0, 0]  # the planted fault of patch 0003
    f = tmp_path / "chk.nc"
    _write(f, {"dens": dens})
    assert netcdf.checksums(f, _fill())["dens"]["fill_errors"] == 1


def test_the_check_and_the_patch_have_the_same_formula():
    """The fill's weights and modulus in the recipe are those patch 0004 writes in Fortran,
    and every tier's reference requires no fill error in any variable of four dimensions."""
    text = (REPO / "patches/flashio/0004-zone-dependent-fill.patch").read_text()
    fill = _fill()
    wi, wj, wk, wg = fill.weights
    m = fill.modulus
    assert f"mod({wi}*ix + {wj}*iy + {wk}*iz + {wg}*(goff+ib), {m})) / {m}.d0" in text
    for tier in ("ci", "nightly", "planted"):
        ref = yaml.safe_load((REPO / f"reference/flashio/{tier}.yaml").read_text())["fields"]
        assert ref["guards"]["value"] == fill.guards  # what FLASH-IO printed
        unknowns = {
            k.rsplit(".", 1)[0] for k in ref if k.endswith(".crc32") and k.split(".")[1] not in TREE
        }
        assert len(unknowns) == 24 + 4 + 4
        assert all(ref[f"{u}.fill_errors"] == {"value": 0, "abs": 0} for u in unknowns), tier


#: The files' variables that describe the blocks (the tree), not their zones.
TREE = {"blocksize", "bndbox", "coordinates", "gid", "lrefine", "nodetype"}


def test_the_validator_knows_every_key_the_checksums_write(tmp_path):
    """`apptune validate` checks FLASH-IO's figures and references against the keys the
    scratch checksums give (apptune.core.verification.netcdf.sum_fields): every key a real file's
    checksums write matches one, and a key no checksum writes matches none."""
    from fnmatch import fnmatchcase

    recipe = recipes.load_recipe(REPO / "build-recipes/flashio.yaml")
    unk = _unk(nblocks=3)
    f = tmp_path / "plt.nc"
    _write(f, {"dens": _centres(unk, 1), "velx": _centres(unk, 2)})
    spec = next(s for s in recipe.run.scratch.files if s.fill and not s.fill.corners)
    written = [
        ln.partition("=")[0]
        for ln in netcdf.keyvalue_lines(spec.name, netcdf.checksums(f, _fill()))
    ]
    patterns = netcdf.sum_fields(recipe.run.scratch.files)
    assert written and all(any(fnmatchcase(k, p) for p in patterns) for k in written), written
    assert any(k.endswith(".fill_errors") for k in written)
    assert not any(fnmatchcase(f"{spec.name}.dens.crc", p) for p in patterns)
