"""The CLI: validate names bad data in one line; run composes a plain reframe command."""

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
