"""Baselines bound to a machine fingerprint, thresholds from their own noise, verdicts
only where they can be trusted, and one-line errors for bad baseline files."""

import difflib
import math
import statistics
import textwrap

import pytest
from conftest import CLEAN, this_machine

from apptune import machine
from apptune.core.data import recipes
from apptune.core.judge import baselines
from apptune.errors import ApptuneError
from apptune.models import BaselineFile, Figure, RunRecord
from apptune.rfm.reference import reframe_reference

FIGS = {
    "HPL": Figure(field="HPL_Tflops", unit="Gflop/s", better="higher", scale=1000),
    "lat": Figure(field="lat", unit="us", better="lower"),
    "energy_J": Figure(field="", unit="J", better="lower"),
}

OTHER = {
    "cpu_vendor": "AuthenticAMD",
    "cpu_model": "AMD EPYC 7B13",
    "cpu_id": "25/1/0",
    "isa": ["avx", "avx2", "fma", "sse4_2"],
    "sockets": 1,
    "cores_per_socket": 2,
    "threads_per_core": 1,
    "cpus": 2,
    "memory_gib": 24,
    "hypervisor": "KVM",
    "kernel": "6.1.0",
}


def bfile(fp=None, noise=0.01, runs=5, **figs):
    fp = fp or this_machine()[1]
    mid = machine.machine_id(fp)
    figs = figs or {"HPL": 40.0, "lat": 1.0, "energy_J": 500.0}
    return BaselineFile.model_validate(
        {
            "app": "hpcc",
            "system": "local",
            "machines": {mid: fp},
            "entries": [
                {
                    "machine": mid,
                    "environment": "gnu",
                    "variant": "tuned",
                    "tier": "ci",
                    "recorded": "t",
                    "figures": {
                        n: {"value": v, "noise": noise, "runs": runs} for n, v in figs.items()
                    },
                }
            ],
        }
    )


def judged(b, values, **kw):
    mid = this_machine()[0]
    entry = baselines.lookup(b, mid, "gnu", "tuned", "ci")
    kw.setdefault("energy_trust", "measured")
    return baselines.compare(b, entry, FIGS, values, **kw)


def test_the_threshold_rule_and_its_cap():
    # 1.5 % noise, baseline of 5 runs, one run compared: sd = 1.5 % x sqrt(1 + pi/10)
    t, sd, ok = baselines.threshold(0.015, 5, 1)
    assert sd == pytest.approx(0.015 * math.sqrt(1 + math.pi / 10))
    assert t == pytest.approx(baselines.SIGMAS * sd) and ok
    assert baselines.threshold(0.002, 5, 1)[0] == baselines.FLOOR  # never below the floor
    # 2 % noise: one run against 5 would miss a 10 % change too often, so no threshold ...
    assert baselines.threshold(0.02, 5, 1)[2] is False
    # ... but the medians of 5 repeats against 5 runs see it
    assert baselines.threshold(0.02, 5, 5)[2] is True
    assert baselines.CAP == pytest.approx(0.0757, abs=0.0005)
    for noise in (0.001, 0.005, 0.01, 0.02, 0.03, 0.05):
        for n in (3, 5, 10):
            t, _, ok = baselines.threshold(noise, n, 1)
            assert not ok or t <= baselines.CAP + 1e-12


def test_verdicts_follow_direction_and_noise():
    b = bfile()
    c = judged(b, {"HPL": 30.0, "lat": 1.02})
    assert c["HPL"].verdict == "regression" and c["HPL"].change == pytest.approx(-0.25)
    assert c["lat"].verdict == "within noise"
    c = judged(b, {"HPL": 50.0, "lat": 2.0})
    assert c["HPL"].verdict == "improvement" and c["lat"].verdict == "regression"
    # a 2x slowdown of one figure is always a regression where the figure is judged
    assert judged(b, {"HPL": 20.0})["HPL"].verdict == "regression"


