"""What a run keeps of the site's variables: names always, values only where they can
change a result, a secret's never (a keyed hash, so that a change is still named)."""

import os
import stat
from pathlib import Path

from conftest import write_run

from apptune.core.data import recipes
from apptune.core.judge import baselines, changes
from apptune.core.run import envrecord, localrun
from apptune.history import records
from apptune.history import store as hist
from apptune.models import RunRecord

SECRET = "ghp_s3cretTokenValue123"


def test_names_always_values_of_what_can_change_a_result_never_a_secrets(tmp_path):
    env = {
        "OMP_NUM_THREADS": "2",
        "OMPI_MCA_btl": "self,tcp",
        "LD_LIBRARY_PATH": "/opt/blis/lib",
        "GITHUB_TOKEN": SECRET,
        "MY_PASSWORD": "hunter2",
        "MY_SITE_SETTING": "x",
        "UCX_NET_KEY": "k1",  # allow-listed pattern, but a secret's name
    }
    got = envrecord.record(env)
    assert set(got) == set(env)
    assert got["OMP_NUM_THREADS"] == "2" and got["OMPI_MCA_btl"] == "self,tcp"
    assert got["LD_LIBRARY_PATH"] == "/opt/blis/lib"
    for k in ("GITHUB_TOKEN", "MY_PASSWORD", "MY_SITE_SETTING", "UCX_NET_KEY"):
        assert envrecord.is_hidden(got[k]) and env[k] not in got[k], k
    # the site extends the list; a secret's name stays hidden even when a pattern matches it
    site = envrecord.record(env, ["MY_SITE_*", "GITHUB_*"])
    assert site["MY_SITE_SETTING"] == "x" and envrecord.is_hidden(site["GITHUB_TOKEN"])
    # a recipe's own values are data, a secret's name is not
    assert envrecord.record({"HDF5_X": "a", "API_KEY": "b"}, data=True)["HDF5_X"] == "a"
    assert envrecord.is_hidden(envrecord.record({"API_KEY": "b"}, data=True)["API_KEY"])
    # hidden again is unchanged; the key lives in the history directory, readable by its owner
    assert envrecord.record(got) == got
    key = Path(os.environ["APPTUNE_HISTORY"]) / envrecord.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_change_of_a_hidden_value_is_named_without_it():
    a = envrecord.record({"GITHUB_TOKEN": SECRET})["GITHUB_TOKEN"]
    b = envrecord.record({"GITHUB_TOKEN": SECRET + "2"})["GITHUB_TOKEN"]
    assert a != b and envrecord.compare(a, b) == "changed"
    assert envrecord.compare(a, a) == "same"
    # another history's key, or a value recorded before values were hidden: not comparable
    other = "hidden:00000000:0123456789abcdef"
    assert envrecord.compare(a, other) == "unknown" and envrecord.compare(SECRET, a) == "unknown"
    lines = changes.describe({"env GITHUB_TOKEN": a}, {"env GITHUB_TOKEN": b})
    assert lines == ["env GITHUB_TOKEN: changed (its value is not recorded)"]
    assert changes.describe({"env GITHUB_TOKEN": SECRET}, {"env GITHUB_TOKEN": b}) == []
    assert changes.describe({}, {"env GITHUB_TOKEN": b}) == [
        "env GITHUB_TOKEN: (none) → (set, its value not recorded)"
    ]


def _grep(where: Path, text: str) -> list[str]:
    """Every file under ``where`` holding ``text`` (SQLite's WAL included)."""
    hits = []
    for f in [where] if where.is_file() else where.rglob("*"):
        if f.is_file() and text.encode() in f.read_bytes():
            hits.append(str(f))
    return hits


def test_a_secret_of_the_sites_environment_reaches_no_file_the_harness_writes(
    toy_root, tmp_path, fake_trials, monkeypatch
):
    """A cluster file's ``env_vars: {GITHUB_TOKEN: ghp_...}``: the run record, the run
    directory, the history and the baseline file hold its name and a keyed hash; a change
    of its value is named, by its name; the process's own environment is not recorded."""
    monkeypatch.setenv("APPTUNE_TEST_OWN_VARIABLE", "mine")
    site = fake_trials.site
    r = recipes.load_recipe("toy")
    plan = localrun.plan_for(r, "tuned", site)
    localrun.build_variant(r, plan, site, tmp_path / "b")
    recs = []
    for i, token in enumerate((SECRET, SECRET + "x")):
        env = {"GITHUB_TOKEN": token, "OMP_PROC_BIND": "close"}
        site.declared = {"modules": [], "env_vars": env}
        localrun.run_tier(r, "ci", tmp_path / "b", tmp_path / f"run{i}", site)
        recs.append(records.load_record(tmp_path / f"run{i}"))
    launch = recs[0].launch
    assert launch.env_vars["OMP_PROC_BIND"] == "close"
    assert envrecord.is_hidden(launch.env_vars["GITHUB_TOKEN"])
    assert "APPTUNE_TEST_OWN_VARIABLE" not in launch.env_vars
    assert not _grep(tmp_path / "run0", SECRET) and not _grep(tmp_path / "run1", SECRET)
    # the history: the record as written, and one written before values were hidden
    h = Path(os.environ["APPTUNE_HISTORY"])
    with hist.History(h) as db:
        for i, rec in enumerate(recs):
            row = {k: v for k, v in rec.data().items() if k in ("app", "tier", "environment")}
            row |= {"variant": "tuned", "figures": rec.figures, "launch": rec.data()["launch"]}
            db.ingest(write_run(tmp_path / f"night{i}", f"n{i}", 1.7e9 + i, [row]))
        old = dict(row, launch={"env_vars": {"GITHUB_TOKEN": SECRET}})
        db.ingest(write_run(tmp_path / "old", "o1", 1.7e9 + 9, [old]))
    assert not _grep(h, SECRET)
    assert stat.S_IMODE((h / hist.DB_FILE).stat().st_mode) & 0o077 == 0
    # the baseline file
    f, notes = baselines.update("local", "toy", [recs[0]])
    assert "env GITHUB_TOKEN: " in f.read_text() and not _grep(f, SECRET), notes
    _, b = baselines.load("local", "toy")
    changed = baselines.what_changed(b.entries[0], recs[1])
    assert changed == ["env GITHUB_TOKEN: changed (its value is not recorded)"]
    assert baselines.what_changed(b.entries[0], recs[0]) == []
    assert isinstance(recs[1], RunRecord)


def test_the_history_database_is_not_readable_by_others(tmp_path):
    d = tmp_path / "h"
    with hist.History(d):
        pass
    assert stat.S_IMODE((d / hist.DB_FILE).stat().st_mode) == 0o600
    os.chmod(d / hist.DB_FILE, 0o644)  # made by an older apptune
    with hist.History(d):
        pass
    assert stat.S_IMODE((d / hist.DB_FILE).stat().st_mode) == 0o640
