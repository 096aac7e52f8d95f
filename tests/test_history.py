"""The history store: ingest of run directories, idempotence, atomicity, concurrent
writers, schema migrations, plain ReFrame reports and ReFrame's results database."""

import json
import sqlite3
from concurrent.futures import ProcessPoolExecutor

import pytest
from conftest import write_run

from apptune import cli
from apptune.commands import workflow
from apptune.errors import ApptuneError
from apptune.history import ingest, store

PROV = {
    "compilers": {"cc": {"version": "gcc 12.2.0"}},
    "flags": {"cflags": ["-O2"]},
    "patches": [{"file": "0001-a.patch", "sha256": "ab" * 32}],
    "build_seconds": 3.1,
}


def _run(tmp_path, i, variant="baseline", value=10.0, ok=True, repeats=None):
    results = [
        {
            "app": "hpcc",
            "tier": "ci",
            "environment": "gnu",
            "variant": variant,
            "figures": {"HPL": value + (rep or 0) * 0.1, "wall_time": 5.0},
            "ok": ok,
            "provenance": PROV,
            "repeat": rep,
        }
        for rep in (repeats or [None])
    ]
    return write_run(tmp_path / f"run{i}", f"uuid-{i:04d}", 1_800_000_000 + 3600 * i, results)


def test_ingest_is_whole_and_idempotent(tmp_path):
    h = store.History(tmp_path / "h")
    run = _run(tmp_path, 1, repeats=[0, 1, 2])
    assert h.ingest(run) == ("uuid-0001", 3, True)
    assert h.ingest(run) == ("uuid-0001", 3, False)
    assert h.db.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    rows = h.db.execute("SELECT test, repeat FROM results ORDER BY repeat").fetchall()
    assert [tuple(r) for r in rows] == [
        ("HPCCCheck %tier=ci %build.variant=baseline", i) for i in range(3)
    ]
    # the three repeats share one build: one provenance row
    assert h.db.execute("SELECT count(*) FROM provenance").fetchone()[0] == 1
    s = h.samples(system="local", mode="nightly")
    hpl = [r for r in s if r["figure"] == "HPL"]
    assert [r["value"] for r in hpl] == [10.0, 10.1, 10.2] and hpl[0]["better"] == "higher"
    assert hpl[0]["unit"] == "Gflop/s" and json.loads(hpl[0]["provenance"])["flags"]["cflags"] == [
        "-O2"
    ]
    assert h.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert h.version() == store.SCHEMA_VERSION


def test_unverified_results_are_stored_but_not_in_series(tmp_path):
    h = store.History(tmp_path / "h")
    h.ingest(_run(tmp_path, 1, ok=False))
    r = h.db.execute("SELECT result, verified, reason FROM results").fetchone()
    assert tuple(r)[:2] == ("fail", 0) and "nan" in r["reason"]
    assert h.samples() == []


def test_a_passed_case_whose_record_fails_validation_is_stored_unverified_naming_it(tmp_path):
    run = _run(tmp_path, 1)
    (f,) = (run / "output").rglob("apptune-result.json")
    rec = json.loads(f.read_text())
    del rec["verification"]["ok"]
    f.write_text(json.dumps(rec))
    h = store.History(tmp_path / "h")
    h.ingest(run)
    r = h.db.execute("SELECT result, verified, reason FROM results").fetchone()
    assert tuple(r)[:2] == ("pass", 0) and r["reason"].startswith(f"{f}: verification.ok: ")
    assert h.samples() == []


def test_a_failed_ingest_leaves_nothing(tmp_path, monkeypatch):
    h = store.History(tmp_path / "h")
    run = write_run(
        tmp_path / "r",
        "uuid-x",
        1.0,
        [
            {
                "app": "hpcc",
                "tier": "ci",
                "environment": "gnu",
                "variant": v,
                "figures": {"HPL": 1.0},
                "provenance": {"v": v},
            }
            for v in ("baseline", "tuned")
        ],
    )
    calls = []

    def crash(db, prov):
        calls.append(prov)
        if len(calls) == 2:
            raise OSError("killed half-way")
        return real(db, prov)

    real = store.History._provenance_id
    monkeypatch.setattr(store.History, "_provenance_id", staticmethod(crash))
    with pytest.raises(OSError):
        h.ingest(run)
    for table in ("runs", "results", "figures", "provenance"):
        assert h.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    monkeypatch.undo()
    assert h.ingest(run)[2] is True


def _ingest_many(args):
    hdir, runs = args
    with store.History(hdir) as h:
        return [h.ingest(r)[2] for r in runs]


