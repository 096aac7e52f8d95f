"""NWChem recipe: the build settings file, how make reads it, inputs and verification.

tests/data/nwchem/ci-gnu-tuned.out is the stdout of the gnu/tuned nwchem on the ci input
(QA h2o + QA dft_ozone t14, 2 ranks).
"""
import re
import shutil
import subprocess

import pytest

from apptune import build, inputs, outputs, recipes, verify
from apptune.recipes import Toolchain

from conftest import REPO

GNU = Toolchain(environment="gnu", family="gnu", cc="mpicc", cxx="mpicxx", ftn="mpifort",
                mpi="openmpi", mpi_standard="3.1", blas="openblas")


def _recipe():
    return recipes.load_recipe(REPO / "build-recipes/nwchem.yaml")


def _settings(variant="tuned", tc=GNU):
    plan = recipes.resolve(_recipe(), variant, tc).to_dict()
    ctx = dict(plan, cc="/w/apptune-cc", cxx="/w/apptune-cxx", ftn="/w/apptune-ftn")
    return plan, build._jinja().get_template("nwchem/apptune.mk.j2").render(**ctx)


def test_settings_carry_compilers_flags_libraries_and_integer_handling():
    plan, text = _settings()
    assert re.search(r"^override FC := /w/apptune-ftn$", text, re.M)
    assert re.search(r"^override CC := /w/apptune-cc$", text, re.M)
    # makefile.h's gfortran/gcc settings (-DGFORTRAN ...) are chosen by these names
    assert re.search(r"^override _FC := gfortran$", text, re.M)
    assert re.search(r"^override FOPTIONS := -fdefault-integer-8 -std=legacy "
                     r"-fno-aggressive-loop-optimizations -fno-tree-dominator-opts "
                     r"-O3 -march=native -funroll-loops$", text, re.M)
    assert re.search(r"^override COPTIONS := -O3 -march=native -funroll-loops$", text, re.M)
    for v in ("FOPTIMIZE", "FDEBUG", "COPTIMIZE", "CDEBUG"):   # upstream's -ffast-math etc. gone
        assert re.search(rf"^override {v} :=$", text, re.M), v
    # LP64 libraries under 8-byte integers: the 64-to-32 conversion, GA and ScaLAPACK first
    assert re.search(r"^BLAS_SIZE := 4$", text, re.M) and re.search(r"^USE_64TO32 := y$", text, re.M)
    assert re.search(r"^BLASOPT := -lga-openmpi -larmci-openmpi -lscalapack-openmpi -lopenblas$", text, re.M)
    assert re.search(r"^EXTERNAL_GA_PATH := /usr/lib/x86_64-linux-gnu/ga/openmpi$", text, re.M)
    assert re.search(r"^NWCHEM_MODULES := nwdft$", text, re.M)
    steps = [s.make for s in _recipe().build.steps]
    assert steps == [["nwchem_config"], ["64_to_32"], []]


def test_mkl_and_flang_plans():
    r = _recipe()
    mkl = recipes.resolve(r, "tuned", Toolchain(**{**GNU.__dict__, "environment": "gnu-mkl", "blas": "mkl"}))
    assert mkl.ldflags[:3] == ["-lga-openmpi", "-larmci-openmpi", "-lscalapack-openmpi"]
    assert any("mkl_intel_lp64" in f for f in mkl.ldflags[3:])   # LP64: 4-byte integers
    llvm = recipes.resolve(r, "tuned", Toolchain(**{**GNU.__dict__, "environment": "llvm", "family": "llvm"}))
    assert llvm.app_fflags == ["-fdefault-integer-8"] and llvm.app_ldflags == ["-flang-experimental-exec"]


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
def test_settings_win_over_makefile_h(tmp_path):
    """What makefile.h does after reading the settings (assign FC, derive _FC from FC's name,
    add -ffast-math) does not change them; NWCHEM_TOP is the tree's top and is exported."""
    _, text = _settings()
    top = tmp_path / "my src" / "nwchem"      # a "/src" in the path: upstream's guess cuts there
    cfg = top / "src" / "config"
    cfg.mkdir(parents=True)
    (cfg / "apptune.mk").write_text(text)
    (cfg / "makefile.h").write_text(
        "include $(dir $(lastword $(MAKEFILE_LIST)))apptune.mk\n"
        "FC = gfortran\n_FC = $(notdir $(FC))\nFOPTIONS += -ffast-math\nFOPTIMIZE = -O2 -ffast-math\n"
        "COPTIONS = -m64 -O3 -funroll-loops -ffast-math\n")
    (top / "src" / "util").mkdir()
    (top / "src" / "util" / "GNUmakefile").write_text(
        "include ../config/makefile.h\nall:\n\t@echo \"FC=$(FC)|_FC=$(_FC)|F=$(FOPTIONS) $(FOPTIMIZE)|"
        "C=$(COPTIONS)|TOP=$$NWCHEM_TOP\"\n")
    out = subprocess.run(["make", "-s", "-C", str(top / "src" / "util")], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == (f"FC=/w/apptune-ftn|_FC=gfortran|F=-fdefault-integer-8 -std=legacy "
                   f"-fno-aggressive-loop-optimizations -fno-tree-dominator-opts -O3 -march=native "
                   f"-funroll-loops |C=-O3 -march=native -funroll-loops|TOP={top}")


def test_patch_reads_the_settings_first():
    text = (REPO / "patches/nwchem/0001-read-apptune-settings.patch").read_text()
    added = [l[1:] for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert "include $(dir $(lastword $(MAKEFILE_LIST)))apptune.mk" in added
    # before makefile.h's own NWCHEM_TOP guess
    assert text.index("+include") < text.index(" ifndef NWCHEM_TOP")
