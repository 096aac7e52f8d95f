"""Per-field comparison against stored references, and output parsing."""

import math

import pytest

from apptune.core.verification import outputs, verify
from apptune.errors import ApptuneError
from apptune.models import FieldTolerance, OutputSpec


def tol(**k):
    return FieldTolerance(**k)


def test_tolerance_used_is_reported():
    r = verify.compare_field("x", tol(value=100.0, rel=0.01), 100.5)
    assert r.ok and r.used == pytest.approx(0.5)
    r = verify.compare_field("x", tol(value=100.0, rel=0.01), 102.0)
    assert not r.ok and "used 200% of tolerance" in r.message


def test_exact_and_bounds():
    assert verify.compare_field("n", tol(value=5, abs=0), 5).ok
    assert not verify.compare_field("n", tol(value=5, abs=0), 6).ok
    assert verify.compare_field("e", tol(max=1e-14), 1e-15).ok
    assert not verify.compare_field("e", tol(max=1e-14), 2e-14).ok
    assert not verify.compare_field("m", tol(min=1.0), 0.5).ok


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, "garbage"])
def test_nan_missing_and_text_fail(bad):
    r = verify.compare_field("HPL_Xnorm1", tol(value=1.0, rel=1.0), bad)
    assert not r.ok and "HPL_Xnorm1" in r.message


def test_reference_schema_rejects_value_without_tolerance(tmp_path):
    from apptune.models import ReferenceFile
    from apptune.yamlio import load_model

    f = tmp_path / "ci.yaml"
    f.write_text("app: a\ntier: ci\nrecorded: x\nfields:\n  e: {value: 1.0}\n")
    with pytest.raises(ApptuneError) as e:
        load_model(f, ReferenceFile)
    assert "fields.e" in str(e.value) and "tolerance" in str(e.value)
    f.write_text("app: a\ntier: ci\nrecorded: x\nfields:\n  e: {value: .nan, abs: 0}\n")
    with pytest.raises(ApptuneError):
        load_model(f, ReferenceFile)


def test_keyvalue_block_parsing_and_nan(tmp_path):
    (tmp_path / "o.txt").write_text("noise=1\nBEGIN\na=1\nb=2.5\nc=nan\nEND\nd=4\n")
    vals = outputs.parse(
        OutputSpec(file="o.txt", format="keyvalue", begin="BEGIN", end="END"), tmp_path
    )
    assert vals["a"] == 1 and vals["b"] == 2.5 and math.isnan(vals["c"]) and "d" not in vals


def test_incomplete_output_is_a_clear_error(tmp_path):
    (tmp_path / "o.txt").write_text("BEGIN\na=1\n")
    with pytest.raises(ApptuneError) as e:
        outputs.parse(
            OutputSpec(file="o.txt", format="keyvalue", begin="BEGIN", end="END"), tmp_path
        )
    assert "o.txt" in str(e.value) and "END" in str(e.value)
    with pytest.raises(ApptuneError) as e:
        outputs.parse(OutputSpec(file="missing.txt", format="keyvalue"), tmp_path)
    assert "crash" in str(e.value)


def test_hpcc_reference_catches_a_fast_but_wrong_result():
    """A variant whose FFT error or HPL solution drifts fails even if it is fast."""
    good = {
        "Success": 1,
        "HPL_N": 2000,
        "HPL_Anorm1": 523.014,
        "HPL_AnormI": 522.676,
        "HPL_BnormI": 0.49996,
        "HPL_Xnorm1": 1840.3,
        "HPL_XnormI": 4.05224,
        "HPL_RnormI": 4.4e-12,
        "DGEMM_N": 815,
        "PTRANS_residual": 0.0,
        "MPIRandomAccess_ErrorsFraction": 0.0,
        "MPIRandomAccess_LCG_ErrorsFraction": 0.0,
        "STREAM_VectorSize": 666666,
        "FFT_N": 262144,
        "MPIFFT_N": 262144,
        "MPIFFT_maxErr": 1.5e-15,
        "dweps": 1.110223e-16,
        "sweps": 5.960464e-08,
        "HPL_dMACH_EPS": 1.110223e-16,
        "HPL_sMACH_EPS": 5.960464e-08,
    }
    assert verify.verify("hpcc", "ci", good).ok
    wrong = dict(good, MPIFFT_maxErr=3.0e-12, HPL_Xnorm1=1840.9)
    v = verify.verify("hpcc", "ci", wrong)
    assert not v.ok
    assert any("MPIFFT_maxErr" in m for m in v.failures)
    assert any("HPL_Xnorm1" in m for m in v.failures)
    v = verify.verify("hpcc", "ci", dict(good, HPL_Xnorm1=float("nan")))
    assert not v.ok and "nan" in v.summary()


def test_malformed_reference_yaml_names_file_and_line(toy_root):
    (toy_root / "reference/toy/ci.yaml").write_text(
        "app: toy\ntier: ci\nfields: {sum: {value: 1, rel: [}\n"
    )
    with pytest.raises(ApptuneError) as e:
        verify.load_reference("toy", "ci")
    assert "reference/toy/ci.yaml" in str(e.value) and "line" in str(e.value)


