"""The history site's data and pages, and apptune compare's ratios."""

import json
import math
import re
from pathlib import Path

import pytest
from conftest import CLEAN
from site_data import NIGHTS, STEP_AT, nightly_history, two_machine_history

from apptune import cli
from apptune.history import compare, regressions
from apptune.history.store import History
from apptune.report import historysite


def _group(hdir, app="hpcc", tier="nightly"):
    with History(hdir, create=False) as h:
        verdicts = regressions.check(h)
        runs, order, hrefs = historysite._runs(h, None, hdir)
    (g,) = [g for g in historysite.groups_of(verdicts) if (g.app, g.tier) == (app, tier)]
    return g, runs, order, hrefs


def test_the_injected_step_is_found_at_its_run_with_its_cause(tmp_path):
    hdir, dirs = nightly_history(tmp_path)
    g, runs, order, hrefs = _group(hdir)
    styles = {"gnu/baseline": {"color": "#111111"}, "gnu/tuned": {"color": "#222222"}}
    page = historysite.series_page(g, styles, order, hrefs, runs)
    cps = page["change_points"]
    # HPL and wall time of gnu/tuned changed at the -O1 build, nothing of gnu/baseline
    assert {(c["verdict"].variant, c["verdict"].figure) for c in cps} == {
        ("tuned", "HPL"),
        ("tuned", "wall_time"),
    }
    for c in cps:
        assert c["cp"]["run"] == f"5173{STEP_AT:04d}-0000-4000-8000-000000000000"
        assert c["cause"] == ["cflags -O2 → -O1"]
        assert c["cp"]["direction"] == "regression"
    hpl = next(c for c in cps if c["verdict"].figure == "HPL")
    assert hpl["cp"]["change"] == pytest.approx(-0.10, abs=0.01)
    # one panel per figure, each point of the trend a link to its run's report (none here)
    assert [p["figure"] for p in page["panels"]] == ["HPL", "wall_time"]
    assert "<svg" in page["panels"][0]["svg"] and "<a " not in page["panels"][0]["svg"]


def test_since_the_last_nightly(tmp_path):
    hdir, dirs = nightly_history(tmp_path)
    g, runs, order, hrefs = _group(hdir)
    with History(hdir, create=False) as h:
        (m,) = historysite.since_last(h, [g], runs, hrefs)
    assert m["last"]["uuid"].startswith(f"5173{NIGHTS - 1:04d}")
    assert m["prev"]["uuid"].startswith(f"5173{NIGHTS - 2:04d}")
    # gnu/baseline failed its verification in the last run
    assert [(s["key"][4], s["before"], s["after"]) for s in m["states"]] == [
        ("baseline", True, False)
    ]
    # the step needs 3 runs after it: the last run is the one that confirmed it
    assert {(c["verdict"].figure, tuple(c["cause"])) for c in m["new_change_points"]} == {
        ("HPL", ("cflags -O2 → -O1",)),
        ("wall_time", ("cflags -O2 → -O1",)),
    }
    assert not m["builds"]  # the same builds in the last two runs


