"""Output formats, multi-step builds and the ExaML/NetPIPE recipes' verification."""

import json

import pytest
from conftest import REPO

from apptune.core.builds import sources, steps
from apptune.core.data import inputs, recipes
from apptune.core.verification import outputs, verify
from apptune.core.verification.formats.newick_rf import parse_newick, robinson_foulds
from apptune.errors import ApptuneError
from apptune.models import OutputSpec, PerFileOverride


# --------------------------------------------------------------------------- trees
def test_rf_distance_ignores_rooting_order_and_branch_lengths():
    a = parse_newick("((A:0.1,B:0.2):0.05,(C,D)0.99:1e-3,E);")
    b = parse_newick("(E,(D,C),(B,A));")
    assert robinson_foulds(a, b) == 0


def test_rf_distance_counts_differing_splits():
    a = parse_newick("((A,B),(C,D),E);")
    b = parse_newick("((A,C),(B,D),E);")
    assert robinson_foulds(a, b) == 4


@pytest.mark.parametrize(
    "text,what",
    [
        ("((A,B),(C,D),E)", "no closing ';'"),
        ("((A,B),(C,D),E;", "expected ')'"),
        ("((A,B),(,D),E);", "empty leaf name"),
    ],
)
def test_malformed_newick_is_one_clear_error(text, what):
    with pytest.raises(ApptuneError) as e:
        parse_newick(text, "result.tree")
    assert str(e.value).startswith("result.tree") and what in str(e.value)


def test_trees_with_different_taxa_are_refused():
    with pytest.raises(ApptuneError, match="different taxa"):
        robinson_foulds(parse_newick("((A,B),(C,D),E);"), parse_newick("((A,B),(C,D),F);"))


# --------------------------------------------------------------------------- formats
def test_regex_first_last_count(tmp_path):
    (tmp_path / "log").write_text("it 1 -10.5\nit 2 -9.25\nit 3 -9.0\nLikelihood : -9.0\n")
    spec = OutputSpec(
        file="log",
        format="regex",
        patterns={
            "first": {"pattern": r"^it \d+ (\S+)", "occurrence": "first"},
            "last": {"pattern": r"^it \d+ (\S+)"},
            "n": {"pattern": r"^it ", "occurrence": "count"},
            "absent": {"pattern": r"^nope (\S+)"},
        },
    )
    got = outputs.parse(spec, tmp_path)
    assert got == {"first": -10.5, "last": -9.0, "n": 3}


def test_curve_derives_figures_and_is_kept_as_data(tmp_path):
    (tmp_path / "np.out").write_text(
        "1 10.0 0.000001\n1024 500.0 0.00001\n65536 900.0 0.0005\n1048576 1000.0 0.008\n"
    )
    spec = OutputSpec(
        file="np.out",
        format="curve",
        columns=["bytes", "mbps", "seconds"],
        name="np",
        derived={
            "lat": {"op": "first", "y": "seconds"},
            "peak": {"op": "max", "y": "mbps"},
            "half": {"op": "x_at_fraction_of_max", "x": "bytes", "y": "mbps", "fraction": 0.5},
            "n": {"op": "count", "y": "bytes"},
        },
    )
    fields, curves = outputs.parse_all([spec], tmp_path)
    assert fields == {"lat": 1e-6, "peak": 1000.0, "half": 1024.0, "n": 4}
    files = outputs.write_curves(curves, tmp_path / "curves")
    text = (tmp_path / files["np"]["file"]).read_text().splitlines()
    assert text[0] == "bytes,mbps,seconds" and len(text) == 5


@pytest.mark.parametrize(
    "content,what",
    [
        ("1 2\n", "expected 3 columns"),
        ("1 x 3\n", "not a number"),
        ("# only a comment\n", "no data rows"),
    ],
)
def test_bad_curve_names_file_and_line(tmp_path, content, what):
    (tmp_path / "np.out").write_text(content)
    spec = OutputSpec(file="np.out", format="curve", columns=["a", "b", "c"], name="np")
    with pytest.raises(ApptuneError) as e:
        outputs.parse(spec, tmp_path)
    assert "np.out" in str(e.value) and what in str(e.value)


def test_output_spec_shape_errors():
    with pytest.raises(ValueError, match="needs 'patterns'"):
        OutputSpec(file="x", format="regex")
    with pytest.raises(ValueError, match="column 'z' not in columns"):
        OutputSpec(
            file="x",
            format="curve",
            name="c",
            columns=["a"],
            derived={"d": {"op": "max", "y": "z"}},
        )
    with pytest.raises(ValueError, match="either 'flags'"):
        PerFileOverride(files=["a.c"], flags="baseline", cflags=["-O1"], reason="r")


def test_render_words_drops_empty_conditional_words():
    words = ["prog", "{{ '-q' if part else '' }}", "{{ part }}", "-n", "{{ n }}"]
    assert inputs.render_words(words, {"part": "", "n": 3}, "toy", "run.args") == [
        "prog",
        "-n",
        "3",
    ]
    assert inputs.render_words(words, {"part": "p.model", "n": 3}, "toy", "run.args") == [
        "prog",
        "-q",
        "p.model",
        "-n",
        "3",
    ]
    with pytest.raises(ApptuneError, match="run.args"):
        inputs.render_words(["{{ missing }}"], {}, "toy", "run.args")


