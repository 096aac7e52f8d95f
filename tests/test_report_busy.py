"""What a report says must hold when it is long or the machine was busy: every failed field
listed, nothing ranked from disturbed or too-short runs, each reason said once, program
output never reaching a terminal or a file as control sequences."""

import json

from conftest import write_run

from apptune import report

FLASHIO_FIELDS = [
    f"{f}_{v}"
    for f in ("chk", "plt_crn", "plt_cnt", "chk_unk")
    for v in ("dens", "pres", "temp", "velx")
]


def _failed_run(tmp_path, fields):
    """FLASH-IO's checkpoint with every field wrong: the run's verification as verify
    says it, each field's message in the summary."""
    comparisons = [
        {
            "field": f,
            "value": 1.5,
            "expected": "1.0 ± 1e-12",
            "ok": False,
            "message": f"{f} = 1.5, expected 1.0 ± 1e-12 (relative difference 5.0e-01)",
        }
        for f in fields
    ]
    run = write_run(
        tmp_path / "run",
        "f1a5f1a5",
        1.7e9,
        [
            {
                "app": "flashio",
                "tier": "ci",
                "environment": "gnu",
                "variant": "baseline",
                "figures": {"wall_time": 3.0},
                "ok": False,
                "fields": comparisons,
            }
        ],
        mode="ci",
    )
    (rec_file,) = run.glob("stage/**/apptune-result.json")
    rec = json.loads(rec_file.read_text())
    rec["verification"]["summary"] = "; ".join(c["message"] for c in comparisons)
    rec_file.write_text(json.dumps(rec))
    return run


def test_every_failed_field_is_listed_and_the_screen_summarises_them(tmp_path):
    run = _failed_run(tmp_path, FLASHIO_FIELDS)
    s = report.collect(run / "report.json")
    (f,) = s["failures"]
    assert len(f["reason"]) > 1000  # not cut: every field with its values
    assert all(f"{x} = 1.5, expected 1.0" in f["reason"] for x in FLASHIO_FIELDS)
    assert f["brief"] == ("16 fields failed: chk_dens, chk_pres, chk_temp, … (all in report.html)")
    _, md, html = report.write(run)
    assert all(f"{x} = 1.5, expected 1.0" in html.read_text() for x in FLASHIO_FIELDS)
    assert "16 fields failed: chk_dens, chk_pres, chk_temp, … (all in report.html)" in (
        md.read_text()
    )
    few = report.collect(_failed_run(tmp_path / "few", FLASHIO_FIELDS[:2]) / "report.json")
    assert few["failures"][0]["brief"] == few["failures"][0]["reason"]  # short: as it is


def test_each_skip_reason_is_said_once(tmp_path):
    """24 variants each skipped for a knob the node cannot set: one clause per kind of
    reason, not 24 on one line."""
    from test_run_lifecycle import _case, _report

    from apptune.constants import SKIP_FILE

    cases = []
    for i, mhz in enumerate(range(1200, 3600, 100)):
        stage = tmp_path / f"s{i}"
        stage.mkdir()
        knob = "cpu_freq" if i % 2 else "turbo"
        (stage / SKIP_FILE).write_text(
            f"{knob}={mhz}000: not in effect: asked {mhz} MHz, measured 2{i:03d} MHz "
            "(median on CPUs 0-1, tolerance 5%)\n"
        )
        cases.append(_case(f"FlashCheck %v={i}", "flashio", "skip", stagedir=stage))
    (reasons,) = report.untested_apps(_report(tmp_path, cases)).values()
    assert reasons == [
        "turbo=1200000: not in effect: asked 1200 MHz, measured 2000 MHz (median on CPUs "
        "0-1, tolerance 5%) (and 11 more like it)",
        "cpu_freq=1300000: not in effect: asked 1300 MHz, measured 2001 MHz (median on CPUs "
        "0-1, tolerance 5%) (and 11 more like it)",
    ]
    from apptune.report.collect import distinct

    many = distinct([f"reason {c}" for c in "abcdefg"])
    assert many[-1] == "and 3 other reason(s) (each under Skipped in report.html)"
    assert len(many) == 5


def test_a_program_that_only_writes_is_not_told_of_its_reads(tmp_path):
    scratch = {
        "root": "/var/tmp",
        "fstype": "ext4",
        "mount": "/",
        "bytes": 40 << 20,
        "memory_bytes": 24 << 30,
        "exceeds_memory": False,
    }
    rows = [
        {
            "app": app,
            "tier": "ci",
            "environment": "gnu",
            "variant": "baseline",
            "figures": {"wall_time": 3.0},
            "scratch": scratch,
        }
        for app in ("flashio", "h5perf")
    ]
    run = write_run(tmp_path / "run", "0f1a5101", 1.7e9, rows, mode="ci")
    for r in rows:  # write_run keeps only the fields it knows: the scratch part by hand
        (f,) = [
            p
            for p in run.glob("output/**/apptune-result.json")
            if json.loads(p.read_text())["app"] == r["app"]
        ]
        f.write_text(json.dumps(json.loads(f.read_text()) | {"scratch": scratch}))
    _, md, html = report.write(run)
    text = html.read_text()
    flashio = text[text.index("flashio — tier ci") : text.index("h5perf — tier ci")]
    h5perf = text[text.index("h5perf — tier ci") :]
    assert "writes may not have reached the disk)" in flashio and "reads" not in flashio
    assert "reads may come from memory" in h5perf


