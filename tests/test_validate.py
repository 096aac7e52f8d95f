"""`apptune validate`: every bad data file caught before a build, every problem one line."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apptune import cli
from apptune.commands import list as list_command
from apptune.commands import workflow
from apptune.core.data import inputs
from apptune.core.validation import datachecks, validate
from apptune.errors import ApptuneError

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def tree(toy_root):
    """The toy tree with the real site config (environments gnu, llvm, oneapi, ...)."""
    shutil.copy(REPO / "site-config/settings.py", toy_root / "site-config/settings.py")
    return toy_root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def lines(problems) -> list[str]:
    return [str(p) for p in problems]


def only(problems) -> str:
    """The one problem, as the one line apptune prints."""
    got = lines(problems)
    assert len(got) == 1, got
    assert "\n" not in got[0] and "Traceback" not in got[0]
    return got[0]


def test_the_toy_tree_is_valid(tree):
    assert lines(validate.problems()) == []


def test_a_line_break_in_a_flag_or_a_template_value_is_refused_naming_the_field(tree):
    """A recipe's flags and template values reach a generated Makefile (``makeflags``) and
    the compile lines: a newline in one would be a line of its own there."""
    edit(
        tree / "build-recipes/toy.yaml",
        "  products: [toy]",
        '  products: [toy]\n  cflags: ["-O2", "-DX\\nall:\\n\\ttouch /tmp/pwned"]',
    )
    got = only(validate.problems())
    assert got.startswith("tree/build-recipes/toy.yaml: build.cflags[1]: "), got
    assert "control character \\n" in got and "one line" in got, got


# ----------------------------------------------------------------------- tiers and variants
def test_unknown_flag_ladder_is_found_before_any_build(tree):
    edit(tree / "build-recipes/toy.yaml", "gnu: [baseline, tuned]", "gnu: [baseline, tunedd]")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: tiers.ci.variants.gnu: 'tunedd': unknown flag ladder "
        "'tunedd' for compiler family gnu (allowed: aggressive, baseline, none, tuned)"
    )


@pytest.mark.parametrize(
    "spec,words",
    [
        (
            "tuned+blas=mkl",
            "tiers.ci.variants.gnu: 'tuned+blas=mkl': unknown blas 'mkl' (allowed: openblas)",
        ),
        (
            "tuned+fft=fftw3",
            "tiers.ci.variants.gnu: 'tuned+fft=fftw3': unknown axis 'fft' (allowed: blas)",
        ),
        ("tuned+blas", "tiers.ci.variants.gnu: 'tuned+blas': 'blas' is not axis=value"),
    ],
)
def test_unknown_axis_options_in_tiers(tree, spec, words):
    edit(tree / "build-recipes/toy.yaml", "gnu: [baseline, tuned]", f"gnu: [baseline, {spec}]")
    assert only(validate.problems()) == f"tree/build-recipes/toy.yaml: {words}"


def test_tier_environment_the_site_config_does_not_define(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "gnu: [baseline, tuned]",
        "gnu: [baseline]\n      gnuu: [tuned]",
    )
    msg = only(validate.problems())
    assert msg.startswith(
        "tree/build-recipes/toy.yaml: tiers.ci.variants.gnuu: unknown environment 'gnuu'"
    )
    assert "gnu, gnu-mkl, gnu-mpich, llvm, oneapi" in msg


@pytest.mark.parametrize("limit", ["5m", "1h30m", "90s", "2d", "300"])
def test_time_limits_reframe_reads_are_accepted(tree, limit):
    edit(
        tree / "build-recipes/toy.yaml",
        "    ranks: 1\n",
        f"    ranks: 1\n    time_limit: {limit}\n",
    )
    assert lines(validate.problems()) == []


@pytest.mark.parametrize("limit", ["5 parsecs", "1m30", "soon", "-5", "0", ".inf"])
def test_time_limits_reframe_would_drop_are_refused(tree, limit):
    edit(
        tree / "build-recipes/toy.yaml",
        "    ranks: 1\n",
        f"    ranks: 1\n    time_limit: {limit}\n",
    )
    msg = only(validate.problems())
    assert msg.startswith("tree/build-recipes/toy.yaml: tiers.ci.time_limit: ")
    assert "time limit" in msg


DURATIONS = ["5m", "1h30m", "90s", "2d", "300", "1d2h3m4s", "0", "-5", "", "1e3", "1_000", "nan"]
DURATIONS += ["inf", "5 parsecs", "1m30", "2h1d", "m", "99999999999d", " 7m ", "0.5"]


@pytest.mark.parametrize("limit", DURATIONS)
def test_time_limits_are_read_as_reframe_reads_them(limit):
    """The recipe's rule for time limits is ReFrame's Duration, without importing ReFrame."""
    from reframe.utility.typecheck import Duration

    from apptune.models import duration_seconds

    try:
        theirs = float(Duration(limit.strip()))
    except (TypeError, ValueError, OverflowError):
        theirs = None
    try:
        ours = duration_seconds(limit)
    except ValueError:
        ours = None
    # ours also refuses what ReFrame reads but then ignores: zero, not finite
    usable = theirs if theirs is not None and 0 < theirs < float("inf") else None
    assert ours == usable


@pytest.mark.parametrize("stack", ["lots", "0M", "512", "-1G", "unlimited; ulimit -c 0"])
def test_a_stack_limit_is_unlimited_or_a_size(tree, stack):
    toy = tree / "build-recipes/toy.yaml"
    edit(toy, "  executable: toy\n", "  executable: toy\n  stack: 512M\n")
    assert lines(validate.problems()) == []
    edit(toy, "stack: 512M", f"stack: {stack!r}")
    msg = only(validate.problems())
    assert msg.startswith("tree/build-recipes/toy.yaml: run.stack: "), msg


# ----------------------------------------------------------------------- system packages
def test_requires_debian_is_written_the_way_bootstrap_reads_it(tree):
    toy = tree / "build-recipes/toy.yaml"
    edit(toy, "\nbuild:\n", "\nrequires:\n  debian: [libfoo-dev]  # why\nbuild:\n")
    assert lines(validate.problems()) == []
    # valid YAML, but not a form ci/bootstrap.sh reads without a YAML parser
    edit(toy, "debian: [libfoo-dev]", "debian: [libfoo-dev,\n    libbar-dev]")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: requires.debian: write the list on one line "
        "(debian: [a, b]) or one '- name' a line under 'debian:' inside a top-level "
        "'requires:' block: ci/bootstrap.sh reads it without a YAML parser and read nothing"
    )


def test_requires_debian_names_debian_packages(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "\nbuild:\n",
        "\nrequires:\n  debian: [libfoo-dev, 'libfoo-dev; rm -rf ~']\nbuild:\n",
    )
    msg = only(validate.problems())
    assert msg.startswith("tree/build-recipes/toy.yaml: requires.debian[1]: "), msg


# ----------------------------------------------------------------------- standard input
def test_stdin_is_a_file_the_tiers_input_makes(tree):
    toy = tree / "build-recipes/toy.yaml"
    edit(toy, "  executable: toy\n", "  executable: toy\n  stdin: params.txt\n")
    assert lines(validate.problems()) == []
    edit(toy, "stdin: params.txt", "stdin: input.txt")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.stdin: 'input.txt' is not a file the input of tier "
        "ci makes (inputs/toy/ci/input.yaml files and from_build: params.txt)"
    )


def test_a_prerun_steps_stdin_is_checked_too(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "  executable: toy\n",
        "  executable: toy\n  prerun:\n    - {command: [cat], stdin: toy.in, stdout: copy.txt}\n",
    )
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.prerun[0].stdin: 'toy.in' is not a file the input of "
        "tier ci makes (inputs/toy/ci/input.yaml files and from_build: params.txt)"
    )


def test_stdin_is_a_file_of_the_run_directory_not_a_path(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "  executable: toy\n",
        "  executable: toy\n  stdin: /etc/passwd\n",
    )
    msg = only(validate.problems())
    assert msg.startswith("tree/build-recipes/toy.yaml: run.stdin: "), msg


# ----------------------------------------------------------------------- references
@pytest.mark.parametrize(
    "tol,field,words",
    [
        ("{value: 1.6449330668, rel: .inf}", "fields.sum.rel", "must be a finite number (got inf)"),
        ("{value: 1.6449330668, abs: .nan}", "fields.sum.abs", "must be a finite number (got nan)"),
        ("{min: 2, max: 1}", "fields.sum.min", "2.0 is above max 1.0: no value can pass"),
    ],
)
def test_reference_tolerances(tree, tol, field, words):
    edit(tree / "reference/toy/ci.yaml", "sum: {value: 1.6449330668, rel: 1.0e-9}", f"sum: {tol}")
    assert only(validate.problems()) == f"tree/reference/toy/ci.yaml: {field}: {words}"


def test_depends_on_names_parameters_of_the_tiers_input(tree):
    edit(tree / "reference/toy/ci.yaml", "rel: 1.0e-9}", "rel: 1.0e-9, depends_on: [n, ranks]}")
    assert lines(validate.problems()) == []
    edit(tree / "reference/toy/ci.yaml", "depends_on: [n, ranks]", "depends_on: [N]")
    assert only(validate.problems()) == (
        "tree/reference/toy/ci.yaml: fields.sum.depends_on: 'N' is not a parameter of "
        "inputs/toy/ci/input.yaml (parameters: n, ranks)"
    )


def test_a_known_wrong_entry_names_fields_or_checks_that_exist(tree):
    ref = tree / "reference/toy/ci.yaml"
    ref.write_text(ref.read_text() + "xfail:\n  gnu/tuned: {reason: r, fails: [s*, figure rate]}\n")
    assert lines(validate.problems()) == []  # a field pattern; a figure that is not a number
    edit(ref, "fails: [s*, figure rate]", "fails: [sum, exit status, Sum]")
    assert only(validate.problems()) == (
        "tree/reference/toy/ci.yaml: xfail.gnu/tuned.fails[2]: 'Sum' names no field of this "
        "reference nor a check of the run (own checks by file, 'exit status', 'binding', "
        "'knobs', 'figure NAME')"
    )


# ----------------------------------------------------------------------- YAML itself
def test_duplicate_keys_are_refused_naming_key_and_line(tree):
    edit(tree / "build-recipes/toy.yaml", "  jobs: 1\n", "  jobs: 1\n  jobs: 2\n")
    line = (tree / "build-recipes/toy.yaml").read_text().splitlines().index("  jobs: 2") + 1
    assert only(validate.problems()) == (
        f"tree/build-recipes/toy.yaml: line {line}, column 3: duplicate key 'jobs' (first given at "
        f"line {line - 1})"
    )


def test_duplicate_keys_in_a_flow_mapping_of_a_reference(tree):
    edit(
        tree / "reference/toy/ci.yaml",
        "n: {value: 1000000, abs: 0}",
        "n: {value: 1000000, abs: 0, abs: 1}",
    )
    msg = only(validate.problems())
    assert msg.startswith("tree/reference/toy/ci.yaml: line ") and "duplicate key 'abs'" in msg


# ----------------------------------------------------------------------- outputs and figures
REGEX_OUTPUT = (
    "output: {file: toy.out, format: regex, patterns: "
    "{sum: {pattern: '^sum=(\\S+)'}, n: {pattern: '^n=(\\S+)'}, rate: {pattern: '^rate=(\\S+)'}}}"
)


def test_figure_and_reference_fields_no_output_produces(tree):
    r = tree / "build-recipes/toy.yaml"
    edit(
        r,
        "output: {file: toy.out, format: keyvalue, begin: BEGIN, end: END, keys: [sum, n, rate]}",
        REGEX_OUTPUT,
    )
    assert lines(validate.problems()) == []
    edit(r, "rate: {field: rate,", "rate: {field: rat,")
    edit(tree / "reference/toy/ci.yaml", "  n: {value", "  nn: {value")
    assert lines(validate.problems()) == [
        "tree/build-recipes/toy.yaml: run.figures.rate.field: 'rat': no output produces this field "
        "(run.output gives: n, rate, sum)",
        "tree/reference/toy/ci.yaml: fields.nn: no output of build-recipes/toy.yaml produces this "
        "field (run.output gives: n, rate, sum)",
    ]


@pytest.mark.parametrize(
    "old,new,words",
    [
        (
            "    rate: {field: rate,",
            "    '<img src=x onerror=alert(1)>': {field: rate,",
            "run.figures: figure name '<img src=x onerror=alert(1)>': use letters",
        ),
        (
            "unit: op/s",
            "unit: '<script>alert(1)</script>'",
            "run.figures.rate.unit: must match the pattern",
        ),
    ],
)
def test_figure_names_and_units_outside_a_safe_pattern(tree, old, new, words):
    """They name columns, plots and pages: markup in them is refused, one line."""
    edit(tree / "build-recipes/toy.yaml", old, new)
    msg = only(validate.problems())
    assert msg.startswith("tree/build-recipes/toy.yaml: ") and words in msg, msg


def test_a_keyvalue_output_lists_the_keys_figures_read(tree):
    r = tree / "build-recipes/toy.yaml"
    edit(r, "rate: {field: rate,", "rate: {field: rat,")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.figures.rate.field: 'rat': no output produces this field "
        "(run.output gives: n, rate, sum)"
    )
    edit(r, "keys: [sum, n, rate]", "keys: [sum, n, 'ra*']")  # a shell pattern
    assert lines(validate.problems()) == []
    edit(r, ", keys: [sum, n, 'ra*']", "")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.output.keys: the keys of toy.out that figures and "
        "references read are not listed (names or shell patterns such as '*_errors')"
    )


def test_keys_belong_to_keyvalue_outputs(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "format: keyvalue, begin: BEGIN, end: END,",
        "format: regex, patterns: {rate: {pattern: '^rate=(\\S+)'}},",
    )
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.output: 'keys' is for format keyvalue, not regex"
    )


@pytest.mark.parametrize(
    "path,old,new,line",
    [
        (
            "build-recipes/hpcc.yaml",
            "HPL: {field: HPL_Tflops,",
            "HPL: {field: HPL_TFlops,",
            "build-recipes/hpcc.yaml: run.figures.HPL.field: 'HPL_TFlops': no output produces "
            "this field (run.output gives 33 fields; the closest: HPL_Tflops",
        ),
        (
            "build-recipes/mpi-micro.yaml",
            "noise_stretch: {field: noise_stretch,",
            "noise_stretch: {field: noise_strech,",
            "build-recipes/mpi-micro.yaml: run.figures.noise_stretch.field: 'noise_strech': no "
            "output produces this field (run.output gives ",
        ),
        (
            "reference/flashio/ci.yaml",
            "ncmpi_chk_0000.dens.crc32:",
            "ncmpi_chk_0000.dens.crc:",
            "reference/flashio/ci.yaml: fields.ncmpi_chk_0000.dens.crc: no output of "
            "build-recipes/flashio.yaml produces this field (run.output gives ",
        ),
    ],
)
def test_a_misspelled_field_of_a_keyvalue_output_in_a_real_recipe(
    tmp_path, monkeypatch, path, old, new, line
):
    """HPCC's summary, mpi-micro's and FLASH-IO's scratch checksums are keyvalue outputs: a
    misspelled figure or reference field is found before the run, one line."""
    root = real_tree(tmp_path, monkeypatch)
    monkeypatch.chdir(root)  # paths are shown from the tree
    site, _ = validate.load_site_facts(None)
    app = Path(path).stem if path.startswith("build-recipes") else Path(path).parent.name
    assert lines(datachecks.app_problems(app, site)) == []
    edit(root / path, old, new)
    got = only(datachecks.app_problems(app, site))
    assert got.startswith(line), got


def test_every_format_the_schema_names_is_read_by_one_module():
    """A format is a module of apptune/core/verification/formats (its names, its fields before a
    run, its parser), and its name in the schema's Literal: neither without the other."""
    from typing import get_args

    from apptune.core.verification import formats
    from apptune.models import OutputSpec

    names = get_args(OutputSpec.model_fields["format"].annotation)
    assert sorted(names) == sorted(formats.FORMATS)
    assert sum(len(m.NAMES) for m in formats.MODULES) == len(formats.FORMATS)
    assert all(callable(m.fields) and callable(m.parse) for m in formats.MODULES)


