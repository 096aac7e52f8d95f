"""apptune plan: the choice of jobs under a budget, from small histories built as
``apptune run`` leaves runs (conftest.write_run), its output and its check."""

import json

import pytest
from conftest import write_run

from apptune import cli
from apptune.core.data import recipes
from apptune.history import store
from apptune.tools import plan, plan_report

H, KWH = 3600.0, 3.6e6
MODELLED = {"trust": "modelled", "energy_J": 1.0}
MEASURED = {"trust": "measured", "energy_J": 1.0}


def row(app, wall, energy, variant="tuned", grade=MEASURED, env="gnu", **over):
    """One verified result of the ci tier: wall time (s) and energy (J) of the given grade."""
    figs = {"wall_time": wall} | ({"energy_J": energy} if energy is not None else {})
    base = {"app": app, "tier": "ci", "environment": env, "variant": variant, "figures": figs}
    return base | {"energy": grade} | over


def history_with(tmp_path, runs: list[list[dict]]) -> str:
    """A history holding one run per list of results; returns its directory."""
    hdir = tmp_path / "hist"
    with store.History(hdir) as h:
        for i, results in enumerate(runs):
            d = write_run(tmp_path / f"run{i}", f"u{i}", 1.8e9 + i, results, mode="ci")
            h.ingest(d)
    return str(hdir)


def apptune(*argv) -> int:
    return cli.main([str(a) for a in argv])


# ------------------------------------------------------------------ the solver
def test_the_studys_example_chooses_jobs_1_and_3():
    """Values 2, 6, 3; 5, 10, 5 h; 6, 18, 7 kWh; 12 h and 15 kWh: jobs 1 and 3."""
    choices = [[(5.0, 6.0)], [(10.0, 18.0)], [(5.0, 7.0)]]
    assert plan.solve([2, 6, 3], choices, (12.0, 15.0)) == [0, None, 0]


def test_the_solver_is_exact_where_greedy_by_value_density_is_not():
    # greedy by value per hour takes 1 (3/2) then nothing fits; the optimum is 2 and 3
    choices = [[(2.0,)], [(3.0,)], [(3.0,)]]
    assert plan.solve([3, 4, 4], choices, (6.0,)) == [None, 0, 0]


def test_of_equal_values_the_plan_needing_less_is_taken():
    choices = [[(5.0, 9.0), (4.0, 3.0)]]  # two options of one job, both fit
    assert plan.solve([1], choices, (10.0, 10.0)) == [1]


def test_one_option_per_job_at_most():
    assert plan.solve([1], [[(1.0,), (1.0,)]], (10.0,)).count(None) == 0


def test_budget_quantities():
    assert plan.quantity("12h", "time", "s") == 12 * H
    assert plan.quantity("90min", "time", "s") == 5400
    assert plan.quantity("15kWh", "energy", "J") == 15 * KWH
    assert plan.power_cap("3kW", None) == 3000
    assert plan.power_cap("13A", 230) == 13 * 230
    with pytest.raises(ValueError, match="voltage"):
        plan.power_cap("13A", None)
    with pytest.raises(ValueError, match="not a time"):
        plan.quantity("12 parsecs", "time", "s")


def test_the_power_model_gives_the_nodes_a_cap_allows():
    b = plan.Budget(power_W=1000, nodes=8, idle_W=50)
    # (8 - x)·50 + x·250 <= 1000  ->  x <= 3
    assert plan.max_loaded_nodes(b, 250) == 3


