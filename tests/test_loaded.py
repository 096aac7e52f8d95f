"""The shared libraries a run's ranks loaded: read from their maps while they run, kept
with a hash of their contents, and a change of them named by path and hash."""

import glob
import os
import sys
from pathlib import Path

from apptune.core.judge import changes
from apptune.core.run import loaded, procfs, runner

PYTHON = os.path.realpath(sys.executable)
#: A rank that loads the BLAS by its soname, as a program linked with -lblas does.
RANK = "import ctypes, time; ctypes.CDLL('libblas.so.3'); time.sleep(0.5)"


def _run(tmp_path: Path, name: str, ld_path: str | None) -> dict:
    """The runner's record of one run of RANK, with LD_LIBRARY_PATH set to ``ld_path``."""
    cwd = tmp_path / name
    cwd.mkdir()
    spec = runner.Spec(
        steps=[runner.Step(label="run", argv=[PYTHON, "-c", RANK])],
        env={"LD_LIBRARY_PATH": ld_path} if ld_path else {},
        program=PYTHON,
    )
    status, rec = runner.run(spec, cwd)
    assert status == 0, rec
    return rec


def _facts(rec: dict, ld_path: str | None) -> dict:
    env = {"LD_LIBRARY_PATH": ld_path} if ld_path else {}
    return changes.provenance_facts({"launch": {"env_vars": env, "loaded": rec["libraries"]}})


def test_a_blas_put_in_place_by_ld_library_path_is_named_by_its_path_and_hash(tmp_path):
    blis = sorted(glob.glob("/usr/lib/*/blis-*/libblas.so.3"))
    assert blis, "BLIS's BLAS interface (libblis-dev, which HPCC's recipe requires) is missing"
    default = os.path.realpath(
        next(p for p in glob.glob("/usr/lib/*/libblas.so.3") if "blis" not in p)
    )
    runs = {
        "default": (None, _run(tmp_path, "default", None)),
        "blis": (os.path.dirname(blis[0]), _run(tmp_path, "blis", os.path.dirname(blis[0]))),
        # the directory the default already comes from: the variable changes, the library not
        "same": (os.path.dirname(default), _run(tmp_path, "same", os.path.dirname(default))),
    }
    libs = {k: {x["path"]: x for x in rec["libraries"]} for k, (_, rec) in runs.items()}
    assert default in libs["default"] and blis[0] in libs["blis"]
    assert libs["default"][default]["role"] == "blas"
    assert libs["blis"][blis[0]]["sha256"] == loaded.sha256(blis[0]) != loaded.sha256(default)
    assert any(lib["role"] == "system" for lib in libs["default"].values())  # the C library
    facts = {k: _facts(rec, ld) for k, (ld, rec) in runs.items()}
    swap = changes.describe(facts["default"], facts["blis"])
    line = next(x for x in swap if x.startswith("loaded libblas.so.3: "))
    assert f"{default} (sha256 {loaded.sha256(default)[:12]}) → {blis[0]} " in line, swap
    same = changes.describe(facts["default"], facts["same"])
    assert same == [
        f"env LD_LIBRARY_PATH: (none) → {os.path.dirname(default)}" + changes.SAME_LIBRARIES
    ]


def test_the_maps_of_a_process_list_its_shared_objects(tmp_path):
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7/maps").write_text(
        "55d0-55d1 r--p 00000000 08:01 1 /usr/bin/prog\n"
        "7f00-7f01 r-xp 00000000 08:01 2 /opt/my libs/libopenblas.so.0\n"
        "7f01-7f02 r--p 00001000 08:01 2 /opt/my libs/libopenblas.so.0\n"
        "7f02-7f03 r-xp 00000000 08:01 3 /usr/lib/libfoo.so.1 (deleted)\n"
        "7f03-7f04 rw-p 00000000 00:00 0 [heap]\n"
        "7f04-7f05 rw-p 00000000 00:00 0\n"
    )
    got = procfs.mapped_libraries(proc, 7)
    assert got == {"/opt/my libs/libopenblas.so.0", "/usr/lib/libfoo.so.1"}
    assert procfs.mapped_libraries(proc, 8) == set()
    assert [x["role"] for x in loaded.record(got)] == ["blas"]  # libfoo is none of the roles
    assert loaded.record(got)[0]["sha256"] is None  # not a file here: recorded, unreadable