def test_reframe_reference_holds_only_judged_figures():
    b = bfile()
    c = judged(b, {"HPL": 39.0, "lat": 1.0, "energy_J": 500.0}, energy_trust="modelled")
    ref = reframe_reference(c, FIGS)
    t = c["HPL"].threshold
    # a rate's lower bound is the baseline over (1 + t): the ratio the verdict weighs
    lower = -t / (1 + t)
    assert ref == {"*": {"HPL": (40.0, lower, None, "Gflop/s"), "lat": (1.0, None, t, "us")}}
    assert c["energy_J"].verdict == "no verdict" and "modelled" in c["energy_J"].why
    # ReFrame's bound and the verdict agree on either side of it
    for value, verdict in (
        (40.0 * (1 + lower) * 0.999, "regression"),
        (40.0 * (1 + lower) * 1.001, "within noise"),
    ):
        assert judged(b, {"HPL": value})["HPL"].verdict == verdict


def test_a_noisy_rate_that_collapses_is_a_regression_although_its_threshold_is_beyond_100_percent():
    """A rate cannot fall by more than 100 %: weighed as a relative drop, a noisy figure's
    threshold of 200 % would let it fall to nothing unjudged. As a ratio, a bandwidth that
    falls 22x is 2100 % worse, as a time that grows 22x is."""
    b = bfile(noise=0.44, runs=5)
    t = judged(b, {"HPL": 40.0})["HPL"]
    assert t.verdict == "no verdict" and "only a change beyond" in t.why
    c = judged(b, {"HPL": 40.0 / 22, "lat": 22.0})
    assert c["HPL"].change == pytest.approx(1 / 22 - 1)
    assert c["HPL"].threshold > 1 and c["HPL"].verdict == "regression"
    assert "the rate fell 22x" in c["HPL"].why
    assert c["lat"].verdict == "regression"
    # and symmetric: the same ratio the other way is an improvement of either kind
    c = judged(b, {"HPL": 40.0 * 22, "lat": 1 / 22})
    assert c["HPL"].verdict == c["lat"].verdict == "improvement"
    # a rate of zero is infinitely worse
    assert judged(b, {"HPL": 0.0})["HPL"].verdict == "regression"


def test_a_baseline_of_another_machine_gives_no_verdict_and_says_how_to_record_one(tmp_path):
    b = bfile(fp=OTHER)
    mid, _ = this_machine()
    why = baselines.not_applicable(b, tmp_path / "hpcc.yaml", mid, "local", "hpcc")
    assert why.startswith(
        "no baseline for this machine (baselines recorded on AMD EPYC 7B13 (25/1/0, avx2)"
    )
    assert "apptune baseline" not in why  # the advice is said once per run, not per figure
    c = judged(b, {"HPL": 1.0}, blocked=why)
    assert c["HPL"].verdict == "no verdict" and c["HPL"].why == why
    assert reframe_reference(c, FIGS) == {}


def test_the_advice_names_the_tier_system_and_partition_of_the_run(toy_root):
    r = result(40.0, "a").model_copy(
        update={"tier": "nightly", "system": "cluster", "partition": "compute"}
    )
    v = baselines.verdicts("cluster", "hpcc", [r], FIGS)
    assert v.why.startswith("no baseline file (reference/baselines/cluster/hpcc.yaml)")
    assert v.advice == (
        "apptune baseline record -c reframe-checks/hpcc --mode nightly -- --system cluster:compute"
    )
    assert baselines.record_command(["netpipe", "hpcc"], "ci") == (
        "apptune baseline record -c reframe-checks/hpcc -c reframe-checks/netpipe --mode ci"
    )


def test_noisy_figures_and_short_baselines_are_not_judged():
    c = judged(bfile(noise=0.06), {"HPL": 37.0})  # -7.5 %: could be noise, could hide -10 %
    assert c["HPL"].verdict == "no verdict" and c["HPL"].why.startswith(
        "not judged here: noise 6.0% per run"
    )
    assert c["HPL"].threshold is None
    assert reframe_reference(c, FIGS) == {}
    c = judged(bfile(noise=None, runs=1), {"HPL": 20.0})
    assert c["HPL"].verdict == "no verdict" and "1 clean run(s)" in c["HPL"].why


