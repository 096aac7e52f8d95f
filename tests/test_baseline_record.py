"""`apptune baseline record`: the sessions, the merge of clean verified runs, the diff, and
the file written only when confirmed (a small timed C application, tests/timeapp.py)."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import timeapp
import yaml
from conftest import write_run

from apptune.commands import baseline as baseline_command

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.integration
@pytest.mark.exclusive
def test_record_runs_the_sessions_shows_the_diff_and_writes_with_yes(tmp_path):
    root = tmp_path / "tree"
    timeapp.write_tree(root, REPO, n=20_000_000)
    f = root / "reference/baselines/local/timeapp.yaml"
    env = dict(os.environ, APPTUNE_ROOT=str(root), APPTUNE_RUNS=str(root / "runs"))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "apptune",
            "baseline",
            "record",
            "-c",
            "reframe-checks/timeapp",
            "--sessions",
            "3",
            "--wait-for-quiet",
            "60",
            "--no-history",
            "--yes",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert out.count("apptune: baseline record: session ") == 3
    assert "+++ " + str(f) + " (after)" in out and f"apptune: baseline record: wrote {f}" in out
    (entry,) = yaml.safe_load(f.read_text())["entries"]
    assert (entry["environment"], entry["variant"], entry["tier"]) == ("gnu", "tuned", "ci")
    # every clean session is in it, a disturbed one is named and left out
    left_out = out.count("left out: run quality disturbed")
    kt = entry["figures"]["kernel_time"]
    assert kt["runs"] == 3 - left_out >= 1, out[-2000:]
    assert (kt["noise"] is not None) == (kt["runs"] >= 3)


def record_args(**kw) -> argparse.Namespace:
    """The options of `apptune baseline record -c reframe-checks/toy --mode ci`."""
    base = dict(
        sessions=5,
        mode="ci",
        checks=["reframe-checks/toy"],
        config="site-config/settings.py",
        wait_for_quiet=60,
        no_history=True,
        reframe_args=[],
        system=None,
        yes=False,
        from_history=None,
        history=None,
        accept_noisy=False,
    )
    return argparse.Namespace(**(base | kw))


@pytest.mark.unit
def test_without_a_tty_or_yes_nothing_is_written(toy_root, tmp_path, monkeypatch, capsys):
    """From cron or a job without --yes: the diff is shown, the file is not written, exit 1."""
    monkeypatch.setenv("APPTUNE_RUNS", str(tmp_path / "runs"))
    sessions = []

    def fake_run(a):
        sessions.append(a.run_dir)
        write_run(
            Path(a.run_dir),
            f"u{len(sessions)}",
            1.7e9 + len(sessions),
            [
                {
                    "app": "toy",
                    "tier": "ci",
                    "environment": "gnu",
                    "variant": "tuned",
                    "figures": {"rate": 10.0 + 0.1 * len(sessions)},
                }
            ],
            mode="ci",
        )
        return 0

    monkeypatch.setattr(baseline_command, "run_session", fake_run)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    a = record_args(sessions=3, yes=False)
    assert baseline_command.cmd_baseline_record(a) == 1
    out = capsys.readouterr()
    f = toy_root / "reference/baselines/local/toy.yaml"
    assert len(sessions) == 3 and not f.exists()
    assert "+++ " + str(f) + " (after)" in out.out
    assert "1 file(s) not written (no tty to confirm: --yes writes them" in out.err
    a.sessions = 0
    with pytest.raises(Exception, match="--sessions: 0: give at least 1"):
        baseline_command.cmd_baseline_record(a)


@pytest.mark.unit
def test_from_history_records_the_stored_nights_and_runs_nothing(toy_root, tmp_path, capsys):
    """`--from-history 4`: the last 4 stored sessions of the mode with the selected app (not
    the older one, not another app's, not another mode's), one session each in the noise
    between sessions; nothing is run."""
    from apptune.history import store as hist

    h = tmp_path / "history"
    night = [10.0, 11.0, 13.0, 10.5, 12.0]
    with hist.History(h) as db:
        for i, rate in enumerate(night):
            r = {"app": "toy", "tier": "ci", "environment": "gnu", "variant": "tuned"}
            d = write_run(
                tmp_path / f"night-{i}",
                f"n{i}",
                1.7e9 + i,
                [dict(r, figures={"rate": rate})],
                mode="ci",
            )
            db.ingest(d)
        other = write_run(
            tmp_path / "dev", "d0", 1.7e9 + 9, [dict(r, figures={"rate": 99.0})], mode="dev"
        )
        db.ingest(other)
    a = record_args(sessions=5, yes=True, from_history=4, history=str(h))
    assert baseline_command.cmd_baseline_record(a) == 0
    out = capsys.readouterr().out
    assert "from 4 stored session(s)" in out and "night-0" not in out.split("\n")[0]
    (entry,) = yaml.safe_load((toy_root / "reference/baselines/local/toy.yaml").read_text())[
        "entries"
    ]
    rate = entry["figures"]["rate"]
    assert (rate["runs"], rate["sessions"], rate["value"]) == (4, 4, 11.5)
    assert rate["between"] > 0
    a.from_history = 2
    with pytest.raises(Exception, match="--from-history: 2: give at least 3"):
        baseline_command.cmd_baseline_record(a)
    a.from_history, a.mode = 3, "nightly"
    with pytest.raises(Exception, match="0 stored session\\(s\\) of mode nightly"):
        baseline_command.cmd_baseline_record(a)


def _nights(tmp_path: Path, rates: list[float], lat: list[float], outside: float) -> Path:
    """A history of nights of the toy, each with its rate and latency, run on a node whose
    other processes used ``outside`` of its CPUs."""
    from conftest import CLEAN

    from apptune.history import store as hist

    h = tmp_path / "history"
    q = dict(CLEAN, outside_cpu_fraction=outside, cpus=2, load1=[outside * 20, 1.0])
    r = {"app": "toy", "tier": "ci", "environment": "gnu", "variant": "tuned", "quality": q}
    with hist.History(h) as db:
        for i, (rate, x) in enumerate(zip(rates, lat, strict=True)):
            figs = {"rate": rate, "wall_time": x}
            d = write_run(tmp_path / f"night-{i}", f"n{i}", 1.7e9 + i, [dict(r, figures=figs)])
            db.ingest(d)
    return h


@pytest.mark.unit
def test_a_baseline_too_noisy_to_judge_by_from_a_busy_node_is_refused(toy_root, tmp_path, capsys):
    """Nights on a node whose other processes used 80 % of its CPUs (clean under a shared
    node's limit): the rate's noise 53 %, the wall time's beyond 100 %. Not written; each
    figure named with what it lets be judged and why; --accept-noisy writes it."""
    h = _nights(tmp_path, [10.0, 16.0, 12.0, 8.0], [1.0, 40.0, 2.0, 90.0], outside=0.8)
    f = toy_root / "reference/baselines/local/toy.yaml"
    a = record_args(yes=True, from_history=4, history=str(h), mode="nightly")
    assert baseline_command.cmd_baseline_record(a) == 1
    err = capsys.readouterr().err
    assert not f.exists()
    assert "gnu/tuned tier ci: too noisy to judge by: " in err
    assert "wall_time (noise " in err and "per run: never judged)" in err
    assert "rate (noise " in err and "only a change beyond " in err
    assert "its runs shared the node: other processes used up to 80% of its CPUs" in err
    assert "1 file(s) not written" in err and "--accept-noisy" in err
    a.accept_noisy = True
    assert baseline_command.cmd_baseline_record(a) == 0
    assert f.exists() and "too noisy to judge by" in capsys.readouterr().err


@pytest.mark.unit
def test_a_noisy_baseline_from_quiet_runs_is_written_with_a_warning(toy_root, tmp_path, capsys):
    """The same noise on a quiet node is the machine's own at this input: recording again
    would not help, so it is written, with the figures named."""
    h = _nights(tmp_path, [10.0, 11.0, 10.5, 10.2], [1.0, 40.0, 2.0, 90.0], outside=0.01)
    a = record_args(yes=True, from_history=4, history=str(h), mode="nightly")
    assert baseline_command.cmd_baseline_record(a) == 0
    err = capsys.readouterr().err
    assert "wall_time (noise " in err and "never judged" in err and "rate (" not in err
    assert "its runs were quiet: this is the machine's own noise" in err
