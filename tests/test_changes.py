"""What changed between a baseline's runs and this run, in the words a user reads."""

import json

import pytest
from conftest import hpcc_ci_run

from apptune.core.judge import baselines, changes
from apptune.errors import ApptuneError
from apptune.models import RunRecord
from apptune.tools.bisect import between

pytestmark = pytest.mark.unit


def record(cflags=("-O3", "-march=native"), fflags=("-O3",), gcc="12.2.0", blas="0.3.21", **kw):
    return RunRecord.model_validate(
        {
            "app": "hpcc",
            "tier": "ci",
            "variant": "tuned",
            "environment": "gnu",
            "verification": {"ok": True, "summary": "verified"},
        }
        | provenance(cflags, fflags, gcc, blas)
        | kw
    )


def provenance(cflags, fflags, gcc, blas):
    return {
        "provenance": {
            "compilers": {"cc": {"version": f"gcc {gcc}", "mpi": "Open MPI 4.1.4"}},
            "flags": {"cflags": list(cflags), "fflags": list(fflags), "per_file": []},
            "libraries": {"openblas": {"version": blas}},
            "patches": [{"file": "0001-x.patch", "sha256": "a" * 64}],
            "source": {"file": "hpcc.tar.gz", "sha256": "1" * 64},
            "build_seconds": 12.0,
            "products": [{"file": "hpcc", "sha256": "f" * 64}],
            "cache": {"hit": True},
        },
        "input": {"n": 1000},
        "placement_layout": {"binding": "core", "ranks": 2},
        "launch": {"launcher": ["srun", "--cpu-bind=cores"], "env_vars": {"A": "1"}},
        "machine": {"kernel": "6.1"},
    }


def test_a_flag_ladder_slip_is_one_line_for_both_languages():
    before = changes.facts(record())
    after = changes.facts(record(cflags=("-O0", "-march=native"), fflags=("-O0",)))
    assert changes.describe(before, after) == ["flags -O3 → -O0"]
    assert changes.short(changes.describe(before, after)) == "flags -O3 → -O0"


def test_what_a_build_produces_is_no_cause_and_each_cause_is_named():
    a, b = record(), record(gcc="13.1.0", blas="0.3.26", input={"n": 2000})
    b.provenance.products = [{"file": "hpcc", "sha256": "e" * 64}]
    b.provenance.build_seconds = 99
    b.launch = {"launcher": ["mpirun", "-np", "2"], "env_vars": {"A": "1", "B": "tcp"}}
    d = changes.describe(changes.facts(a), changes.facts(b))
    assert d == [
        "compiler cc: gcc 12.2.0 / Open MPI 4.1.4 → gcc 13.1.0 / Open MPI 4.1.4",
        "env B: (none) → tcp",
        "input n: 1000 → 2000",
        "launcher: srun --cpu-bind=cores → mpirun -np 2",
        "library openblas: version=0.3.21 → version=0.3.26",
    ]
    assert changes.short(d) == "; ".join(d[:3]) + " (+2 more)"
    assert changes.describe(changes.facts(a), changes.facts(record())) == []
    assert changes.short([]) == changes.NOTHING


def test_a_fact_the_baseline_runs_disagree_on_is_never_blamed():
    base = changes.common([changes.facts(record()), changes.facts(record(input={"n": 5}))])
    assert base["input n"] == changes.VARIED
    assert changes.describe(base, changes.facts(record(input={"n": 7}))) == []


def test_a_baseline_keeps_its_runs_facts_but_not_the_machine(toy_root):
    from test_baselines import result

    rs = [record(**result(40.0, r).data()) for r in "abc"]
    f, text, notes = baselines.merge("local", "hpcc", rs)
    b = baselines.BaselineFile.model_validate(__import__("yaml").safe_load(text))
    (e,) = b.entries
    assert e.provenance["flags cflags"] == "-O3 -march=native"
    assert not any(k.startswith("machine ") for k in e.provenance)
    slip_prov = record(cflags=("-O0",), fflags=("-O0",)).provenance
    slip = rs[0].model_copy(update={"provenance": slip_prov})
    assert baselines.what_changed(e, slip) == ["cflags -O3 -march=native → -O0", "fflags -O3 → -O0"]
    old = e.model_copy(update={"provenance": None})
    assert baselines.what_changed(old, slip) is None


def test_the_history_keeps_how_a_run_was_launched_with_its_build(tmp_path):
    """A change point in the history names a run-time change too (Open MPI forced to TCP
    by the site's environment), not only the build's."""
    from apptune.history import regressions

    prov = record().provenance.data()
    before = dict(prov, launch={"env_vars": {"A": "1"}})
    after = dict(prov, launch={"env_vars": {"A": "1", "OMPI_MCA_btl": "tcp"}})
    assert regressions.provenance_diff(before, after) == ["env OMPI_MCA_btl: (none) → tcp"]