@pytest.mark.parametrize("value, verdict", [(20.0, "regression"), (80.0, "improvement")])
def test_a_change_beyond_the_threshold_of_a_noisy_figure_is_judged(value, verdict):
    """Too noisy to vouch for "within noise", but a halving is no noise: the verdict is
    given, and ReFrame gets the threshold as its reference."""
    c = judged(bfile(noise=0.06), {"HPL": value})
    t = c["HPL"].threshold
    assert c["HPL"].verdict == verdict and 0.2 < t < 0.5, c["HPL"]
    assert "noise 6.0% per run: a change inside it would not be judged" in c["HPL"].why
    assert reframe_reference(c, FIGS)["*"]["HPL"] == (40.0, -t / (1 + t), None, "Gflop/s")


def result(value, run, quality=CLEAN, ok=True, energy="measured", mach=None, **figs):
    mid, fp = mach or this_machine()
    return RunRecord.model_validate(
        {
            "app": "hpcc",
            "environment": "gnu",
            "variant": "tuned",
            "tier": "ci",
            "run_id": run,
            "verification": {"ok": ok, "summary": "verified" if ok else "wrong"},
            "quality": quality,
            "machine_id": mid,
            "machine": fp,
            "energy": {"trust": energy},
            "figures": {"HPL": value, "energy_J": 500.0, **figs},
        }
    )


def test_merge_takes_clean_verified_runs_their_median_and_noise(toy_root):
    disturbed = {"grade": "disturbed", "reasons": ["other processes used 40 % of the 2 CPUs"]}
    rs = [
        result(40.0, "a"),
        result(41.0, "b"),
        result(39.0, "c"),
        result(42.0, "d"),
        result(40.5, "e"),
        result(10.0, "f", quality=disturbed),
        result(99.0, "g", ok=False),
    ]
    f, text, notes = baselines.merge("local", "hpcc", rs)
    b = BaselineFile.model_validate(__import__("yaml").safe_load(text))
    (e,) = b.entries
    assert (
        e.machine == this_machine()[0]
        and e.figures["HPL"].value == 40.5
        and e.figures["HPL"].runs == 5
    )
    vals = [40.0, 41.0, 39.0, 42.0, 40.5]
    # the standard deviation at its upper 80 % confidence bound (4 degrees of freedom)
    chi2 = 4 * (1 - 2 / 36 - 0.8416 * math.sqrt(2 / 36)) ** 3
    assert e.figures["HPL"].noise == pytest.approx(
        statistics.stdev(vals) / 40.5 * math.sqrt(4 / chi2), abs=1e-4
    )
    assert "energy_J" in e.figures  # measured energy is recorded
    assert any("(f): left out: run quality disturbed" in n for n in notes)
    assert any("(g): left out: not verified" in n for n in notes)
    assert "median of 5 clean run(s)" in e.recorded


def test_merge_leaves_out_modelled_energy_and_non_finite_values(toy_root):
    rs = [
        result(40.0, r, energy="modelled", lat=v)
        for r, v in (("a", 1.0), ("b", float("nan")), ("c", 1.1))
    ]
    _, text, notes = baselines.merge("local", "hpcc", rs)
    b = BaselineFile.model_validate(__import__("yaml").safe_load(text))
    assert set(b.entries[0].figures) == {"HPL"}
    assert any("lat left out (value nan" in n for n in notes)


def test_merge_keeps_other_machines_entries(toy_root):
    other = (machine.machine_id(OTHER), OTHER)
    f, text, _ = baselines.merge("local", "hpcc", [result(40.0, r, mach=other) for r in "abc"])
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    _, text, _ = baselines.merge("local", "hpcc", [result(30.0, r) for r in "abc"])
    b = BaselineFile.model_validate(__import__("yaml").safe_load(text))
    assert {e.machine for e in b.entries} == {other[0], this_machine()[0]}


