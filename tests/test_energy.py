"""Energy meters on fake sysfs trees and recorded tool outputs; the sampler's degradation."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apptune import energy
from apptune.energy import EnergyRecord, MeterError, Sampler, ipmi, model, pm_counters, rapl, slurm

DATA = Path(__file__).parent / "data" / "energy"


def wait_until(cond, what: str, timeout: float = 30.0) -> None:
    """Poll for what a sampler thread has done; how soon it does it depends on the load."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.005)


def make_rapl(root: Path, energy_uj=1000, wrap=2**32, dram=True):
    z = root / "intel-rapl:0"
    z.mkdir(parents=True)
    (z / "name").write_text("package-0\n")
    (z / "energy_uj").write_text(f"{energy_uj}\n")
    (z / "max_energy_range_uj").write_text(f"{wrap}\n")
    core = root / "intel-rapl:0:0"
    core.mkdir()
    (core / "name").write_text("core\n")
    (core / "energy_uj").write_text("5\n")
    if dram:
        d = root / "intel-rapl:0:1"
        d.mkdir()
        (d / "name").write_text("dram\n")
        (d / "energy_uj").write_text("100\n")
        (d / "max_energy_range_uj").write_text(f"{wrap}\n")
    return z


# ------------------------------------------------------------------------- rapl
def test_rapl_sums_package_and_dram_not_core(tmp_path):
    z = make_rapl(tmp_path)
    m = rapl.RaplMeter({"root": str(tmp_path)})
    assert m.available() is None
    assert m.read().energy_J == 0
    (z / "energy_uj").write_text("3001000\n")
    (tmp_path / "intel-rapl:0:1" / "energy_uj").write_text("1000100\n")
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("999999999\n")
    assert m.read().energy_J == pytest.approx(4.0)


def test_rapl_counter_wrap(tmp_path):
    z = make_rapl(tmp_path, energy_uj=2**32 - 500_000, wrap=2**32 - 1, dram=False)
    m = rapl.RaplMeter({"root": str(tmp_path)})
    assert m.available() is None
    m.read()
    (z / "energy_uj").write_text("1500000\n")  # wrapped past max_energy_range_uj
    assert m.read().energy_J == pytest.approx(2.0)


def test_rapl_missing_zone_and_missing_tree(tmp_path):
    assert "does not exist" in rapl.RaplMeter({"root": str(tmp_path / "nope")}).available()
    (tmp_path / "intel-rapl:0").mkdir()
    (tmp_path / "intel-rapl:0" / "name").write_text("psys\n")
    assert "no RAPL package zones" in rapl.RaplMeter({"root": str(tmp_path)}).available()


def test_rapl_permission_denied_says_why(tmp_path, monkeypatch):
    make_rapl(tmp_path)
    real = Path.read_text

    def deny(self, *a, **k):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", deny)
    why = rapl.RaplMeter({"root": str(tmp_path)}).available()
    assert "permission denied" in why and "docs/energy.md" in why


