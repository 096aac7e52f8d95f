"""Every numeric option of every command is finite and in its range, or refused in one line
while the command line is read: before the command writes anything."""

import argparse

import pytest
from test_plan import history_with, row

from apptune import cli
from apptune.commands import MODULES, parser


def _actions(p: argparse.ArgumentParser, where=("apptune",)):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _actions(sub, (*where, name))
        else:
            yield where, a


def test_no_option_takes_a_bare_int_or_float():
    """A bare ``type=float`` takes ``nan`` and ``inf``, a bare ``int`` any count: each
    numeric option has one of the range-checked types of apptune/commands/options.py."""
    bare = [
        f"{' '.join(w)} {'/'.join(a.option_strings) or a.dest}"
        for w, a in _actions(parser("x"))
        if a.type in (int, float)
    ]
    assert bare == []


@pytest.mark.parametrize(
    "argv, option",
    [
        (["run", "--repeats", "0"], "--repeats"),
        (["run", "--repeats", "1e3"], "--repeats"),
        (["run", "--wait-for-quiet", "nan"], "--wait-for-quiet"),
        (["run", "--wait-for-quiet", "-1"], "--wait-for-quiet"),
        (["baseline", "record", "--sessions", "-2"], "--sessions"),
        (["baseline", "record", "--wait-for-quiet", "inf"], "--wait-for-quiet"),
        (["baseline", "record", "--from-history", "0"], "--from-history"),
        (["check-regressions", "--alpha", "nan"], "--alpha"),
        (["check-regressions", "--alpha", "1"], "--alpha"),
        (["check-regressions", "--min-change", "-0.1"], "--min-change"),
        (["check-regressions", "--min-change", "inf"], "--min-change"),
        (["cache", "prune", "--max-gb", "nan"], "--max-gb"),
        (["cache", "prune", "--max-gb", "1e400"], "--max-gb"),
        (["tune", "hpcc", "--budget", "0"], "--budget"),
        (["tune", "hpcc", "--polish", "-1"], "--polish"),
        (["tune", "hpcc", "--seed", "nan"], "--seed"),
        (["bisect", "hpcc", "--ranks", "0"], "--ranks"),
        (["bisect", "hpcc", "--max-cycles", "99999999999"], "--max-cycles"),
        (["new", "x", "--ranks", "-4"], "--ranks"),
    ],
)
def test_a_bad_number_is_one_line_naming_the_option(argv, option, capsys, monkeypatch):
    def ran(a):
        raise AssertionError(f"the command ran with {option} {argv[-1]}")

    for m in MODULES:  # nothing may run: the number is refused as the line is read
        for name in dir(m):
            if name.startswith("cmd_"):
                monkeypatch.setattr(m, name, ran)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"apptune: error: {option}: must be "), err


@pytest.mark.parametrize(
    "args, option",
    [
        (["--time", "1e309s"], "--time"),
        (["--time", "nan"], "--time"),
        (["--energy", "1e400kWh"], "--energy"),
        (["--time", "1h", "--power-cap", "1e309W"], "--power-cap"),
        (["--time", "1h", "--power-cap", "1" + "0" * 400 + "A", "--voltage", "230"], "--power-cap"),
        (["--time", "1h", "--voltage", "nan", "--power-cap", "13A"], "--voltage"),
        (["--time", "1h", "--voltage", "0", "--power-cap", "13A"], "--voltage"),
        (["--time", "1h", "--idle-power", "nan", "--nodes", "2"], "--idle-power"),
        (["--time", "1h", "--idle-power", "-20", "--nodes", "2"], "--idle-power"),
        (["--time", "1h", "--job-overhead", "nan"], "--job-overhead"),
        (["--time", "1h", "--job-overhead", "-600"], "--job-overhead"),
        (["--time", "1h", "--nodes", "0"], "--nodes"),
        (["--time", "1h", "--nodes", "inf"], "--nodes"),
    ],
)
def test_plan_refuses_a_number_before_it_writes_anything(tmp_path, capsys, args, option):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100)]])
    out = tmp_path / "plan"
    assert cli.main(["plan", "--history", hdir, "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"apptune: error: {option}: "), err
    assert not out.exists()


def test_a_wrong_command_line_is_one_line(capsys):
    assert cli.main(["nosuch"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("apptune: error: cmd: invalid choice: 'nosuch'")
    assert cli.main(["plan", "--tiem", "1h"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "unrecognized arguments: --tiem 1h" in line and "--help" in line


def test_plan_takes_the_numbers_it_should(tmp_path, capsys):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100)]])
    out = tmp_path / "plan"
    argv = ["plan", "--history", hdir, "--out", str(out), "--time", "1h", "--power-cap",
            "1A", "--voltage", "230", "--idle-power", "0", "--job-overhead", "0",
            "--nodes", "1"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert (out / "plan.json").is_file()


def test_every_history_option_names_where_the_history_is_by_default(monkeypatch, tmp_path):
    """One ``--history``, whose help says what the store chooses without it: it honours
    $XDG_DATA_HOME, so the help names it."""
    from apptune import paths

    found = [(w, a) for w, a in _actions(parser("x")) if "--history" in a.option_strings]
    assert len(found) >= 10  # tune and bisect through trial_history_options too
    for where, a in found:
        assert "$APPTUNE_HISTORY" in a.help and "$XDG_DATA_HOME/apptune/history" in a.help, where
    monkeypatch.delenv("APPTUNE_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert paths.history_dir() == tmp_path / "apptune" / "history"