BAD = [
    (
        "old format",
        "app: hpcc\nsystem: local\nthresholds: {default: {regression: 0.3}}\nentries: []\n",
        "machines: baseline file has no machine fingerprint",
    ),
    ("edited fingerprint", None, "the id does not match its fingerprint"),
    ("unknown machine", None, "entries[0].machine: 'm-0000000000' is not one of machines"),
    ("nan value", None, "value must be a finite number, not nan"),
    ("negative value", None, "value must be positive, not -40.0"),
    ("duplicate entry", None, "a second entry for gnu/tuned tier ci"),
]


@pytest.mark.parametrize("case,text,message", BAD, ids=[b[0] for b in BAD])
def test_bad_baseline_files_give_one_line_naming_file_and_field(toy_root, case, text, message):
    import yaml

    f = toy_root / "reference/baselines/local/hpcc.yaml"
    if text is None:
        data = bfile().model_dump(mode="json")
        mid = next(iter(data["machines"]))
        if case == "edited fingerprint":
            data["machines"][mid]["memory_gib"] = 512
        elif case == "unknown machine":
            data["entries"][0]["machine"] = "m-0000000000"
        elif case == "nan value":
            data["entries"][0]["figures"]["HPL"]["value"] = float("nan")
        elif case == "negative value":
            data["entries"][0]["figures"]["HPL"]["value"] = -40.0
        elif case == "duplicate entry":
            data["entries"].append(dict(data["entries"][0]))
        text = yaml.safe_dump(data)
    f.write_text(textwrap.dedent(text))
    with pytest.raises(ApptuneError) as e:
        baselines.load("local", "hpcc")
    line = str(e.value)
    assert "\n" not in line and "reference/baselines/local/hpcc.yaml" in line and message in line, (
        line
    )


def test_a_baseline_update_keeps_the_files_comments_and_order(toy_root):
    """The file is edited in place (ruamel round trip): a reviewer's comments and the order
    stay; the entry recorded again gets its new figures, another machine's is untouched."""
    other = (machine.machine_id(OTHER), OTHER)
    f, text, _ = baselines.merge("local", "hpcc", [result(40.0, r, mach=other) for r in "abc"])
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    first = text
    _, text, _ = baselines.merge("local", "hpcc", [result(30.0, r) for r in "abc"])
    # a new machine's entry only adds lines: the file keeps the style it was written in
    diff = difflib.ndiff(first.splitlines(), text.splitlines())
    assert [ln for ln in diff if ln.startswith("- ")] == []
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("- machine:"))
    lines.insert(at, "  # the first entry: recorded on the old cluster, kept for comparison")
    commented = "\n".join(lines).replace("app: hpcc", "app: hpcc  # reviewed") + "\n"
    f.write_text(commented)
    _, new, _ = baselines.merge("local", "hpcc", [result(33.0, r) for r in "def"])
    assert "app: hpcc  # reviewed" in new
    assert "  # the first entry: recorded on the old cluster, kept for comparison" in new
    b = BaselineFile.model_validate(__import__("yaml").safe_load(new))
    mine = next(e for e in b.entries if e.machine == this_machine()[0])
    theirs = next(e for e in b.entries if e.machine == other[0])
    assert mine.figures["HPL"].value == 33.0 and theirs.figures["HPL"].value == 40.0
    # only the re-recorded entry changed
    before = __import__("yaml").safe_load(commented)
    after = __import__("yaml").safe_load(new)
    assert after["machines"] == before["machines"]
    assert [e["machine"] for e in after["entries"]] == [e["machine"] for e in before["entries"]]
    assert new.count("\n") >= commented.count("\n") - 2


