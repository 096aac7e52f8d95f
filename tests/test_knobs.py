"""Machine knobs (apptune/core/run/knobs.py) on recorded sysfs trees of the machines that have them:
an Intel node (intel_pstate, no_turbo, two threads per core) and an AMD node
(acpi-cpufreq, boost, a frequency table); the readers, the writes the runner does and
puts back, and the judgement of what was in effect."""

import json
from pathlib import Path

import pytest

from apptune.core.run import knobs, procfs
from apptune.core.run.knobs import Asked
from apptune.models import RunBinding, RunKnobs


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return root


def intel(root: Path) -> Path:
    """4 CPUs, 2 cores of 2 threads (0,2 and 1,3), intel_pstate, turbo on."""
    files = {
        "devices/system/cpu/intel_pstate/no_turbo": "0",
        "devices/system/cpu/smt/control": "on",
    }
    for cpu, sib in ((0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")):
        d = f"devices/system/cpu/cpu{cpu}"
        files |= {
            f"{d}/topology/thread_siblings_list": sib,
            f"{d}/cpufreq/scaling_driver": "intel_pstate",
            f"{d}/cpufreq/scaling_governor": "powersave",
            f"{d}/cpufreq/scaling_min_freq": "800000",
            f"{d}/cpufreq/scaling_max_freq": "3500000",
            f"{d}/cpufreq/scaling_cur_freq": str(3000000 + 100000 * cpu),
            f"{d}/cpufreq/cpuinfo_min_freq": "800000",
            f"{d}/cpufreq/cpuinfo_max_freq": "3500000",
        }
    return _tree(root, files)


def amd(root: Path) -> Path:
    """2 CPUs, 1 thread per core, acpi-cpufreq with a frequency table, boost on."""
    files = {"devices/system/cpu/cpufreq/boost": "1"}
    for cpu in (0, 1):
        d = f"devices/system/cpu/cpu{cpu}"
        files |= {
            f"{d}/topology/thread_siblings_list": str(cpu),
            f"{d}/cpufreq/scaling_driver": "acpi-cpufreq",
            f"{d}/cpufreq/scaling_governor": "ondemand",
            f"{d}/cpufreq/scaling_available_frequencies": "2450000 2000000 1500000",
            f"{d}/cpufreq/scaling_min_freq": "1500000",
            f"{d}/cpufreq/scaling_max_freq": "2450000",
            f"{d}/cpufreq/scaling_cur_freq": "2450000",
            f"{d}/cpufreq/cpuinfo_min_freq": "1500000",
            f"{d}/cpufreq/cpuinfo_max_freq": "2450000",
        }
    return _tree(root, files)


def test_the_readers_say_what_each_node_offers(tmp_path):
    i = knobs.node_state(intel(tmp_path / "intel"))
    assert i["cpufreq"]["driver"] == "intel_pstate" and i["cpufreq"]["cpus_with_cpufreq"] == 4
    assert i["boost"]["path"].endswith("intel_pstate/no_turbo") and i["boost"]["on"] is True
    assert i["smt"]["threads_per_core"] == 2 and i["smt"]["siblings"]["2"] == "0,2"
    a = knobs.node_state(amd(tmp_path / "amd"))
    assert a["cpufreq"]["available_khz"] == [1500000, 2000000, 2450000]
    assert a["boost"]["path"].endswith("cpufreq/boost") and a["smt"]["threads_per_core"] == 1
    bare = knobs.node_state(_tree(tmp_path / "vm", {"devices/system/cpu/cpu0/topology/x": ""}))
    assert bare["cpufreq"] is None and bare["boost"] is None
    # each CPU's frequency, from cpufreq, else from each processor of /proc/cpuinfo
    by_cpu = procfs.frequency_by_cpu(tmp_path, tmp_path / "intel")
    assert by_cpu == {0: 3000.0, 1: 3100.0, 2: 3200.0, 3: 3300.0}
    (tmp_path / "cpuinfo").write_text("processor\t: 0\ncpu MHz\t\t: 2445.4\nprocessor\t: 1\n"
                                      "cpu MHz\t\t: 1200.0\n")  # fmt: skip
    assert procfs.frequency_by_cpu(tmp_path, tmp_path / "vm") == {0: 2445.4, 1: 1200.0}


@pytest.mark.parametrize(
    "args, message",
    [
        ({"cpu_freq": "fast"}, "cpu_freq='fast': give kHz (1800000), one of low"),
        ({"cpu_freq": "1.8GHz"}, "cpu_freq='1.8GHz': give kHz"),
        ({"smt": "2"}, "smt='2': give on or off"),
        ({"turbo": "yes"}, "turbo='yes': give on or off"),
    ],
)
def test_a_knob_no_launcher_takes_is_refused_naming_it(args, message):
    with pytest.raises(knobs.KnobError, match=None) as e:
        Asked.of(**args)
    assert str(e.value).startswith(message)


def test_the_frequency_names_are_resolved_from_the_nodes_table(tmp_path):
    cf = knobs.node_state(amd(tmp_path))["cpufreq"]
    got = {f: knobs.target_khz(f, cf) for f in ("low", "medium", "high", "highm1", "1700000")}
    assert got == {"low": 1500000, "medium": 2000000, "high": 2450000, "highm1": 2000000,
                   "1700000": 1700000}  # fmt: skip
    assert knobs.target_khz("performance", cf) is None
    assert Asked.of("HIGH", "Off", "on").label() == ["freq=high", "smt=off", "turbo=on"]


def test_what_a_node_cannot_set_is_one_line_naming_the_file(tmp_path):
    vm = knobs.node_state(_tree(tmp_path, {"devices/system/cpu/cpu0/topology/x": ""}))
    asked = Asked.of("1800000", "off", "off")
    out = knobs.unavailable(asked, vm, "mpirun", "openmpi")
    assert out["cpu_freq"] == (
        "cpu_freq=1800000: not set: the node has no cpufreq interface "
        "(/sys/devices/system/cpu/cpu0/cpufreq is missing)"
    )
    assert "no turbo switch (neither /sys/devices/system/cpu/intel_pstate/no_turbo" in out["turbo"]
    assert out["smt"].startswith("smt=off: not set: the node has 1 thread per core")
    # srun sets the frequency itself: that is judged after the run, not refused before
    assert "cpu_freq" not in knobs.unavailable(asked, vm, "srun")
    node = knobs.node_state(intel(tmp_path / "intel"))
    assert knobs.unavailable(asked, node, "srun") == {}
    node["boost"]["writable"] = node["cpufreq"]["writable"] = False
    out = knobs.unavailable(asked, node, "mpirun", "mpich")
    assert out["turbo"] == "turbo=off: not set: /sys/devices/system/cpu/intel_pstate/no_turbo " \
        "is not writable by this user"  # fmt: skip
    assert "scaling_max_freq is not writable" in out["cpu_freq"]
    assert "no option for launcher 'mpirun' with MPI 'mpich'" in out["smt"]
    assert knobs.launcher_options(asked, "srun") == ["--cpu-freq=1800000", "--hint=nomultithread"]
    assert knobs.launcher_options(Asked.of(smt="on"), "mpirun", "openmpi") == [
        "--use-hwthread-cpus"
    ]


def test_the_runner_writes_the_knobs_and_puts_them_back(tmp_path):
    sysfs = amd(tmp_path)
    cpu0 = sysfs / "devices/system/cpu/cpu0/cpufreq"
    want = {"asked": {"cpu_freq": "low", "turbo": "off"}, "launcher": "mpirun", "mpi": "openmpi"}
    rec, undo = knobs.before_run(want, {0}, sysfs)
    assert "refused" not in rec and rec["set_by"] == {"cpu_freq": "runner: sysfs",
                                                      "turbo": "runner: sysfs"}  # fmt: skip
    assert (sysfs / knobs.BOOST).read_text() == "0\n"
    assert (cpu0 / "scaling_min_freq").read_text() == (cpu0 / "scaling_max_freq").read_text()
    assert (cpu0 / "scaling_max_freq").read_text() == "1500000\n"
    # CPU 1 is not the job's: untouched
    assert (sysfs / "devices/system/cpu/cpu1/cpufreq/scaling_max_freq").read_text() == "2450000\n"
    # what was in effect while it ran: the turbo switch, and the frequency measured on the
    # ranks' CPUs (their first sample, before the program started, left out)
    probed = knobs.probe(sysfs)
    binding = {"ranks": [{"cpus": "0"}]}
    rec = knobs.after_run(rec, undo, {0: [2450.0, 1500.0, 1510.0], 1: [2450.0]}, probed, binding,
                          {0, 1})  # fmt: skip
    assert rec["observed"]["frequency"]["median_mhz"] == 1505.0
    assert rec["observed"]["boost"]["on"] is False and rec["observed"]["governor"] == "ondemand"
    ran = RunKnobs.model_validate(rec)
    assert knobs.problems(Asked.of("low", turbo="off"), ran, RunBinding(**binding)) == []
    assert (sysfs / knobs.BOOST).read_text() == "1\n"
    assert (cpu0 / "scaling_min_freq").read_text() == "1500000\n"
    assert (cpu0 / "scaling_max_freq").read_text() == "2450000\n"


def test_a_write_that_fails_refuses_the_run_and_puts_back_what_was_written(tmp_path):
    sysfs = intel(tmp_path)
    cpu1 = sysfs / "devices/system/cpu/cpu1/cpufreq"
    (cpu1 / "scaling_min_freq").unlink()
    (cpu1 / "scaling_min_freq").mkdir()  # unwritable as a file, also for root
    want = {"asked": {"cpu_freq": "2000000", "turbo": "off"}, "launcher": "local"}
    rec, undo = knobs.before_run(want, {0, 1}, sysfs)
    assert undo == [] and "cannot write 800000 to" in rec["refused"]["write"]
    assert rec["refused"]["write"].startswith("freq=2000000, turbo=off: not set:")
    assert (sysfs / knobs.NO_TURBO).read_text() == "0\n"
    assert (sysfs / "devices/system/cpu/cpu0/cpufreq/scaling_max_freq").read_text() == "3500000\n"
    ran = RunKnobs.model_validate(rec)
    assert knobs.problems(Asked.of("2000000"), ran, None) == [rec["refused"]["write"]]


def test_what_was_not_in_effect_is_said_knob_by_knob(tmp_path):
    node = knobs.node_state(intel(tmp_path))
    freq = {"cpus": "0-1", "median_mhz": 3000.0, "min_mhz": 2900.0, "max_mhz": 3100.0}
    seen = {"frequency": freq, "boost": node["boost"], "governor": "powersave"}
    rec = RunKnobs.model_validate({"node": node, "observed": seen})
    out = knobs.problems(Asked.of("2000000", turbo="off"), rec, None)
    assert out == [
        "cpu_freq=2000000: not in effect: asked 2000 MHz, measured 3000 MHz (median on CPUs "
        "0-1, tolerance 5%)",
        "turbo=off: not in effect: /sys/devices/system/cpu/intel_pstate/no_turbo said turbo on "
        "during the run",
    ]
    assert knobs.problems(Asked.of("3100000"), rec, None) == []  # within 5 %
    assert knobs.problems(Asked.of("performance"), rec, None) == [
        "cpu_freq=performance: not in effect: the governor was powersave"
    ]
    # SMT: ranks on CPUs 0 and 2 share core 0's two threads
    shared = RunBinding(ranks=[{"cpus": "0"}, {"cpus": "2"}])
    apart = RunBinding(ranks=[{"cpus": "0"}, {"cpus": "1"}])
    assert knobs.problems(Asked.of(smt="off"), rec, shared) == [
        "smt=off: not in effect: the ranks could run on both threads of 1 core(s)"
    ]
    assert knobs.problems(Asked.of(smt="off"), rec, apart) == []
    assert knobs.problems(Asked.of(smt="on"), rec, shared) == []
    assert (
        "no core's hardware threads were shared"
        in knobs.problems(Asked.of(smt="on"), rec, apart)[0]
    )
    # a node without cpufreq: a scheduler that accepted the frequency did not set it
    vm = RunKnobs.model_validate(
        {"node": {"cpufreq": None}, "observed": dict(seen, cpu_freq_set_by="srun --cpu-freq=low")}
    )
    assert knobs.problems(Asked.of("low"), vm, None) == [
        "cpu_freq=low: not in effect: the node has no cpufreq interface "
        "(/sys/devices/system/cpu/cpu0/cpufreq is missing); srun --cpu-freq=low was accepted "
        "and the CPUs ran at 3000 MHz"
    ]


def test_the_runners_knob_record_is_the_run_records_typed_knobs_part(tmp_path):
    """What the runner records (the node, what was asked, set and in effect) reads as
    :class:`apptune.models.RunKnobs` and is written back unchanged."""
    sysfs = amd(tmp_path)
    want = {"asked": {"cpu_freq": "low", "turbo": "off"}, "launcher": "mpirun", "mpi": "openmpi"}
    rec, undo = knobs.before_run(want, {0}, sysfs)
    rec = knobs.after_run(rec, undo, {0: [2450.0, 1500.0, 1510.0]}, knobs.probe(sysfs),
                          {"ranks": [{"cpus": "0"}]}, {0, 1})  # fmt: skip
    rec = json.loads(json.dumps(rec))  # as the record file holds it
    typed = RunKnobs.model_validate(rec)
    assert typed.data() == rec
    assert typed.asked.given() == {"cpu_freq": "low", "turbo": "off"}
    assert typed.node.cpufreq.available_khz == [1500000, 2000000, 2450000]
    assert typed.node.boost.path == "/sys/" + knobs.BOOST and typed.node.smt.threads_per_core == 1
    assert typed.observed.frequency.median_mhz == 1505.0 and typed.observed.frequency.cpus == "0"
    assert typed.observed.boost.on is False and typed.observed.governor == "ondemand"
    # a node without cpufreq or a turbo switch, and SMT of two threads
    intel_node = json.loads(json.dumps(knobs.node_state(intel(tmp_path / "intel"))))
    assert RunKnobs(node=intel_node).data() == {"node": intel_node}
    vm = knobs.node_state(_tree(tmp_path / "vm", {"devices/system/cpu/cpu0/topology/x": ""}))
    assert RunKnobs(node=vm).node.cpufreq is None and RunKnobs(node=vm).node.boost is None
