"""The report's machine knobs: each setting that ran side by side with the node's own, as
ratios, and each one the node could not set said to be not measured. The runs are
synthetic records (this VM can set no knob); the skip reasons are the lines this VM gave
under the local scheduler and under the private Slurm cluster."""

import json

from conftest import write_run

from apptune import report
from apptune.report.knob_table import knob_lines

NO_CPUFREQ = (
    "cpu_freq=low: not in effect: the node has no cpufreq interface "
    "(/sys/devices/system/cpu/cpu0/cpufreq is missing); srun --cpu-freq=low was accepted "
    "and the CPUs ran at 2445.4 MHz"
)
NO_SMT = (
    "smt=off: not set: the node has 1 thread per core "
    "(/sys/devices/system/cpu/cpu*/topology/thread_siblings_list; smt/control: notsupported)"
)
NO_TURBO = (
    "turbo=off: not set: the node has no turbo switch (neither "
    "/sys/devices/system/cpu/intel_pstate/no_turbo nor /sys/devices/system/cpu/cpufreq/boost)"
)


def _row(variant, wall, energy, hpl, asked=None, mhz=None, trust="modelled"):
    row = {
        "app": "hpcc",
        "tier": "ci",
        "environment": "gnu",
        "variant": variant,
        "figures": {"HPL": hpl, "wall_time": wall, "energy_J": energy},
        "energy": {"trust": trust, "source": "model" if trust == "modelled" else "rapl"},
        "quality": {"grade": "clean", "reasons": [], "freq_mhz": [2445.4, 2445.4]},
    }
    if asked:
        freq = {"median_mhz": mhz, "min_mhz": mhz, "max_mhz": mhz, "cpus": "0-1", "samples": 9}
        row["knobs"] = {
            "asked": asked,
            "observed": {"frequency": freq if mhz else None},
            "problems": [],
        }
        row["cpu_freq"] = asked.get("cpu_freq")
    return row


def _skipped(tmp_path, name, variant, reason, **asked):
    stage = tmp_path / "stage" / name
    stage.mkdir(parents=True)
    (stage / "apptune-skip.txt").write_text(reason + "\n")
    return {
        "display_name": f"HPCCCheck %tier=ci %build.variant={variant}",
        "unique_name": name,
        "environ": "gnu",
        "result": "skip",
        "fixture": False,
        "stagedir": str(stage),
        "app": "hpcc",
        "tier": "ci",
        **asked,
    }


def _run(tmp_path, rows, skipped):
    write_run(tmp_path, "u1", 1.7e9, rows, mode="ci")
    rep = json.loads((tmp_path / "report.json").read_text())
    rep["runs"][0]["testcases"] += skipped
    (tmp_path / "report.json").write_text(json.dumps(rep))
    return report.collect(tmp_path / "report.json")