@pytest.mark.parametrize(
    "app,unprinted",
    [
        ("npb", []),
        # one node of one socket: no partner on another socket or node (the figures are
        # optional)
        ("mpi-micro", ["placement_other_socket_us", "placement_other_node_us"]),
    ],
)
def test_the_keys_a_recipe_lists_are_what_its_recorded_run_printed(app, unprinted):
    """Each listed key (or pattern) is a key the real program printed (tests/data/APP/good):
    a key misspelled in the list would let the same misspelling pass in a figure."""
    from fnmatch import fnmatchcase

    from apptune.core.data import recipes
    from apptune.core.verification import outputs

    (spec,) = [o for o in recipes.load_recipe(app).run.outputs if o.format == "keyvalue"]
    printed = outputs.parse(spec, REPO / "tests/data" / app / "good")
    assert printed and spec.keys
    assert [k for k in spec.keys if not any(fnmatchcase(f, k) for f in printed)] == unprinted


# ----------------------------------------------------------------------- templates
def test_undefined_names_in_run_args_and_prerun(tree):
    r = tree / "build-recipes/toy.yaml"
    edit(
        r,
        "  executable: toy\n",
        "  executable: toy\n  args: ['{{ n }}', '-r', '{{ ranks }}']\n"
        "  prerun:\n    - command: [echo, '{{ size }}']\n",
    )
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.prerun[0].command: '{{ size }}': undefined name 'size' "
        "(parameters of inputs/toy/ci/input.yaml for tier ci: n, ranks)"
    )
    edit(r, "'-r', '{{ ranks }}'", "'-r', '{{ rank }}'")
    assert len(validate.problems()) == 2
    # a name every use of which has a fallback is not undefined
    edit(r, "'{{ size }}'", "'{{ size | default(1) }}'")
    edit(r, "'{{ rank }}'", "'{{ rank | default(ranks) }}'")
    assert validate.problems() == []


