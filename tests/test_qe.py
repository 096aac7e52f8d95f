"""Quantum ESPRESSO recipe: make.inc, family flags, inputs and verification on a real pw.x output.

tests/data/qe/ci-gnu-baseline.out is the stdout of the gnu/baseline pw.x on the ci
input (`apptune run --mode dev -c reframe-checks/qe`, 2026-11-22).
"""

import re

import pytest
from conftest import REPO, gnu_mpi_toolchain, own_check_failed

from apptune.core.builds import steps
from apptune.core.data import inputs, recipes
from apptune.core.data.recipes import Toolchain
from apptune.core.verification import outputs, verify

OUT = (REPO / "tests/data/qe/ci-gnu-baseline.out").read_text()


def _recipe():
    return recipes.load_recipe(REPO / "build-recipes/qe.yaml")


def _verify(tmp_path, text, env="gnu", variant="baseline"):
    (tmp_path / "rfm_job.out").write_text(text)
    r = _recipe()
    values, _ = outputs.parse_all(r.run.outputs, tmp_path, stdout="rfm_job.out", tier="ci")
    return verify.verify(
        "qe", "ci", values, r.run.own_checks, {"stdout": text}, env, variant, "stdout"
    ), values


def test_recorded_output_verifies_and_gives_the_timing_breakdown(tmp_path):
    v, values = _verify(tmp_path, OUT)
    assert v.ok, v.summary()
    assert values["total_energy"] == -15.79449443 and values["scf_iterations"] == 4
    assert {"electrons_s", "h_psi_s", "cdiaghg_s", "fftw_s", "fft_s"} <= set(values)


@pytest.mark.parametrize(
    "old,new,field",
    [
        ("=     -15.79449443 Ry", "=     -15.79349443 Ry", "total_energy"),  # 1 mRy off
        ("P=      -29.93", "P=      -31.93", "pressure"),
        ("achieved in   4 iterations", "achieved in  14 iterations", "scf_iterations"),
    ],
)
def test_corrupted_quantity_fails_naming_it(tmp_path, old, new, field):
    assert old in OUT
    v, _ = _verify(tmp_path, OUT.replace(old, new))
    assert not v.ok and any(m.startswith(f"{field} = ") for m in v.failures), v.failures


def test_nan_energy_fails(tmp_path):
    v, _ = _verify(tmp_path, OUT.replace("-15.79449443 Ry", "NaN Ry"))
    assert not v.ok and any("total_energy" in m and "not finite" in m for m in v.failures)


def test_unconverged_or_crashed_run_fails(tmp_path):
    v, _ = _verify(
        tmp_path,
        OUT.replace(
            "convergence has been achieved in   4 iterations",
            "convergence NOT achieved after 100 iterations: stopping",
        ),
    )
    assert not v.ok and own_check_failed("the SCF cycle converged", v)
    cut = OUT[: OUT.index("Computing stress")]
    v, _ = _verify(
        tmp_path, cut + "\n %%%%%%%%%%%%%%\n Error in routine stres (1):\n %%%%%%%%%%%%%%\n"
    )
    assert not v.ok
    assert own_check_failed("pw.x finished (JOB DONE)", v) and any(
        m.startswith("pressure") for m in v.failures
    )


def test_make_inc_carries_the_variant_and_family_flags(tmp_path):
    r = _recipe()
    gnu = gnu_mpi_toolchain()
    plan = recipes.resolve(r, "tuned+fft=internal", gnu).to_dict()
    ctx = dict(plan, cc="/w/cc", cxx="/w/cxx", ftn="/w/ftn")
    text = steps.jinja_env().get_template("qe/make.inc.j2").render(**ctx)
    assert re.search(r"^DFLAGS\s+= -D__FFTW -D__MPI$", text, re.M)
    assert re.search(
        r"^FFLAGS\s+= -fallow-argument-mismatch -O3 -march=native -funroll-loops$", text, re.M
    )
    assert re.search(r"^MPIF90\s+= /w/ftn$", text, re.M) and re.search(
        r"^F90\s+= /w/ftn$", text, re.M
    )
    assert re.search(r"^BLAS_LIBS\s+= -lopenblas$", text, re.M)  # no -lfftw3 with the internal FFT
    mkl = recipes.resolve(
        r, "tuned", Toolchain(**{**gnu.__dict__, "environment": "gnu-mkl", "blas": "mkl"})
    )
    assert mkl.ldflags[0] == "-lfftw3" and any(
        "mkl_core" in f for f in mkl.ldflags
    )  # FFTW before MKL
    llvm = recipes.resolve(
        r, "tuned", Toolchain(**{**gnu.__dict__, "environment": "llvm", "family": "llvm"})
    )
    assert llvm.app_fflags == ["-I/usr/include"] and llvm.app_ldflags == [
        "-flang-experimental-exec"
    ]
    assert recipes.expected_build_failure(r, "llvm", "tuned") is not None
    assert recipes.expected_build_failure(r, "gnu", "tuned") is None
    # the 32 000-line data table keeps -O2 in every variant
    assert plan["per_file"][0]["files"] == ["dft-d3/pars.f90"] and plan["per_file"][0][
        "fflags"
    ] == ["-O2"]


def test_nightly_input_is_the_64_atom_rattled_supercell(tmp_path):
    b = tmp_path / "build"
    b.mkdir()
    (b / "Si.pz-vbc.UPF").write_text("pseudo")
    params = inputs.render("qe", "nightly", tmp_path, 2, build_dir=b)
    text = (tmp_path / "pw.in").read_text()
    pos = re.findall(r"^ Si +(\S+) +(\S+) +(\S+)$", text, re.M)
    assert len(pos) == 64 and "nat = 64" in text and params["pools"] == 1
    assert pos[0] == ("-0.00800000", "0.00400000", "-0.00400000")
    # every atom is displaced (no force vanishes by symmetry), by at most 2 * rattle
    for p in pos:
        d = [abs(x - round(x * 8) / 8) for x in map(float, p)]
        assert 1e-9 < max(d) <= 2 * params["rattle"] + 1e-9, p
    assert len(set(pos)) == 64
    assert (tmp_path / "Si.pz-vbc.UPF").read_text() == "pseudo"
