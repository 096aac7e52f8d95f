"""NWChem recipe: the build settings file, how make reads it, inputs and verification.

tests/data/nwchem/ci-gnu-tuned.out is the stdout of the gnu/tuned nwchem on the ci input
(QA h2o + QA dft_ozone t14, 2 ranks; `apptune run --mode ci -c reframe-checks/nwchem`,
2026-11-22).
"""

import re
import subprocess

import pytest
from conftest import REPO, gnu_mpi_toolchain, own_check_failed

from apptune.core.builds import steps
from apptune.core.data import recipes
from apptune.core.data.recipes import Toolchain
from apptune.core.verification import outputs, verify

OUT = (REPO / "tests/data/nwchem/ci-gnu-tuned.out").read_text()

GNU = gnu_mpi_toolchain()


def _recipe():
    return recipes.load_recipe(REPO / "build-recipes/nwchem.yaml")


def _settings(variant="tuned", tc=GNU):
    plan = recipes.resolve(_recipe(), variant, tc).to_dict()
    ctx = dict(plan, cc="/w/apptune-cc", cxx="/w/apptune-cxx", ftn="/w/apptune-ftn")
    return plan, steps.jinja_env().get_template("nwchem/apptune.mk.j2").render(**ctx)


def test_settings_carry_compilers_flags_libraries_and_integer_handling():
    plan, text = _settings()
    assert re.search(r"^override FC := /w/apptune-ftn$", text, re.M)
    assert re.search(r"^override CC := /w/apptune-cc$", text, re.M)
    # makefile.h's gfortran/gcc settings (-DGFORTRAN ...) are chosen by these names
    assert re.search(r"^override _FC := gfortran$", text, re.M)
    assert re.search(
        r"^override FOPTIONS := -fdefault-integer-8 -std=legacy "
        r"-fno-aggressive-loop-optimizations -fno-tree-dominator-opts "
        r"-O3 -march=native -funroll-loops$",
        text,
        re.M,
    )
    assert re.search(r"^override COPTIONS := -O3 -march=native -funroll-loops$", text, re.M)
    for v in ("FOPTIMIZE", "FDEBUG", "COPTIMIZE", "CDEBUG"):  # upstream's -ffast-math etc. gone
        assert re.search(rf"^override {v} :=$", text, re.M), v
    # LP64 libraries under 8-byte integers: the 64-to-32 conversion, GA and ScaLAPACK first
    assert re.search(r"^BLAS_SIZE := 4$", text, re.M) and re.search(
        r"^USE_64TO32 := y$", text, re.M
    )
    assert re.search(
        r"^BLASOPT := -lga-openmpi -larmci-openmpi -lscalapack-openmpi -lopenblas$", text, re.M
    )
    assert re.search(r"^EXTERNAL_GA_PATH := /usr/lib/x86_64-linux-gnu/ga/openmpi$", text, re.M)
    assert re.search(r"^NWCHEM_MODULES := nwdft$", text, re.M)
    steps = [s.make for s in _recipe().build.steps]
    assert steps == [["nwchem_config"], ["64_to_32"], []]


def test_mkl_and_flang_plans():
    r = _recipe()
    mkl = recipes.resolve(
        r, "tuned", Toolchain(**{**GNU.__dict__, "environment": "gnu-mkl", "blas": "mkl"})
    )
    assert mkl.ldflags[:3] == ["-lga-openmpi", "-larmci-openmpi", "-lscalapack-openmpi"]
    assert any("mkl_intel_lp64" in f for f in mkl.ldflags[3:])  # LP64: 4-byte integers
    llvm = recipes.resolve(
        r, "tuned", Toolchain(**{**GNU.__dict__, "environment": "llvm", "family": "llvm"})
    )
    assert llvm.app_fflags == ["-fdefault-integer-8"] and llvm.app_ldflags == [
        "-flang-experimental-exec"
    ]