def test_the_site_shows_the_step_with_its_cause_and_links_each_point(tmp_path):
    from apptune import report

    hdir, dirs = nightly_history(tmp_path, last_fails=False)
    report.write(dirs[STEP_AT])  # one run with a report: its points link to it
    out = tmp_path / "site"
    assert cli.main(["history", "site", str(out), "--history", str(hdir)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names[:1] == ["index.html"] and "since.html" in names
    (series,) = [n for n in names if n.startswith("series-")]
    html = (out / series).read_text()
    assert html.count('class="change-point"') == 2
    assert "<code>cflags -O2 → -O1</code>" in html
    link = f"../night-{STEP_AT:02d}/report.html"
    assert html.count(f'xlink:href="{link}"') == 4  # 2 figures x 2 variants at that run
    assert f'<a href="{link}">' in html  # the change points' run
    index = (out / "index.html").read_text()
    assert f'href="./{series}"' in index
    assert re.search(r"gnu/tuned HPL -(9|10)\.\d%; gnu/tuned wall_time \+(9|10)\.\d%", index)


def test_pages_are_named_safely(tmp_path):
    assert historysite.slug("m-1", "a/../b", "<x>") != historysite.slug("m-1", "a_.._b", "_x_")
    assert "/" not in historysite.slug("../../etc", "x")
    f = tmp_path / "javascript:alert(1)" / "report.html"
    f.parent.mkdir()
    f.write_text("x")
    assert historysite.link(f, tmp_path) == "./javascript%3Aalert%281%29/report.html"
    assert historysite.link(tmp_path / "missing.html", tmp_path) is None


def _side(v, noise=0.01, runs=5):
    return compare.Side(v, noise, runs)


def test_ratios_speed_ups_and_noise():
    hpl = compare.ComparedFigure(
        "hpcc", "ci", "gnu", "tuned", "HPL", "Gflop/s", "higher", _side(10), _side(20)
    )
    wall = compare.ComparedFigure(
        "x", "ci", "gnu", "tuned", "wall_time", "s", "lower", _side(10), _side(5)
    )
    assert hpl.ratio == 2 and hpl.speedup == 2 and hpl.verdict == "B faster"
    assert wall.ratio == 0.5 and wall.speedup == 2 and wall.verdict == "B faster"
    assert wall.uncertainty == pytest.approx(math.sqrt(2 * 0.01**2 / 5))
    close = compare.ComparedFigure("x", "ci", "g", "v", "t", "s", "lower", _side(10), _side(10.05))
    assert close.verdict == "within noise"
    unknown = compare.ComparedFigure(
        "x", "ci", "g", "v", "t", "s", "lower", _side(10, None, 1), _side(9)
    )
    assert unknown.uncertainty is None and unknown.verdict == "noise unknown"


def test_compare_two_recorded_machines(tmp_path, capsys):
    """The recorded HPCC ci runs of an AMD EPYC and an Intel Xeon VM (2 cores each)."""
    hdir = two_machine_history(tmp_path)
    with History(hdir, create=False) as h:
        c = compare.compare(h, "m-4d23c915ae", "m-ca27fe65b3")
    assert "AMD EPYC" in c.a.label and "Intel(R) Xeon(R) Processor (6/207/2, avx512f)" in c.b.label
    # gnu/tuned is the variant measured on both; its figures split into application figures
    # and micro-benchmarks, the other variants of the AMD machine are on one side only
    assert {(r.environment, r.variant) for r in c.rows + c.micro} == {("gnu", "tuned")}
    assert {r.figure for r in c.rows} == {
        "HPL",
        "MPIFFT",
        "MPIRandomAccess",
        "PTRANS",
        "StarFFT",
        "wall_time",
    }
    assert set(c.kinds) == {"STREAM", "DGEMM", "latency", "bandwidth"}
    assert c.only == {"a": 5 * 14, "b": 0}
    for r in c.rows + c.micro:
        assert r.a.runs == 2 and r.b.runs == 9
        assert r.ratio == pytest.approx(r.b.value / r.a.value)
        assert r.nearest in c.kinds or r.kind
    # the ratios as recorded: the Intel VM's HPL at less than half the AMD's
    hpl = next(r for r in c.rows if r.figure == "HPL")
    assert 0.3 < hpl.ratio < 0.6 and hpl.verdict == "A faster"
    # the command: the history's two machines without naming them, a JSON copy
    out = tmp_path / "c.json"
    assert cli.main(["compare", "--history", str(hdir), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "micro-benchmarks" in text and "HPL" in text and "m-ca27fe65b3" in text
    assert json.loads(out.read_text())["kinds"].keys() == c.kinds.keys()


def test_compare_refuses_what_it_cannot_compare(tmp_path, capsys):
    hdir = two_machine_history(tmp_path)
    assert cli.main(["compare", "m-4d23c915ae", "--history", str(hdir)]) == 2
    assert cli.main(["compare", "m-4d23", "m-4d23c915ae", "--history", str(hdir)]) == 2
    assert "the same machine" in capsys.readouterr().err
    assert cli.main(["compare", "m-4d23", "m-0000", "--history", str(hdir)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"no verified results of machine 'm-0000'.*m-ca27fe65b3", err), err


DISTURBED = {
    "grade": "disturbed",
    "reasons": ["other processes used 61% of the node's CPU time (limit 5%)"],
    "steal_fraction": 0.0,
    "outside_cpu_fraction": 0.61,
}


def _history(tmp_path, prefix: str, runs: int, results) -> Path:
    """A history of ``runs`` runs an hour apart, run N holding ``results(N)``."""
    from conftest import write_run

    dirs = [
        write_run(
            tmp_path / f"{prefix}-{n}",
            f"{prefix}{n:04d}-0000-4000-8000-000000000000",
            1.7e9 + n * 3600,
            results(n),
        )
        for n in range(runs)
    ]
    hdir = tmp_path / "history"
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    return hdir


def _busy_history(tmp_path):
    """Three runs on a busy machine: every result graded disturbed, and in the last run
    one variant whose numbers did not verify."""
    return _history(
        tmp_path,
        "b05e",
        3,
        lambda night: [
            {
                "app": "npb",
                "tier": "ci",
                "environment": env,
                "variant": "tuned",
                "figures": {"wall_time": 2.0 + night},
                "quality": DISTURBED,
                "ok": not (night == 2 and env == "llvm"),
            }
            for env in ("gnu", "llvm")
        ],
    )


def test_the_site_counts_a_history_of_disturbed_runs(tmp_path):
    """Disturbed and unverified runs are stored and counted on the index and the 'since'
    page with their grades, never drawn."""
    hdir = _busy_history(tmp_path)
    out = tmp_path / "site"
    assert cli.main(["history", "site", str(out), "--history", str(hdir)]) == 0
    assert not [p for p in out.iterdir() if p.name.startswith("series-")]  # nothing drawn
    index = (out / "index.html").read_text()
    assert "No clean verified" not in index
    row = re.search(r'<tr class="group">(.*?)</tr>', index, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert "npb" in cells[2] and "<a " not in cells[2]  # no trend page to link to
    assert cells[4] == "3"  # runs
    assert "1 of 2" in cells[6]  # the last run: gnu verified, llvm did not
    assert "5 disturbed" in cells[7] and "1 not verified" in cells[7]
    assert "no clean verified run" in cells[8]
    since = (out / "since.html").read_text()
    assert "No clean verified" not in since
    assert "b05e0002" in since and "b05e0001" in since  # the last run against the one before
    assert "npb/ci gnu/tuned" not in since  # the same state in both runs
    assert re.search(r"npb/ci llvm/tuned.*verified → not verified", since)
    assert "1 disturbed" in since and "other processes used 61%" in since


def test_compare_two_environments_of_a_busy_machine(tmp_path, capsys):
    """Every run disturbed: the figures are shown with their grade and noise, never judged."""
    hdir = _busy_history(tmp_path)
    assert cli.main(["compare", "gnu", "llvm", "--history", str(hdir)]) == 0
    text = capsys.readouterr().out
    assert "A: environment gnu on m-" in text and "B: environment llvm" in text
    (line,) = [x for x in text.splitlines() if "wall_time" in x]
    # gnu: 3 disturbed runs (2, 3, 4 s); llvm: the 2 that verified (2, 3 s)
    assert "A 3 ±" in line and "(3 disturbed runs)" in line and "(2 disturbed runs)" in line
    assert "not judged: both disturbed" in line and "B faster" not in line
    assert "shown, no ratio is judged" in text
    # the same by name of the axis, and the history's two environments without naming them
    assert cli.main(["compare", "--by", "environment", "--app", "npb", "--history", str(hdir)]) == 0
    assert "not judged: both disturbed" in capsys.readouterr().out
    with History(hdir, create=False) as h:
        c = compare.compare(h, by="environment")
    (row,) = c.rows
    assert (row.environment, row.variant, row.machine_id) == (None, "tuned", c.a.ids[0])
    assert row.a.grade == row.b.grade == "disturbed" and row.a.noise is not None
    assert row.verdict == "not judged: both disturbed" and not c.kinds


def test_compare_environments_and_variants_of_one_machine(tmp_path, capsys):
    """gnu against gnu-mpich (the MPI axis) on one machine from clean runs, a variant
    against another, and a clean side never set against a disturbed one."""
    hdir = _history(
        tmp_path,
        "c0de",
        4,
        lambda night: [
            {
                "app": "mpi-micro",
                "tier": "ci",
                "environment": env,
                "variant": "tuned",
                "figures": {"pingpong_latency": lat * (1 + 0.01 * night)},
                "quality": CLEAN if env != "llvm" else DISTURBED,
            }
            for env, lat in (("gnu", 1.0), ("gnu-mpich", 2.0), ("llvm", 1.0))
        ],
    )
    capsys.readouterr()
    assert cli.main(["compare", "gnu", "gnu-mpich", "--history", str(hdir)]) == 0
    text = capsys.readouterr().out
    assert "each row: the same machine, application, tier, variant and figure" in text
    with History(hdir, create=False) as h:
        c = compare.compare(h, "gnu", "gnu-mpich")
        (row,) = c.micro
        assert row.ratio == pytest.approx(2.0) and row.speedup == pytest.approx(0.5)
        assert row.a.runs == row.b.runs == 4 and row.a.noise and row.verdict == "A faster"
        mixed = compare.compare(h, "gnu", "llvm").micro[0]
        assert (mixed.a.grade, mixed.b.grade) == ("clean", "disturbed")
        assert mixed.ratio is None and mixed.speedup is None
        assert mixed.verdict == "not comparable: A clean and B disturbed"
    hdir2, _ = nightly_history(tmp_path / "n")
    with History(hdir2, create=False) as h:
        c = compare.compare(h, "baseline", "tuned", app="hpcc")
    assert c.by == "variant"
    hpl = next(r for r in c.rows if r.figure == "HPL")
    assert (hpl.environment, hpl.variant) == ("gnu", None) and hpl.speedup > 1.1
    assert cli.main(["compare", "gnu", "nosuch", "--history", str(hdir)]) == 2
    err = capsys.readouterr().err
    assert re.search(
        r"'gnu' and 'nosuch' are not two machines.*environments \(gnu, gnu-mpich, llvm\)", err
    ), err


def test_a_changed_input_starts_a_series_of_its_own(tmp_path):
    """h5perf's xfer 1048576 -> 1048575: the bandwidths of the new input are a series apart,
    each named by what tells them apart; runs stored before inputs were kept join the
    first input's series."""

    def results(night):
        row = {
            "app": "h5perf",
            "tier": "ci",
            "environment": "gnu",
            "variant": "tuned",
            "figures": {"mpiio_coll_write": 1700.0 - (300 if night >= 6 else 0) + night},
            "provenance": {"app": "h5perf"},
        }
        if night >= 2:  # the first two runs were stored before inputs were
            xfer = 1048576 if night < 6 else 1048575
            row["input"] = {"bytes_per_rank": 8388608, "ranks": 2, "xfer": xfer}
        return [row]

    hdir = _history(tmp_path, "1a9e", 9, results)
    with History(hdir, create=False) as h:
        vs = [v for v in regressions.check(h) if v.figure == "mpiio_coll_write"]
    by = {v.input_label: v for v in vs}
    assert set(by) == {"xfer=1048576", "xfer=1048575"}
    assert len(by["xfer=1048576"].points) == 6 and len(by["xfer=1048575"].points) == 3
    assert by["xfer=1048575"].input["xfer"] == 1048575
    assert by["xfer=1048575"].name.endswith("gnu/tuned [xfer=1048575] mpiio_coll_write")
    assert not by["xfer=1048576"].change_points  # the drop is the new input, not a change
    out = tmp_path / "site"
    assert cli.main(["history", "site", str(out), "--history", str(hdir)]) == 0
    (page,) = out.glob("series-*.html")
    assert "gnu/tuned [xfer=1048575]" in page.read_text()


def test_a_15x_step_over_the_last_four_runs_is_a_change_point_here_and_on_the_site(
    tmp_path, capsys
):
    """Eight nights on a busy node, then four on a quiet one, every rate 15x higher: a
    change point at the ninth run in check-regressions and on the site, not "no change
    point in 12 runs"."""
    from conftest import write_run

    dirs = []
    for night in range(12):
        level = 15.0 if night >= 8 else 1.0
        hpl = level * (1 + 0.05 * math.sin(3 * night))
        r = {"app": "hpcc", "tier": "nightly", "environment": "gnu", "variant": "tuned"}
        uuid = f"5174{night:04d}-0000-4000-8000-000000000000"
        d = write_run(
            tmp_path / f"n{night:02d}",
            uuid,
            1.79e9 + night * 86400,
            [dict(r, figures={"HPL": hpl})],
        )
        dirs.append(d)
    hdir = tmp_path / "history"
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    capsys.readouterr()
    assert cli.main(["check-regressions", "--history", str(hdir)]) == 0
    out = capsys.readouterr().out
    assert "IMPROVEMENT: " in out and "HPL" in out and "8 runs before, 4 after" in out, out
    assert "first changed run: " in out and "(51740008" in out
    site = tmp_path / "site"
    assert cli.main(["history", "site", str(site), "--history", str(hdir)]) == 0
    (series,) = [p for p in site.iterdir() if p.name.startswith("series-")]
    assert series.read_text().count('class="change-point"') == 1