def test_the_header_counts_skipped_builds_as_reframe_does(tmp_path):
    """oneAPI's build skipped (its compilers missing) and its run skipped with it: ReFrame
    counts 2 skipped, and so does the report."""
    from test_run_lifecycle import _case, _report

    from apptune.constants import SKIP_FILE

    stage = tmp_path / "build"
    stage.mkdir()
    (stage / SKIP_FILE).write_text("compiler/tool icx, mpiicx not found on its PATH\n")
    cases = [
        _case("HPCCBuild %variant=tuned", "hpcc", "skip", "oneapi", fixture=True, stagedir=stage),
        _case("HPCCCheck %tier=ci", "hpcc", "skip", "oneapi", deps=["HPCCBuild_%variant=tuned"]),
        _case("HPCCBuild %variant=tuned", "hpcc", "pass", "gnu", fixture=True),
    ]
    f = _report(tmp_path, cases)
    rep = json.loads(f.read_text())
    rep["session_info"]["num_skipped"] = 2  # as ReFrame counted them
    f.write_text(json.dumps(rep))
    s = report.collect(f)
    assert len(s["skipped"]) == s["session"]["num_skipped"] == 2
    assert {x["reason"] for x in s["skipped"]} == {
        "compiler/tool icx, mpiicx not found on its PATH"
    }


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\r\x9b6n"


def test_terminal_escape_sequences_of_program_output_are_never_printed_or_stored(tmp_path, capsys):
    from apptune.core.verification import verify
    from apptune.errors import printable
    from apptune.models import OwnCheck

    assert printable(ESCAPES + "\tok\n") == (
        "\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\x0d\\x9b6n\tok\n"
    )
    # a forbidden line of the program's output, quoted by the verification
    checks = [OwnCheck(pattern="FAILED", forbid=True, message="no test FAILED")]
    v = verify.Verification("reference/x/ci.yaml", False, [], [])
    v.own_checks = verify.run_own_checks(checks, f"{ESCAPES} FAILED\n", "stdout")
    assert "\x1b" not in v.summary() and "\\x1b]0;owned" in v.summary()
    # a record that holds them (written by an older version, or by hand) and a skip reason
    run = _failed_run(tmp_path, ["sum"])
    (rec_file,) = run.glob("stage/**/apptune-result.json")
    rec = json.loads(rec_file.read_text())
    rec["verification"]["summary"] = f"sum = {ESCAPES}"
    rec["variant"] = f"baseline{ESCAPES}"
    rec_file.write_text(json.dumps(rec))
    _, md, html = report.write(run)
    for f in (md, html):
        text = f.read_text()
        assert not any(c in text for c in "\x1b\x07\r\x9b"), f
        assert "\\x1b]0;owned" in text
    s = report.collect(run / "report.json")
    for line in map(report.summary_line, s["summary"]):
        assert "\x1b" not in line and "\\x1b[2J" in line


def _npb_rows(grades, mg_seconds=0.5):
    from test_report_screen import row

    return [
        row(
            v,
            3.0,
            app="npb",
            figures={"cg_rate": rate, "mg_rate": 10 * rate, "wall_time": 3.0},
            values={"cg_seconds": 0.52, "mg_seconds": mg_seconds},
            quality={"grade": g, "reasons": ["other processes used 61% of the node's CPU time"]},
        )
        for (v, rate), g in zip((("baseline", 100.0), ("tuned", 248.0)), grades, strict=True)
    ]


def test_nothing_is_ranked_from_disturbed_runs():
    """Class S NPB on a busy machine: no 'fastest correct ×2.48' headline, the reason."""
    from test_report_screen import only_row, summarised

    s = summarised(_npb_rows(["disturbed", "disturbed"]))
    r = only_row(s)
    assert r["fastest"] is None and r["speedup"] is None
    assert r["no_ranking"] == "no ranking by cg_rate: gnu/baseline, gnu/tuned: disturbed run"
    (a,) = s["apps"]
    assert a["best"] == {} and all(not x.speedup for x in a["rows"])
    line = report.summary_line(s["summary"][0])
    assert "fastest" not in line and "no ranking by cg_rate: gnu/baseline, gnu/tuned" in line
    # one clean run, one disturbed: the clean one ranks, the other is named as left out
    r = only_row(summarised(_npb_rows(["clean", "disturbed"])))
    assert r["fastest"] == "gnu/baseline" and r["unranked"] == ["gnu/tuned: disturbed run"]
    assert r["reference"] == r["fastest"]  # no ratio said: it is the reference itself


