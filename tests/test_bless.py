"""``apptune bless RUN``: a reviewable diff first, nothing written without --yes or a TTY,
refusal of a run whose verification failed, in-place edits that keep comments."""

import os

import pytest
import yaml
from conftest import write_run

from apptune import cli
from apptune.tools import bless

FIELDS = [
    {"field": "sum", "value": 1.6449330668, "ok": True},
    {"field": "n", "value": 1000000, "ok": True},
]


def _toy_run(tmp_path, ok=True, rate=123.5, sum_=1.6449330669, name="run"):
    fields = [dict(FIELDS[0], value=sum_), FIELDS[1]]
    return write_run(
        tmp_path / name,
        f"uuid-{name}",
        1.0,
        [
            {
                "app": "toy",
                "tier": "ci",
                "environment": "gnu",
                "variant": "baseline",
                "figures": {"rate": rate, "wall_time": 1.5},
                "ok": ok,
                "fields": fields,
                "repeat": rep,
            }
            for rep in range(3)
        ]
        + [
            {
                "app": "toy",
                "tier": "ci",
                "environment": "gnu",
                "variant": "tuned",
                "figures": {"rate": rate * 1.2, "wall_time": 1.2},
                "ok": True,
                "fields": fields,
            }
        ],
    )


def test_without_yes_and_without_a_tty_only_the_diff_is_shown(
    toy_root, tmp_path, capsys, monkeypatch
):
    ref = toy_root / "reference/toy/ci.yaml"
    before = ref.read_text()
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["bless", str(_toy_run(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "--- a/reference/toy/ci.yaml" in out and "+++ b/reference/toy/ci.yaml" in out
    assert "-  sum: {value: 1.6449330668, rel: 1.0e-9}" in out
    assert "+  sum: {value: 1.6449330669, rel: 1.0e-9}" in out
    assert "+++ b/reference/baselines/local/toy.yaml" in out and "value: 123.5" in out
    assert "nothing written" in out
    assert ref.read_text() == before
    assert not (toy_root / "reference/baselines/local/toy.yaml").exists()


def test_yes_writes_reference_and_baselines_in_place(toy_root, tmp_path, capsys):
    ref = toy_root / "reference/toy/ci.yaml"
    run = _toy_run(tmp_path)
    assert cli.main(["bless", str(run), "--yes"]) == 0
    text = ref.read_text()
    assert "  sum: {value: 1.6449330669, rel: 1.0e-9}\n" in text
    assert "  n: {value: 1000000, abs: 0}\n" in text  # unchanged line kept as it was
    assert "blessed from run" in text and "gnu/baseline" in text
    base = (toy_root / "reference/baselines/local/toy.yaml").read_text()
    assert (
        "variant: baseline" in base
        and "value: 123.5" in base
        and "median of 3 clean run(s)" in base
    )
    capsys.readouterr()
    # blessing the same run again changes nothing
    assert cli.main(["bless", str(run), "--yes"]) == 0
    assert "nothing to change" in capsys.readouterr().out


def test_a_run_whose_verification_failed_is_refused(toy_root, tmp_path, capsys):
    """The failed tests' records are in stage/ (ReFrame copies only passed tests to
    output/): the refusal finds them there and names them."""
    ref = toy_root / "reference/toy/ci.yaml"
    before = ref.read_text()
    run = _toy_run(tmp_path, ok=False)
    # ReFrame keeps a failed test's files in stage/, a passed one's in output/
    assert len(list((run / "stage").rglob("apptune-result.json"))) == 3
    assert len(list((run / "output").rglob("apptune-result.json"))) == 1
    assert cli.main(["bless", str(run), "--yes"]) == 2
    err = capsys.readouterr().err
    assert "refused: 3 test(s) failed or were not verified" in err
    assert (
        "TOYCheck %tier=ci %.repeat_no=0 %build.variant=baseline [gnu]: fail in sanity: sum = nan"
        in err
    )
    assert "--only-passing" in err and err.count("\n") == 1
    assert ref.read_text() == before
    assert not (toy_root / "reference/baselines/local/toy.yaml").exists()


def test_only_passing_blesses_the_verified_tests_and_names_the_others(toy_root, tmp_path, capsys):
    run = _toy_run(tmp_path, ok=False)
    assert cli.main(["bless", str(run), "--yes", "--only-passing"]) == 0
    cap = capsys.readouterr()
    assert cap.err.count("left out: TOYCheck") == 3
    base = (toy_root / "reference/baselines/local/toy.yaml").read_text()
    assert "variant: tuned" in base and "variant: baseline" not in base


def test_a_failed_build_refuses_the_run(toy_root, tmp_path, capsys):
    import json

    run = _toy_run(tmp_path)
    rep = json.loads((run / "report.json").read_text())
    rep["runs"][0]["testcases"].append(
        {
            "display_name": "TOYBuild %variant=tuned",
            "unique_name": "B",
            "environ": "gnu",
            "result": "fail",
            "fail_phase": "compile",
            "fail_reason": "build failed: acc.c: error",
            "fixture": True,
        }
    )
    (run / "report.json").write_text(json.dumps(rep))
    assert cli.main(["bless", str(run), "--yes"]) == 2
    assert (
        "TOYBuild %variant=tuned [gnu]: fail in compile: build failed: acc.c: error"
        in capsys.readouterr().err
    )


def test_disturbed_runs_never_enter_a_baseline(toy_root, tmp_path, capsys):
    disturbed = {"grade": "disturbed", "reasons": ["CPU steal 5.0%"]}
    run = write_run(
        tmp_path / "run",
        "uuid-d",
        1.0,
        [
            {
                "app": "toy",
                "tier": "ci",
                "environment": "gnu",
                "variant": "tuned",
                "figures": {"rate": 1.0},
                "fields": FIELDS,
                "quality": disturbed,
            }
        ],
    )
    assert cli.main(["bless", str(run), "--yes"]) == 0
    assert "left out: run quality disturbed" in capsys.readouterr().err
    assert not (toy_root / "reference/baselines/local/toy.yaml").exists()


def test_a_failed_write_leaves_every_file_whole(toy_root, tmp_path, monkeypatch):
    ref = toy_root / "reference/toy/ci.yaml"
    before = ref.read_text()
    changes = bless.plan(_toy_run(tmp_path))
    assert len(changes) == 2

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        bless.write(changes)
    assert ref.read_text() == before
    assert sorted(p.name for p in ref.parent.iterdir()) == ["ci.yaml"]


def test_block_style_fields_keep_their_comments():
    text = (
        "# comment kept\napp: x\ntier: ci\nrecorded: old\nfields:\n"
        "  lnL:\n    value: -10.5\n    abs: 0.01\n    why: >-\n      a: folded text\n"
        "  rf: {value: 0, abs: 0}\n"
    )
    new = bless.reference_text(text, {"lnL": -10.25, "rf": 0}, "today")
    assert new == text.replace("value: -10.5", "value: -10.25").replace(
        "recorded: old", 'recorded: "today"'
    )


def test_a_real_reference_changes_in_the_changed_values_only():
    """Every committed reference file: a bless that changes one value changes that line
    only (comments, flow style, quoting and order stay), and one that changes nothing
    leaves the file byte-identical."""
    import difflib

    from conftest import REPO

    edited = 0
    for f in sorted((REPO / "reference").glob("*/*.yaml")):
        text = f.read_text()
        fields = yaml.safe_load(text)["fields"]
        assert bless.reference_text(text, {}, None) == text, f
        # a new application's reference has no field until its first `bless --new`
        some = [(n, s) for n, s in fields.items() if "value" in s and s["value"] != 0]
        if not some:
            continue
        edited += 1
        name, spec = some[0]
        new = bless.reference_text(text, {name: float(spec["value"]) * 2 + 1}, None)
        changed = [
            ln
            for ln in difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        ]
        assert len(changed) == 2 and all("value: " in ln for ln in changed), (f, changed)
        assert yaml.safe_load(new)["fields"][name]["value"] == float(spec["value"]) * 2 + 1
    assert edited, "no committed reference with a value to change"