# ----------------------------------------------------------------------- one judgement
def _write(toy_root, b: BaselineFile):
    f = toy_root / "reference/baselines/local/hpcc.yaml"
    f.parent.mkdir(parents=True, exist_ok=True)
    import yaml

    f.write_text(yaml.safe_dump(b.model_dump(mode="json")))
    return f


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_figure_that_is_not_a_finite_number_gets_no_verdict(toy_root, value):
    _write(toy_root, bfile())
    v = baselines.verdicts("local", "hpcc", [result(value, "a", lat=1.0)], FIGS)
    hpl = v.figures["HPL"]
    assert hpl.verdict == "no verdict" and hpl.change is None, hpl
    assert hpl.why.startswith("not a finite number")
    assert v.figures["lat"].verdict == "within noise"  # the other figures are judged
    # among repeats, no median hides it
    rs = [result(40.0, "a"), result(value, "b"), result(41.0, "c")]
    assert baselines.verdicts("local", "hpcc", rs, FIGS).figures["HPL"].verdict == ("no verdict")


def test_an_unverified_run_gets_no_performance_verdict(toy_root):
    _write(toy_root, bfile())
    v = baselines.verdicts("local", "hpcc", [result(10.0, "a", ok=False)], FIGS)
    assert v.why == "not verified" and v.figures["HPL"].verdict == "no verdict"
    assert v.figures["HPL"].why == "not verified"
    # repeats: only the verified and clean ones are judged
    rs = [result(10.0, "a", ok=False), result(40.5, "b"), result(39.5, "c")]
    v = baselines.verdicts("local", "hpcc", rs, FIGS)
    assert v.figures["HPL"].verdict == "within noise" and v.repeats == 2


def test_a_disturbed_run_and_a_bad_baseline_withhold_only_the_verdict(toy_root):
    _write(toy_root, bfile())
    disturbed = {"grade": "disturbed", "reasons": ["other processes used 40 % of the 2 CPUs"]}
    v = baselines.verdicts("local", "hpcc", [result(10.0, "a", quality=disturbed)], FIGS)
    assert v.why.startswith("run disturbed") and v.figures["HPL"].verdict == "no verdict"
    f = toy_root / "reference/baselines/local/hpcc.yaml"
    f.write_text(f.read_text().replace("value: 40.0", "value: .nan"))
    v = baselines.verdicts("local", "hpcc", [result(10.0, "a")], FIGS)
    assert v.why.startswith("baseline unusable: ") and "hpcc.yaml" in v.why, v.why
    assert v.figures["HPL"].verdict == "no verdict"


def test_a_few_agreeing_runs_are_not_taken_for_a_machine_without_noise():
    """Three runs that agree to 0.06 % (NetPIPE's half-peak size on a quiet night) give the
    threshold of a 1.2 % noise, not of no noise; many runs keep their own noise."""
    assert baselines.effective_noise(0.0006, 3) == pytest.approx(0.0122, abs=0.0002)
    assert baselines.effective_noise(0.0006, 10) == pytest.approx(0.0083, abs=0.0002)
    assert baselines.effective_noise(0.03, 5) == 0.03  # a noisy figure keeps its noise
    c = judged(bfile(noise=0.0006, runs=3), {"HPL": 37.8})  # -5.5 %
    assert c["HPL"].verdict == "within noise" and c["HPL"].threshold > 0.055


def test_a_discrete_figure_is_not_judged_on_one_run():
    """NetPIPE's half-peak size jumps between message sizes (4093 <-> 65539 B) on identical
    builds, and the median of 3 repeats jumped as well on unchanged nights: never judged
    against the baseline (the history's change points judge it)."""
    r = recipes.load_recipe("netpipe")
    specs = recipes.figure_specs(r)
    assert specs["half_peak_size"].discrete and not specs["latency"].discrete
    figs = {"half_peak_size": specs["half_peak_size"]}
    b = bfile(half_peak_size=4093.0)
    entry = baselines.lookup(b, this_machine()[0], "gnu", "tuned", "ci")
    one = baselines.compare(b, entry, figs, {"half_peak_size": 65539.0}, energy_trust="measured")
    assert one["half_peak_size"].verdict == "no verdict"
    assert one["half_peak_size"].why.startswith("discrete figure (its values lie on a grid)")
    three = baselines.compare(
        b, entry, figs, {"half_peak_size": 65539.0}, energy_trust="measured", repeats=3
    )
    assert three["half_peak_size"].verdict == "no verdict"


