"""npb: the kernels' summary verifies against the specification's published values, and a
wrong result fails naming each value with what was expected and what was got.

tests/data/npb/ holds real ci-tier runs (class S, 2 ranks, gnu/baseline, Open MPI) of the
harness-built program: ``good/`` from the repository's source, ``planted/`` from the
variant with the planted wrong seed (patches/npb/0001-planted-wrong-seed.patch).
``rfm_job.out`` is the program's standard output (the job's stdout in a ReFrame stage).
"""

import pytest
from conftest import REPO

from apptune.core.data import recipes
from apptune.core.verification import outputs, verify

DATA = REPO / "tests/data/npb"
RECIPE = recipes.load_recipe(REPO / "build-recipes/npb.yaml")


def _verify(run):
    stage = DATA / run
    values, _ = outputs.parse_all(RECIPE.run.outputs, stage, "rfm_job.out", "ci")
    texts = {
        "npb.summary": (stage / "npb.summary").read_text(),
        "stdout": (stage / "rfm_job.out").read_text(),
    }
    return values, verify.verify("npb", "ci", values, RECIPE.run.own_checks, texts)


def test_a_good_run_verifies_every_published_value():
    values, v = _verify("good")
    assert v.ok, v.summary
    fields = {f.field for f in v.fields}
    assert {"ep_sx", "ep_sy", "cg_zeta", "mg_rnm2", "ft_sum_re_6", "is_partial_passed"} <= fields
    assert values["class"] == "S" and values["ranks"] == 2


@pytest.mark.parametrize(
    "field, expected, got",
    [
        ("cg_zeta", "8.59718", "8.39671"),
        ("mg_rnm2", "5.30771e-05", "5.43472e-05"),
        ("ft_sum_re_1", "554.609", "477.068"),
    ],
)
def test_a_wrong_seed_fails_naming_the_value_expected_and_got(field, expected, got):
    _, v = _verify("planted")
    assert not v.ok
    failed = {f.field: f for f in v.fields if not f.ok}
    msg = failed[field].message
    assert msg.startswith(f"{field} = {got}, expected {expected} ± "), msg
    # EP has its own seed and IS spells the seed in C: those still verify
    assert "ep_sx" not in failed and "is_partial_passed" not in failed
    # the program's own report names the value too
    out = (DATA / "planted/rfm_job.out").read_text()
    assert f"VERIFICATION FAILED: {field} = " in out
    assert any(not c["ok"] for c in v.own_checks)


def test_a_failed_own_check_is_said_as_a_failure():
    """The recipe's message says what passing means; a failure says it was not so, and what
    the output showed instead (never 'every kernel passed' under a failure)."""
    _, v = _verify("planted")
    own = [m for m in v.failures if m.startswith("own check failed")]
    assert own[0] == (
        "own check failed: expected “every kernel passed its own verification against the "
        "specification's values”; no line of npb.summary matches '^verified=1$'"
    )
    assert own[1].startswith(
        "own check failed: expected “no kernel reported a value off the specification's”; "
        "15 line(s) of stdout match 'VERIFICATION FAILED'"
    )
    assert "(first: VERIFICATION FAILED: cg_zeta = " in v.summary()
    _, good = _verify("good")
    assert all(c["message"].endswith(": ok (1 matches)") for c in good.own_checks[:1])
