"""`apptune run` and `check-regressions` never pass a run that tested nothing, never
share a run directory, and stop cleanly on SIGTERM/SIGINT/SIGHUP.

The integration tests run the toy application of conftest.py through real ReFrame
(a few seconds each)."""

import contextlib
import datetime
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO, TOY_ACC, TOY_MAIN, TOY_MAKEFILE, make_tarball, write_run

from apptune import cli, report
from apptune.commands import run as run_command
from apptune.commands import workflow
from apptune.constants import RESULT_FILE, SKIP_FILE
from apptune.core.data.site import load_site
from apptune.core.run import supervise
from apptune.history import records, store

REFRAME = str(Path(sys.executable).with_name("reframe"))

APPTUNE = [sys.executable, "-m", "apptune"]
ONEAPI_SKIP = "environment 'oneapi': compiler/tool icx, mpiicx not found on its PATH"


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("apptune: error:")]


# ------------------------------------------------------------------ run directories
def _stamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%Y%m%dT%H%M%S")


def test_a_run_directory_taken_in_the_same_second_gets_a_suffix(tmp_path):
    now = time.time()
    for k in range(60):  # the plain names of this minute are taken
        (tmp_path / f"{_stamp(now + k)}-ci").mkdir()
    first, second = workflow.new_run_dir(tmp_path, "ci"), workflow.new_run_dir(tmp_path, "ci")
    assert first.is_dir() and first.name.endswith("-ci-2"), first
    assert second.is_dir() and second != first and second.name.rsplit("-", 1)[1] in ("2", "3"), (
        second
    )


def _new(base):
    return str(workflow.new_run_dir(Path(base), "ci"))


@pytest.mark.slow
def test_run_directories_made_at_once_are_distinct(tmp_path):
    with ProcessPoolExecutor(6) as ex:
        dirs = list(ex.map(_new, [tmp_path] * 24))
    assert len(set(dirs)) == 24 and all(Path(d).is_dir() for d in dirs)


def _flip_latest(args):
    runs, target, n = args
    os.environ["APPTUNE_RUNS"] = runs
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        for _ in range(n):
            workflow.point_latest(Path(target))
    return err.getvalue()


@pytest.mark.slow
def test_latest_is_replaced_in_one_step_by_concurrent_runs(tmp_path):
    runs = tmp_path / "runs"
    targets = [runs / "a", runs / "b"]
    for t in targets:
        t.mkdir(parents=True)
    latest = runs / "latest"
    with ProcessPoolExecutor(2) as ex:
        futures = [ex.submit(_flip_latest, (str(runs), str(t), 300)) for t in targets]
        seen = missing = 0
        while not all(f.done() for f in futures):  # once there, `latest` is never missing
            if latest.is_symlink():
                seen += 1
            elif seen:
                missing += 1
        notes = [f.result() for f in futures]
    assert missing == 0 and notes == ["", ""]  # and no "could not point" note
    assert Path(os.readlink(latest)) in targets
    assert sorted(p.name for p in runs.iterdir()) == ["a", "b", "latest"]  # no temporary link left


# ------------------------------------------------------------------ nothing tested
def _case(name, app, result, env="gnu", fixture=False, stagedir=None, deps=()):
    return {
        "display_name": name,
        "unique_name": name.replace(" ", "_"),
        "app": app,
        "environ": env,
        "result": result,
        "fixture": fixture,
        "stagedir": str(stagedir) if stagedir else None,
        "outputdir": None,
        "fail_reason": None,
        "system": "local",
        "partition": "default",
        "dependencies_actual": [[d, "local:default", env] for d in deps],
    }


def _report(tmp_path, cases) -> Path:
    f = tmp_path / "report.json"
    f.write_text(
        json.dumps(
            {
                "session_info": {
                    "uuid": uuid.uuid4().hex,
                    "time_start_unix": 1.0,
                    "num_cases": len(cases),
                    "cmdline": "reframe --mode ci -r",
                },
                "runs": [{"testcases": cases}],
            }
        )
    )
    return f