def test_bisect_between_tests_what_it_can_undo_and_names_the_rest():
    from conftest import gnu_mpi_toolchain

    from apptune.core.data import recipes
    from apptune.core.data.site import Site
    from apptune.tools.bisect import between

    base = changes.facts(record())
    now = changes.facts(
        record(
            cflags=("-O0", "-march=native"),
            gcc="13.1.0",
            input={"n": 2000},
            launch={"launcher": ["srun"], "env_vars": {"A": "1", "B": "tcp"}},
        )
    )
    dims = {c.fact: c for c in between.dimensions(base, now)}
    assert {k for k, c in dims.items() if c.where} == {"flags cflags", "env B", "input n"}
    assert dims["compiler cc"].why_not.startswith("cannot be put back")
    assert dims["flags cflags"].line == "cflags -O3 → -O0"
    assert dims["env B"].line == "env B: (none) → tcp"
    hpcc = recipes.resolve(recipes.load_recipe("hpcc"), "tuned", gnu_mpi_toolchain())
    plan = hpcc.updated(cflags=["-O0", "-march=native"])
    site = Site(
        environment="gnu",
        toolchain=None,
        env={"A": "1", "B": "tcp"},
        launcher="local",
        partition="default",
    )
    chs = list(dims.values())
    p, s, params = between.undo_config(chs, set(), plan, site)  # everything as the baseline had it
    assert p.cflags == ["-O3", "-march=native"] and "B" not in s.env and "B" in s.unset
    assert params == {"n": 1000}
    p, s, params = between.undo_config(chs, {"env B"}, plan, site)  # only the variable changed
    assert p.cflags == ["-O3", "-march=native"] and s.env["B"] == "tcp" and params == {"n": 1000}


def test_a_report_row_keeps_what_its_verdict_compares(tmp_path):
    """A report row keeps how its run was launched (the repeats of a variant are judged
    again from their run records, where a row without the launch named every variable of
    the site as removed since the baseline)."""
    from conftest import write_run

    from apptune.report.collect import collect

    launch = {"launcher": ["srun"], "env_vars": {"OMPI_ALLOW_RUN_AS_ROOT": "1"}, "modules": []}
    r = {"app": "toy", "tier": "ci", "environment": "gnu", "variant": "tuned"}
    d = write_run(tmp_path / "run", "u1", 1.7e9, [dict(r, figures={"rate": 1.0}, launch=launch)])
    (row,) = collect(d / "report.json")["results"]
    assert row.launch.data() == launch


def test_a_shift_with_nothing_changed_is_unexplained_and_a_named_change_is_a_regression(toy_root):
    """A run 60 % slower than its baseline: a regression when the flags changed, but only
    ``unexplained`` (said, failing nothing, no ReFrame bound) when every recorded fact is
    the baseline's: a VM's night at another level is no regression of the build."""
    from test_baselines import FIGS, result

    from apptune.rfm.reference import reframe_reference

    rs = [record(**result(40.0 + i / 10, r).data()) for i, r in enumerate("abc")]
    f, text, _ = baselines.merge("local", "hpcc", rs)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    same = record(**result(16.0, "d").data())
    v = baselines.verdicts("local", "hpcc", [same], FIGS)
    hpl = v.figures["HPL"]
    assert v.changed == [] and hpl.verdict == "unexplained", hpl
    assert hpl.direction == "regression" and "nothing recorded changed" in hpl.why
    assert reframe_reference(v.figures, FIGS)["*"]["HPL"][1:3] == (None, None)
    slip = record(cflags=("-O0",), **result(16.0, "e").data())
    v = baselines.verdicts("local", "hpcc", [slip], FIGS)
    assert v.changed == ["cflags -O3 -march=native → -O0"]
    assert v.figures["HPL"].verdict == "regression"
    low, high = reframe_reference(v.figures, FIGS)["*"]["HPL"][1:3]
    assert low < 0 and high is None  # the threshold below the baseline fails ReFrame


@pytest.fixture(scope="module")
def hpcc_here():
    """HPCC's ``tuned+fft=fftw3`` with the site's gnu environment (Open MPI), as bisect
    --between sees a run of it; nothing is built."""
    from apptune import paths
    from apptune.core.data import recipes
    from apptune.core.data.site import load_site
    from apptune.tools.bisect import undo

    recipe = recipes.load_recipe("hpcc")
    gnu = load_site("gnu", languages=recipe.build.languages)
    return undo.Here(recipe, "tuned+fft=fftw3", gnu, paths.DEFAULT_CONFIG)


