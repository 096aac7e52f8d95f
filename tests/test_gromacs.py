"""GROMACS: the recipe's CMake step, the readers of gmx check's reports and of md.log's cycle
table (as regressiontests' gmxtest.pl reads them), the SIMD axis on a CPU without the level,
and the bad inputs, each one line naming the file and the field.

tests/data/gromacs/: ``md-2ranks.log`` is the md.log of the ci benchmark (nbnxn_pme, 400 steps,
gnu/tuned on 2 ranks, with a build running beside it); ``grompp-bad-topology.out`` and
``check-missing-reference.err`` are what gmx_mpi grompp and gmx_mpi check (2022.5) printed for
a topology naming a molecule type that does not exist and for a reference .edr that is missing.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, gnu_mpi_toolchain

from apptune.core.builds import steps
from apptune.core.data import inputs, recipes
from apptune.core.run import outcome
from apptune.core.verification import outputs, verify
from apptune.core.verification.formats import gmx
from apptune.errors import ApptuneError
from apptune.models import OutputSpec

DATA = REPO / "tests/data/gromacs"

GNU = gnu_mpi_toolchain()

# what gmx check -e prints (fileio/enxio.cpp comp_enx and cmp_energies)
ENERGY_HEADER = textwrap.dedent("""\
    comparing energy file nbnxn_pme/reference_s.edr and nbnxn_pme/md.edr

    There are 32 terms in the energy files

    There are 11 terms to compare in the energy files

    """)


def _recipe():
    return recipes.load_recipe(REPO / "build-recipes/gromacs.yaml")


def test_the_cmake_step_carries_the_variant_its_simd_level_and_fft():
    r = _recipe()
    plan = recipes.resolve(r, "tuned+simd=None+fft=fftpack", GNU).to_dict()
    ctx = dict(plan, cc="/w/apptune-cc", cxx="/w/apptune-cxx", ftn="/w/apptune-ftn")
    argv = steps.step_argv(r, r.build.steps[0], 0, ctx)
    assert "-DCMAKE_CXX_COMPILER=/w/apptune-cxx" in argv
    assert "-DCMAKE_CXX_FLAGS=-DNDEBUG -O3 -march=native -funroll-loops" in argv
    assert {"-DGMX_MPI=ON", "-DGMX_THREAD_MPI=OFF", "-DGMX_SIMD=None"} <= set(argv)
    assert "-DGMX_FFT_LIBRARY=fftpack" in argv and "-DMKL_LIBRARIES=" in argv
    assert steps.step_argv(r, r.build.steps[1], 1, ctx)[-4:] == [
        "--target",
        "gmx",
        "--parallel",
        "2",
    ]
    mkl = recipes.resolve(r, "tuned+fft=mkl", GNU).to_dict()
    argv = steps.step_argv(r, r.build.steps[0], 0, dict(mkl, cc="c", cxx="c", ftn="f"))
    lib = next(w for w in argv if w.startswith("-DMKL_LIBRARIES="))
    inc = next(w for w in argv if w.startswith("-DMKL_INCLUDE_DIR="))
    assert "libmkl_core" in lib and inc.endswith("/lib/../include")


def test_energy_report_counts_the_terms_outside_the_tolerance(tmp_path):
    text = ENERGY_HEADER + textwrap.dedent("""\
        Angle            step   0:       1733.2,  step   0:      1817.86
        Potential        step  20:     -30761.8,  step  20:     -30671.3

        Files read successfully
        """)
    p = tmp_path / "check.out"
    p.write_text(text)
    assert gmx.energy_errors(p, "nbnxn_pme.energy") == {"nbnxn_pme.energy": 2}
    p.write_text(ENERGY_HEADER + "\nFiles read successfully\n")
    assert gmx.energy_errors(p, "nbnxn_pme.energy") == {"nbnxn_pme.energy": 0}


def test_energy_report_with_other_frames_or_no_report_is_one_error_naming_file_and_field(tmp_path):
    p = tmp_path / "check.out"
    p.write_text(
        ENERGY_HEADER + "\nEnd of file on nbnxn_pme/md.edr but not on nbnxn_pme/reference_s.edr\n"
    )
    with pytest.raises(ApptuneError) as e:
        gmx.energy_errors(p, "nbnxn_pme.energy")
    assert str(e.value).startswith(f"{p}: nbnxn_pme.energy: the energy files have different")
    p.write_text("Fatal error: something else\n")
    with pytest.raises(ApptuneError, match=r"check.out: nbnxn_pme.energy: not a report"):
        gmx.energy_errors(p, "nbnxn_pme.energy")


def test_force_report_judges_the_direction_of_each_listed_force(tmp_path):
    p = tmp_path / "check.out"
    a, b, c = "1.00000e+02", "0.00000e+00", "1.00000e+00"
    p.write_text(
        "\n"
        f"x[    3] ( {c}  {c}  {c}) - ( 1.10000e+00  {c}  {c})\n"
        # the same direction, 10 % longer: not an error for the driver
        f"f[   12] ( {a}  {b}  {b}) - ( 1.10000e+02  {b}  {b})\n"
        # 6 degrees apart: 1 - cos = 0.0055
        f"f[   40] ( {a}  {b}  {b}) - ( 9.94522e+01  1.04528e+01  {b})\n"
        "\nBoth files read correctly\n"
    )
    got = gmx.force_direction_error(p, "tip4p.forces")["tip4p.forces"]
    assert got == pytest.approx(1 - 0.994522, rel=1e-3)
    p.write_text("\nBoth files read correctly\n")
    assert gmx.force_direction_error(p, "tip4p.forces") == {"tip4p.forces": 0.0}


def test_force_report_with_another_difference_names_it(tmp_path):
    p = tmp_path / "check.out"
    p.write_text("\nbF (TRUE - FALSE)\n")
    with pytest.raises(ApptuneError) as e:
        gmx.force_direction_error(p, "tip4p.forces")
    assert str(e.value) == (
        f"{p}: tip4p.forces: gmx check reports a difference: bF (TRUE - FALSE) (line 2)"
    )


def test_mdlog_gives_ns_per_day_wall_time_and_the_cycle_table_shares():
    got = gmx.mdlog(DATA / "md-2ranks.log")
    assert set(got) == set(gmx.MDLOG_FIELDS)
    assert got["mpi_ranks"] == 2 and got["pme_ranks"] == 0
    assert got["ns_per_day"] > 0 and got["mdrun_wall_s"] > 0
    rows, pme = gmx.cycle_table((DATA / "md-2ranks.log").read_text(), DATA / "md-2ranks.log")
    assert sum(rows.values()) == pytest.approx(100, abs=0.5)  # every row of the main table
    assert set(pme) == {
        "PME redist. X/F",
        "PME spread",
        "PME gather",
        "PME 3D-FFT",
        "PME 3D-FFT Comm.",
        "PME solve Elec",
    }
    assert got["force_pct"] == rows["Force"] == 9.7
    assert got["pme_pct"] == rows["PME mesh"] == 81.9
    # Comm. coord., Wait + Comm. F, Comm. energies; PME redist. X/F and PME 3D-FFT Comm.
    assert got["comm_pct"] == pytest.approx(1.7 + 2.0 + 0.3 + 34.1 + 18.6)
    assert got["ns_per_day"] == 18.099 and got["mdrun_wall_s"] == 1.919
    # what the run was: -nsteps 400 (step 0 counted too) of 2 fs, nbnxn_pme's 2400 atoms
    assert (got["steps"], got["simulated_ps"], got["atoms"]) == (401, 0.8, 2400)


def test_mdlog_without_the_runs_size_names_the_missing_line(tmp_path):
    cut = tmp_path / "md.log"
    cut.write_text((DATA / "md-2ranks.log").read_text().replace("There are: 2400 Atoms", ""))
    with pytest.raises(ApptuneError, match=r"md.log: atoms: md.log has no line matching"):
        gmx.mdlog(cut)


def test_mdlog_of_a_run_that_stopped_is_one_error(tmp_path):
    text = (DATA / "md-2ranks.log").read_text()
    cut = tmp_path / "md.log"
    cut.write_text(text[: text.index("R E A L   C Y C L E")])
    with pytest.raises(ApptuneError, match=r"md.log: Performance: md.log has no Performance"):
        gmx.mdlog(cut)


def test_outputs_dispatch_the_gromacs_formats(tmp_path):
    shutil.copy(DATA / "md-2ranks.log", tmp_path / "md.log")
    (tmp_path / "e.out").write_text(ENERGY_HEADER)
    specs = [
        OutputSpec(file="md.log", format="gmx_mdlog"),
        OutputSpec(file="e.out", format="gmx_check_energy", field="t.energy"),
    ]
    fields, _ = outputs.parse_all(specs, tmp_path)
    assert fields["t.energy"] == 0 and fields["ns_per_day"] > 0
    with pytest.raises(ValueError, match="format gmx_check_forces needs 'field'"):
        OutputSpec(file="f.out", format="gmx_check_forces")


def test_a_wrong_energy_or_force_fails_naming_the_test_and_the_quantity():
    ok = dict(
        {f: 0 for f in _reference_fields()}, mpi_ranks=2, steps=401, simulated_ps=0.8, atoms=2400
    )
    v = verify.verify("gromacs", "ci", ok)
    assert v.ok, v.summary()
    v = verify.verify("gromacs", "ci", dict(ok, **{"nbnxn_vsite.energy": 3, "tip4p.forces": 0.02}))
    assert not v.ok
    assert v.failures == [
        "nbnxn_vsite.energy = 3, expected 0 ± 0 (difference +3)",
        "tip4p.forces = 0.02, expected ≤ 0.001 (used 2000% of tolerance)",
    ]


def _reference_fields():
    return verify.load_reference("gromacs", "ci")[1].fields


def test_a_simd_level_the_cpu_lacks_is_skipped_saying_which_flag():
    r = _recipe()
    epyc = {"sse2", "avx", "avx2", "fma"}
    why = recipes.cpu_missing(r, "tuned+simd=AVX_512", epyc)
    assert why == (
        "simd=AVX_512 needs CPU flag avx512f, which this node's CPU does not have "
        "(gromacs.yaml: axes.simd.AVX_512.cpu)"
    )
    assert recipes.cpu_missing(r, "tuned", epyc) is None  # the default AVX2_256
    assert recipes.cpu_missing(r, "tuned+simd=None", set()) is None
    assert "avx2, fma" in recipes.cpu_missing(r, "tuned", {"sse2"})


def test_an_unknown_simd_value_is_one_line_naming_the_file_and_field():
    with pytest.raises(ApptuneError) as e:
        recipes.Variant.parse("tuned+simd=AVX_1024", _recipe(), "tiers.ci.variants.gnu")
    assert str(e.value) == (
        "build-recipes/gromacs.yaml: tiers.ci.variants.gnu: 'tuned+simd=AVX_1024': "
        "unknown simd 'AVX_1024' (allowed: AVX2_256, AVX_512, None)"
    )


def test_a_tpr_that_cannot_be_made_is_one_line_naming_the_file_and_line(tmp_path):
    shutil.copy(DATA / "grompp-bad-topology.out", tmp_path / "grompp-nbnxn_pme.out")
    said = outcome.app_error(_recipe(), tmp_path, [])
    assert said == (
        "nbnxn_pme/topol (topol.top, line 50): No such moleculetype SOLX "
        "(grompp could not make the .tpr)"
    )


def test_a_missing_reference_file_is_one_line_naming_it(tmp_path):
    shutil.copy(DATA / "check-missing-reference.err", tmp_path / "check-tip4p-energy.err")
    said = outcome.app_error(_recipe(), tmp_path, [])
    assert said == "tip4p/reference_s.edr: does not exist (gmx check -e)"


def test_the_inputs_copy_the_tests_from_the_builds_tree(tmp_path, monkeypatch):
    stage = tmp_path / "build"
    for t in ("nbnxn_pme", "nbnxn_vsite", "tip4p"):
        d = stage / "tree/regressiontests/complex" / t
        d.mkdir(parents=True)
        (d / "grompp.mdp").write_text(f"; {t}\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    params = inputs.render("gromacs", "ci", run_dir, 2, build_dir=stage)
    assert (run_dir / "bench/grompp.mdp").read_text() == "; nbnxn_pme\n"
    assert (run_dir / "tip4p/grompp.mdp").is_file() and params["etol_rel"] == 0.001
    shutil.rmtree(stage / "tree/regressiontests/complex/tip4p")
    with pytest.raises(ApptuneError) as e:
        inputs.render("gromacs", "ci", tmp_path / "run2", 2, build_dir=stage)
    assert str(e.value).startswith(
        "inputs/gromacs/ci/input.yaml: from_build.tip4p: build product "
        "'tree/regressiontests/complex/tip4p' not found"
    )


def test_mode_ci_runs_the_distributions_build_alone_and_nightly_the_builds_too():
    reframe = str(Path(sys.executable).with_name("reframe"))
    listed = {}
    for mode in ("ci", "nightly"):
        p = subprocess.run(
            [reframe, "-C", "site-config/settings.py", "-c", "reframe-checks/gromacs"]
            + ["--mode", mode, "-l"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        listed[mode] = [ln.split(" /")[0] for ln in p.stdout.splitlines() if ln.startswith("- ")]
    # make run compiles no GROMACS: Debian's gmx_mpi, nothing built
    assert listed["ci"] == ["- GromacsInstalledCheck %tier=ci %build.variant=debian"]
    assert "- GromacsInstalledCheck %tier=nightly %build.variant=debian" in listed["nightly"]
    assert "- GromacsCheck %tier=nightly %build.variant=tuned+fft=mkl" in listed["nightly"]


def test_the_installs_source_paths_hold_every_test_the_inputs_copy():
    """The distribution's build runs the same regression tests as a build of the tarball:
    each test an input copies from the build's tree is among the install's source paths,
    and the paths lie in the regressiontests component (fetched alone)."""
    r = _recipe()
    install = r.installs["debian"]
    comp = r.source.components[0]
    assert all(p.startswith(comp.dest + "/") for p in install.source_paths)
    for tier in recipes.tiers_naming(r, ["debian"]):
        _, spec = inputs.load_input("gromacs", tier)
        for product in spec.from_build.values():
            rel = product.removeprefix("tree/")
            assert any(rel == p or rel.startswith(p + "/") for p in install.source_paths), (
                tier,
                product,
            )