def test_an_application_with_every_case_skipped_is_untested(tmp_path):
    stage = tmp_path / "build"
    stage.mkdir()
    (stage / SKIP_FILE).write_text(ONEAPI_SKIP + "\n")
    cases = [
        _case("ToySource", "toy", "pass", "oneapi", fixture=True),
        _case("ToyBuild %variant=baseline", "toy", "skip", "oneapi", fixture=True, stagedir=stage),
        _case("ToyCheck %tier=ci", "toy", "skip", "oneapi", deps=["ToyBuild_%variant=baseline"]),
        # another application tested in one environment, skipped in the other: fine
        _case("HPCCCheck %tier=ci %build.variant=tuned", "hpcc", "pass", "gnu"),
        _case("HPCCBuild %variant=tuned", "hpcc", "skip", "oneapi", fixture=True, stagedir=stage),
        _case(
            "HPCCCheck %tier=ci %build.variant=tuned",
            "hpcc",
            "skip",
            "oneapi",
            deps=["HPCCBuild_%variant=tuned"],
        ),
        # an expected build failure is a result; a plain ReFrame check has no app
        _case("QEBuild %variant=tuned", "qe", "xfail", "llvm", fixture=True),
        _case("QECheck %tier=ci", "qe", "skip", "llvm", deps=["QEBuild_%variant=tuned"]),
        {**_case("StreamTest", None, "skip"), "app": "<undefined>"},
    ]
    assert report.untested_apps(_report(tmp_path, cases)) == {"toy": [ONEAPI_SKIP]}


def test_a_skipped_run_of_a_passing_build_is_untested(tmp_path):
    stage = tmp_path / "run"
    stage.mkdir()
    (stage / SKIP_FILE).write_text("placement 'bound' has no launcher options for MPI 'mpich'\n")
    cases = [
        _case("NetpipeBuild %variant=tuned", "netpipe", "pass", fixture=True),
        _case("NetpipeCheck %placement=bound", "netpipe", "skip", stagedir=stage),
    ]
    assert report.untested_apps(_report(tmp_path, cases)) == {
        "netpipe": ["placement 'bound' has no launcher options for MPI 'mpich'"]
    }


FAKE_REFRAME = """\
import sys
report = sys.argv[sys.argv.index("--report-file") + 1]
open(report, "w").write(open(sys.argv[1]).read())
"""


def test_run_that_skipped_every_case_of_an_application_fails_with_one_line(
    toy_root, tmp_path, monkeypatch, capsys
):
    shutil.copytree(REPO / "site-config", toy_root / "site-config", dirs_exist_ok=True)
    stage = tmp_path / "build"
    stage.mkdir()
    (stage / SKIP_FILE).write_text(ONEAPI_SKIP + "\n")
    rep = _report(
        tmp_path,
        [
            _case(
                "ToyBuild %variant=baseline", "toy", "skip", "oneapi", fixture=True, stagedir=stage
            ),
            _case(
                "ToyCheck %tier=ci", "toy", "skip", "oneapi", deps=["ToyBuild_%variant=baseline"]
            ),
        ],
    )
    fake = tmp_path / "fake_reframe.py"
    fake.write_text(FAKE_REFRAME)
    monkeypatch.setenv("APPTUNE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(
        run_command,
        "reframe_command",
        lambda root, mode, checks, run_dir, config, extra: [
            sys.executable,
            str(fake),
            str(rep),
            "--report-file",
            str(run_dir / "report.json"),
        ],
    )
    assert cli.main(["run", "--mode", "ci"]) == 1
    out, err = capsys.readouterr()
    assert _errors(err) == [f"apptune: error: toy: nothing tested: {ONEAPI_SKIP}"], err
    assert "apptune: report" in out  # the run is still stored and reported


# ------------------------------------------------------------------ the supervisor
CHILD = """\
import os, signal, subprocess, sys, time
out, marker, mode = sys.argv[1:4]
def stop(signum, frame):
    open(out, "a").write(f"got {signum}\\n")
    if mode == "graceful":
        sys.exit(3)
# an orphan in a session of its own: the child's process group does not hold it
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", marker]
subprocess.Popen(sleeper, start_new_session=True)
signal.signal(signal.SIGTERM, stop if mode != "stubborn" else signal.SIG_IGN)
# a shell that started the tests in the background leaves SIGINT ignored: the default here
signal.signal(signal.SIGINT, signal.SIG_DFL)
open(out, "a").write("started\\n")
for _ in range(2400):   # a test that went wrong ends after 2 minutes instead of hanging
    time.sleep(0.05)
sys.exit(99)
"""