def test_the_run_record_keeps_them_in_its_launch(toy_root, tmp_path, fake_trials, monkeypatch):
    """The runner's list goes into the run record (``launch.loaded``), and from there into
    the facts a verdict compares."""
    import json

    from apptune.core.data import recipes
    from apptune.core.run import localrun
    from apptune.history import records

    fake_run = localrun._run

    def run(argv, cwd, environ, deadline, sampler):
        rc = fake_run(argv, cwd, environ, deadline, sampler)
        rec = json.loads((cwd / runner.RECORD_FILE).read_text())
        rec["libraries"] = [{"path": "/opt/blis/libblas.so.3", "role": "blas", "sha256": "ab" * 32}]
        (cwd / runner.RECORD_FILE).write_text(json.dumps(rec))
        return rc

    monkeypatch.setattr(localrun, "_run", run)
    r = recipes.load_recipe("toy")
    site = fake_trials.site
    localrun.build_variant(r, localrun.plan_for(r, "tuned", site), site, tmp_path / "b")
    localrun.run_tier(r, "ci", tmp_path / "b", tmp_path / "run", site)
    rec = records.load_record(tmp_path / "run")
    assert rec.launch.loaded[0].path == "/opt/blis/libblas.so.3"
    assert (
        changes.facts(rec)["loaded libblas.so.3"] == "/opt/blis/libblas.so.3 (sha256 abababababab)"
    )


def test_a_rank_s_libraries_are_its_last_read_and_its_binding_its_last_mask(tmp_path, monkeypatch):
    """A rank's libraries are read when it is first seen and at the next samples: the last
    read keeps what it still maps (what MPI_Init opened and closed again is left out), and
    its binding is the last mask read (MPI_Init binds a rank to one CPU for a moment)."""
    from test_runner import FakeProc

    from apptune.core.run import quality, ranks

    fake = FakeProc(tmp_path)
    program = str(tmp_path / "NPmpi")
    Path(program).write_text("")
    fake.process(1, "init", 0)
    fake.process(60, "python3", 1)  # the runner; the ranks are its children
    mon = quality.Monitor(fake.proc, fake.sysfs, program=program)
    mon.me = 60
    mon.start(watch=False)
    lib = "/usr/lib/x86_64-linux-gnu/"
    for pid in (71, 72):
        fake.process(pid, "NPmpi", 60, exe=program, cpus="0")
        (fake.proc / str(pid) / "maps").write_text(
            f"7f00-7f01 r-xp 00000000 08:01 2 {lib}libmpi.so.40.30.4\n"
            f"7f01-7f02 r-xp 00000000 08:01 3 {lib}libucp.so.0.0.0\n"
        )
    mon._sample()
    assert mon.ranks.affinity == {71: {0}, 72: {0}}
    assert {x["role"] for x in mon.libraries()} >= {"mpi"}
    for pid in (71, 72):  # MPI_Init is over: the rank's own CPUs, UCX unloaded
        fake.process(pid, "NPmpi", 60, exe=program, cpus="0-1")
        (fake.proc / str(pid) / "maps").write_text(
            f"7f00-7f01 r-xp 00000000 08:01 2 {lib}libmpi.so.40.30.4\n"
        )
    monkeypatch.setattr(ranks, "MAPS_AGES", (0.0,))  # the young ranks' next read is due
    mon.ranks.recheck(look=False)
    mon._sample()
    assert mon.ranks.affinity == {71: {0, 1}, 72: {0, 1}}
    assert mon.ranks.libraries() == {f"{lib}libmpi.so.40.30.4"}