def test_undefined_names_in_input_and_build_templates(tree):
    (tree / "inputs/toy/ci/params.txt.j2").write_text("n={{ n }} m={{ m }}\n")
    (tree / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ cflag | makeflags }}\n"
    )
    got = lines(validate.problems())
    assert got[0].startswith(
        "tree/build-recipes/templates/toy/config.mk.j2: template: undefined name 'cflag' (names of "
        "the build plan:"
    )
    assert got[1] == (
        "tree/inputs/toy/ci/params.txt.j2: template: undefined name 'm' "
        "(parameters of inputs/toy/ci/input.yaml: n, ranks)"
    )


# ----------------------------------------------------------------------- stands_for
def test_an_application_with_only_a_ci_tier_is_allowed(tree):
    assert inputs.check_stands_for("toy", "ci", ["ci"]).stands_for is None
    assert lines(validate.problems()) == []


def test_an_application_with_only_a_nightly_tier_is_allowed(tree):
    edit(tree / "build-recipes/toy.yaml", "  ci:\n    ranks: 1", "  nightly:\n    ranks: 1")
    (tree / "inputs/toy/ci").rename(tree / "inputs/toy/nightly")
    ref = tree / "reference/toy/ci.yaml"
    ref.rename(tree / "reference/toy/nightly.yaml")
    edit(tree / "reference/toy/nightly.yaml", "tier: ci", "tier: nightly")
    assert lines(validate.problems()) == []