# ------------------------------------------------------------------ pm_counters
def _put(path: Path, text: str):
    """Replace a file atomically, as sysfs reads are (no torn reads in the sampler)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def make_pm(root: Path, energy=2906072, power=327, fresh=1000):
    root.mkdir(parents=True, exist_ok=True)
    _put(root / "energy", f"{energy} J\n")
    _put(root / "power", f"{power} W\n")
    _put(root / "freshness", f"{fresh}\n")
    _put(root / "accel0_energy", "4566 J\n")


def test_pm_counters_reads_energy_and_power(tmp_path):
    make_pm(tmp_path)
    m = pm_counters.PmCountersMeter({"root": str(tmp_path)})
    assert m.available() is None
    r = m.read()
    assert (r.energy_J, r.power_W) == (2906072.0, 327.0)


@pytest.mark.slow
def test_pm_counters_stale_freshness_fails_the_meter(tmp_path):
    make_pm(tmp_path)
    m = pm_counters.PmCountersMeter({"root": str(tmp_path), "stale_after": 0.05})
    m.read()
    time.sleep(0.1)
    with pytest.raises(MeterError, match="stale"):
        m.read()


# ------------------------------------------------------------------------- ipmi
def test_ipmi_parses_both_tools_recorded_output():
    assert ipmi.parse("ipmitool", (DATA / "ipmitool-dcmi-power-reading.txt").read_text()) == 220.0
    assert (
        ipmi.parse("freeipmi", (DATA / "ipmi-dcmi-system-power-statistics.txt").read_text())
        == 236.0
    )
    with pytest.raises(MeterError, match="no power reading"):
        ipmi.parse("ipmitool", (DATA / "ipmitool-dcmi-deactivated.txt").read_text())


def test_ipmi_meter_with_a_recorded_runner():
    m = ipmi.IpmiMeter(
        runner=lambda cmd: (
            (DATA / "ipmi-dcmi-system-power-statistics.txt").read_text()
            if cmd[0] == "ipmi-dcmi"
            else (DATA / "ipmitool-dcmi-deactivated.txt").read_text()
        )
    )
    assert m.available() is None and m.tool == "freeipmi"
    assert m.read().power_W == 236.0


def test_ipmi_unavailable_without_tools(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "ipmitool not installed" in ipmi.IpmiMeter().available()


# ------------------------------------------------------------------------ slurm
def test_sacct_job_total_and_missing_energy():
    assert slurm.parse((DATA / "sacct-energy.txt").read_text(), "4242") == 853215.0
    assert slurm.parse((DATA / "sacct-no-energy.txt").read_text(), "4243") is None
    assert slurm.parse((DATA / "sacct-zero-energy.txt").read_text(), "4244") is None


def _slurm_record(tmp_path, text, exclusive):
    s = Sampler(
        ["slurm"],
        "cluster:compute",
        tmp_path,
        context={"scheduler": "slurm", "jobid": "4242"},
        exclusive=exclusive,
    )
    s.meters[0].runner = lambda jobid: text
    s.start()
    return s.stop()


def test_slurm_meter_exclusive_and_shared(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    rec = _slurm_record(tmp_path, (DATA / "sacct-energy.txt").read_text(), exclusive=True)
    assert rec.trust == "measured" and rec.energy_J == 853215.0 and rec.source == "slurm"
    rec = _slurm_record(tmp_path, (DATA / "sacct-energy.txt").read_text(), exclusive=False)
    assert rec.trust == "measured-shared" and any(
        "not allocated exclusively" in n for n in rec.notes
    )
    rec = _slurm_record(tmp_path, "4242|\n", exclusive=True)
    assert rec.trust == "none" and "AcctGatherEnergyType" in rec.reason


def test_slurm_meter_needs_slurm_scheduler():
    assert "not Slurm" in slurm.SlurmMeter(context={"scheduler": "local"}).available()


# ------------------------------------------------------------------------- nvml
class FakeNVML:
    def __init__(self, n=2, fail=False):
        self.n, self.fail, self.mj = n, fail, 0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.n

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if self.fail:
            raise RuntimeError("GPU is lost")
        self.mj += 1000
        return self.mj


def test_nvml_counter_and_absence():
    from apptune.energy import nvml

    m = nvml.NvmlMeter(nvml=FakeNVML())
    assert m.available() is None
    assert m.read().energy_J == pytest.approx(3.0)  # 1000 + 2000 mJ over two GPUs
    assert nvml.NvmlMeter(nvml=FakeNVML(n=0)).available() == "no GPU"


# ------------------------------------------------------------------------ model
def test_model_power_from_utilisation(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    m = model.ModelMeter(
        {"proc": str(proc)}, {"power_model": {"idle_W": 20, "load_W": 60}, "nodes": 2}
    )
    assert m.available() is None
    assert m.utilisation() is None  # first sample: no interval yet
    (proc / "stat").write_text("cpu  175 0 175 850 0 0 0 0 0 0\n")  # 150 busy of 200 jiffies
    assert m.utilisation() == pytest.approx(0.75)


@pytest.mark.parametrize(
    "busy,idle,power",
    # P = nodes * (idle_W + u (load_W - idle_W)), 2 nodes of 20 W idle, 60 W loaded
    [(150, 50, 100.0), (0, 200, 40.0), (200, 0, 120.0)],
    ids=["u=0.75", "idle", "loaded"],
)
def test_model_power_of_the_nodes_at_a_utilisation(tmp_path, busy, idle, power):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    m = model.ModelMeter(
        {"proc": str(proc)}, {"power_model": {"idle_W": 20, "load_W": 60}, "nodes": 2}
    )
    assert m.available() is None
    m.utilisation()
    (proc / "stat").write_text(f"cpu  {100 + busy} 0 100 {800 + idle} 0 0 0 0 0 0\n")
    assert m.read().power_W == pytest.approx(power)


def test_model_needs_power_model():
    assert "power_model" in model.ModelMeter(context={}).available()


@pytest.mark.slow
def test_model_tree_utilisation_of_a_busy_child(tmp_path):
    stop = tmp_path / "stop"
    busy = f"import os\nwhile not os.path.exists({str(stop)!r}): pass"
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        m = model.ModelMeter(
            {"rescan_s": 0.2},
            {"power_model": {"idle_W": 10, "load_W": 50}, "pid": child.pid, "ncpus": 1},
        )
        assert m.available() is None
        assert m.utilisation() is None  # first sample: no interval yet
        # the child's CPU time is found and counted, within [0, 1] of a CPU; how soon it
        # gets the CPU depends on the machine's load (the arithmetic: fake /proc above)
        seen = []
        wait_until(lambda: seen.append(m.utilisation()) or seen[-1] > 0, "the child's CPU time")
        assert all(u is not None and 0 <= u <= 1.0 for u in seen)
    finally:
        stop.touch()
        child.wait()


# ---------------------------------------------------------------------- sampler
def test_sampler_none_when_nothing_configured(tmp_path):
    s = Sampler([], "local:default", tmp_path)
    s.start()
    rec = s.stop()
    assert rec.trust == "none" and "energy_meters' is empty" in rec.reason
    assert rec.figures(10.0, {"HPL": 5.0}) == {}


@pytest.mark.slow
def test_sampler_counter_preferred_and_compared_with_integral(tmp_path):
    root = tmp_path / "pm"
    make_pm(root, energy=0, power=100)
    # counters never stale however long the test waits for the sampler
    opts = {"pm_counters": {"root": str(root), "stale_after": 600}}
    s = Sampler(["pm_counters"], "n:p", tmp_path, hz=50, options=opts)
    s.start()
    wait_until(lambda: s.samples, "the first sample")
    for i in range(1, 6):  # the counter moves by 10 J between two samples, five times
        n = len(s.samples)
        make_pm(root, energy=10 * i, power=100, fresh=i)
        wait_until(lambda n=n: len(s.samples) > n, "a sample of the new counter")
    rec = s.stop()
    assert rec.trust == "measured" and rec.source == "pm_counters"
    # the counter, not the integral, is the energy; the integral of the 100 W it read is
    # compared with it
    assert rec.energy_J == pytest.approx(50.0)
    span = s.samples[-1][0] - s.samples[0][0]
    assert rec.energy_integrated_J == pytest.approx(100.0 * span)
    assert rec.disagreement == pytest.approx((rec.energy_integrated_J - 50.0) / 50.0)
    assert rec.samples == len(s.samples) >= 6
    assert (tmp_path / "power-trace.csv").read_text().startswith("t_s,power_W")
    assert rec.sampler_cpu_s is not None and 0 < rec.coverage <= 1.0


@pytest.mark.slow
def test_meter_that_disappears_mid_run_degrades_to_next(tmp_path):
    root = tmp_path / "pm"
    make_pm(root)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    s = Sampler(
        ["pm_counters", "model"],
        "n:p",
        tmp_path,
        hz=50,
        options={"pm_counters": {"root": str(root)}, "model": {"proc": str(proc)}},
        context={"power_model": {"idle_W": 20, "load_W": 60}},
    )
    s.start()
    wait_until(lambda: s.samples, "a pm_counters sample")
    shutil.rmtree(root)
    wait_until(lambda: s.notes, "pm_counters to fail")
    n = len(s.samples)
    wait_until(lambda: len(s.samples) > n, "a sample of the model")
    rec = s.stop()
    assert rec.source == "model" and rec.trust == "modelled"
    assert any(
        "pm_counters failed during the run" in n and "continuing with model" in n for n in rec.notes
    )
    # coverage: only the model's segment counts, the time pm_counters sampled does not
    assert rec.energy_J is not None and 0 < rec.coverage < 1.0


def test_broken_meter_never_raises(tmp_path):
    class Broken(energy.Meter):
        name = "broken-test"

        def available(self):
            raise OSError("device exploded")

    energy.register(Broken)
    try:
        s = Sampler(["broken-test"], "n:p", tmp_path)
        s.start()
        rec = s.stop()
        assert rec.trust == "none" and "device exploded" in rec.reason
    finally:
        energy.METERS.pop("broken-test")


def test_energy_figures_and_unknown_meter(tmp_path):
    rec = EnergyRecord(
        trust="modelled", source="model", energy_J=500.0, avg_power_W=50.0, peak_power_W=60.0
    )
    f = rec.figures(10.0, {"HPL": 20.0, "MPIFFT": None})
    assert f == {
        "energy_J": 500.0,
        "avg_power_W": 50.0,
        "peak_power_W": 60.0,
        "edp_Js": 5000.0,
        "HPL_per_W": 0.4,
    }
    s = Sampler(["watts-up"], "n:p", tmp_path)
    assert "unknown meter" in s.reasons[0]


def test_node_local_meters_refused_for_batch_jobs(tmp_path):
    make_rapl(tmp_path / "pc")
    s = Sampler(
        ["rapl"],
        "cluster:compute",
        tmp_path,
        options={"rapl": {"root": str(tmp_path / "pc")}},
        context={"scheduler": "slurm"},
    )
    assert s.meters == [] and "per-node agents" in s.reasons[0]


@pytest.mark.slow
def test_per_node_agents_sum_into_the_jobs_record(tmp_path, monkeypatch):
    """Two agents (as on two nodes of a Slurm job) with the model meter; merged."""
    import json
    import threading

    from apptune.energy import TRACE_FILE, agent, read_trace

    samplers = []

    class Watched(Sampler):
        def start(self):
            samplers.append(self)
            super().start()

    monkeypatch.setattr(agent, "Sampler", Watched)
    out = tmp_path / agent.NODES_DIR
    ctx = {"power_model": {"idle_W": 10.0, "load_W": 50.0}, "ncpus": 2}
    threads = [
        threading.Thread(
            target=agent.run_agent,
            args=(out, ["rapl", "model"], 20.0, {}, ctx, True, 30),
            kwargs={"node": n},
        )
        for n in ("n1", "n2")
    ]
    for t in threads:
        t.start()
    wait_until(
        lambda: len(samplers) == 2 and all(len(s.samples) >= 2 for s in samplers),
        "two samples on each node",
    )
    (out / agent.STOP).touch()
    for t in threads:
        t.join(timeout=10)
    assert sorted(p.parent.name for p in out.glob("*/energy.json")) == ["n1", "n2"]
    rec = agent.merge(out, tmp_path, expected_nodes=2)
    n1 = json.loads((out / "n1" / "energy.json").read_text())
    assert rec.trust == "modelled" and rec.source == "model (per-node agents on 2 node(s): n1, n2)"
    assert rec.energy_J == pytest.approx(
        n1["energy_J"] + json.loads((out / "n2/energy.json").read_text())["energy_J"]
    )
    # each node between idle (10 W) and loaded (50 W) over the time it sampled
    for n in ("n1", "n2"):
        ts = [t for t, _ in read_trace(out / n / TRACE_FILE)]
        e = json.loads((out / n / "energy.json").read_text())["energy_J"]
        assert 10.0 * (ts[-1] - ts[0]) - 0.1 <= e <= 50.0 * (ts[-1] - ts[0]) + 0.1
    assert rec.peak_power_W >= 20.0  # two nodes, each at least idle
    assert any(n.startswith("n1: not used: rapl:") for n in rec.notes)
    trace = read_trace(tmp_path / TRACE_FILE)
    assert trace and all(p >= 20.0 - 1e-6 for _, p in trace)
    # a node that wrote no record: no energy figure, and the record says which
    missing = agent.merge(out, tmp_path, expected_nodes=3)
    assert missing.trust == "none" and "only 2 of 3 nodes" in missing.reason


def test_prefer_follows_the_meter_order(tmp_path):
    from apptune.energy import EnergyRecord, prefer

    nodes = EnergyRecord(
        trust="modelled", source="model (per-node agents on 1 node(s): n1)", energy_J=50.0
    )
    acct = EnergyRecord(trust="measured", source="slurm", energy_J=40.0)
    assert prefer(["slurm", "model"], acct, nodes, ["model"]) is acct
    assert "not used: model (per-node agents" in acct.notes[-1]
    none = EnergyRecord(trust="none", reason="slurm: sacct has no ConsumedEnergyRaw")
    assert prefer(["slurm", "model"], none, nodes, ["model"]) is nodes
    assert prefer(
        ["rapl", "model"], EnergyRecord(trust="none"), None, ["rapl", "model"]
    ).reason.startswith("the per-node agents wrote no record")