@pytest.mark.slow
def test_concurrent_writers(tmp_path):
    runs = [str(_run(tmp_path, i)) for i in range(12)]
    hdir = str(tmp_path / "h")
    # four processes, overlapping sets: every run stored exactly once
    jobs = [(hdir, runs[k::3] + runs[:2]) for k in range(3)] + [(hdir, runs)]
    with ProcessPoolExecutor(4) as ex:
        stored = [x for r in ex.map(_ingest_many, jobs) for x in r]
    assert sum(stored) == 12
    with store.History(hdir) as h:
        assert [r["session_uuid"] for r in h.runs()] == [f"uuid-{i:04d}" for i in range(12)]
        assert h.db.execute("SELECT count(*) FROM results").fetchone()[0] == 12


def _open_only(hdir):
    with store.History(hdir) as h:
        return h.version()


@pytest.mark.slow
def test_first_openers_racing_on_a_new_database_all_succeed(tmp_path):
    # switching a fresh database to WAL takes an exclusive lock SQLite does not wait
    # for; before opening was serialised, one of several first openers could fail
    for k in range(10):
        hdir = str(tmp_path / f"h{k}")
        with ProcessPoolExecutor(4) as ex:
            assert list(ex.map(_open_only, [hdir] * 6)) == [store.SCHEMA_VERSION] * 6


def test_an_error_in_a_worker_process_reaches_the_parent_whole():
    import pickle

    e = pickle.loads(pickle.dumps(ApptuneError("h/history.sqlite", "schema_version", "too new")))
    assert (e.file, e.field, e.message) == ("h/history.sqlite", "schema_version", "too new")
    assert str(e) == "h/history.sqlite: schema_version: too new"


def test_migrations_are_applied_in_order_and_a_newer_schema_is_refused(tmp_path, monkeypatch):
    hdir = tmp_path / "h"
    with store.History(hdir) as h:
        h.ingest(_run(tmp_path, 1))
    nxt = store.SCHEMA_VERSION + 1
    monkeypatch.setattr(
        store,
        "MIGRATIONS",
        store.MIGRATIONS
        + [(nxt, ["ALTER TABLE runs ADD COLUMN label TEXT", "UPDATE runs SET label = 'migrated'"])],
    )
    monkeypatch.setattr(store, "SCHEMA_VERSION", nxt)
    with store.History(hdir) as h:
        assert h.version() == nxt
        assert h.db.execute("SELECT label, session_uuid FROM runs").fetchone()[:] == (
            "migrated",
            "uuid-0001",
        )
    monkeypatch.undo()
    with pytest.raises(ApptuneError) as e:
        store.History(hdir)
    assert "newer than this apptune" in str(e.value)


def test_plain_reframe_check_keeps_its_performance_values(tmp_path):
    run = tmp_path / "plain"
    run.mkdir()
    (run / "report.json").write_text(
        json.dumps(
            {
                "session_info": {
                    "uuid": "plain-1",
                    "time_start_unix": 5.0,
                    "cmdline": "reframe -r",
                },
                "runs": [
                    {
                        "testcases": [
                            {
                                "display_name": "StreamTest",
                                "unique_name": "StreamTest",
                                "environ": "gnu",
                                "system": "local",
                                "partition": "default",
                                "result": "pass",
                                "fixture": False,
                                "outputdir": str(run / "nowhere"),
                                "stagedir": str(run / "nowhere"),
                                "perfvalues": {
                                    "local:default:triad": [21.5, 20, -0.1, None, "GB/s", "pass"],
                                    "local:default:elapsed": [3.2, 0, None, None, "s", "pass"],
                                },
                            }
                        ]
                    }
                ],
            }
        )
    )
    with store.History(tmp_path / "h") as h:
        h.ingest(run)
        got = {
            r["figure"]: (r["value"], r["better"]) for r in h.db.execute("SELECT * FROM figures")
        }
        # stored, but no run quality was measured: not part of any change-point series
        assert h.samples() == []
    assert got == {"triad": (21.5, "higher"), "elapsed": (3.2, "lower")}


def test_ingest_from_reframe_results_database(tmp_path, capsys):
    runs = [_run(tmp_path, i) for i in range(2)]
    db = tmp_path / "reframe-results.db"
    con = sqlite3.connect(db)
    # the table ReFrame 4.10 creates (reframe/frontend/reporting/storage.py)
    con.execute(
        "CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
        "session_end_unix REAL, json_blob TEXT, report_file TEXT)"
    )
    for r in runs:
        rep = json.loads((r / "report.json").read_text())
        con.execute(
            "INSERT INTO sessions VALUES (?,?,?,?,?)",
            (
                rep["session_info"]["uuid"],
                rep["session_info"]["time_start_unix"],
                0,
                json.dumps(rep),
                str(r / "report.json"),
            ),
        )
    con.commit()
    con.close()
    hdir = tmp_path / "h"
    assert cli.main(["history", "ingest", "--reframe-db", str(db), "--history", str(hdir)]) == 0
    assert cli.main(["history", "ingest", "--reframe-db", str(db), "--history", str(hdir)]) == 0
    out = capsys.readouterr().out
    assert out.count("1 results stored") == 2 and out.count("already in the history") == 2
    assert cli.main(["history", "list", "--history", str(hdir)]) == 0
    assert "2 runs in" in capsys.readouterr().out