def test_a_ci_input_beside_another_tier_names_what_it_stands_for(tree):
    r = tree / "build-recipes/toy.yaml"
    r.write_text(r.read_text() + "  nightly:\n    ranks: 1\n    variants:\n      gnu: [tuned]\n")
    shutil.copytree(tree / "inputs/toy/ci", tree / "inputs/toy/nightly")
    (tree / "reference/toy/nightly.yaml").write_text(
        (tree / "reference/toy/ci.yaml").read_text().replace("tier: ci", "tier: nightly")
    )
    msg = only(validate.problems())
    assert msg.startswith(
        "tree/inputs/toy/ci/input.yaml: stands_for: a ci input must name the input it "
        "stands for: one of nightly"
    )


# ----------------------------------------------------------------------- messages in words
def test_a_literal_lists_its_values_in_words(tree):
    edit(tree / "build-recipes/toy.yaml", "format: keyvalue", "format: keyval")
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.output.format: must be one of: "
        "keyvalue, regex, newick_rf, curve, gmx_check_energy, gmx_check_forces, gmx_mdlog "
        "(got 'keyval')"
    )


def test_an_unknown_field_lists_the_fields_allowed_there(tree):
    edit(tree / "build-recipes/toy.yaml", "ranks: 1", "rank: 1")
    edit(tree / "build-recipes/toy.yaml", "format: keyvalue,", "format: keyvalue, beginn: x,")
    assert lines(validate.problems()) == [
        "tree/build-recipes/toy.yaml: run.output.beginn: unknown field (allowed: file, format, "
        "begin, end, keys, patterns, reference, field, columns, name, derived, plot)",
        "tree/build-recipes/toy.yaml: tiers.ci.rank: unknown field (allowed: ranks, variants, "
        "time_limit, tags)",
    ]