def test_bisect_between_puts_back_library_axes_and_the_mpi_of_another_environment(hpcc_here):
    """The baseline: built with MPICH (environment gnu-mpich), BLIS and FFTE; the run: Open
    MPI, OpenBLAS and FFTW (with the patch FFTW needs). Each axis is one dimension with its
    library, flags and patch; the MPI is put back by building in gnu-mpich."""
    from apptune.tools.bisect import undo

    h = hpcc_here
    mpich = h.other_sites()["gnu-mpich"]
    old_plan = h.plan_with(dict(h.plan.axes, blas="blis", fft="ffte"), mpich)
    base = h.plan_facts(old_plan) | h.site_facts(mpich)
    now = h.plan_facts(h.plan) | h.site_facts(h.site)
    chs = undo.dimensions(base, now, h)
    by = {c.fact: c for c in chs}
    assert {k for k, c in by.items() if c.where} == {"axis blas", "axis fft", "compiler cc"}
    assert by["compiler cc"].environment == "gnu-mpich"
    assert "MPICH" in by["compiler cc"].old and "Open MPI" in by["compiler cc"].new
    assert by["patch 0002-fftw3-interface.patch"].part_of == "axis fft"
    assert by["flags ldflags"].part_of == "axis blas + axis fft"
    assert by["env OMPI_CC"].part_of == "compiler cc"
    assert all(c.where or c.part_of for c in chs), [c.line for c in chs if not c.where]

    plan, site, _ = undo.config(chs, set(), h.plan, h.site, h)  # all as the baseline's
    assert site.environment == "gnu-mpich" and plan.axes == old_plan.axes
    assert plan == old_plan and "OMPI_CC" not in site.env
    plan, site, _ = undo.config(chs, {"compiler cc", "axis fft"}, h.plan, h.site, h)
    assert site.environment == "gnu" and plan.axes == dict(h.plan.axes, blas="blis")
    assert [p.file for p in plan.patches] == [p.file for p in h.plan.patches]
    assert undo.config(chs, {c.fact for c in chs if c.where}, h.plan, h.site, h)[0] == h.plan


def test_bisect_between_applies_a_removed_patch_again_when_its_file_is_here(hpcc_here):
    """A patch the baseline's build had and the run's has not is applied again for the
    candidates without that change (its file, checked against the recorded checksum); an
    edited patch cannot be put back (only its checksum was recorded)."""
    from apptune import paths
    from apptune.core.data import recipes
    from apptune.tools.bisect import undo

    h = hpcc_here
    ffte = h.plan_with(dict(h.plan.axes, fft="ffte"), h.site)
    fftw = next(p for p in h.plan.patches if p.file == "0002-fftw3-interface.patch")
    now = h.plan_facts(ffte)
    gone = dict(now, **{"patch 0002-fftw3-interface.patch": fftw.sha256[:12]})
    edited = dict(now, **{"patch 0001-mpi3-get-address-create-struct.patch": "0" * 12})
    h2 = undo.Here(h.recipe, "tuned", h.site, h.config)
    (c,) = undo.dimensions(gone, now, h2)
    assert c.where == "build" and c.line.startswith("patch 0002-fftw3-interface.patch: ")
    plan, _, _ = undo.config([c], set(), ffte, h.site, h2)
    assert [p.file for p in plan.patches] == sorted([p.file for p in ffte.patches] + [fftw.file])
    assert plan.patches[-1].sha256 == recipes.sha256_file(paths.patches_dir("hpcc") / fftw.file)
    assert undo.config([c], {c.fact}, ffte, h.site, h2)[0].patches == ffte.patches
    (c,) = undo.dimensions(edited, now, h2)
    assert c.where is None and "only its checksum" in c.why_not


def test_bisect_between_takes_the_result_named_as_the_report_names_it(tmp_path):
    """``--test gnu/tuned`` (environment/variant, as the report and the docs name it), the
    run variant or the test's name; another environment's is not this one."""
    run_dir = hpcc_ci_run(tmp_path / "run")
    f = next(run_dir.rglob("apptune-result.json"))
    rec = json.loads(f.read_text())
    verdict = {"value": 20.0, "baseline": 40.0, "change": -0.5, "verdict": "regression"}
    rec["baseline"] = {"found": True, "figures": {"HPL": verdict}}
    f.write_text(json.dumps(rec))
    for test in ("gnu/tuned", "tuned", "HPCCCheck %tier=ci %build.variant=tuned"):
        r, fig = between._regressed(run_dir, "HPL", test)
        assert (r.environment, r.variant, fig) == ("gnu", "tuned", "HPL")
    with pytest.raises(ApptuneError, match="in figure HPL for llvm/tuned"):
        between._regressed(run_dir, "HPL", "llvm/tuned")


def test_a_flag_set_no_compile_line_carries_is_listed_not_bisected(hpcc_here):
    """The ladder's Fortran flags changed with its C flags; HPCC compiles C only: one
    dimension (cflags), not a cycle spent on fflags."""
    from apptune.tools.bisect import undo

    h = hpcc_here
    old = h.plan.updated(cflags=["-O2"], fflags=["-O2"])
    by = {c.fact: c for c in undo.dimensions(h.plan_facts(old), h.plan_facts(h.plan), h)}
    assert by["flags cflags"].where == "build"
    assert by["flags fflags"].where is None
    assert (
        by["flags fflags"].why_not == "no compile line of this build carries fflags (it compiles c)"
    )


def test_a_library_loaded_on_one_side_only_is_said_as_a_change_of_its_own():
    """bisect --between lists each difference alone: a library the new run's ranks loaded
    (and the baseline's did not record) is one line, not nothing."""
    from apptune.tools.bisect.undo import Change

    blis = "/usr/lib/blis/libblas.so.3 (sha256 abababababab)"
    assert Change("loaded libblas.so.3", None, blis).line == f"loaded libblas.so.3: (none) → {blis}"
    assert Change("flags cflags", "-O3", "-O0").line == "cflags -O3 → -O0"
