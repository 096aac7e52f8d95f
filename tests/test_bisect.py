"""apptune bisect: archives, object mixing, the search, the recipe diff, bad inputs,
and the synthetic Fortran + C case built and bisected for real (integration)."""

import json
import subprocess

import pytest
import synth_app
import yaml
from conftest import REPO

from apptune import cli
from apptune.core.data import recipes
from apptune.core.data.site import Site, load_site
from apptune.core.run import localrun
from apptune.errors import ApptuneError
from apptune.tools import bisect


# ----------------------------------------------------------------------- archives
def test_read_archive_gives_members_with_long_names(tmp_path):
    names = ["a.o", "a_member_name_longer_than_sixteen.o", "odd.o"]
    for i, n in enumerate(names):
        (tmp_path / n).write_bytes(b"x" * (i + 1))
    subprocess.run(["ar", "rcs", "lib.a", *names], cwd=tmp_path, check=True)
    assert bisect.read_archive(tmp_path / "lib.a") == [
        (n, b"x" * (i + 1)) for i, n in enumerate(names)
    ]


def test_read_archive_refuses_other_files(tmp_path):
    (tmp_path / "x.a").write_bytes(b"not an archive")
    with pytest.raises(ApptuneError, match="x.a: archive: not an ar archive"):
        bisect.read_archive(tmp_path / "x.a")


def test_object_of_reads_o_or_derives_it():
    e = {
        "cwd": "/s/b",
        "argv": ["cc", "-O2", "-c", "../x/y.c", "-o", "../x/y.o"],
        "sources": ["x/y.c"],
    }
    assert bisect.object_of(e) == "/s/b/../x/y.o"
    e = {"cwd": "/s/b", "argv": ["cc", "-c", "../x/y.c"], "sources": ["x/y.c"]}
    assert bisect.object_of(e) == "/s/b/y.o"


# ------------------------------------------------------------------------- search
def _oracle(culprits, needs_all=False):
    calls = []

    def fails(bad):
        calls.append(frozenset(bad))
        hit = [c for c in culprits if c in bad]
        return len(hit) == len(culprits) if needs_all else bool(hit)

    return fails, calls


def test_search_finds_one_culprit_among_200_in_log2_steps():
    units = [f"f{i:03d}.o" for i in range(200)]
    fails, calls = _oracle(["f137.o"])
    r = bisect.bisect_search(units, fails)
    assert r["culprits"] == ["f137.o"] and r["verified"] and r["method"] == "bisection"
    assert len(calls) <= 8 + 1  # at most ceil(log2 200) halvings + the verification


def test_search_finds_two_independent_culprits_and_checks_each_is_needed():
    units = [f"f{i:02d}.o" for i in range(40)]
    fails, calls = _oracle(["f03.o", "f31.o"])
    r = bisect.bisect_search(units, fails)
    assert sorted(r["culprits"]) == ["f03.o", "f31.o"] and r["verified"] and r["one_minimal"]


def test_search_on_an_interaction_returns_a_sufficient_set():
    # fails only when both are bad: keeping either one good is enough
    units = [f"f{i:02d}.o" for i in range(16)]
    fails, _ = _oracle(["f02.o", "f12.o"], needs_all=True)
    r = bisect.bisect_search(units, fails)
    assert r["verified"] and len(r["culprits"]) == 1
    assert not fails([u for u in units if u not in r["culprits"]])


def test_search_says_when_no_object_is_the_cause():
    with pytest.raises(ApptuneError, match="every object from the good build still fails"):
        bisect.bisect_search([f"f{i}.o" for i in range(8)], lambda bad: True)


# ----------------------------------------------------------------- recipe edits
def test_add_per_file_appends_to_an_existing_block_and_keeps_comments(toy_root):
    text = (toy_root / "build-recipes/toy.yaml").read_text()
    entry = {"files": ["main.c"], "flags": "baseline", "reason": "apptune bisect: x: y"}
    new = bisect.add_per_file(text, [entry])
    data = yaml.safe_load(new)
    assert data["per_file"][-1] == entry and len(data["per_file"]) == 2
    assert new.startswith(text.split("per_file:")[0])