# ------------------------------------------------------------ from a history
def test_the_studys_example_from_a_history(tmp_path, capsys):
    """The example as three applications' measured runs: jobs 1 and 3, nothing modelled."""
    hdir = history_with(
        tmp_path,
        [
            [
                row("examl", 5 * H, 6 * KWH),
                row("hpcc", 10 * H, 18 * KWH),
                row("qe", 5 * H, 7 * KWH, variant="none"),
            ]
        ],
    )
    (tmp_path / "v.yaml").write_text("values: {examl: 2, hpcc: 6, qe: 3}\n")
    out = tmp_path / "plan"
    rc = apptune("plan", "--history", hdir, "--values", tmp_path / "v.yaml", "--time", "12h",
                 "--energy", "15kWh", "--out", out)  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "energy measured (grade 'measured')"
    data = json.loads((out / "plan.json").read_text())
    assert [j["app"] for j in data["chosen"]] == ["examl", "qe"]
    assert [j["app"] for j in data["left_out"]] == ["hpcc"]
    assert "left out: hpcc (value 6): " in text and "modelled" not in text
    assert "budget used: time 10 h of 12 h" in text
    assert "budget used: energy 13 kWh of 15 kWh" in text


def test_modelled_energy_is_said_first_and_on_every_line_using_it(tmp_path, capsys):
    hdir = history_with(
        tmp_path, [[row("hpcc", 10, 400, grade=MODELLED), row("examl", 20, 900, grade=MODELLED)]]
    )
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--energy", "2kJ", "--out", out) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ENERGY MODELLED")
    # a job left out for the cap or the energy budget: its power or energy is modelled too
    rc = apptune("plan", "--history", hdir, "--energy", "800J", "--power-cap", "42W",
                 "--out", tmp_path / "capped")  # fmt: skip
    capped = capsys.readouterr().out.splitlines()
    assert rc == 0, capped
    assert (
        "left out: examl (value 1): draws 45 W (mean power, no peak recorded) (modelled) on "
        "1 node(s), cap 42 W" in capped
    )
    lines += capped[1:]
    for line in lines[1:]:
        if " J" in line or "kJ" in line or " W " in line:
            assert "(modelled)" in line, line
    script = (out / "plan.sh").read_text()
    assert script.splitlines()[1].startswith("# ENERGY MODELLED")
    assert all("(modelled)" in x for x in script.splitlines() if x.startswith("# job"))
    assert json.loads((out / "plan.json").read_text())["energy_grade"] == "modelled"


def test_noise_of_several_runs_is_the_spread_and_the_budget_counts_it(tmp_path, capsys):
    runs = [[row("hpcc", t, 100)] for t in (10.0, 11.0, 12.0)]
    hdir = history_with(tmp_path, runs)
    out = tmp_path / "plan"
    # median 11 s, σ 1 s: planned at 13 s, so 12 s of budget is not enough
    assert apptune("plan", "--history", hdir, "--time", "12s", "--out", out) == 2
    assert "infeasible budget: no job fits (hpcc: takes 13 s" in capsys.readouterr().err
    assert apptune("plan", "--history", hdir, "--time", "13s", "--out", out) == 0
    assert "11 s ± 1 s" in capsys.readouterr().out


def test_the_fastest_variant_that_fits_is_chosen_with_its_layout(tmp_path, capsys):
    lay2 = {"ranks": 4, "ranks_per_node": 2, "threads_per_rank": 1, "nodes": 2}
    hdir = history_with(
        tmp_path,
        [[row("hpcc", 30, 300, variant="baseline"),
          row("hpcc", 10, 400, variant="tuned@rpn=half", placement_layout=lay2)]],
    )  # fmt: skip
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "20s", "--out", out) == 0
    chosen = json.loads((out / "plan.json").read_text())["chosen"][0]
    assert (chosen["variant"], chosen["nodes"]) == ("tuned@rpn=half", 2)
    script = (out / "plan.sh").read_text()
    assert "--nodes=2" in script and "-S ranks_per_node=half" in script
    assert "--cpu-freq" not in script
    # a cluster of one node leaves the 2-node layout out: the baseline is the only way
    assert apptune("plan", "--history", hdir, "--time", "40s", "--nodes", "1",
                   "--idle-power", "10", "--out", out) == 0  # fmt: skip
    assert json.loads((out / "plan.json").read_text())["chosen"][0]["variant"] == "baseline"