# --------------------------------------------------------------------------- multi-step build
STEP_BUILD = """build:
  system: make
  jobs: 1
  templates:
    - {src: toy/config.mk.j2, dest: config.mk}
  steps:
    - {command: [sh, -c, 'echo step-one > first.txt']}
    - {make: ["CC={{ cc }}", "{{ vars.target }}"]}
  products:
    - {src: "{{ vars.target }}", name: toy-bin}
    - first.txt
axes:
  kind:
    plain: {vars: {target: toy}}
defaults: {kind: plain}
per_file:
  - files: [acc.c]
    cflags: [-O1]
    reason: upstream compiles it at -O1
run:
  executable: toy-bin
"""


def _steps_recipe(toy_root):
    import yaml

    f = toy_root / "build-recipes/toy.yaml"
    data = yaml.safe_load(f.read_text())
    new = yaml.safe_load(STEP_BUILD)
    data["build"], data["axes"], data["defaults"], data["per_file"] = (
        new["build"],
        new["axes"],
        new["defaults"],
        new["per_file"],
    )
    data.pop("patches")
    data["run"]["executable"] = "toy-bin"
    f.write_text(yaml.safe_dump(data))


@pytest.mark.slow
def test_multi_step_build_with_vars_renamed_products_and_explicit_per_file_flags(
    toy_root, tmp_path, gnu_toolchain
):
    _steps_recipe(toy_root)
    r = recipes.load_recipe("toy")
    plan = recipes.resolve(r, "tuned", gnu_toolchain).to_dict()
    assert plan["vars"] == {"target": "toy"}
    assert plan["per_file"][0]["cflags"] == ["-O1"] and plan["per_file"][0]["ladder"] == "recipe"
    stage = tmp_path / "stage"
    stage.mkdir()
    prov = steps.build(plan, sources.fetch(r), stage)
    assert (stage / "toy-bin").is_file() and (stage / "first.txt").read_text() == "step-one\n"
    assert [p["file"] for p in prov["products"]] == ["toy-bin", "first.txt"]
    lines = [json.loads(ln) for ln in (stage / "compile-lines.jsonl").read_text().splitlines()]
    acc = next(ln for ln in lines if ln["source"] == "acc.c")["argv"]
    assert "-O1" in acc and "-O3" not in acc


@pytest.mark.slow
def test_failing_build_step_is_named(toy_root, tmp_path, gnu_toolchain):
    _steps_recipe(toy_root)
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("echo step-one > first.txt", "exit 3"))
    r = recipes.load_recipe("toy")
    plan = recipes.resolve(r, "baseline", gnu_toolchain).to_dict()
    stage = tmp_path / "stage"
    stage.mkdir()
    with pytest.raises(ApptuneError) as e:
        steps.build(plan, sources.fetch(r), stage)
    assert "toy.yaml: build.steps[0]: sh exited with status 3" in str(e.value)


def test_executable_must_be_a_product(toy_root):
    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(f.read_text().replace("executable: toy", "executable: nosuch"))
    with pytest.raises(ApptuneError, match="run.executable: 'nosuch' is not a build product"):
        recipes.load_recipe("toy")


# --------------------------------------------------------------------------- real recipes
def test_examl_recipe_keeps_upstream_models_c_rule_and_kernel_makefiles(gnu_toolchain):
    r = recipes.load_recipe(REPO / "build-recipes/examl.yaml")
    plan = recipes.resolve(r, "tuned+kernel=sse3", gnu_toolchain).to_dict()
    assert plan["vars"]["makefile"] == "Makefile.SSE3.gcc"
    rule = plan["per_file"][0]
    assert rule["files"] == ["examl/models.c"] and rule["cflags"] == ["-O1"]
    ctx = dict(plan, cc="CC", cxx="CXX", ftn="FC")
    argv = steps.step_argv(r, steps.steps_of(r)[0], 0, ctx)
    assert argv[:4] == ["make", "-j2", "-f", "Makefile.SSE3.gcc"] and argv[-1] == "examl"
    assert "OPT_FLAG_2=-O3 -march=native -funroll-loops" in argv
    assert ("examl/examl", "examl") in steps.product_paths(r, ctx)


EXAML_INFO = """Likelihood of best tree: -16221.368990

Overall Time for 1 Inference 7.3

Likelihood   : {lnl}

Final tree written to:                 /x/ExaML_result.run
"""


