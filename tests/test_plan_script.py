"""plan.sh takes words from stored records: none of them may end a line of it. A record
whose launcher or CPU frequency holds a newline (a damaged or hostile run directory,
ingested into the history) gives a script whose every line is what apptune wrote."""

import glob
import json
import os
import subprocess

from conftest import write_run
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


# ------------------------------------------------------------------ the power cap
def peaked(app, wall, energy, peak, **over):
    """A measured run that recorded its peak power (the meter's largest sample)."""
    r = row(app, wall, energy, **over)
    r["figures"]["peak_power_W"] = peak
    r["energy"] = {"trust": "measured", "energy_J": energy, "peak_power_W": peak}
    return r


def test_the_cap_holds_at_the_recorded_peak_not_the_mean(tmp_path, capsys):
    """tuned: 100 W on average, 160 W at its peak; baseline: 60 W, 70 W at its peak. A cap of
    120 W takes the mean of neither over it, but the tuned build's peaks would go over it
    at every peak: the plan takes the baseline, and says which power it counted."""
    hdir = history_with(
        tmp_path,
        [[peaked("hpcc", 10, 1000, 160), peaked("hpcc", 20, 1200, 70, variant="baseline")]],
    )
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--power-cap", "120W", "--out", out) == 0
    text = capsys.readouterr().out
    (chosen,) = json.loads((out / "plan.json").read_text())["chosen"]
    assert chosen["variant"] == "baseline" and chosen["peak_W"] == 70
    assert "budget used: power 70 W (recorded peak, hpcc) of the cap 120 W" in text
    assert "no peak recorded" not in text
    # a cap below every recorded peak: the reason names the peak
    assert apptune("plan", "--history", hdir, "--power-cap", "65W", "--out", out) == 2
    err = capsys.readouterr().err
    assert "draws 70 W (recorded peak) on 1 node(s), cap 65 W" in err
    assert "draws 160 W (recorded peak) on 1 node(s), cap 65 W" in err


def fake_slurm(tmp_path):
    """An ``sbatch`` on PATH that, as Slurm does, creates the job's ``--output`` file, and
    prints a job id; it runs nothing."""
    bin_dir = tmp_path / "slurmbin"
    bin_dir.mkdir()
    sb = bin_dir / "sbatch"
    sb.write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in --output=*) : > "${a#--output=}";; esac; done\n'
        "echo 42\n"
    )
    sb.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def test_check_takes_the_documented_glob_on_the_layout_plan_sh_makes(tmp_path, capsys):
    """docs/planning.md and plan.sh's comment: ``apptune plan --check OUT/jobs/* --plan
    OUT/plan.json``. Slurm's output files used to sit in jobs/ and the check refused them
    ("not a run directory")."""
    hdir = history_with(tmp_path, [[peaked("hpcc", 10, 1000, 90)]])
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "1h", "--power-cap", "100W",
                   "--out", out) == 0  # fmt: skip
    capsys.readouterr()
    script = (out / "plan.sh").read_text()
    assert f"apptune plan --check {out}/jobs/* --plan {out}/plan.json" in script
    p = subprocess.run(["bash", str(out / "plan.sh")], env=fake_slurm(tmp_path), text=True)
    assert p.returncode == 0
    assert (out / "logs/1-hpcc.out").is_file()
    # the job's run, where the script's `apptune run --run-dir` puts it
    write_run(out / "jobs/1-hpcc", "j1", 1.9e9, [peaked("hpcc", 11, 1050, 95)], mode="ci")
    jobs = sorted(glob.glob(f"{out}/jobs/*"))
    assert apptune("plan", "--check", *jobs, "--plan", out / "plan.json") == 0
    text = capsys.readouterr().out
    assert "hpcc gnu/tuned: time 11 s, expected 10 s (+10.0%" in text
    assert "highest recorded peak power 95 W (hpcc) of the cap 100 W: within the cap" in text
    # a job's output file among the run directories (an older plan.sh's layout): named, left
    (out / "jobs/1-hpcc.out").write_text("slurm output\n")
    jobs = sorted(glob.glob(f"{out}/jobs/*"))
    assert apptune("plan", "--check", *jobs, "--plan", out / "plan.json") == 0
    assert f"left out: {out}/jobs/1-hpcc.out: not a run directory" in capsys.readouterr().out


def test_check_says_when_a_run_went_over_the_cap_at_its_peak(tmp_path, capsys):
    hdir = history_with(tmp_path, [[peaked("hpcc", 10, 1000, 90)]])
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--power-cap", "100W", "--out", out) == 0
    write_run(tmp_path / "j", "j1", 1.9e9, [peaked("hpcc", 10, 1000, 130)], mode="ci")
    assert apptune("plan", "--check", tmp_path / "j", "--plan", out / "plan.json") == 1
    assert "highest recorded peak power 130 W (hpcc) of the cap 100 W: OVER the cap" in (
        capsys.readouterr().out
    )