def test_a_power_cap_picks_the_frequency_that_fits(tmp_path, capsys):
    """Runs at two frequencies: the fast one draws too much under the cap; the trade-off
    is shown with each figure's grade, and the script asks Slurm for the frequency."""
    hdir = history_with(
        tmp_path,
        [[row("hpcc", 10, 1000, cpu_freq="2400000"),  # 100 W
          row("hpcc", 14, 840, variant="tuned", cpu_freq="1800000")]],  # 60 W
    )  # fmt: skip
    out = tmp_path / "plan"
    rc = apptune("plan", "--history", hdir, "--power-cap", "80W", "--nodes", "2",
                 "--idle-power", "10", "--out", out)  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    chosen = json.loads((out / "plan.json").read_text())["chosen"][0]
    assert chosen["freq"] == "1800000"
    assert "--cpu-freq=1800000" in (out / "plan.sh").read_text()
    assert "frequency: hpcc gnu/tuned on 1 node(s): 2.4 GHz: 10 s, 1 kJ; 1.8 GHz: 14 s" in text
    # 60 W + one idle node; no peak in these runs: their mean, said so
    assert "budget used: power 70 W (mean power, no peak recorded, hpcc) of the cap 80 W" in text
    assert "power: no peak recorded for hpcc: its mean power is counted" in text


def test_runs_of_a_frequency_axis_are_one_variant_at_several_frequencies(tmp_path, capsys):
    """A session with ``-P cpu_freq=...`` names each run's frequency in its variant: the plan
    weighs them as options of one variant, and its script asks the check for the frequency."""
    hdir = history_with(
        tmp_path,
        [[row("hpcc", 10, 1000, variant="tuned@rpn=full,freq=2400000", cpu_freq="2400000"),
          row("hpcc", 14, 840, variant="tuned@rpn=full,freq=1800000", cpu_freq="1800000")]],
    )  # fmt: skip
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--energy", "900J", "--out", out) == 0
    text = capsys.readouterr().out
    assert "frequency: hpcc gnu/tuned@rpn=full on 1 node(s): 2.4 GHz: 10 s" in text, text
    chosen = json.loads((out / "plan.json").read_text())["chosen"][0]
    assert (chosen["variant"], chosen["freq"]) == ("tuned@rpn=full", "1800000")
    assert "-S ranks_per_node=full -S cpu_freq=1800000" in (out / "plan.sh").read_text()


def test_a_cap_below_the_idle_cluster_is_an_infeasible_budget(tmp_path, capsys):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100)]])
    rc = apptune("plan", "--history", hdir, "--power-cap", "10A", "--voltage", "5", "--nodes",
                 "8", "--idle-power", "20", "--out", tmp_path / "p")  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "apptune: error: --power-cap: infeasible budget: 8 idle nodes draw 160 W, "
        "more than the cap of 50 W"
    ]


def test_bad_value_files_one_line_each(tmp_path, capsys):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100)]])
    v = tmp_path / "v.yaml"
    v.write_text("values: {hpcc: 1, nosuch: 2}\n")
    assert apptune("plan", "--history", hdir, "--values", v, "--time", "1h") == 2
    known = ", ".join(recipes.list_recipes())  # every recipe of build-recipes/, whatever they are
    assert "hpcc, " in known
    assert capsys.readouterr().err.splitlines() == [
        f"apptune: error: {v}: values.nosuch: unknown application (known: {known})"
    ]
    v.write_text("values: {hpcc: 1, qe: 2, examl: 1}\n")
    assert apptune("plan", "--history", hdir, "--values", v, "--time", "1h") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("no verified run of" in e for e in err)
    assert err[0].startswith(
        f"apptune: error: {v}: values.examl: no verified run of examl (tier ci) on this machine"
    )
    v.write_text("values: {hpcc: -1}\n")
    assert apptune("plan", "--history", hdir, "--values", v, "--time", "1h") == 2
    assert "v.yaml: values.hpcc: a value must be a number more than 0" in capsys.readouterr().err


