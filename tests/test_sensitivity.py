"""What each application's verification sees of the faults planted in it
(reference/APP/sensitivity/faults.yaml, run by ``apptune sensitivity APP``;
apptune/tools/sensitivity/).

The faulted runs are not run here: each caught fault's values, as its run gave them
(reference/APP/sensitivity/seen.yaml), are judged again against the current reference and
tolerances, and must still fail with the fields they failed with. So a tolerance loosened
until a planted fault passes, or a field dropped that alone caught one, fails this test;
re-running the battery is the nightly's and ``make test-long``'s business."""

import textwrap
from pathlib import Path

import pytest
import yaml

from apptune.cli import main
from apptune.core.data import faults
from apptune.core.validation import validate
from apptune.models import Seen
from apptune.tools import sensitivity
from apptune.tools.sensitivity import judge

REPO = Path(__file__).resolve().parent.parent
APPS = sorted(p.parent.parent.name for p in (REPO / "reference").glob("*/sensitivity/seen.yaml"))


def _caught(app):
    seen = faults.load_seen(app)
    runs = [(n, s) for n, s in seen.faults.items() if s.caught]
    runs += [(f"sweep {n}", sw.smallest_run) for n, sw in seen.sweeps.items() if sw.smallest_run]
    return seen, runs


@pytest.mark.parametrize("app", APPS)
def test_every_caught_fault_is_still_caught_by_the_same_fields(app):
    seen, runs = _caught(app)
    assert runs, f"{app}: the battery caught nothing"
    for name, s in runs:
        lost = [b for b in s.by if b not in judge.still_failing(app, seen.tier, s)]
        assert not lost, (
            f"{app}: planted fault {name} was caught by {', '.join(s.by)} and no longer by "
            f"{', '.join(lost)}: a tolerance was loosened or a field dropped "
            f"(reference/{app}/{seen.tier}.yaml)"
        )


@pytest.mark.parametrize("app", APPS)
def test_what_was_recorded_is_of_the_faults_as_they_are(app):
    """Each fault and sweep has a recorded outcome of its present definition (a changed
    patch, parameter or clean build is run again: `apptune sensitivity APP --only NAME`)."""
    data, seen = faults.load(app), faults.load_seen(app)
    assert (seen.tier, seen.environment, seen.variant) == (
        data.tier,
        data.environment,
        data.variant,
    )
    for name in [*data.faults, *data.sweeps]:
        got = seen.faults.get(name) or seen.sweeps.get(name)
        assert got is not None, f"{app}: {name} never ran (apptune sensitivity {app} --only {name})"
        assert got.digest == faults.digest(app, name, data), (
            f"{app}: {name} changed since it ran (apptune sensitivity {app} --only {name})"
        )
    assert set(seen.faults) <= set(data.faults) and set(seen.sweeps) <= set(data.sweeps)


def test_the_docs_table_says_what_was_recorded():
    """docs/applications.md's table is the recorded batteries' (a battery rewrites it)."""
    docs = (REPO / "docs/applications.md").read_text()
    assert sensitivity.table.HEADER in docs
    for app in APPS:
        assert sensitivity.docs_row(app) in docs, f"{app}: run apptune sensitivity {app}"
    assert sensitivity.docs_table(faults.apps_with_faults()) in docs


def test_a_battery_rewrites_the_docs_table_in_place_and_nothing_else(toy_faults, tmp_path):
    (toy_faults / "reference/toy/sensitivity/seen.yaml").write_text(TOY_SEEN)
    f = tmp_path / "applications.md"
    before, after = "# Apps\n\nText before.\n\n", "\n\nText after, | not a row.\n"
    stale = "| toy (gnu/baseline, tier ci) | old | old | old | old |\n| other | x | x | x | x |"
    f.write_text(before + sensitivity.table.HEADER + "\n" + stale + after)
    assert sensitivity.update_docs(f) == f
    want = before + sensitivity.docs_table(["toy"]) + after
    assert f.read_text() == want
    assert sensitivity.update_docs(f) == f and f.read_text() == want  # again: nothing changes
    g = tmp_path / "other.md"
    g.write_text("no table here\n")
    assert sensitivity.update_docs(g) is None and g.read_text() == "no table here\n"


def test_every_application_on_the_ci_tier_has_its_faults():
    from apptune.core.data import recipes

    on_ci = [a for a in recipes.list_recipes() if "ci" in recipes.load_recipe(a).tiers]
    missing = [a for a in on_ci if not (REPO / f"reference/{a}/sensitivity/faults.yaml").is_file()]
    # npb-official: NASA's own NPB, for a site that keeps its tarball: no check ships with it
    assert missing == ["npb-official"], missing


