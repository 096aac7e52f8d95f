"""mpi-micro: each benchmark's verification passes on a recorded real run and
fails on corrupted data, through the same parsing and verification the check uses.

tests/data/mpi-micro/ holds real ci-tier runs of the harness-built binary (gnu/tuned,
Open MPI, 2 ranks bound to cores):

* ``good/``: an ordinary run;
* ``corrupt-BENCH/``: the same input with ``--corrupt=SUBTESTS``: the program flips one
  byte of the first buffer each rank checks in those subtests, as a faulty transport
  would deliver it. Its own check must count the mismatch and its checksum must change.

``rfm_job.out`` is the program's standard output (the job's stdout in a ReFrame stage).
"""

import shutil

import pytest
from conftest import REPO

from apptune.core.builds import steps
from apptune.core.data import recipes
from apptune.core.verification import outputs, verify

DATA = REPO / "tests/data/mpi-micro"
RECIPE = recipes.load_recipe(REPO / "build-recipes/mpi-micro.yaml")

#: The six benchmarks and the subtests whose data each one checks.
BENCHMARKS = {
    "imb": ["pingpong", "pingping", "sendrecv", "allreduce", "alltoall", "bcast"],
    "noise": ["noise"],
    "overlap": ["overlap"],
    "contention": ["wocon", "wicon"],
    "placement": ["placement"],
    "rma": ["rma_put", "rma_get", "rma_acc", "rma_fop", "rma_shift", "rma_amo"],
}


def _verify(stage, tier="ci"):
    values, curves = outputs.parse_all(RECIPE.run.outputs, stage, "rfm_job.out", tier)
    texts = {}
    for c in RECIPE.run.own_checks:
        f = c.file or RECIPE.run.outputs[0].file
        texts[f] = outputs.output_path(f, stage, "rfm_job.out").read_text()
    v = verify.verify(
        "mpi-micro",
        tier,
        values,
        RECIPE.run.own_checks,
        texts,
        "gnu",
        "tuned@bound",
        RECIPE.run.outputs[0].file,
    )
    return v, values, curves


def _copy(name, tmp_path):
    dest = tmp_path / name
    shutil.copytree(DATA / name, dest)
    return dest


def test_recorded_run_verifies_and_keeps_every_curve(tmp_path):
    v, values, curves = _verify(_copy("good", tmp_path))
    assert v.ok, v.summary()
    expected_curves = {o.name for o in RECIPE.run.outputs if o.format == "curve"}
    assert set(curves) == expected_curves and len(curves) == 16
    # every required figure of the recipe is present in a real run; the optional ones
    # (other socket, other node) are absent on this one-socket, one-node machine
    for name, fig in RECIPE.run.figures.items():
        assert isinstance(values.get(fig.field), (int, float)) != fig.optional, name
    assert values["noise_kernel_fortran"] == 1 and values["bound"] == 1
    # two ranks: WICON has one pair, the placement classes other than same-socket are absent
    assert values["contention_pairs"] == 1
    assert values["placement_other_socket_available"] == 0
    assert values["placement_other_node_available"] == 0
    assert "placement_other_node_us" not in values


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
def test_corrupted_data_fails_that_benchmarks_verification(tmp_path, bench):
    v, values, _ = _verify(_copy(f"corrupt-{bench}", tmp_path))
    assert not v.ok
    failed = {f.field for f in v.fields if not f.ok}
    for sub in BENCHMARKS[bench]:
        # the program's own count of mismatched bytes, and the checksum of what arrived
        assert values[f"{sub}_errors"] > 0, sub
        assert f"{sub}_errors" in failed and f"{sub}_checksum" in failed or sub == "placement", (
            failed
        )
        assert any(m.startswith(f"{sub}_errors = ") and "expected 0" in m for m in v.failures)
    if bench == "placement":
        # which placement classes exist depends on the nodes: no stored checksum
        assert "placement_errors" in failed
    # only this benchmark's checks fail (and the run's total and its stdout say so)
    others = {s for b, subs in BENCHMARKS.items() if b != bench for s in subs}
    assert not {f for f in failed if f.rsplit("_", 1)[0] in others}, failed
    assert "verification_failures" in failed
    assert any("found no received data that differed" in m for m in v.failures)


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
def test_changed_checksum_alone_fails_naming_the_field(tmp_path, bench):
    """Data that differs without a counted mismatch (e.g. a pattern bug on both sides)
    still fails: the checksum of the received data is a reference value."""
    stage = _copy("good", tmp_path)
    sub = next(s for s in BENCHMARKS[bench] if s != "placement") if bench != "placement" else None
    summary = stage / "mpi-micro.summary"
    text = summary.read_text()
    if sub is None:
        # placement has no checksum (machine dependent): a lost check must fail instead
        old = next(ln for ln in text.splitlines() if ln.startswith("placement_checked="))
        summary.write_text(text.replace(old + "\n", "placement_checked=0\n"))
        field = "placement_checked"
    else:
        old = next(ln for ln in text.splitlines() if ln.startswith(f"{sub}_checksum="))
        value = int(old.split("=")[1])
        summary.write_text(text.replace(old + "\n", f"{sub}_checksum={value ^ 1}\n"))
        field = f"{sub}_checksum"
    v, _, _ = _verify(stage)
    assert not v.ok
    assert [f.field for f in v.fields if not f.ok] == [field]
    assert any(m.startswith(f"{field} = ") for m in v.failures)