def test_a_variant_the_tier_no_longer_builds_is_left_out_saying_so(tmp_path, capsys):
    """FLASH-IO's gnu/tuned in the history of the ci tier (it runs nightly now, with 32-zone
    blocks): the fastest in the history, but the script's `apptune run --mode ci` would run
    nothing of it."""
    hdir = history_with(
        tmp_path,
        [[row("flashio", 0.3, 20), row("flashio", 0.5, 30, variant="baseline")]],
    )
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "1min", "--out", out) == 0
    text = capsys.readouterr().out
    (chosen,) = json.loads((out / "plan.json").read_text())["chosen"]
    assert (chosen["environment"], chosen["variant"]) == ("gnu", "baseline")
    assert (
        "left out: flashio gnu/tuned: in the history, no longer on the ci tier of "
        "flashio.yaml" in text
    )
    assert "tuned" not in (out / "plan.sh").read_text()


def test_unverified_runs_and_other_machines_are_not_planned_from(tmp_path, capsys):
    other = ("m-0000000000", {"cpu": "other"})
    qe = row("qe", 5, 50, variant="none", machine=other)
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100, ok=False), qe]])
    assert apptune("plan", "--history", hdir, "--time", "1h", "--out", tmp_path / "p") == 2
    assert "no verified run of tier ci on this machine" in capsys.readouterr().err
    # the other machine's run, by its system's name
    assert apptune("plan", "--history", hdir, "--time", "1h", "--system", "local",
                   "--out", tmp_path / "p") == 0  # fmt: skip
    assert "qe" in capsys.readouterr().out


# ------------------------------------------------------------------- the check
def test_check_reports_the_error_per_job_and_the_budget(tmp_path, capsys):
    hdir = history_with(tmp_path, [[row("hpcc", 10, 100), row("qe", 20, 300, variant="none")]])
    out = tmp_path / "plan"
    assert apptune("plan", "--history", hdir, "--time", "40s", "--out", out) == 0
    capsys.readouterr()
    jobs = tmp_path / "jobs"
    write_run(jobs / "1", "c1", 1.9e9, [row("hpcc", 12, 110)], mode="ci")
    write_run(jobs / "2", "c2", 1.9e9, [row("qe", 19, 280, variant="none")], mode="ci")
    assert apptune("plan", "--check", jobs / "1", jobs / "2", "--plan", out / "plan.json") == 0
    text = capsys.readouterr().out
    assert "hpcc gnu/tuned: time 12 s, expected 10 s (+20.0%" in text
    assert "qe gnu/none: time 19 s, expected 20 s (-5.0%" in text
    assert "total time 31 s of the budget's 40 s: within the budget" in text
    # a job that did not run, or ran over: exit 1
    assert apptune("plan", "--check", jobs / "1", "--plan", out / "plan.json") == 1
    assert "qe gnu/none: no run of it in the run directories" in capsys.readouterr().out


def test_check_refuses_what_is_not_a_plan(tmp_path, capsys):
    f = tmp_path / "x.json"
    f.write_text("[]")
    assert apptune("plan", "--check", tmp_path, "--plan", f) == 2
    assert "not a plan written by apptune plan" in capsys.readouterr().err


def test_the_launch_repeats_the_recorded_selection():
    o = plan.Option(
        app="mpi-micro", tier="ci", environment="gnu", variant="tuned@bound@tpr=2",
        system="localslurm:batch", mode="dev", layout={}, nodes=1, freq="low",
        time_s=1, time_sd=None, energy_J=None, energy_sd=None, grade="none", runs=1, clean=True,
    )  # fmt: skip
    argv = plan_report.launch(o, "/r", python="py")
    assert argv == [
        "py", "-m", "apptune", "run", "--mode", "dev", "--run-dir", "/r", "--app", "mpi-micro",
        "--env", "gnu", "--variant", "tuned", "--placement", "bound", "--",
        "--system", "localslurm:batch", "-S", "threads_per_rank=2", "-S", "cpu_freq=low",
    ]  # fmt: skip