def _examl_stage(tmp_path, lnl="-16221.368990", tree=None):
    (tmp_path / "ExaML_info.run").write_text(EXAML_INFO.format(lnl=lnl))
    (tmp_path / "ExaML_log.run").write_text("0.44 -16269.357322\n4.57 -16221.368990\n")
    ref_tree = (REPO / "reference/examl/ci.tree").read_text()
    (tmp_path / "ExaML_result.run").write_text(tree or ref_tree)
    r = recipes.load_recipe(REPO / "build-recipes/examl.yaml")
    values, _ = outputs.parse_all(r.run.outputs, tmp_path, tier="ci")
    texts = {"ExaML_info.run": (tmp_path / "ExaML_info.run").read_text()}
    return verify.verify(
        "examl", "ci", values, r.run.own_checks, texts, "gnu", "tuned", "ExaML_info.run"
    )


def test_examl_verification_passes_on_the_reference(tmp_path):
    v = _examl_stage(tmp_path)
    assert v.ok, v.summary()


def test_examl_corrupted_likelihood_fails_naming_the_quantity(tmp_path):
    v = _examl_stage(tmp_path, lnl="-16221.468990")
    assert not v.ok and any(m.startswith("final_lnL = -16221.5") for m in v.failures)


def test_examl_nan_likelihood_fails(tmp_path):
    v = _examl_stage(tmp_path, lnl="nan")
    assert not v.ok and any("final_lnL" in m and "not finite" in m for m in v.failures)


def test_examl_other_topology_fails_on_rf_distance(tmp_path):
    ref = parse_newick((REPO / "reference/examl/ci.tree").read_text())
    # swap two taxa from different clades: same taxa, another tree
    text = (REPO / "reference/examl/ci.tree").read_text()
    swapped = text.replace("Seq47:", "TMP:").replace("Seq1:", "Seq47:").replace("TMP:", "Seq1:")
    assert robinson_foulds(parse_newick(swapped), ref) > 0
    v = _examl_stage(tmp_path, tree=swapped)
    assert not v.ok and any(m.startswith("rf_distance = ") for m in v.failures)


def _netpipe_stage(tmp_path, integrity: str):
    rows = "".join(
        f"{b} {min(b, 30000) * 1.0} {1e-6 + b / 3e9:.8f}\n"
        for b in [1, 2, 3, 4, 6, 8, 12, 16, 1024, 65536, 1048576]
    )
    (tmp_path / "np.out").write_text(rows)
    (tmp_path / "integrity.log").write_text(integrity)
    r = recipes.load_recipe(REPO / "build-recipes/netpipe.yaml")
    values, curves = outputs.parse_all(r.run.outputs, tmp_path, tier="ci")
    texts = {"integrity.log": integrity}
    return verify.verify(
        "netpipe", "ci", values, r.run.own_checks, texts, "gnu", "tuned", "np.out"
    ), values


GOOD = "".join(f"{i}: {2**i} bytes 100 times -->  Integrity check passed\n" for i in range(12))


def test_netpipe_verification_passes_with_clean_integrity_pass(tmp_path):
    v, values = _netpipe_stage(tmp_path, GOOD)
    assert v.ok, v.summary()
    assert values["half_peak_bytes"] == 65536.0 and values["latency_s"] == pytest.approx(
        1e-6, rel=1e-3
    )


def test_netpipe_corrupted_data_fails_verification(tmp_path):
    bad = GOOD + "Integrity check failed: Expecting 17 but received 4711\n"
    v, _ = _netpipe_stage(tmp_path, bad)
    assert not v.ok
    assert any("integrity_failed = 1" in m for m in v.failures)
    assert any("found no corrupted message" in m for m in v.failures)


def test_netpipe_truncated_curve_fails_verification(tmp_path):
    v, _ = _netpipe_stage(tmp_path, GOOD)
    lines = (tmp_path / "np.out").read_text().splitlines()[:-1]
    (tmp_path / "np.out").write_text("\n".join(lines) + "\n")
    r = recipes.load_recipe(REPO / "build-recipes/netpipe.yaml")
    values, _ = outputs.parse_all(r.run.outputs, tmp_path, tier="ci")
    v = verify.verify(
        "netpipe", "ci", values, r.run.own_checks, {"integrity.log": GOOD}, "gnu", "tuned"
    )
    assert not v.ok and any(m.startswith("last_bytes = 65536") for m in v.failures)


def test_input_from_a_missing_build_product_names_file_and_field(toy_root, tmp_path):
    (toy_root / "inputs/toy/ci/input.yaml").write_text(
        "description: toy\nfrom_build: {data.txt: nosuch.dat}\nparameters: {n: 1}\n"
    )
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    with pytest.raises(ApptuneError) as e:
        inputs.render("toy", "ci", tmp_path, 1, build_dir=build_dir)
    assert "input.yaml: from_build.data.txt" in str(e.value) and "nosuch.dat" in str(e.value)
    (build_dir / "nosuch.dat").write_text("x\n")
    inputs.render("toy", "ci", tmp_path, 1, build_dir=build_dir)
    assert (tmp_path / "data.txt").read_text() == "x\n"


def test_invalid_regex_in_a_recipe_pattern_is_refused():
    from apptune.models import RegexField

    with pytest.raises(ValueError, match="not a valid regular expression"):
        RegexField(pattern="([")