def test_add_per_file_creates_the_section(toy_root):
    text = (
        "\n".join(
            ln
            for ln in (toy_root / "build-recipes/toy.yaml").read_text().splitlines()
            if "per_file" not in ln
            and "acc.c" not in ln
            and "flags: baseline" not in ln
            and "IEEE order" not in ln
        )
        + "\n"
    )
    assert "per_file" not in text
    new = bisect.add_per_file(text, [{"files": ["a.c"], "cflags": ["-O1"], "reason": "r"}])
    assert yaml.safe_load(new)["per_file"] == [{"files": ["a.c"], "cflags": ["-O1"], "reason": "r"}]
    new = bisect.add_per_file(
        text.replace("run:", "per_file: []\nrun:"),
        [{"files": ["a.c"], "flags": "none", "reason": "r"}],
    )
    assert yaml.safe_load(new)["per_file"] == [{"files": ["a.c"], "flags": "none", "reason": "r"}]


def test_good_flags_are_the_rule_the_good_build_applied(toy_root, gnu_toolchain):
    r = recipes.load_recipe("toy")
    plan = recipes.resolve(r, "tuned", gnu_toolchain)
    assert bisect.good_flags(plan, "acc.c") == {"flags": "baseline"}  # the recipe's rule
    assert bisect.good_flags(plan, "main.c") == {"flags": "tuned"}


# --------------------------------------------------------------------- bad inputs
@pytest.fixture
def toy_site(gnu_toolchain):
    return Site("gnu", gnu_toolchain, {}, "local", "test:local", {})


@pytest.mark.parametrize(
    "good,bad,match",
    [
        ("tuned", "nosuch", "toy.yaml: variant: 'nosuch': unknown flag ladder 'nosuch'"),
        ("tuned", "tuned+blas=mkl", "toy.yaml: variant: 'tuned\\+blas=mkl': unknown blas 'mkl'"),
        ("tuned", "tuned", "toy.yaml: variant: --good tuned and --bad tuned are the same build"),
    ],
)
def test_bad_variants_are_one_clear_error(toy_root, toy_site, tmp_path, good, bad, match):
    with pytest.raises(ApptuneError, match=match):
        bisect.bisect("toy", good, bad, toy_site, work=tmp_path / "w")


def test_unknown_tier_and_unknown_app(toy_root, toy_site, tmp_path):
    with pytest.raises(ApptuneError, match="toy.yaml: tiers: unknown tier 'huge'"):
        bisect.bisect("toy", "baseline", "tuned", toy_site, tier="huge", work=tmp_path / "w")
    with pytest.raises(ApptuneError, match="no recipe for application 'nope'"):
        bisect.bisect("nope", "baseline", "tuned", toy_site, work=tmp_path / "w")


def test_variants_differing_in_library_axes_are_refused(toy_root, toy_site, tmp_path):
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(
        f.read_text().replace(
            "openblas: {library: openblas}",
            "openblas: {library: openblas}\n    blis: {library: blis}",
        )
    )
    with pytest.raises(ApptuneError, match="differ in more than flags"):
        bisect.bisect("toy", "tuned", "tuned+blas=blis", toy_site, work=tmp_path / "w")


def test_cli_unknown_environment_names_the_site_config(capsys):
    rc = cli.main(["bisect", "hpcc", "--good", "tuned", "--bad", "aggressive", "-e", "nosuch"])
    err = capsys.readouterr().err.strip()
    assert (
        rc == 2
        and err.startswith("apptune: error: ")
        and "settings.py: environments: unknown environment 'nosuch'" in err
        and len(err.splitlines()) == 1
    )


def test_load_site_takes_launcher_and_variables_from_the_site_config():
    s = load_site("gnu", REPO / "site-config/settings.py")
    assert (s.launcher, s.system, s.partition) == ("mpirun", "local", "default")
    assert s.env["OMPI_CC"] == "gcc" and s.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert s.toolchain.family == "gnu"


@pytest.mark.slow
def test_a_passing_bad_variant_is_refused(toy_root, toy_site, tmp_path):
    # both builds of the toy verify: nothing to bisect
    with pytest.raises(
        ApptuneError, match="--bad: tuned passes verification on tier ci: nothing to bisect"
    ):
        bisect.bisect("toy", "baseline", "tuned", toy_site, work=tmp_path / "w")


