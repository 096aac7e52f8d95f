"""The CLI: validate names bad data in one line; run composes a plain reframe command."""

import dataclasses
import shutil
from pathlib import Path

from apptune import cli
from apptune.commands import workflow

REPO = Path(__file__).resolve().parent.parent


def test_validate_real_tree(capsys):
    assert cli.main(["validate"]) == 0
    assert "all data files valid" in capsys.readouterr().out


def test_validate_unknown_environment(tmp_path, monkeypatch, capsys):
    root = tmp_path / "tree"
    for d in ("build-recipes", "patches", "inputs", "reference", "site-config"):
        shutil.copytree(REPO / d, root / d)
    r = root / "build-recipes/hpcc.yaml"
    r.write_text(r.read_text().replace("      oneapi: [tuned]\n", "      lvm: [tuned]\n", 1))
    monkeypatch.setenv("APPTUNE_ROOT", str(root))
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[0].startswith("apptune: error: ")
        and "tiers.ci.variants.lvm" in err[0]
        and "llvm" in err[0]
    )
    assert len(err) == 2 and "1 problem(s)" in err[1]


def test_validate_missing_reference_and_reference_tree(tmp_path, monkeypatch, capsys):
    root = tmp_path / "tree"
    for d in ("build-recipes", "patches", "inputs", "reference", "site-config"):
        shutil.copytree(REPO / d, root / d)
    monkeypatch.setenv("APPTUNE_ROOT", str(root))
    (root / "reference/examl/ci.tree").unlink()
    (root / "reference/netpipe/nightly.yaml").unlink()
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err.strip()
    # both problems, not only the first
    assert "examl.yaml: run.output.reference" in err and "ci.tree" in err
    assert "reference/netpipe/nightly.yaml" in err and "no stored reference" in err


def test_run_command_is_plain_reframe(tmp_path):
    cmd = workflow.reframe_command(
        REPO, "ci", [], tmp_path, "site-config/settings.py", ["-p", "gnu"]
    )
    assert Path(cmd[0]).name == "reframe"
    assert cmd[1:3] == ["-C", str(REPO / "site-config/settings.py")]
    assert ["--mode", "ci"] == cmd[cmd.index("--mode") : cmd.index("--mode") + 2]
    assert str(tmp_path / "report.json") in cmd and cmd[-2:] == ["-p", "gnu"]


def test_run_options_are_the_run_command_line_and_nothing_else():
    """`apptune run`'s options reach the session as a RunOptions, each under its name; an
    option the command line gains and RunOptions lacks (or the reverse) fails here."""
    from apptune.commands import parser
    from apptune.commands.run import RunOptions

    argv = ["run", "--mode", "nightly", "-c", "reframe-checks/hpcc", "--repeats", "3"]
    argv += ["--no-history", "--env", "gnu", "--env", "llvm", "--wait-for-quiet", "30"]
    a = parser("apptune").parse_args([*argv, "--", "-n", "HPCC"])
    assert RunOptions.from_args(a) == RunOptions(
        mode="nightly",
        checks=["reframe-checks/hpcc"],
        config="site-config/settings.py",
        reframe_args=["-n", "HPCC"],
        no_history=True,
        repeats=3,
        wait_for_quiet=30.0,
        env=["gnu", "llvm"],
    )
    dests = set(vars(parser("apptune").parse_args(["run"]))) - {"cmd", "traceback", "func"}
    assert dests == {f.name for f in dataclasses.fields(RunOptions)}


def test_a_run_is_judged_unless_its_options_ask_for_no_performance_verdict():
    assert workflow.judged("ci", []) and workflow.judged("nightly", ["-n", "HPCC"])
    assert not workflow.judged("dev", [])
    assert not workflow.judged("ci", ["-n", "HPCC", "--skip-performance-check"])


def test_trials_not_stored_have_no_callback_and_a_failed_store_replaces_success_only():
    with workflow.trials_in_history("tune", store=False, history=None, argv=["tune"]) as t:
        assert t.add is None
    assert t.status(0) == 0 and t.status(1) == 1
    failed = workflow.Trials(failed=3)
    assert failed.status(0) == 3 and failed.status(1) == 1