def test_a_list_of_outputs_names_the_entry(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "output: {file: toy.out, format: keyvalue, begin: BEGIN, end: END, keys: [sum, n, rate]}",
        "output:\n    - {file: toy.out, format: keyvalue, keys: [sum, n, rate]}\n"
        "    - {file: x.out, format: regex}",
    )
    assert (
        only(validate.problems())
        == "tree/build-recipes/toy.yaml: run.output[1]: format regex needs 'patterns'"
    )


def test_a_single_output_with_its_own_problem(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "format: keyvalue, begin: BEGIN, end: END, keys: [sum, n, rate]",
        "format: regex",
    )
    assert (
        only(validate.problems())
        == "tree/build-recipes/toy.yaml: run.output: format regex needs 'patterns'"
    )


def test_a_value_that_fits_no_member_of_a_union_says_what_would(tree):
    edit(tree / "inputs/toy/ci/input.yaml", "parameters: {n: 1000000}", "parameters: {n: [1, 2]}")
    assert only(validate.problems()) == (
        "tree/inputs/toy/ci/input.yaml: parameters.n: must be an integer, "
        "a number, a string or a mapping (got a list)"
    )


def test_a_recipes_own_check_names_its_field(tree):
    edit(
        tree / "build-recipes/toy.yaml",
        "  executable: toy\n",
        "  executable: toy\n  primary: speed\n",
    )
    assert only(validate.problems()) == (
        "tree/build-recipes/toy.yaml: run.primary: 'speed' is not a figure "
        "(figures: rate, or wall_time)"
    )


# ----------------------------------------------------------------------- patches, parameters, env
@pytest.mark.parametrize(
    "text,words",
    [
        (
            "this is a note, not a patch\n",
            "not a unified diff: no file header ('--- a/FILE', '+++ b/FILE') found",
        ),
        (
            "--- a/main.c\n+++ b/main.c\n@@ -1,3 +1,4 @@\n+/* added */\n \n",
            "line 3: the hunk ends early: 2 line(s) of the old and 2 of the new text are missing",
        ),
        ("--- a/main.c\n+++ b/main.c\n@@ one line @@\n", "line 3: malformed hunk header"),
    ],
)
def test_a_patch_that_is_not_a_unified_diff(tree, text, words):
    (tree / "patches/toy/0001-comment.patch").write_text(text)
    assert only(validate.problems()).startswith(f"tree/patches/toy/0001-comment.patch: {words}")


