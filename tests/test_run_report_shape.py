"""A ReFrame run report of the wrong shape (cut short, hand-edited, of another program) is
one line naming the file and the field in `apptune history ingest` and `apptune report`,
never a traceback; one such run stops no other run of an ingest."""

import json
import sqlite3

import pytest
from conftest import hpcc_ci_run

from apptune import cli

CASE = {"display_name": "T", "unique_name": "T", "result": "pass"}
SESSION = {"uuid": "u1", "time_start_unix": 1.7e9}


def report(**over):
    return {"session_info": dict(SESSION), "runs": [{"testcases": [dict(CASE)]}], **over}


def session(**over):
    return report(session_info={"uuid": "u", **over})


def case(**over):
    return report(runs=[{"testcases": [dict(CASE, **over)]}])


BAD = [
    ([], None, "not a JSON object"),
    (report(runs=5), "runs", "list"),
    (report(runs=[5]), "runs[0]", ""),
    (report(session_info=[]), "session_info", ""),
    (report(session_info={"uuid": 7}), "session_info.uuid", "string"),
    (session(time_start_unix="yesterday"), "session_info.time_start_unix", ""),
    (session(time_start_unix=1e300), "session_info.time_start_unix", ""),
    (session(num_cases=-1), "session_info.num_cases", ""),
    (case(display_name=5), "runs[0].testcases[0].display_name", "string"),
    (report(runs=[{"testcases": [{"display_name": "T"}]}]),
     "runs[0].testcases[0].unique_name", "required"),
    (case(fixture="maybe"), "runs[0].testcases[0].fixture", ""),
    (case(perfvalues=[1, 2]), "runs[0].testcases[0].perfvalues", ""),
    (case(dependencies_actual=[5]), "runs[0].testcases[0].dependencies_actual[0]", ""),
    (case(stagedir={"a": 1}), "runs[0].testcases[0].stagedir", ""),
]  # fmt: skip


@pytest.mark.parametrize("data, field, words", BAD, ids=[b[1] or "top" for b in BAD])
@pytest.mark.parametrize("command", ["history", "report"])
def test_a_report_of_the_wrong_shape_is_one_line(tmp_path, capsys, data, field, words, command):
    run = tmp_path / "run"
    run.mkdir()
    f = run / "report.json"
    f.write_text(json.dumps(data))
    argv = (
        ["history", "ingest", "--history", str(tmp_path / "h"), str(run)]
        if command == "history"
        else ["report", str(run), "--no-history"]
    )
    assert cli.main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("apptune: error:")]
    assert len(err) == 1, err
    assert err[0].startswith(f"apptune: error: {f}: " + (f"{field}: " if field else "")), err
    assert words in err[0]


@pytest.mark.parametrize(
    "text, words", [("{", "invalid JSON"), ("\udcff", "invalid JSON"), (None, "did the run start")]
)
def test_a_report_that_is_not_json_or_not_there(tmp_path, capsys, text, words):
    run = tmp_path / "run"
    run.mkdir()
    if text is not None:
        (run / "report.json").write_bytes(text.encode(errors="surrogateescape"))
    assert cli.main(["history", "ingest", "--history", str(tmp_path / "h"), str(run)]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("apptune: error")]
    assert f"{run / 'report.json'}: " in line and words in line


def test_one_bad_report_stops_no_other_run_of_an_ingest(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "report.json").write_text(json.dumps(case(display_name=None)))
    good = hpcc_ci_run(tmp_path / "good")
    argv = ["history", "ingest", "--history", str(tmp_path / "h"), str(bad), str(good)]
    assert cli.main(argv) == 2
    cap = capsys.readouterr()
    assert "bad/report.json: runs[0].testcases[0].display_name" in cap.err
    assert f"{good}: session u1: 1 results stored" in cap.out
    assert "(1 run(s) not stored)" in cap.out


def test_a_bad_session_of_reframes_database_is_one_line(tmp_path, capsys):
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions (uuid, json_blob, report_file, session_start_unix)")
    con.execute("INSERT INTO sessions VALUES ('s1', ?, NULL, 1)", (json.dumps(case(fixture=[])),))
    con.execute("INSERT INTO sessions VALUES ('s2', '{not json', NULL, 2)")
    con.commit()
    con.close()
    argv = ["history", "ingest", "--history", str(tmp_path / "h"), "--reframe-db", str(db)]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"apptune: error: {db}: sessions.s2: not a ReFrame run report")
    assert cli.main([*argv, "s1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "runs[0].testcases[0].fixture" in line