# --------------------------------------------------------------------- on the toy
TOY_FAULTS = """
app: toy
tier: ci
environment: gnu
variant: baseline
faults:
  loop-short:
    what: the sum's loop without its first term
    patch: loop-short.patch
  n-other:
    what: another n
    set: {n: 999}
sweeps:
  n:
    what: the number of terms
    steps: [0.001, 0.1]
"""

TOY_SEEN = textwrap.dedent("""
    app: toy
    tier: ci
    environment: gnu
    variant: baseline
    command: apptune sensitivity toy
    clean: verified 2 fields
    date: 2026-11-28
    machine: m-0
    faults:
      loop-short: {digest: x, caught: true, by: [sum], summary: s, date: 2026-11-28}
    sweeps:
      n:
        digest: y
        base: 1000000
        steps: [{change: 0.1, value: 1100000, caught: true, by: [n]}]
        smallest: 0.1
        smallest_run: {digest: y, caught: true, by: [n], summary: s, date: 2026-11-28}
""")

# one line a list item: the context line of acc.c's empty first line is a lone space
LOOP_SHORT = "\n".join(
    [
        "--- a/acc.c",
        "+++ b/acc.c",
        "@@ -1,6 +1,6 @@",
        " ",
        " double accumulate(int n) {",
        "     double s = 0.0;",
        "-    for (int i = 1; i <= n; i++) s += 1.0 / ((double)i * (double)i);",
        "+    for (int i = 2; i <= n; i++) s += 1.0 / ((double)i * (double)i);",
        "     return s;",
        " }",
        "",
    ]
)


@pytest.fixture
def toy_faults(toy_root):
    (toy_root / "reference/toy/sensitivity").mkdir()
    (toy_root / "reference/toy/sensitivity/faults.yaml").write_text(TOY_FAULTS)
    (toy_root / "patches/toy/faults").mkdir()
    (toy_root / "patches/toy/faults/loop-short.patch").write_text(LOOP_SHORT)
    return toy_root


def _only(found):
    assert len(found) == 1, found
    return str(found[0])


@pytest.mark.parametrize(
    "edit, words",
    [
        (("loop-short.patch", "gone.patch"), "faults.loop-short.patch: patches/toy/faults/gone"),
        (("{n: 999}", "{m: 999}"), "faults.n-other.set.m: no such parameter"),
        (("variant: baseline", "variant: aggressive"), "variant: gnu/aggressive is not on tier ci"),
        (("steps: [0.001, 0.1]", "steps: [0.1, 0.001]"), "sweeps.n.steps: steps grow"),
        (("    patch: loop-short.patch\n", ""), "faults.loop-short: give either"),
        (("  n-other:", "  N-other:"), "faults: 'N-other': a fault's name"),
    ],
)
def test_bad_faults_are_one_line_naming_the_file_and_field(toy_faults, edit, words):
    f = toy_faults / "reference/toy/sensitivity/faults.yaml"
    f.write_text(f.read_text().replace(*edit))
    line = _only([p for p in validate.problems() if "faults" in str(p)])
    assert line.startswith("tree/reference/toy/sensitivity/faults.yaml: ") and words in line, line


def test_an_install_has_no_source_to_patch(toy_faults):
    """The distribution's build (an install) takes faults in its input only."""
    r = toy_faults / "build-recipes/toy.yaml"
    text = r.read_text().replace(
        "build:\n",
        "installs:\n  distro: {programs: [toy], description: x, env: {A: b}}\nbuild:\n",
        1,
    )
    r.write_text(text.replace("gnu: [baseline, tuned]", "gnu: [baseline, tuned, distro]"))
    f = toy_faults / "reference/toy/sensitivity/faults.yaml"
    f.write_text(f.read_text().replace("variant: baseline", "variant: distro"))
    line = _only([p for p in validate.problems() if "faults" in str(p)])
    assert line == (
        "tree/reference/toy/sensitivity/faults.yaml: faults.loop-short.patch: distro is an install "
        "(installs.distro): it has no source to patch; plant its faults in the input"
    )


def test_a_fault_patch_that_is_no_diff_is_named(toy_faults):
    (toy_faults / "patches/toy/faults/loop-short.patch").write_text("not a diff\n")
    found = [p for p in validate.problems() if "patches" in str(p)]
    assert _only(found).startswith("tree/patches/toy/faults/loop-short.patch: not a unified diff")


def _seen(**over) -> Seen:
    base = dict(
        digest="x",
        caught=True,
        by=["sum"],
        summary="sum = 1.6, expected ...",
        values={"sum": 1.6449320668, "n": 1000000},
        date="2026-11-28",
    )
    return Seen(**{**base, **over})