def test_a_parameter_that_is_a_number_elsewhere_must_be_one(tree):
    r = tree / "build-recipes/toy.yaml"
    r.write_text(r.read_text() + "  nightly:\n    ranks: 1\n    variants:\n      gnu: [tuned]\n")
    shutil.copytree(tree / "inputs/toy/ci", tree / "inputs/toy/nightly")
    edit(
        tree / "inputs/toy/ci/input.yaml",
        "description: toy",
        "description: toy\nstands_for: nightly",
    )
    (tree / "reference/toy/nightly.yaml").write_text(
        (tree / "reference/toy/ci.yaml").read_text().replace("tier: ci", "tier: nightly")
    )
    assert lines(validate.problems()) == []
    edit(tree / "inputs/toy/ci/input.yaml", "n: 1000000", "n: lots")
    assert only(validate.problems()) == (
        "tree/inputs/toy/ci/input.yaml: parameters.n: must be a number, as in "
        "inputs/toy/nightly/input.yaml (got 'lots')"
    )


def test_a_parameter_the_tuning_space_sets_to_numbers_must_be_one(tree):
    edit(tree / "inputs/toy/ci/input.yaml", "n: 1000000", "n: lots")
    assert lines(validate.problems()) == []  # nothing says n is a number
    (tree / "tuning").mkdir()
    (tree / "tuning/toy.yaml").write_text(
        "app: toy\nbaseline: {environment: gnu, variant: baseline}\n"
        "build: {environments: [gnu], ladders: [baseline]}\ninputs: {n: [1000, 2000]}\n"
    )
    assert only(validate.problems()) == (
        "tree/inputs/toy/ci/input.yaml: parameters.n: must be a number, as in "
        "tuning/toy.yaml (got 'lots')"
    )


@pytest.mark.parametrize("name", ["1THREADS", "OMP-NUM", "A=B", ""])
def test_run_env_names_are_environment_variable_names(tree, name):
    edit(
        tree / "build-recipes/toy.yaml",
        "  executable: toy\n",
        f"  executable: toy\n  env: {{OMP_NUM_THREADS: '1', '{name}': x}}\n",
    )
    assert only(validate.problems()) == (
        f"tree/build-recipes/toy.yaml: run.env: {name!r} is not an environment variable name "
        "(letters, digits and underscores, not starting with a digit)"
    )


@pytest.mark.parametrize(
    "word", ["{{ cflags.append('-O0') }}", "{{ cc.__class__.__mro__ }}", "{{ cflags.clear() }}"]
)
def test_recipe_words_render_in_a_sandbox(toy_root, gnu_toolchain, word):
    from apptune.core.builds import steps
    from apptune.core.data import recipes

    plan = recipes.resolve(recipes.load_recipe("toy"), "tuned", gnu_toolchain).to_dict()
    flags = list(plan["cflags"])
    with pytest.raises(ApptuneError) as e:
        steps.render_word(word, dict(plan, cc="cc"), "build.args", "toy")
    assert str(e.value).startswith(f"tree/build-recipes/toy.yaml: build.args: {word!r}: ")
    assert plan["cflags"] == flags
    with pytest.raises(ApptuneError):
        inputs.render_words([word], {"cflags": [], "cc": "cc"}, "toy", "run.args")


# ----------------------------------------------------------------------- all of them, and the CLI
def test_every_problem_is_reported_not_only_the_first(tree, capsys):
    r = tree / "build-recipes/toy.yaml"
    edit(r, "system: make", "system: scons")
    edit(r, "format: keyvalue", "format: keyval")
    edit(r, "ranks: 1", "ranks: 0")
    edit(tree / "reference/toy/ci.yaml", "rel: 1.0e-9", "rel: -1")
    (tree / "reference/baselines/local/toy.yaml").write_text(
        "app: toy\nsystem: local\nthresholds: {}\n"
    )
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert all(ln.startswith("apptune: error: ") for ln in err[:-1]) and "Traceback" not in "".join(
        err
    )
    body = "\n".join(err)
    for words in (
        "build.system: must be one of: make, cmake (got 'scons')",
        "run.output.format: must be one of:",
        "tiers.ci.ranks: must be greater than or equal to 1 (got 0)",
    ):
        assert words in body
    # the recipe's problems stop its other files being checked against it, so fix it and look again
    edit(r, "system: scons", "system: make")
    edit(r, "format: keyval", "format: keyvalue")
    edit(r, "ranks: 0", "ranks: 1")
    assert cli.main(["validate"]) == 1
    body = capsys.readouterr().err
    assert (
        "reference/toy/ci.yaml: fields.sum.rel: must be greater than or equal to 0 (got -1)" in body
    )
    assert (
        "reference/baselines/local/toy.yaml: machines: baseline file has no machine fingerprint"
        in body
    )
    assert "2 problem(s)" in body