def test_the_settings_that_ran_are_ratios_to_the_nodes_own_and_the_others_not_measured(
    tmp_path,
):
    rows = [
        _row("tuned", 10.0, 500.0, 40.0),
        _row("tuned@freq=1500000", 15.0, 450.0, 27.0, {"cpu_freq": "1500000"}, 1505.0),
        _row("tuned@freq=high", 10.0, 520.0, 40.4, {"cpu_freq": "high"}, 2445.0),
    ]
    skipped = [
        _skipped(tmp_path, "low", "tuned", NO_CPUFREQ, cpu_freq="low"),
        _skipped(tmp_path, "smt", "tuned", NO_SMT, smt="off"),
        _skipped(tmp_path, "smt-base", "baseline", NO_SMT, smt="off"),
        # skipped for a reason that is no knob's: not said to be the node's
        _skipped(tmp_path, "turbo", "tuned", "environment 'gnu': no mpicc", turbo="on"),
    ]
    s = _run(tmp_path, rows, skipped)
    tables = {(t["knob"], t["variant"]): t for t in s["knobs"]}
    assert set(tables) == {
        ("cpu_freq", "gnu/tuned"),
        ("smt", "gnu/tuned"),
        ("smt", "gnu/baseline"),
        ("turbo", "gnu/tuned"),
    }
    freq = tables[("cpu_freq", "gnu/tuned")]
    assert freq["reference"] == "node's own setting"
    assert freq["figures"] == ["wall_time", "energy_J", "HPL"]
    cols = {c["setting"]: c for c in freq["columns"]}
    assert list(cols) == ["node's own setting", "freq=1500000", "freq=high", "freq=low"]
    low_clock = cols["freq=1500000"]
    assert low_clock["ratios"]["wall_time"] == 1.5 and low_clock["ratios"]["energy_J"] == 0.9
    assert round(low_clock["ratios"]["HPL"], 3) == 0.675
    assert low_clock["in_effect"] == "1505 MHz measured (median on CPUs 0-1)"
    assert cols["node's own setting"]["in_effect"] == "2445.4 MHz measured"
    # modelled energy is labelled as such wherever it is shown
    assert all(c.get("energy_note") == "modelled" for c in cols.values() if "figures" in c)
    cannot = "not measured: the node cannot set it"
    assert cols["freq=low"]["not_measured"] == f"{cannot} ({NO_CPUFREQ})"
    assert "figures" not in cols["freq=low"]
    # beside the node's own setting where that ran, alone where nothing of the variant ran
    own, smt = tables[("smt", "gnu/tuned")]["columns"]
    assert own["setting"] == "node's own setting" and own["figures"]["wall_time"] == 10.0
    assert smt == {"setting": "smt=off", "not_measured": f"{cannot} ({NO_SMT})"}
    (smt,) = tables[("smt", "gnu/baseline")]["columns"]
    assert smt["not_measured"] == f"{cannot} ({NO_SMT})"
    assert tables[("smt", "gnu/baseline")]["reference"] is None
    turbo = tables[("turbo", "gnu/tuned")]["columns"][1]
    assert turbo["not_measured"].startswith("not measured: environment 'gnu'")

    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    section = md[md.index("## Machine knobs") :]
    assert "### hpcc/ci: cpu_freq, gnu/tuned (ratios against node's own setting)\n\n|" in section
    assert "| | node's own setting | freq=1500000 | freq=high | freq=low | \n" in section, section
    assert (
        "| wall_time (s, lower is better) | 10 ×1.00 | 15 ×1.50 | 10 ×1.00 | not measured |"
        in section
    )
    assert (
        "| energy_J (J, lower is better) | 500 ×1.00 (modelled) | 450 ×0.90 (modelled) |" in section
    )
    assert f"- freq=low: not measured: the node cannot set it ({NO_CPUFREQ})" in section
    assert "### hpcc/ci: smt, gnu/baseline (no verified run to compare with)" in section
    assert '<h2 id="machine-knobs">Machine knobs</h2>' in html and "freq=1500000" in html


def test_without_the_nodes_own_setting_the_first_that_ran_is_the_reference(tmp_path):
    rows = [
        _row("tuned@smt=on", 8.0, 300.0, 50.0, {"smt": "on"}, trust="measured"),
        _row("tuned@smt=off", 10.0, 330.0, 40.0, {"smt": "off"}, trust="measured"),
    ]
    (t,) = _run(tmp_path, rows, [])["knobs"]
    assert t["reference"] == "smt=on" and [c["setting"] for c in t["columns"]] == [
        "smt=on",
        "smt=off",
    ]
    off = t["columns"][1]
    assert off["ratios"]["wall_time"] == 1.25 and "energy_note" not in off
    assert off["in_effect"] == "in effect (checked after the run)"


def test_a_run_that_asked_for_no_knob_has_no_knob_tables(tmp_path):
    assert _run(tmp_path, [_row("tuned", 10.0, 500.0, 40.0)], [])["knobs"] == []


def test_each_knobs_line_is_taken_out_of_a_skip_reason():
    lines = knob_lines(NO_CPUFREQ.replace("low", "1800000") + "; " + NO_TURBO)
    assert lines == {
        ("cpu_freq", "1800000"): NO_CPUFREQ.replace("low", "1800000"),
        ("turbo", "off"): NO_TURBO,
    }
