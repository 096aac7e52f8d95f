"""OpenFOAM's verification (build-recipes/openfoam.yaml, reference/openfoam/): the water's shear
stress on the tank's floor, read from the function object's file as interFoam wrote it, sees
the water's viscosity 10 % high, which the blessed pressures do not; and every blessed
field's tolerance follows the rule its reference states."""

import math
import re
from pathlib import Path

import pytest
import yaml

from apptune.core.data import recipes
from apptune.core.verification import outputs, verify

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.unit

HEADER = """# Region type : patch lowerWall
# Faces       : 62
# Area        : 9.927970e-03
# Scale factor: 1.000000e+00
# Weight field: alpha.water
# Time        \tweightedAreaAverage(mag(wallShearStress))
"""
#: postProcessing/waterWallShear/0/surfaceFieldValue.dat of damBreak's ci input, Debian's
#: build on 2 ranks (2026-11-28, m-558d23d960): as blessed, and with the water's viscosity
#: 1.1e-6 for 1e-6 m2/s
SHEAR = {
    "as blessed": [1.280244e-04, 2.663051e-04, 2.383685e-04, 1.584995e-04, 1.238533e-04],
    "viscosity +10 %": [1.406556e-04, 2.927046e-04, 2.621293e-04, 1.742693e-04, 1.361595e-04],
}
TIMES = (0.05, 0.1, 0.15, 0.2, 0.25)


def _shear(tmp_path, which) -> dict:
    recipe = recipes.load_recipe("openfoam")
    spec = next(o for o in recipe.run.outputs if o.name == "water_wall_shear")
    f = tmp_path / spec.file
    f.parent.mkdir(parents=True)
    f.write_text(
        HEADER + "".join(f"{t:<14}\t{v:.6e}\n" for t, v in zip(TIMES, SHEAR[which], strict=True))
    )
    values = outputs.parse(spec, tmp_path, tier="ci")
    values.pop("__curve__")
    return values


def test_the_water_shear_is_read_at_the_sampled_times(tmp_path):
    assert _shear(tmp_path, "as blessed") == {
        "water_shear_t005": 1.280244e-04,
        "water_shear_t010": 2.663051e-04,
        "water_shear_t020": 1.584995e-04,
    }


def test_ten_percent_more_viscous_water_fails_on_its_shear_and_not_on_the_pressure(tmp_path):
    """The pressure behind the obstacle moved 4.7e-4 (within its 2e-3): the flow is inertial.
    The shear stress is nu du/dn: it moved 9.9 %, about fifty times its tolerance."""
    _, ref = verify.load_reference("openfoam", "ci")
    for which, fails in (("as blessed", False), ("viscosity +10 %", True)):
        for name, value in _shear(tmp_path / which.split()[0], which).items():
            r = verify.compare_field(name, ref.fields[name], value)
            assert r.ok is not fails, r.message
    p = verify.compare_field("p_obstacle_t010", ref.fields["p_obstacle_t010"], 86.4163)
    assert p.ok and p.used < 0.3, p.message


def _rule(spread: float) -> float:
    """The references' rule: ten times the serial/2-rank spread, rounded up to one digit, at
    least 2e-3."""
    ten = 10 * spread
    unit = 10 ** math.floor(math.log10(ten))
    return max(math.ceil(round(ten / unit, 9)) * unit, 2e-3)


@pytest.mark.parametrize("tier", ["ci", "nightly"])
def test_every_blessed_tolerance_follows_the_rule_from_its_measured_spread(tier):
    """Each blessed field's why gives the spread between the serial and the 2-rank run; its
    rel tolerance is the rule's (the step count is a count: its own bound)."""
    fields = yaml.safe_load((REPO / f"reference/openfoam/{tier}.yaml").read_text())["fields"]
    blessed = [n for n, f in fields.items() if "rel" in f and "steps" not in n]
    assert len(blessed) >= 14
    for name in blessed:
        m = re.search(r"serial and 2 ranks differ by ([0-9.e-]+)", fields[name]["why"])
        assert m, f"{name}: its why does not give the spread"
        assert fields[name]["rel"] == pytest.approx(_rule(float(m.group(1)))), name