@pytest.mark.slow
def test_settings_win_over_makefile_h(tmp_path):
    """What makefile.h does after reading the settings (assign FC, derive _FC from FC's name,
    add -ffast-math) does not change them; NWCHEM_TOP is the tree's top and is exported."""
    _, text = _settings()
    top = tmp_path / "my src" / "nwchem"  # a "/src" in the path: upstream's guess cuts there
    cfg = top / "src" / "config"
    cfg.mkdir(parents=True)
    (cfg / "apptune.mk").write_text(text)
    (cfg / "makefile.h").write_text(
        "include $(dir $(lastword $(MAKEFILE_LIST)))apptune.mk\n"
        "FC = gfortran\n_FC = $(notdir $(FC))\nFOPTIONS += -ffast-math\n"
        "FOPTIMIZE = -O2 -ffast-math\n"
        "COPTIONS = -m64 -O3 -funroll-loops -ffast-math\n"
    )
    (top / "src" / "util").mkdir()
    (top / "src" / "util" / "GNUmakefile").write_text(
        "include ../config/makefile.h\nall:\n"
        '\t@echo "FC=$(FC)|_FC=$(_FC)|F=$(FOPTIONS) $(FOPTIMIZE)|'
        'C=$(COPTIONS)|TOP=$$NWCHEM_TOP"\n'
    )
    out = subprocess.run(
        ["make", "-s", "-C", str(top / "src" / "util")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == (
        f"FC=/w/apptune-ftn|_FC=gfortran|F=-fdefault-integer-8 -std=legacy "
        f"-fno-aggressive-loop-optimizations -fno-tree-dominator-opts -O3 -march=native "
        f"-funroll-loops |C=-O3 -march=native -funroll-loops|TOP={top}"
    )


def test_patch_reads_the_settings_first():
    text = (REPO / "patches/nwchem/0001-read-apptune-settings.patch").read_text()
    added = [ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert "include $(dir $(lastword $(MAKEFILE_LIST)))apptune.mk" in added
    # before makefile.h's own NWCHEM_TOP guess
    assert text.index("+include") < text.index(" ifndef NWCHEM_TOP")


def _verify(tmp_path, text):
    (tmp_path / "rfm_job.out").write_text(text)
    r = _recipe()
    values, _ = outputs.parse_all(r.run.outputs, tmp_path, stdout="rfm_job.out", tier="ci")
    v = verify.verify(
        "nwchem", "ci", values, r.run.own_checks, {"stdout": text}, "gnu", "tuned", "stdout"
    )
    return v, values


def test_recorded_output_verifies_with_each_tasks_gradients_dipoles_and_timings(tmp_path):
    v, values = _verify(tmp_path, OUT)
    assert v.ok, v.summary()
    # the SCF task's (first) and the DFT task's (last) blocks are told apart
    assert values["scf_energy"] == -76.010538615914 and values["dft_energy"] == -225.397498577748
    assert (values["scf_grad_1z"], values["scf_grad_2x"], values["scf_grad_2z"]) == (
        0.014490,
        -0.007296,
        -0.007245,
    )
    assert (values["dft_grad_1z"], values["dft_grad_2y"], values["dft_grad_2z"]) == (
        0.084550,
        -0.073823,
        -0.042275,
    )
    assert (values["scf_dipole_z"], values["dft_dipole_z"]) == (-0.875294, -0.258688)
    assert (values["scf_task_s"], values["dft_task_s"], values["total_s"]) == (0.2, 0.5, 0.7)
    assert values["tasks_done"] == 2 and values["ga_get_remote"] == 1.16e06


@pytest.mark.parametrize(
    "old,new,field",
    [
        # 2e-5 hartree off: beyond QA's 5 decimals
        (
            "Total DFT energy =     -225.397498577748",
            "Total DFT energy =     -225.397478577748",
            "dft_energy",
        ),
        # an SCF gradient component 2e-3 off: beyond QA's 3 decimals
        ("-0.007296   0.000000  -0.007245", "-0.009296   0.000000  -0.007245", "scf_grad_2x"),
        ("1   0 0 1     -0.875294", "1   0 0 1     -0.873294", "scf_dipole_z"),
    ],
)
def test_a_quantity_beyond_qas_tolerance_fails_naming_it(tmp_path, old, new, field):
    assert OUT.count(old) == 1
    v, _ = _verify(tmp_path, OUT.replace(old, new))
    assert not v.ok and any(m.startswith(f"{field} = ") for m in v.failures), v.failures


def test_a_change_within_qas_rounding_passes(tmp_path):
    # 4e-6 hartree: equal to 5 decimals, as NWChem's QA comparison rounds
    v, _ = _verify(
        tmp_path,
        OUT.replace(
            "Total SCF energy =    -76.010538615914", "Total SCF energy =    -76.010542615914"
        ),
    )
    assert v.ok, v.summary()


def test_an_error_banner_or_a_missing_task_fails(tmp_path):
    cut = OUT[: OUT.index("Total DFT energy")]
    banner = " current input line : \n   47: task dft gradient\n ------\n dft_scf: failed\n"
    v, _ = _verify(tmp_path, cut + banner)
    assert not v.ok
    assert own_check_failed("nwchem printed no error banner (errquit)", v)
    assert own_check_failed("nwchem finished (Total times)", v)
    v, _ = _verify(
        tmp_path,
        OUT.replace(
            "\n         Total SCF energy",
            "\n Calculation failed to converge\n         Total SCF energy",
            1,
        ),
    )
    assert not v.ok and own_check_failed("every SCF converged", v)