def test_bad_site_config_files_are_reported(tree):
    edit(tree / "site-config/flag-ladders.yaml", "  gnu:\n", "  gnu:\n    tuned: {}\n")
    (tree / "site-config/libraries.yaml").write_text(
        "libraries: {openblas: {ldflags: -lopenblas}}\n"
    )
    got = lines(validate.check().site)
    assert any(
        g.startswith("tree/site-config/flag-ladders.yaml: line ") and "duplicate key 'tuned'" in g
        for g in got
    )
    assert (
        "tree/site-config/libraries.yaml: libraries.openblas.ldflags: must be a valid list (got "
        "'-lopenblas')" in got
    )


def test_a_compiler_family_without_ladders(tree):
    s = tree / "site-config/settings.py"
    s.write_text(s.read_text().replace("'family': 'oneapi'", "'family': 'intel'"))
    assert only(validate.problems()) == (
        "tree/site-config/flag-ladders.yaml: families.intel: no flag ladders for compiler family "
        "'intel' of environment 'oneapi' (families: gnu, llvm, oneapi)"
    )


def test_validate_with_a_missing_site_config(tree, capsys):
    assert cli.main(["validate", "-C", "site-config/nope.py"]) == 1
    assert "tree/site-config/nope.py: site config not found" in capsys.readouterr().err


def test_the_real_tree_is_valid():
    assert lines(validate.problems()) == []