# mpi-micro's pingpong_latency (us), gnu/tuned@bound at ci size on a private one-node Slurm
# (benchmarks/nightly_slurm.sh, 2026-11-24, m-4d23c915ae): 3 repeats a night. The level of a
# night moved by up to +45 % with every repeat of that night clean.
NIGHTS = [
    [0.1652, 0.1666, 0.1633],
    [0.2276, 0.2364, 0.1625],
    [0.1628, 0.1627, 0.1655],
    [0.3098, 0.2401, 0.2459],
    [0.2101, 0.1614, 0.2158],
    [0.2042, 0.2311, 0.2476],
]


def test_a_baseline_of_several_sessions_holds_the_noise_between_them(toy_root):
    rs = [result(40.0, f"night-{i}", lat=v) for i, night in enumerate(NIGHTS[:5]) for v in night]
    f, text, notes = baselines.merge("local", "hpcc", rs)
    (e,) = BaselineFile.model_validate(__import__("yaml").safe_load(text)).entries
    lat = e.figures["lat"]
    medians = [statistics.median(n) for n in NIGHTS[:5]]
    assert lat.sessions == 5 and lat.runs == 15
    assert lat.between == pytest.approx(baselines.run_noise(medians), abs=1e-4)
    # one session (or runs without a session) has no noise between sessions
    _, text1, _ = baselines.merge("local", "hpcc", [result(40.0, "s", lat=v) for v in NIGHTS[0]])
    (e1,) = BaselineFile.model_validate(__import__("yaml").safe_load(text1)).entries
    assert e1.figures["lat"].sessions is None and e1.figures["lat"].between is None


def test_repeats_do_not_shrink_the_noise_between_nights(toy_root):
    """Judged against a baseline of five stored nights, the sixth unchanged night (+24 %,
    every repeat high) raises no alarm, where a baseline of three back-to-back sessions
    that happened to agree calls it a regression; -O0 (x3) is still a regression."""
    rs = [result(40.0, f"night-{i}", lat=v) for i, night in enumerate(NIGHTS[:5]) for v in night]
    _, text, _ = baselines.merge("local", "hpcc", rs)
    nights = BaselineFile.model_validate(__import__("yaml").safe_load(text))
    sixth = statistics.median(NIGHTS[5])
    c = judged(nights, {"lat": sixth}, repeats=3)
    assert c["lat"].verdict != "regression", c["lat"]
    assert "between sessions" in c["lat"].why
    assert judged(nights, {"lat": 3 * sixth}, repeats=3)["lat"].verdict == "regression"
    back_to_back = [result(40.0, f"s{i}", lat=v) for i, v in enumerate([0.1695, 0.1606, 0.1646])]
    _, text, _ = baselines.merge("local", "hpcc", back_to_back)
    tight = BaselineFile.model_validate(__import__("yaml").safe_load(text))
    assert judged(tight, {"lat": sixth}, repeats=3)["lat"].verdict == "regression"


def test_a_figure_noisier_than_its_own_size_is_never_judged():
    """mpi-micro's allreduce_large at ci size: 247 % noise per run (a few stalled runs), and an
    unchanged night's median 12x its baseline. No threshold of standard deviations holds
    such a spread: not judged, saying why."""
    c = judged(bfile(noise=2.47, runs=12, lat=1343.2), {"lat": 16280.3}, repeats=3)
    assert c["lat"].verdict == "no verdict" and "beyond 100%" in c["lat"].why
    c = judged(bfile(noise=0.4, runs=12, lat=0.2), {"lat": 10.0}, repeats=3)  # TCP: x50
    assert c["lat"].verdict == "regression"