def test_truncated_curve_fails_on_its_point_count(tmp_path):
    stage = _copy("good", tmp_path)
    f = stage / "imb-alltoall.dat"
    f.write_text("".join(f.read_text().splitlines(True)[:-1]))
    v, _, _ = _verify(stage)
    assert not v.ok and [x.field for x in v.fields if not x.ok] == ["alltoall_points"]


def test_missing_curve_file_is_a_clear_error(tmp_path):
    from apptune.errors import ApptuneError

    stage = _copy("good", tmp_path)
    (stage / "rma-amo.dat").unlink()
    with pytest.raises(ApptuneError, match="rma-amo.dat: output file was not written"):
        _verify(stage)


def test_incomplete_run_fails_its_own_check(tmp_path):
    stage = _copy("good", tmp_path)
    summary = stage / "mpi-micro.summary"
    summary.write_text(summary.read_text().replace("complete=1\n", ""))
    v, _, _ = _verify(stage)
    assert not v.ok
    assert any("complete" in m and "missing" in m for m in v.failures)
    assert any("ran every selected benchmark" in m for m in v.failures)


def test_references_hold_checks_and_checksums_never_timings():
    for tier in RECIPE.tiers:
        _, ref = verify.load_reference("mpi-micro", tier)
        for name in ref.fields:
            assert not name.endswith(("_us", "_seconds", "_mbs", "_pct", "_stretch")), (tier, name)
        subs = [s for subs in BENCHMARKS.values() for s in subs]
        assert all(f"{s}_errors" in ref.fields and f"{s}_checked" in ref.fields for s in subs)
        assert all(f"{s}_checksum" in ref.fields for s in subs if s != "placement")
    ci = verify.load_reference("mpi-micro", "ci")[1]
    nightly = verify.load_reference("mpi-micro", "nightly")[1]
    assert set(ci.fields) == set(nightly.fields)


# --------------------------------------------------------------------------- recipe
def test_flang_cannot_use_the_gfortran_mpi_f08_module_is_an_expected_failure():
    x = recipes.expected_build_failure(RECIPE, "llvm", "tuned")
    assert x is not None and "mpi_f08" in x[1].match
    # the C noise kernel builds with clang: not expected to fail
    assert recipes.expected_build_failure(RECIPE, "llvm", "tuned+noise=c") is None
    assert recipes.expected_build_failure(RECIPE, "gnu", "tuned") is None
    assert recipes.expected_build_failure(RECIPE, "gnu-mpich", "tuned") is None
    import re

    said = (
        "./noise_kernel_f08.f90:12:7: error: Cannot read module file for module 'mpi_f08': "
        "bad character (0x1f) in Fortran token"
    )
    assert re.search(x[1].match, said)


def test_make_arguments_carry_compilers_flags_and_kernel(gnu_toolchain):
    from dataclasses import replace

    plan = recipes.resolve(RECIPE, "tuned", gnu_toolchain).to_dict()
    ctx = dict(plan, cc="CC", cxx="CXX", ftn="FC")
    argv = steps.step_argv(RECIPE, steps.steps_of(RECIPE)[0], 0, ctx)
    assert argv[:2] == ["make", "-j2"] and argv[-1] == "mpi-micro"
    assert "CC=CC" in argv and "FC=FC" in argv and "NOISE=f08" in argv
    assert "CFLAGS=-O3 -march=native -funroll-loops" in argv
    assert "FFLAGS=-std=f2008 -O3 -march=native -funroll-loops" in argv
    llvm = replace(gnu_toolchain, environment="llvm", family="llvm")
    plan = recipes.resolve(RECIPE, "tuned+noise=c", llvm).to_dict()
    argv = steps.step_argv(
        RECIPE, steps.steps_of(RECIPE)[0], 0, dict(plan, cc="CC", cxx="CXX", ftn="FC")
    )
    assert "NOISE=c" in argv and "FFLAGS=-O3 -march=native -funroll-loops" in argv


def test_inputs_give_every_runtime_argument():
    from apptune.core.data import inputs

    for tier in RECIPE.tiers:
        _, spec = inputs.load_input("mpi-micro", tier)
        params = inputs.resolve_parameters(spec, 2)
        args = inputs.render_words(RECIPE.run.args, params, "mpi-micro", "run.args")
        assert all(a.startswith("--") and "=" in a and not a.endswith("=") for a in args), args
        assert (
            "--max-bytes=4194304" in args
            and "--noise-outer=100" in args
            and "--noise-inner=100" in args
        )
