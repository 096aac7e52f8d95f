"""plan.sh takes words from stored records: none of them may end a line of it. A record
whose launcher or CPU frequency holds a newline (a damaged or hostile run directory,
ingested into the history) gives a script whose every line is what apptune wrote."""

import json
import os
import subprocess

from test_plan import apptune, history_with, row

PAYLOAD = "2\ntouch {}\n#"


def _lines(script: str) -> list[str]:
    return script.splitlines()


def fake_sbatch(tmp_path):
    """An ``sbatch`` on PATH that records its arguments and prints a job id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    sb = bin_dir / "sbatch"
    sb.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\necho 42\n')
    sb.chmod(0o755)
    return bin_dir, log


def test_a_launcher_with_a_newline_stays_in_its_comment(tmp_path, capsys):
    marker = tmp_path / "TOUCHED"
    launch = {"launcher": ["mpirun", "-np", PAYLOAD.format(marker)]}
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100, launch=launch)]])
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "1h", "--out", out) == 0
    script = (out / "plan.sh").read_text()
    lines = _lines(script)
    assert not any(ln.strip().startswith("touch") for ln in lines), script
    (launch_line,) = [ln for ln in lines if "recorded launch" in ln]
    assert launch_line.startswith("# ") and "\\ntouch" in launch_line
    # every byte of it is apptune's: bash parses it, and with sbatch faked it touches nothing
    assert subprocess.run(["bash", "-n", str(out / "plan.sh")]).returncode == 0
    bin_dir, log = fake_sbatch(tmp_path)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    p = subprocess.run(["bash", str(out / "plan.sh")], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "job 1 (hpcc): Slurm job 42" in p.stdout
    assert not marker.exists() and "--job-name=apptune-plan-1-hpcc" in log.read_text()


def test_a_command_word_with_a_newline_leaves_its_option_out(tmp_path, capsys):
    """A CPU frequency goes on sbatch's command line (``--cpu-freq``): an option whose
    recorded frequency holds a newline is left out, saying so in one line."""
    marker = tmp_path / "TOUCHED"
    hdir = history_with(
        tmp_path,
        [[row("hpcc", 10, 100, cpu_freq=PAYLOAD.format(marker)),
          row("hpcc", 20, 100, variant="baseline")]],
    )  # fmt: skip
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "1h", "--out", out) == 0
    text = capsys.readouterr().out
    assert "left out: hpcc gnu/tuned: its recorded CPU frequency holds a line break or NUL" in text
    (chosen,) = json.loads((out / "plan.json").read_text())["chosen"]
    assert chosen["variant"] == "baseline"
    script = (out / "plan.sh").read_text()
    assert "touch" not in script and str(marker) not in script
    assert all("\n" not in ln for ln in (out / "plan.txt").read_text().splitlines())


def test_an_out_directory_with_a_newline_is_refused_before_anything_is_written(tmp_path, capsys):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100)]])
    out = tmp_path / "plan\ntouch x"
    assert apptune("plan", "--history", hdir, "--time", "1h", "--out", out) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "plan.sh: a line would hold a line break" in err
    assert not out.exists()