def test_default_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("APPTUNE_HISTORY", str(tmp_path / "x"))
    assert store.history_dir() == tmp_path / "x"
    monkeypatch.delenv("APPTUNE_HISTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert store.history_dir() == tmp_path / "data" / "apptune" / "history"


def test_run_sets_reframe_results_storage_next_to_the_history(monkeypatch, tmp_path):
    monkeypatch.setenv("APPTUNE_HISTORY", str(tmp_path / "h"))
    env = workflow.reframe_storage_env({})
    assert env == {
        "RFM_ENABLE_RESULTS_STORAGE": "1",
        "RFM_SQLITE_DB_FILE": str(tmp_path / "h" / "reframe-results.db"),
    }
    # a caller's own setting wins
    assert workflow.reframe_storage_env({"RFM_ENABLE_RESULTS_STORAGE": "0"}) == {}


# ------------------------------------------------------------------ tune and bisect trials
def _trials(tmp_path, fake_trials, names=("trial-000-0", "trial-001-0")) -> store.TrialSession:
    """A tune session of the toy as the tool records it: the run directory of each trial, its
    run record written by the real localrun.run_tier (the first right, the others wrong)."""
    from apptune.core.data import recipes
    from apptune.core.run import localrun

    r, site = recipes.load_recipe("toy"), fake_trials.site
    fake_trials.wrong = {"tuned"}
    s = store.TrialSession("tune", "apptune tune toy --budget 2", started_unix=1_800_000_100.0)
    for i, name in enumerate(names):
        variant = "baseline" if i == 0 else "tuned"
        build = tmp_path / "w" / "builds" / variant
        localrun.build_variant(r, localrun.plan_for(r, variant, site), site, build)
        run = localrun.run_tier(
            r, "ci", build, tmp_path / "w" / "runs" / name, site, variant=f"gnu/{variant}"
        )
        s.add(run.run_dir)
    return s


def test_a_trial_session_is_stored_as_a_check_result_is_and_once(toy_root, tmp_path, fake_trials):
    from conftest import this_machine

    s = _trials(tmp_path, fake_trials)
    with store.History(tmp_path / "h") as h:
        assert h.ingest_trials(s) == (s.uuid, 2, True)
        # the same session again (the same uuid) is already stored
        again = store.TrialSession(s.tool, s.cmdline, s.started_unix, s.hostname, s.run_dirs)
        assert again.uuid == s.uuid and h.ingest_trials(again) == (s.uuid, 2, False)
        (run,) = h.db.execute("SELECT * FROM runs").fetchall()
        assert (run["kind"], run["mode"], run["cmdline"]) == ("trial", "tune", s.cmdline)
        assert (run["num_cases"], run["num_failures"]) == (2, 1)
        assert run["run_dir"] == str(tmp_path / "w" / "runs")
        assert run["started"] == "2027-01-15T08:01:40+00:00" and run["hostname"] == s.hostname
        res = h.results(s.uuid)
        assert [(r["test"], r["variant"], r["verified"], r["result"]) for r in res] == [
            ("trial-000-0", "gnu/baseline", 1, "pass"),
            ("trial-001-0", "gnu/tuned", 0, "fail"),
        ]
        good, bad = res
        assert (good["system"], good["app"], good["tier"], good["environment"]) == (
            "test:local",
            "toy",
            "ci",
            "gnu",
        )
        assert (
            good["figures"]["rate"] == (123.5, "op/s") and good["figures"]["wall_time"][0] == 0.25
        )
        assert good["quality_grade"] == "clean" and good["machine_id"] == this_machine()[0]
        assert (
            json.loads(good["energy"])
            == json.loads((tmp_path / "w/runs/trial-000-0/apptune-result.json").read_text())[
                "energy"
            ]
        )
        prov = h.db.execute(
            "SELECT json FROM provenance WHERE id = ?", (good["provenance_id"],)
        ).fetchone()[0]
        assert json.loads(prov)["variant"] == "baseline"
        assert bad["reason"].startswith("sum = 1.7")
        # never judged: not in the series, the runs, the stored modes or applications
        assert h.samples() == [] and h.runs() == [] and h.stored("mode") == []
        assert h.stored("app") == [] and h.stored("app", kind="trial") == ["toy"]
        assert {r["figure"] for r in h.samples(kind="trial")} == {"rate", "wall_time"}


def test_a_trial_record_reads_as_the_same_result_as_a_checks_record(
    toy_root, tmp_path, fake_trials
):
    """One reader of run records: the trial's record, found the way a check's is (a
    ReFrame test case whose stage directory holds it), gives the same result."""
    s = _trials(tmp_path, fake_trials, names=("trial-000-0",))
    (trial,) = store.read_trials(s).results
    tc = {
        "display_name": "trial-000-0",
        "result": "pass",
        "stagedir": str(s.run_dirs[0]),
        "system": "test",
        "partition": "local",
    }
    assert ingest._result(tc) == trial


def test_samples_leave_trials_out_unless_asked(toy_root, tmp_path, fake_trials):
    from apptune.history import regressions

    with store.History(tmp_path / "h") as h:
        h.ingest(_run(tmp_path, 1))
        h.ingest_trials(_trials(tmp_path, fake_trials))
        assert {r["app"] for r in h.samples()} == {"hpcc"}
        assert {r["app"] for r in h.samples(kind="trial")} == {"toy"}
        assert {r["app"] for r in h.samples(kind=None)} == {"hpcc", "toy"}
        assert [r["mode"] for r in h.runs()] == ["nightly"]
        assert [r["mode"] for r in h.runs(kind=None)] == ["tune", "nightly"]  # in time order
        assert h.runs(mode="tune") == [] and h.samples(mode="tune") == []
        assert {v.app for v in regressions.check(h)} == {"hpcc"}


def test_a_version_2_database_is_migrated_and_keeps_its_runs(toy_root, tmp_path, monkeypatch):
    hdir = tmp_path / "h"
    monkeypatch.setattr(store, "MIGRATIONS", store.MIGRATIONS[:2])
    monkeypatch.setattr(store, "SCHEMA_VERSION", 2)
    with store.History(hdir) as h:
        # a run as apptune stored it before trials were kept
        h.db.execute(
            "INSERT INTO runs (session_uuid, run_dir, started_unix, started, mode, ingested) "
            "VALUES ('old-1', '/runs/old', 5.0, '1970-01-01T00:00:05+00:00', 'nightly', 'x')"
        )
        h.db.execute(
            "INSERT INTO results (run_id, test, system, app, tier, environment, variant, "
            "result, verified, quality_grade) VALUES "
            "(1, 'HPCCCheck', 'local:default', 'hpcc', 'ci', 'gnu', 'baseline', 'pass', 1, "
            "'clean')"
        )
        h.db.execute("INSERT INTO figures (result_id, figure, value) VALUES (1, 'HPL', 9.5)")
        assert h.version() == 2
        assert "kind" not in {c[1] for c in h.db.execute("PRAGMA table_info(runs)")}
    monkeypatch.undo()
    with store.History(hdir) as h:
        assert h.version() == store.SCHEMA_VERSION == 5
        assert [(r["session_uuid"], r["kind"]) for r in h.runs()] == [("old-1", "check")]
        # version 4: the layout of a result stored before is not known
        assert [r["layout"] for r in h.verified_runs("ci")] == [None]
        assert [(r["figure"], r["value"]) for r in h.samples()] == [("HPL", 9.5)]
        assert h.machines() == {}  # the old run has no fingerprint stored
        assert h.ingest(_run(tmp_path, 2))[2] is True
        with pytest.raises(sqlite3.IntegrityError):
            h.db.execute("UPDATE runs SET kind = 'other'")


#: The identity and verdict every run record has.
TRIAL_IDENTITY = {
    "app": "toy",
    "tier": "ci",
    "variant": "tuned",
    "environment": "gnu",
    "verification": {"ok": True, "summary": "verified"},
}


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"app": "toy", "trial": tr', "not a run record: invalid JSON (Expecting value)"),
        (
            '{"app": "toy", "figures": {}}',
            "tier: required field is missing (and 3 more problem(s))",
        ),
        (
            json.dumps(dict(TRIAL_IDENTITY, trial=True, figures=[1])),
            "figures: must be a mapping",
        ),
        (json.dumps(TRIAL_IDENTITY), "trial: not the run record of a tune or bisect trial"),
    ],
)
def test_a_bad_trial_record_is_one_line_naming_the_file_and_stores_nothing(
    toy_root, tmp_path, fake_trials, text, match
):
    s = _trials(tmp_path, fake_trials)
    bad = s.run_dirs[1] / "apptune-result.json"
    bad.write_text(text)
    with store.History(tmp_path / "h") as h:
        with pytest.raises(ApptuneError) as e:
            h.ingest_trials(s)
        assert str(e.value) == f"w/runs/trial-001-0/apptune-result.json: {match}"
        assert h.db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    s.run_dirs[1].joinpath("apptune-result.json").unlink()
    with pytest.raises(ApptuneError, match="apptune-result.json: no run record: the trial did not"):
        store.read_trials(s)