def _alive_with(marker: str) -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes()
                state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmd and state != "Z":
                pids.append(int(d))
    return pids


def _signal_when(path: Path, text: str, sig: int):
    def go():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.is_file() and text in path.read_text():
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.02)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.slow
def test_supervisor_forwards_the_signal_once_and_stops_what_is_left(tmp_path, sig):
    out, marker = tmp_path / "child.log", f"apptune-test-{uuid.uuid4().hex}"
    mode = "graceful" if sig == signal.SIGTERM else "default"
    # the signal under test as an interactive shell leaves it (make run in the background
    # inherits SIGINT ignored, which the supervisor rightly keeps ignored)
    inherited = signal.signal(sig, signal.SIG_DFL)
    before = [signal.getsignal(x) for x in supervise.STOP_SIGNALS]
    try:
        with supervise.Supervisor() as s:
            t = _signal_when(out, "started", sig)
            rc = s.run([sys.executable, "-c", CHILD, str(out), marker, mode])
            t.join()
            assert s.signum == sig
            os.kill(os.getpid(), signal.SIGTERM)  # held back after the child ended
            assert s.signum == sig
        assert rc == (3 if mode == "graceful" else 128 + sig)
        assert out.read_text().count("got") == (1 if mode == "graceful" else 0)
        assert s.leftovers and _alive_with(marker) == []  # the orphan in its own session is gone
        assert [signal.getsignal(x) for x in supervise.STOP_SIGNALS] == before
    finally:
        signal.signal(sig, inherited)
        for pid in _alive_with(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_supervisor_kills_a_child_that_ignores_the_signal(tmp_path):
    out, marker = tmp_path / "child.log", f"apptune-test-{uuid.uuid4().hex}"
    try:
        with supervise.Supervisor(grace=1.0) as s:
            t = _signal_when(out, "started", signal.SIGTERM)
            rc = s.run([sys.executable, "-c", CHILD, str(out), marker, "stubborn"])
            t.join()
        assert rc == 128 + signal.SIGKILL and s.signum == signal.SIGTERM
        assert _alive_with(marker) == []
    finally:
        for pid in _alive_with(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_supervisor_leaves_the_other_children_of_this_process_alone(tmp_path):
    marker = f"apptune-test-{uuid.uuid4().hex}"
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    try:
        with supervise.Supervisor() as s:
            assert s.run([sys.executable, "-c", "pass"]) == 0
        assert s.leftovers == [] and mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


def test_supervisor_keeps_an_ignored_signal_ignored(tmp_path):
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with supervise.Supervisor():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


# ------------------------------------------------------------------ check-regressions
def _history(tmp_path) -> Path:
    hdir = tmp_path / "h"
    with store.History(hdir) as h:
        for i in range(3):
            h.ingest(
                write_run(
                    tmp_path / f"r{i}",
                    f"uuid-{i}",
                    1_800_000_000 + 3600 * i,
                    [
                        {
                            "app": "hpcc",
                            "tier": "ci",
                            "environment": "gnu",
                            "variant": "tuned",
                            "figures": {"HPL": 10.0 + 0.01 * i},
                        }
                    ],
                )
            )
    return hdir


def test_check_regressions_without_a_history_database_creates_none(tmp_path, capsys):
    hdir = tmp_path / "nowhere"
    assert cli.main(["check-regressions", "--history", str(hdir)]) == 2
    err = capsys.readouterr().err
    assert len(_errors(err)) == 1 and "history.sqlite: no history database here" in err
    assert not hdir.exists()
    assert cli.main(["history", "list", "--history", str(hdir)]) == 2
    assert len(_errors(capsys.readouterr().err)) == 1 and not hdir.exists()


def test_check_regressions_of_an_unknown_application_lists_the_known_ones(tmp_path, capsys):
    hdir = _history(tmp_path)
    assert cli.main(["check-regressions", "--history", str(hdir), "--app", "hpc"]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert "--app: unknown application 'hpc'" in line and "hpcc" in line and "examl" in line


@pytest.mark.parametrize("option", [["--mode", "ci"], ["--system", "cluster"], ["--app", "examl"]])
def test_check_regressions_over_nothing_is_not_a_pass(tmp_path, capsys, option):
    hdir = _history(tmp_path)
    assert cli.main(["check-regressions", "--history", str(hdir)]) == 0
    capsys.readouterr()
    assert cli.main(["check-regressions", "--history", str(hdir), *option]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert (
        f"selected by {' '.join(option)}" in line
        and "modes nightly" in line
        and "systems local:default" in line
        and "apps hpcc" in line
    ), line


def test_a_first_night_with_nothing_clean_says_why_and_exits_0(tmp_path, capsys):
    """A new cluster: 16 verified results stored, all disturbed. Not a failure, not bad input
    (exit 0, as docs/regressions.md says): one line counts what is stored and what is needed."""
    hdir = tmp_path / "h"
    disturbed = {"grade": "disturbed", "reasons": ["other processes used 30 % of 2 CPUs"]}
    with store.History(hdir) as h:
        h.ingest(
            write_run(
                tmp_path / "night1",
                "uuid-n1",
                1_800_000_000,
                [
                    {
                        "app": "netpipe",
                        "tier": "nightly",
                        "environment": "gnu",
                        "variant": f"v{i}",
                        "figures": {"latency": 1.0},
                        "quality": disturbed,
                    }
                    for i in range(16)
                ],
            )
        )
    out_json = tmp_path / "regressions.json"
    rc = cli.main(
        ["check-regressions", "--history", str(hdir), "--mode", "nightly", "--json", str(out_json)]
    )
    out = capsys.readouterr()
    assert rc == 0 and _errors(out.err) == [], out
    (line,) = out.out.splitlines()
    assert line.startswith(
        "apptune: check-regressions: nothing to judge yet: 16 result(s) stored selected by "
        f"--mode nightly in {(hdir / 'history.sqlite').resolve()}: 16 disturbed"
    ), line
    assert "0 not verified, 0 clean; a series needs 3 clean verified runs" in line
    assert json.loads(out_json.read_text()) == []


# ------------------------------------------------------------------ real runs
PAUSE_MAIN = TOY_MAIN.replace(
    "int main(void) {",
    "#include <unistd.h>\nint main(void) {\n#ifdef TOY_PAUSE\n    sleep(600);\n#endif",
)
TOY_CHECK = """
import reframe as rfm
from reframe.core.builtins import fixture, parameter
from apptune.rfm import AppBuild, AppRun, SourceFetch
from apptune.core.data.recipes import all_variants, load_recipe
RECIPE = load_recipe('toy')
class ToySource(SourceFetch):
    app = 'toy'
class ToyBuild(AppBuild):
    app = 'toy'
    source = fixture(ToySource, scope='session')
    variant = parameter(all_variants(RECIPE), loggable=True)
@rfm.simple_test
class ToyCheck(AppRun):
    app = 'toy'
    tier = parameter(list(RECIPE.tiers), loggable=True)
    build = fixture(ToyBuild, scope='environment')
"""


def toy_checks(root: Path, variants: str) -> Path:
    """The toy application as a ReFrame check in ``root``, with the site config, a
    ``pause`` axis (``pause=always``: the program sleeps 10 minutes) and the tier's
    ``variants`` (YAML flow mapping)."""
    shutil.copytree(REPO / "site-config", root / "site-config", dirs_exist_ok=True)
    (root / "reframe-checks/toy").mkdir(parents=True)
    (root / "reframe-checks/toy/toy.py").write_text(TOY_CHECK)
    tarball = make_tarball({"main.c": PAUSE_MAIN, "acc.c": TOY_ACC, "Makefile": TOY_MAKEFILE})
    (Path(os.environ["APPTUNE_SOURCE_MIRROR"]) / "toy-1.0.tar.gz").write_bytes(tarball)
    rec = (root / "build-recipes/toy.yaml").read_text()
    rec = rec.replace(rec.split("sha256: ")[1].split()[0], hashlib.sha256(tarball).hexdigest())
    rec = rec.replace(
        "    openblas: {library: openblas}\n",
        "    openblas: {library: openblas}\n"
        "  pause:\n    never: {}\n    always: {cppflags: [-DTOY_PAUSE]}\n",
    )
    rec = rec.replace("defaults: {blas: openblas}", "defaults: {blas: openblas, pause: never}")
    rec = rec.replace("variants:\n      gnu: [baseline, tuned]", f"variants: {variants}")
    (root / "build-recipes/toy.yaml").write_text(rec)
    (root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ (app_cflags + cflags + cppflags) | makeflags }}\n"
    )
    return root


def _run(args, env=None, **kw):
    return subprocess.run(
        APPTUNE + ["run", "--mode", "dev", "-c", "reframe-checks/toy", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        **kw,
    )


@pytest.mark.parametrize(
    "options,environments",
    [
        (["--mode", "ci", "-p", "llvm$"], ["llvm"]),
        (["--mode", "dev", "-p", "gnu"], ["gnu", "gnu-mpich"]),  # ReFrame's regex, from the start
        (["--mode", "ci", "-p", "gnu$", "-p", "llvm"], ["gnu", "llvm"]),
        (["-p", "gnu-mpich"], ["gnu-mpich"]),
        (["--mode", "ci"], ["gnu", "gnu-mpich", "llvm"]),
    ],
)
def test_reframes_p_selects_the_environments_also_with_an_execution_mode(
    toy_root, options, environments
):
    toy_checks(toy_root, "{gnu: [baseline], gnu-mpich: [baseline], llvm: [baseline]}")
    r = subprocess.run(
        [REFRAME, "-C", "site-config/settings.py", "-c", "reframe-checks/toy", "-lC", *options],
        capture_output=True,
        text=True,
        cwd=toy_root,
        env=dict(os.environ, APPTUNE_ROOT=str(toy_root), RFM_ENABLE_RESULTS_STORAGE="0"),
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cases = [ln for ln in r.stdout.splitlines() if ln.startswith("- ToyCheck")]
    assert sorted(ln.rsplit("+", 1)[1] for ln in cases) == environments, r.stdout


@pytest.mark.integration
def test_an_application_whose_debian_package_is_missing_is_skipped_naming_it(toy_root, tmp_path):
    toy_checks(toy_root, "{gnu: [baseline]}")
    recipe = toy_root / "build-recipes/toy.yaml"
    recipe.write_text(
        recipe.read_text().replace(
            "\nbuild:\n", "\nrequires:\n  debian: [apptune-no-such-package]\nbuild:\n"
        )
    )
    p = _run(["--no-history", "--run-dir", str(tmp_path / "run")])
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    (line,) = _errors(p.stderr)
    assert line.startswith("apptune: error: toy: nothing tested: ") and line.endswith(
        "build-recipes/toy.yaml: requires.debian: Debian package apptune-no-such-package "
        "not installed (ci/bootstrap.sh installs it)"
    ), line
    assert not list((tmp_path / "run").rglob("compile-lines.jsonl"))  # nothing was built


@pytest.mark.integration
def test_two_runs_started_in_the_same_second_keep_apart(toy_root, tmp_path):
    toy_checks(toy_root, "{gnu: [baseline]}")
    bad = tmp_path / "bad-tree"
    shutil.copytree(toy_root, bad)
    ref = bad / "reference/toy/ci.yaml"
    ref.write_text(ref.read_text().replace("1.6449330668", "1.7"))
    runs = tmp_path / "runs"
    now = time.time()
    for k in range(120):  # the plain names of the next two minutes are taken: both need a suffix
        (runs / f"{_stamp(now + k)}-dev").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, APPTUNE_RUNS=str(runs))
    procs = {
        name: subprocess.Popen(
            APPTUNE + ["run", "--mode", "dev", "-c", "reframe-checks/toy"],
            env=dict(env, APPTUNE_ROOT=str(root)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, root in (("good", toy_root), ("bad", bad))
    }
    out = {name: p.communicate(timeout=600)[0] for name, p in procs.items()}
    rcs = {name: p.returncode for name, p in procs.items()}
    assert rcs == {"good": 0, "bad": 1}, out
    dirs = {}
    for name, text in out.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith("apptune: report ")]
        dirs[name] = Path(line.split()[2]).parent
        assert dirs[name].parent == runs and dirs[name].name.split("-dev")[1].startswith("-"), dirs[
            name
        ]
    assert dirs["good"] != dirs["bad"]
    summary = {n: json.loads((d / "summary.json").read_text()) for n, d in dirs.items()}
    assert summary["good"]["failures"] == [] and summary["good"]["results"][0]["verified"]
    assert any("sum" in f["reason"] for f in summary["bad"]["failures"]), summary["bad"]["failures"]
    with store.History() as h:
        stored = {r["run_dir"]: r["session_uuid"] for r in h.runs()}
    assert stored == {
        str(d): json.loads((d / "report.json").read_text())["session_info"]["uuid"]
        for d in dirs.values()
    }
    assert Path(os.readlink(runs / "latest")) in dirs.values()


def _procs_of(run_dir: Path) -> list[tuple[int, str]]:
    """Processes whose command line or working directory is in the run directory."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = (
                Path(f"/proc/{d}/cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
            cwd = os.readlink(f"/proc/{d}/cwd")
            state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (str(run_dir) in cmd or cwd.startswith(str(run_dir))):
            found.append((int(d), cmd))
    return found


@pytest.mark.integration
def test_sigterm_stops_the_run_stores_what_completed_and_leaves_nothing(toy_root, tmp_path):
    toy_checks(toy_root, "{gnu: [baseline, baseline+pause=always]}")
    run_dir = tmp_path / "run"
    p = subprocess.Popen(
        APPTUNE
        + [
            "run",
            "--mode",
            "dev",
            "--run-dir",
            str(run_dir),
            "-c",
            "reframe-checks/toy",
            "--",
            "--exec-order=name",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            done = list((run_dir / "output").rglob(RESULT_FILE))
            if done and any(
                c.split()[:1] and c.split()[0].endswith("/toy") for _, c in _procs_of(run_dir)
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the run did not reach the pausing program: {p.communicate()[0][-3000:]}")
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=supervise.GRACE_S + 120)[0]
        assert p.returncode == 143, out[-3000:]
        assert _procs_of(run_dir) == []
        assert _errors(out) == [
            "apptune: error: stopped by SIGTERM: ReFrame aborted the run; "
            "the tests that completed are stored and in the report"
        ], out[-3000:]
        cases = {
            tc["display_name"]: tc["result"]
            for r in json.loads((run_dir / "report.json").read_text())["runs"]
            for tc in r["testcases"]
            if not tc["fixture"]
        }
        assert cases == {
            "ToyCheck %tier=ci %build.variant=baseline": "pass",
            "ToyCheck %tier=ci %build.variant=baseline+pause=always": "abort",
        }
        summary = json.loads((run_dir / "summary.json").read_text())
        assert [r["variant"] for r in summary["results"] if r["verified"]] == ["baseline"]
        # the report states the status the command exited with, and what the stop aborted
        assert summary["outcome"]["status"] == 143, summary["outcome"]
        assert [x["test"] for x in summary["aborted"]] == [
            "ToyCheck %tier=ci %build.variant=baseline+pause=always"
        ]
        html = (run_dir / "report.html").read_text()
        assert "<b>Exit status 143</b>" in html and 'id="n-aborted"' in html
        with store.History() as h:
            (run,) = h.runs()
            got = {
                r["variant"]: (r["result"], r["verified"])
                for r in h.db.execute("SELECT * FROM results WHERE run_id = ?", (run["id"],))
            }
        assert got["baseline"] == ("pass", 1)
    finally:
        if p.poll() is None:
            p.kill()
        for pid, _ in _procs_of(run_dir):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.integration
def test_a_run_whose_only_environment_is_skipped_fails_with_one_line(toy_root, tmp_path):
    toy_checks(toy_root, "{gnu: [baseline], oneapi: [baseline]}")
    p = _run(["--run-dir", str(tmp_path / "oneapi"), "--", "-S", "valid_prog_environs=oneapi"])
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr
    assert _errors(p.stderr) == [f"apptune: error: toy: nothing tested: {ONEAPI_SKIP}"], p.stderr
    # the same application tested with gnu while oneapi is skipped: a pass, the skip is in the
    # report
    p = _run(["--run-dir", str(tmp_path / "both")])
    assert p.returncode == 0 and _errors(p.stderr) == [], p.stdout[-3000:] + p.stderr
    summary = json.loads((tmp_path / "both/summary.json").read_text())
    # the oneapi build and its run, each counted as ReFrame counts them, for the same reason
    skipped = summary["skipped"]
    assert {s["reason"] for s in skipped} == {ONEAPI_SKIP} and len(skipped) == 2, skipped
    assert {s["environment"] for s in skipped} == {"oneapi"}, skipped
    assert [r["environment"] for r in summary["results"] if r["verified"]] == ["gnu"]


@pytest.mark.integration
def test_a_tier_naming_an_unknown_environment_fails_the_run_with_one_line(toy_root, tmp_path):
    toy_checks(toy_root, "{gnu: [baseline], gnu-typo: [tuned]}")
    p = _run(["--run-dir", str(tmp_path / "run")])
    # found by the validation before ReFrame starts: the application is left out, and with
    # nothing else to run the run is refused
    assert p.returncode == 2, p.stdout[-3000:]
    line = _errors(p.stderr)[0]
    assert "toy.yaml: tiers.ci.variants.gnu-typo: unknown environment" in line, p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    # plain ReFrame, without apptune's validation, stops with the same one line
    r = subprocess.run(
        [REFRAME, "-C", "site-config/settings.py", "-c", "reframe-checks/toy", "-l"],
        capture_output=True,
        text=True,
        cwd=toy_root,
        env=dict(os.environ, APPTUNE_ROOT=str(toy_root)),
    )
    assert "unknown environment" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr


#: What a run measures anew (times, energy, the run's quality and the machine's load while
#: it ran) and what names who ran it; every other part of a run record is the same for the
#: check and for a trial of the same build and input.
MEASURED_ANEW = {
    "energy": None,
    "quality": None,
    "run": ("t_start", "wall_s"),
    "figures": ("wall_time", "energy_J", "avg_power_W", "peak_power_W", "edp_Js"),
    "job": ("jobid",),
    # what the runner's sampler saw of the ranks (their CPUs, the libraries they loaded): the
    # toy's kernel ends within milliseconds, between two samples on a busy machine
    "binding": ("ranks",),
    "launch": ("loaded",),
}
WHO_RAN_IT = ("test", "trial")
#: A check's verdict against this machine's baseline; a trial (other inputs, flags or
#: placements than any baseline's) has none.
CHECK_ONLY = ("baseline",)


def _same_parts(record: dict) -> str:
    out = {k: v for k, v in record.items() if k not in CHECK_ONLY}
    for key, parts in MEASURED_ANEW.items():
        if parts is None:
            out[key] = "<measured>"
        else:
            out[key] = dict(out[key], **{p: "<measured>" for p in parts if p in out[key]})
    for key in WHO_RAN_IT:
        out[key] = "<who>"
    return json.dumps(out, sort_keys=True, indent=1)


@pytest.mark.integration
def test_the_check_and_a_trial_write_the_same_run_record(toy_root, tmp_path):
    """One run core: the check (ReFrame) and a tune/bisect trial (localrun) of the same build
    and input write the same run record, byte for byte, once what is measured anew and
    who ran it are set aside (MEASURED_ANEW, WHO_RAN_IT): the same system, partition,
    variant, placement, job shape, input, provenance, values, curves and verification."""
    from apptune.core.data import recipes
    from apptune.core.run import localrun

    toy_checks(toy_root, "{gnu: [baseline]}")
    run_dir = tmp_path / "run"
    p = _run(["--run-dir", str(run_dir), "--no-history", "--", "--keep-stage-files"])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (check_file,) = (run_dir / "output").rglob(RESULT_FILE)
    check = records.load_record(check_file).data()
    (build,) = (run_dir / "stage").rglob("ToyBuild_*")
    site = load_site("gnu", toy_root / "site-config/settings.py")
    trial = localrun.run_tier(recipes.load_recipe("toy"), "ci", build, tmp_path / "trial", site)
    rec = records.load_record(tmp_path / "trial").data()
    assert trial.ok and rec["trial"] is True and "trial" not in check
    assert rec["test"] == localrun.TRIAL_TEST and check["test"].startswith("ToyCheck")
    assert set(check) - set(rec) == set(CHECK_ONLY), (sorted(check), sorted(rec))
    assert _same_parts(rec) == _same_parts(check)
    # what the program computes from its input is equal; the times are its own
    assert rec["figures"]["rate"] == check["figures"]["rate"] == 123.5
    assert rec["job"]["jobid"] != check["job"]["jobid"] and rec["run"]["wall_s"] > 0
    # the same launch line, started by the same runner
    spec = json.loads((tmp_path / "trial/.apptune-run-spec.json").read_text())
    (check_spec,) = (run_dir / "stage").rglob("ToyCheck_*/.apptune-run-spec.json")
    assert [s["argv"] for s in spec["steps"]] == [
        s["argv"] for s in json.loads(check_spec.read_text())["steps"]
    ]


@pytest.mark.integration
def test_a_known_wrong_result_is_xfail_with_its_reason_and_a_stale_entry_is_xpass(
    toy_root, tmp_path
):
    """``reference/APP/TIER.yaml`` ``xfail`` through ReFrame's ``@rfm.xfail``: a listed
    variant whose numbers are wrong as its entry says is XFAIL (the report gives the data's
    reason); wrong otherwise, it is a FAIL saying what differs; on numbers that verify it is
    XPASS, a failure that names the stale entry."""
    toy_checks(toy_root, "{gnu: [baseline, tuned]}")
    ref = toy_root / "reference/toy/ci.yaml"
    ref.write_text(
        ref.read_text()
        + 'xfail:\n  gnu/tuned: {reason: "sum drifts with -O3 (toy bug 7)", fails: [sum]}\n'
    )
    good = ref.read_text()
    ref.write_text(good.replace("1.6449330668", "1.7"))  # both variants now give wrong numbers
    p = _run(["--run-dir", str(tmp_path / "wrong"), "--no-history"])
    assert p.returncode != 0, p.stdout[-3000:]
    assert "XFAIL" in p.stdout, p.stdout[-3000:]
    said = "known-wrong result listed in reference/toy/ci.yaml xfail: sum drifts with -O3"
    assert said in p.stdout, p.stdout[-3000:]
    summary = json.loads((tmp_path / "wrong/summary.json").read_text())
    (x,) = summary["expected_failures"]
    assert x["reason"] == "known-wrong result: sum drifts with -O3 (toy bug 7)", x
    assert "%build.variant=tuned" in x["test"]
    assert [f["test"] for f in summary["failures"] if "variant=baseline" in f["test"]], summary

    ref.write_text(good.replace("1.6449330668", "1.7").replace("value: 1000000", "value: 7"))
    p = _run(["--run-dir", str(tmp_path / "otherwise"), "--no-history"])  # n is wrong too
    assert p.returncode != 0 and "XFAIL" not in p.stdout, p.stdout[-3000:]
    summary = json.loads((tmp_path / "otherwise/summary.json").read_text())
    assert not summary["expected_failures"]
    (f,) = [f for f in summary["failures"] if "variant=tuned" in f["test"]]
    assert (
        "not the known-wrong result of reference/toy/ci.yaml xfail gnu/tuned (fails: sum): "
        "failed besides: n" in f["reason"]
    ), f

    ref.write_text(good)  # the numbers verify: the entry is stale
    p = _run(["--run-dir", str(tmp_path / "stale"), "--no-history"])
    assert p.returncode != 0, p.stdout[-3000:]
    assert "XPASS" in p.stdout, p.stdout[-3000:]
    summary = json.loads((tmp_path / "stale/summary.json").read_text())
    assert not summary["expected_failures"]
    (f,) = summary["failures"]
    assert "%build.variant=tuned" in f["test"], f