def test_a_loosened_tolerance_lets_a_caught_fault_pass(toy_faults):
    """What the test above catches: the stored faulted sum fails the reference's 1e-9, and
    passes once someone loosens it to 1e-6 (the fault is then no longer caught)."""
    s = _seen()
    assert judge.still_failing("toy", "ci", s) == ["sum"]
    ref = toy_faults / "reference/toy/ci.yaml"
    ref.write_text(ref.read_text().replace("rel: 1.0e-9", "rel: 1.0e-6"))
    assert judge.still_failing("toy", "ci", s) == []
    assert judge.rejudge("toy", "ci", s).ok


def test_a_field_gained_since_is_not_judged_and_a_crash_stays_a_failure(toy_faults):
    ref = toy_faults / "reference/toy/ci.yaml"
    ref.write_text(ref.read_text() + "  rate: {value: 123.5, abs: 0}\n")
    s = _seen(values={"sum": 1.6449330668, "n": 1000000}, caught=False, by=[])
    assert judge.rejudge("toy", "ci", s).ok  # rate was not recorded: not judged
    crashed = _seen(values={}, by=["exit status"], crash="run exited with status 139")
    assert judge.still_failing("toy", "ci", crashed) == ["exit status"]


@pytest.mark.slow
def test_the_battery_on_the_toy(toy_faults, gnu_toolchain, tmp_path):
    """The clean build verifies; the shortened loop is caught by the sum; another n is not
    seen (the toy ignores its input), nor is any step of the sweep; the outcome is written
    beside the faults and reads back."""
    from apptune.core.data.site import Site

    site = Site("gnu", gnu_toolchain, {}, "local", "default", {}, "test")
    lines = []
    b = sensitivity.Battery("toy", work=tmp_path / "w", site=site, log=lines.append)
    out = b.go()
    assert out.faults["loop-short"].caught and out.faults["loop-short"].by == ["sum"]
    assert out.faults["loop-short"].values["n"] == 1000000
    assert not out.faults["n-other"].caught and out.faults["n-other"].used == 0
    sw = out.sweeps["n"]
    assert sw.smallest is None and [s.change for s in sw.steps] == [0.001, 0.1]
    assert faults.load_seen("toy") == out
    assert judge.still_failing("toy", "ci", out.faults["loop-short"]) == ["sum"]
    row = sensitivity.docs_row("toy")
    assert "the sum's loop without its first term (`sum`)" in row and "another n (0% of `" in row
    assert "the number of terms: none seen up to +10 %" in row
    # again with one fault: the other keeps what was recorded
    b = sensitivity.Battery("toy", work=tmp_path / "w", site=site, only=["n-other"], log=print)
    assert b.go().faults["loop-short"] == out.faults["loop-short"]


def test_the_command_refuses_an_unknown_fault_in_one_line(toy_faults, capsys):
    assert main(["sensitivity", "toy", "--only", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "apptune: error: tree/reference/toy/sensitivity/faults.yaml: no fault or sweep 'nope' "
        "(there are: loop-short, n-other, n)"
    )


def test_the_docs_table_of_the_command(toy_faults, capsys):
    seen = TOY_SEEN
    (toy_faults / "reference/toy/sensitivity/seen.yaml").write_text(seen)
    assert main(["sensitivity", "--docs", "toy"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == sensitivity.table.HEADER.splitlines()[0]
    assert (
        "| toy (gnu/baseline, tier ci) | the sum's loop without its first term (`sum`) | "
        "nothing planted went unseen | the number of terms: +10 % (`n`) | 2026-11-28, `m-0` |"
    ) in out
    assert yaml.safe_load(seen)["faults"]["loop-short"]["by"] == ["sum"]


@pytest.mark.integration
@pytest.mark.long_build
@pytest.mark.parametrize("app", APPS)
def test_the_battery_run_again_sees_what_it_recorded(app, tmp_path):
    """Every fault built and run again (make test-long, the nightly): caught by the same
    fields, or not seen, as recorded; each sweep's smallest change seen the same."""
    seen = faults.load_seen(app)
    again = sensitivity.Battery(
        app, work=tmp_path / "work", out=tmp_path / "seen.yaml", log=print
    ).go()
    for name, s in seen.faults.items():
        now = again.faults[name]
        assert (now.caught, now.by) == (s.caught, s.by), f"{app}: {name}: {now.summary}"
    for name, sw in seen.sweeps.items():
        assert again.sweeps[name].smallest == sw.smallest, f"{app}: sweep {name}"