def test_reference_for_another_app_is_rejected(toy_root):
    p = toy_root / "reference/toy/ci.yaml"
    p.write_text(p.read_text().replace("app: toy", "app: hpcc"))
    with pytest.raises(ApptuneError, match="expected toy/ci"):
        verify.load_reference("toy", "ci")


def _known_wrong(toy_root, fails: str):
    p = toy_root / "reference/toy/ci.yaml"
    p.write_text(
        p.read_text() + f'xfail:\n  gnu/tuned: {{reason: "sum drifts with -O3", fails: {fails}}}\n'
    )


@pytest.mark.parametrize(
    "values, crashed, xfail, unexpected",
    [
        ({"sum": 1.7, "n": 1000000}, False, True, None),  # exactly what the entry names
        ({"sum": 1.6449330668, "n": 1000000}, False, True, None),  # passed: XPASS, stale
        ({"sum": 1.7, "n": 5}, False, False, "failed besides: n"),
        ({"sum": 1.6449330668, "n": 5}, False, False, "did not fail: sum; failed besides: n"),
        ({"sum": 1.7, "n": 1000000}, True, False, "failed besides: exit status"),
        ({}, False, False, "failed besides: n"),  # no output: every field is missing
    ],
)
def test_a_known_wrong_variant_must_fail_exactly_as_its_entry_says(
    toy_root, values, crashed, xfail, unexpected
):
    """``xfail`` ``fails`` names what must fail: anything else failing (another field, a
    crash) is a plain failure saying what differs, never an expected one."""
    _known_wrong(toy_root, "[sum]")
    v = verify.verify("toy", "ci", values, environment="gnu", variant="tuned")
    if crashed:  # what apptune.core.run.outcome.evaluate adds for a program that did not exit 0
        v.ok = False
        v.own_checks.append({"pattern": "exit status", "ok": False, "message": "exit 139"})
    verify.judge_known_wrong(v)
    assert (v.xfail == "sum drifts with -O3") is xfail
    if unexpected:
        assert v.unexpected.endswith(unexpected), v.unexpected
        assert v.summary().startswith(
            "not the known-wrong result of reference/toy/ci.yaml xfail gnu/tuned (fails: sum)"
        ), v.summary()
    else:
        assert v.unexpected is None
    assert "known" not in v.to_dict()


def test_a_known_wrong_entry_names_fields_by_pattern_and_other_variants_are_not_judged(toy_root):
    _known_wrong(toy_root, "['s*', n]")
    v = verify.verify("toy", "ci", {"sum": 1.7, "n": 5}, environment="gnu", variant="tuned")
    verify.judge_known_wrong(v)
    assert v.xfail and not v.unexpected
    v = verify.verify("toy", "ci", {"sum": 1.7, "n": 5}, environment="gnu", variant="baseline")
    verify.judge_known_wrong(v)
    assert v.xfail is None and v.unexpected is None and not v.ok


@pytest.mark.parametrize(
    "entry, error",
    [
        ('"sum drifts"', "xfail.gnu/tuned: must be a mapping"),
        ("{reason: drifts, fails: []}", "xfail.gnu/tuned.fails: must have at least 1 item"),
        ("{reason: drifts}", "xfail.gnu/tuned.fails: required field is missing"),
    ],
)
def test_a_known_wrong_entry_without_what_must_fail_is_refused(toy_root, entry, error):
    p = toy_root / "reference/toy/ci.yaml"
    p.write_text(p.read_text() + f"xfail:\n  gnu/tuned: {entry}\n")
    with pytest.raises(ApptuneError) as e:
        verify.load_reference("toy", "ci")
    assert "reference/toy/ci.yaml" in str(e.value) and error in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "values, said",
    [
        (
            {"sum": 1.7, "n": 1000000},
            "known-wrong result listed in reference/toy/ci.yaml xfail: sum drifts with -O3",
        ),
        (
            {"sum": 1.6449330668, "n": 1000000},
            "listed as a known-wrong result in reference/toy/ci.yaml xfail (sum drifts with "
            "-O3), but it verified: the entry is stale",
        ),
    ],
)
def test_reframes_expected_failure_line_names_the_tiers_own_reference_file(toy_root, values, said):
    """ReFrame's XFAIL (and XPASS) line of a known-wrong result names the file that lists it
    and the entry's reason, never the pattern ``reference/APP/TIER.yaml``."""
    from types import SimpleNamespace

    from reframe.core.exceptions import ExpectedFailureError

    from apptune.models import RunVerification
    from apptune.rfm import AppRun

    _known_wrong(toy_root, "[sum]")
    v = verify.verify("toy", "ci", values, environment="gnu", variant="tuned")
    verify.judge_known_wrong(v)
    test = SimpleNamespace(
        apptune_result=SimpleNamespace(verification=RunVerification.model_validate(v.to_dict()))
    )
    # what ReFrame's sanity stage does with the check's @rfm.xfail: ask, then say
    expected, message = AppRun.__rfm_xfail_sanity__(test)
    assert expected and str(ExpectedFailureError(message)) == said
    other = SimpleNamespace(apptune_result=None)  # a check that is not an expected failure
    assert AppRun.__rfm_xfail_sanity__(other)[0] is False