# ----------------------------------------------------------------------- apptune run
def real_tree(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "real"
    for d in ("build-recipes", "patches", "inputs", "reference", "site-config", "reframe-checks"):
        shutil.copytree(REPO / d, root / d, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("APPTUNE_ROOT", str(root))
    monkeypatch.setenv("APPTUNE_RUNS", str(tmp_path / "runs"))
    return root


def test_run_leaves_out_a_bad_application_and_runs_the_others(tmp_path, monkeypatch, capsys):
    root = real_tree(tmp_path, monkeypatch)
    monkeypatch.chdir(root)  # a person runs apptune from the tree: paths are shown from there
    edit(root / "build-recipes/qe.yaml", "time_limit: 5m", "time_limit: 5 parsecs")
    seen = []

    def fake_reframe(self, cmd, **kw):
        seen.append(cmd)
        return 0

    from apptune.core.run import supervise

    monkeypatch.setattr(supervise.Supervisor, "run", fake_reframe)
    rc = cli.main(["run", "--no-history", "--run-dir", str(tmp_path / "run")])
    assert rc != 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "apptune: error: build-recipes/qe.yaml: tiers.ci.time_limit: '5 parsecs' is not a "
        "time limit ReFrame reads (invalid duration: 5 parsecs); write e.g. 5m, 1h30m, 90s, 2d "
        "or a number of seconds"
    )
    assert err[1] == "apptune: left out of the run: qe (problems above)"
    (cmd,) = seen
    checks = [cmd[i + 1] for i, w in enumerate(cmd) if w == "-c"]
    # every other application of the tree, however many it has
    others = sorted(d for d in (root / "reframe-checks").iterdir() if d.is_dir() and d.name != "qe")
    assert len(others) >= 2 and checks == [str(d) for d in others]


def test_checks_without_bad_applications(tmp_path):
    for app in ("a", "b", "c"):
        (tmp_path / "reframe-checks" / app).mkdir(parents=True)
    (tmp_path / "reframe-checks/b/b.py").write_text("")
    d = tmp_path / "reframe-checks"
    assert workflow.checks_without(tmp_path, [], []) == ["reframe-checks"]
    assert workflow.checks_without(tmp_path, [], ["b"]) == [str(d / "a"), str(d / "c")]
    assert workflow.checks_without(
        tmp_path, ["reframe-checks/b/b.py", "reframe-checks/a"], ["b"]
    ) == ["reframe-checks/a"]
    assert workflow.checks_without(tmp_path, ["reframe-checks/b"], ["b"]) == []


def test_a_refused_run_leaves_no_run_directory(tree, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("ReFrame must not start"))
    (tree / "reframe-checks/toy").mkdir(parents=True)
    run_dir = tmp_path / "run"
    # a problem of the site config: nothing runs
    edit(tree / "site-config/libraries.yaml", "libraries:", "libraries:\nlibraries:")
    assert cli.main(["run", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "tree/site-config/libraries.yaml: line " in err and "duplicate key 'libraries'" in err
    assert "run refused" in err
    assert not run_dir.exists()
    # the only application is bad: nothing is left to run
    shutil.copy(REPO / "site-config/libraries.yaml", tree / "site-config/libraries.yaml")
    edit(tree / "build-recipes/toy.yaml", "ranks: 1", "ranks: one")
    assert cli.main(["run", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert (
        err[0]
        == "apptune: error: tree/build-recipes/toy.yaml: tiers.ci.ranks: must be a valid integer, "
        "unable to parse string as an integer (got 'one')"
    )
    assert err[-1] == "apptune: run refused: no check left to run"
    assert not run_dir.exists() and not (tmp_path / "tree/runs").exists()


def test_plain_reframe_lists_a_failing_data_test_for_a_bad_recipe_and_loads_the_others(
    tmp_path, monkeypatch
):
    root = real_tree(tmp_path, monkeypatch)
    edit(root / "build-recipes/qe.yaml", "time_limit: 5m", "time_limit: 5 parsecs")
    reframe = Path(sys.executable).with_name("reframe")
    env = dict(
        os.environ, PYTHONPATH=str(REPO), APPTUNE_ROOT=str(root), RFM_ENABLE_RESULTS_STORAGE="0"
    )
    proc = subprocess.run(
        [
            str(reframe),
            "-C",
            "site-config/settings.py",
            "-c",
            "reframe-checks/",
            "-R",
            "-l",
            "--nocolor",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # the application's own test cases are gone, a test that fails naming the problem is there
    assert "- QeDataProblems " in out and "skipping test file" not in out
    assert (
        "build-recipes/qe.yaml: tiers.ci.time_limit: '5 parsecs' is not a time limit ReFrame reads"
        in out
    )
    others = [d for d in (root / "reframe-checks").iterdir() if d.is_dir() and d.name != "qe"]
    loaded = [c for d in others for c in check_classes(d)]
    assert len(loaded) >= len(others) >= 2
    for check in loaded:
        assert f"- {check} " in out
    (qe_check,) = check_classes(root / "reframe-checks/qe")
    assert f"- {qe_check}" not in out and "Traceback" not in out


def check_classes(check_dir: Path) -> list[str]:
    """The test classes (``AppRun``) of an application's check files."""
    return [
        m
        for f in sorted(check_dir.glob("*.py"))
        for m in re.findall(r"^class (\w+)\(AppRun\):", f.read_text(), re.M)
    ]


# ----------------------------------------------------------------------- error presentation
@pytest.mark.parametrize(
    "exc,rc,line",
    [
        (ApptuneError("f.yaml", "x", "bad"), 2, "apptune: error: f.yaml: x: bad"),
        (
            FileNotFoundError(2, "No such file or directory", "runs/x/report.json"),
            2,
            "apptune: error: runs/x/report.json: No such file or directory",
        ),
        (
            subprocess.CalledProcessError(3, ["make", "-j2"]),
            2,
            "apptune: error: make -j2: exited with status 3",
        ),
        (KeyboardInterrupt(), 130, "apptune: interrupted"),
    ],
)
def test_expected_failures_are_one_line_and_the_traceback_needs_verbose(
    monkeypatch, capsys, exc, rc, line
):
    def boom(a):
        raise exc

    monkeypatch.setattr(list_command, "cmd_list", boom)
    assert cli.main(["list"]) == rc
    assert capsys.readouterr().err.splitlines() == [line]
    assert cli.main(["-v", "list"]) == rc
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and err.splitlines()[-1] == line


def test_yaml_and_pydantic_errors_escaping_a_command_are_one_line(monkeypatch, capsys):
    import yaml

    from apptune.models import TierSpec

    def bad_yaml(a):
        yaml.safe_load("a: [1")

    def bad_model(a):
        TierSpec.model_validate({"variants": {}, "ranks": 0})

    for fn in (bad_yaml, bad_model):
        monkeypatch.setattr(list_command, "cmd_list", fn)
        assert cli.main(["list"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("apptune: error: "), err
    assert (
        "ranks: must be greater than or equal to 1 (got 0)" in err[0] and "more problem" in err[0]
    )


def test_a_bug_still_shows_its_traceback(monkeypatch):
    monkeypatch.setattr(list_command, "cmd_list", lambda a: {}["missing"])
    with pytest.raises(KeyError):
        cli.main(["list"])


def test_every_recipe_and_reference_survives_a_round_trip_edit_unchanged():
    """bless, tune and bisect edit these files through ruamel.yaml's round trip: a file it
    would re-format (a flow list spread over several lines, say) would show unrelated lines
    in every reviewed diff."""
    from apptune.yamlio import edit_yaml_text

    files = sorted(
        [*(REPO / "build-recipes").glob("*.yaml"), *(REPO / "reference").glob("*/*.yaml")]
    )
    changed = [
        str(f.relative_to(REPO))
        for f in files
        if edit_yaml_text(f.read_text(), lambda d: None) != f.read_text()
    ]
    assert files and not changed, changed