# ------------------------------------------------------------ function level
LIB = """\
int g_scale = SCALE;
static int helper(int x) { return x * SCALE; }
int f1(int x) { return helper(x) + 1; }
int f2(int x) { return f1(x) + 100; }
"""
MAIN = """\
#include <stdio.h>
int f1(int), f2(int);
extern int g_scale;
int main(void) { printf("%d %d %d\\n", f1(1), f2(1), g_scale); return 0; }
"""


@pytest.mark.parametrize(
    "good_funcs,expected",
    [
        (set(), "8 108 7"),  # all bad (f2 inlines bad f1: 7 + 1 + 100)
        ({"f1"}, "4 108 7"),  # f1 good; the bad f2 keeps its inlined copy of the bad f1
        ({"f2"}, "8 104 7"),  # f2 good (with its own inlined good f1)
        ({"f1", "f2"}, "4 104 7"),  # all good functions; variables always the bad build's
    ],
)
@pytest.mark.slow
def test_symbol_mix_takes_each_function_from_its_side(tmp_path, good_funcs, expected):
    for name, scale in (("good", 3), ("bad", 7)):
        (tmp_path / f"{name}.c").write_text(LIB.replace("SCALE", str(scale)))
        subprocess.run(
            ["gcc", "-O2", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp_path, check=True
        )
    (tmp_path / "main.c").write_text(MAIN)
    assert bisect.defined_globals(tmp_path / "bad.o") == (["f1", "f2"], ["g_scale"])
    mixed = bisect.symbol_mix(
        tmp_path / "good.o",
        tmp_path / "bad.o",
        good_funcs,
        ["f1", "f2"],
        tmp_path / "mix" / "lib.o",
    )
    subprocess.run(["gcc", "main.c", str(mixed), "-o", "t"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout
    assert out.strip() == expected


@pytest.mark.slow
def test_symbol_mix_errors_name_the_object(tmp_path):
    (tmp_path / "x.o").write_text("not an object")
    with pytest.raises(ApptuneError, match=r"x\.o: nm: cannot list the symbols"):
        bisect.defined_globals(tmp_path / "x.o")
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\n")
    subprocess.run(["gcc", "-c", "a.c"], cwd=tmp_path, check=True)
    with pytest.raises(ApptuneError, match="a.o: g: not a global function of both objects"):
        bisect.symbol_mix(tmp_path / "a.o", tmp_path / "a.o", {"g"}, ["f"], tmp_path / "m.o")


def test_fortran_module_procedures_read_as_module_colon_colon_name():
    assert bisect.pretty_symbol("__kernels_MOD_mean_of") == "kernels::mean_of"
    assert bisect.pretty_symbol("count_missing") == "count_missing"


# ------------------------------------------------------------ the synthetic case
@pytest.fixture
def synth_root(toy_root):
    synth_app.write_tree(toy_root)
    return toy_root


@pytest.mark.integration
def test_synthetic_fortran_c_case_names_the_fast_math_file(synth_root, tmp_path, capsys, toy_site):
    """Builds the synthetic program (8 objects: 5 C in an archive, 3 Fortran with two
    modules) at baseline and aggressive, and bisects: exactly lib/missing.c, in at
    most 15 build+run cycles, verified; the recipe is only written with --write."""
    site = toy_site
    recipe_file = synth_root / "build-recipes/synth.yaml"
    before = recipe_file.read_text()
    res = bisect.bisect("synth", "baseline", "aggressive", site, work=tmp_path / "w", repeats=1)
    assert [c["source"] for c in res.culprits] == ["lib/missing.c"]
    assert res.verified and res.one_minimal and res.n_cycles <= 15
    assert res.units == 8 and res.relink_identical and res.modules_differing == []
    assert res.cycles[1].summary.startswith("missing = 0, expected 14286")
    # then the functions of lib/missing.c: count_missing alone, count_above may stay aggressive
    [fl] = res.functions
    assert fl["functions"] == ["count_missing"] and fl["of"] == 2 and fl["verified"], fl
    assert 1 <= fl["cycles"] <= 2 and "`count_missing`" in bisect.report_md(res)
    assert [(e["files"], e["flags"]) for e in res.entries] == [(["lib/missing.c"], "baseline")]
    assert "+  - files: [lib/missing.c]" in res.diff and "+    flags: baseline" in res.diff
    assert recipe_file.read_text() == before
    saved = json.loads((tmp_path / "w/bisect.json").read_text())
    assert saved["n_cycles"] == res.n_cycles and (tmp_path / "w/bisect-report.md").is_file()
    assert set(res.timing["medians"]) == {"good", "bad", "mixed"}
    # the recipe with the rule: aggressive now passes as built by the checks' build step
    recipe_file.write_text(bisect.add_per_file(before, res.entries))
    plan = localrun.plan_for(recipes.load_recipe("synth"), "aggressive", site)
    localrun.build_variant(
        recipes.load_recipe("synth"), plan, site, tmp_path / "fixed", use_cache=False
    )
    r = localrun.run_tier(
        recipes.load_recipe("synth"), "ci", tmp_path / "fixed", tmp_path / "fixed-run", site
    )
    assert r.ok, r.summary


@pytest.mark.integration
def test_a_cmake_build_is_bisected_like_a_make_build(toy_root, tmp_path, toy_site):
    """The same program built by CMake (Makefile generator, out of source): CMake's
    own probes (compiler identification, try_compile) pass through the wrappers
    and are not the product; the objects under _build/ are mixed and relinked with
    CMake's recorded link lines; the culprit is found the same way."""
    synth_app.write_tree(toy_root, cmake=True)
    site = toy_site
    res = bisect.bisect("synth", "baseline", "aggressive", site, work=tmp_path / "w", repeats=1)
    assert [c["source"] for c in res.culprits] == ["lib/missing.c"]
    assert res.verified and res.n_cycles <= 15
    assert res.units == 8 and res.relink_identical and res.modules_differing == []
    assert res.cycles[1].summary.startswith("missing = 0, expected 14286")


def test_build_system_probes_are_not_the_product():
    from apptune.core.builds.compilelines import is_probe

    assert is_probe({"cwd": "/s/src", "argv": ["cc", "conftest.c"], "sources": ["conftest.c"]})
    assert is_probe(
        {"cwd": "/s/src/_build/CMakeFiles/3.25.1/CompilerIdC", "argv": ["cc", "CMakeCCompilerId.c"]}
    )
    assert is_probe(
        {"cwd": "/s/src/_build/CMakeFiles/CMakeScratch/TryCompile-x", "argv": ["cc", "-c", "a.c"]}
    )
    assert is_probe(
        {"cwd": "/s/src", "argv": ["cc", "-E", "/usr/share/cmake-3.25/Modules/CMakeTestGNU.c"]}
    )
    assert not is_probe(
        {"cwd": "/s/src/_build", "argv": ["cc", "-O2", "-c", "lib/a.c"], "sources": ["lib/a.c"]}
    )


@pytest.mark.slow
def test_lto_objects_are_refused_at_function_level(tmp_path):
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\n")
    subprocess.run(["gcc", "-O2", "-flto", "-c", "a.c"], cwd=tmp_path, check=True)
    with pytest.raises(ApptuneError, match="a.o: nm: a link-time-optimisation object"):
        bisect.defined_globals(tmp_path / "a.o")


def test_bisect_stores_the_trials_that_ran_before_it_stopped(
    toy_root, fake_trials, tmp_path, capsys
):
    """Both ends ran (the good one verified, the bad one not), then bisect stops on the
    builds (these have no compile lines): the two runs are one bisect session in the history."""
    from apptune.history import store

    fake_trials.wrong = {"tuned"}
    hdir = tmp_path / "h"
    argv = ["bisect", "toy", "--good", "baseline", "--bad", "tuned", "--work-dir"]
    rc = cli.main([*argv, str(tmp_path / "w"), "--history", str(hdir)])
    err = capsys.readouterr().err
    assert rc == 2 and "compile-lines.jsonl: no compile lines" in err, err
    with store.History(hdir) as h:
        (run,) = h.runs(kind="trial")
        assert run["mode"] == "bisect" and run["run_dir"] == str(tmp_path / "w" / "runs")
        got = [(r["test"], r["variant"], r["verified"]) for r in h.results(run["session_uuid"])]
        assert got == [("good", "baseline", 1), ("bad", "tuned", 0)]
        assert h.samples() == [] and h.runs() == []