def test_nothing_is_ranked_from_a_figure_too_short_to_time():
    """MG of class S timed in 2.8 ms: its rate ranks nothing, CG's (0.52 s) does."""
    from test_report_screen import summarised

    s = summarised(_npb_rows(["clean", "clean"], mg_seconds=0.0028))
    (a,) = s["apps"]
    assert a["best"]["cg_rate"] == "gnu/tuned" and "mg_rate" not in a["best"]
    assert a["unranked"]["mg_rate"] == {
        "gnu/baseline": "timed over 0.0028 s (less than 0.1 s)",
        "gnu/tuned": "timed over 0.0028 s (less than 0.1 s)",
    }
    tuned = a["rows"][1]
    assert tuned.speedup["cg_rate"] == 2.48 and "mg_rate" not in tuned.speedup


def test_each_variants_input_is_shown(tmp_path):
    """h5perf with xfer 1048575 in one variant: the shared input said once, the other in
    that variant's column."""
    rows = [
        {
            "app": "h5perf",
            "tier": "ci",
            "environment": "gnu",
            "variant": v,
            "figures": {"wall_time": 3.0},
            "input": {"bytes_per_rank": 8388608, "ranks": 2, "xfer": xfer},
        }
        for v, xfer in (("baseline", 1048576), ("tuned", 1048575))
    ]
    run = write_run(tmp_path / "run", "1a9e1a9e", 1.7e9, rows, mode="ci")
    _, md, html = report.write(run)
    text = md.read_text()
    assert (
        "Input of every variant (the others in the matrix): `bytes_per_rank=8388608`, `ranks=2`."
        in text
    )
    assert "| input | xfer=1048576 | xfer=1048575 |" in text
    assert "<code>xfer=1048575</code>" in html.read_text()


def test_a_stopped_runs_report_states_its_exit_status_and_what_never_ran(tmp_path):
    """SIGTERM during a FLASH-IO run: one variant verified, the gnu-mpich build aborted in
    its compile and its run never started. The report says exit status 143, not 0."""
    from apptune.commands import workflow

    row = {
        "app": "flashio",
        "tier": "ci",
        "environment": "gnu",
        "variant": "baseline",
        "figures": {"wall_time": 3.0},
    }
    run = write_run(tmp_path / "run", "5709a5e1", 1.7e9, [row], mode="ci")
    rep = json.loads((run / "report.json").read_text())
    build_stage = tmp_path / "run" / "stage" / "FlashioBuild"
    build_stage.mkdir(parents=True)
    common = {"system": "local", "partition": "default", "environ": "gnu-mpich", "app": "flashio"}
    rep["runs"][0]["testcases"] += [
        common
        | {
            "display_name": "FlashioBuild %variant=tuned",
            "unique_name": "FlashioBuild_1",
            "fixture": True,
            "result": "abort",
            "fail_phase": "compile_wait",
            "fail_reason": "aborted due to ForceExitError",
            "stagedir": str(build_stage),
        },
        common
        | {
            "display_name": "FlashioCheck %tier=ci %build.variant=tuned",
            "unique_name": "FlashioCheck_2",
            "fixture": False,
            "tier": "ci",
            "result": "abort",
            "fail_phase": None,
            "fail_reason": "aborted due to ForceExitError",
            "stagedir": None,
        },
    ]
    (run / "report.json").write_text(json.dumps(rep))
    assert report.collect(run / "report.json")["outcome"]["status"] == 0  # ReFrame alone
    workflow.note_stop(run, 15)
    s = report.collect(run / "report.json")
    assert s["outcome"] == {
        "status": 143,
        "why": ["stopped by SIGTERM: ReFrame aborted the run; 2 test case(s) aborted or never ran"],
    }
    assert [(x["test"], x["what"]) for x in s["aborted"]] == [
        ("FlashioBuild %variant=tuned", "build aborted in compile_wait"),
        ("FlashioCheck %tier=ci %build.variant=tuned", "run never started"),
    ]
    assert s["summary"][0]["aborted"] == 2
    assert "(2 test case(s) aborted: the run was stopped)" in report.summary_line(s["summary"][0])
    _, md, html = report.write(run)
    text = html.read_text()
    assert "<b>Exit status 143</b>" in text and "Exit status 0" not in text
    assert '<b id="n-aborted" class="bad">2</b> aborted or never run' in text
    assert "build aborted in compile_wait" in text and "run never started" in md.read_text()
