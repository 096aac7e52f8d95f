"""The runner (apptune/core/run/runner.py): no shell, the application's exit status kept,
signals passed on; run quality (apptune/core/run/quality.py) and the machine fingerprint
(apptune/machine.py)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apptune import machine, placement
from apptune.core.run import procfs, quality, ranks, runner
from apptune.models import RunBinding

PAYLOADS = [
    "; touch PWNED1",
    "$(touch PWNED2)",
    "`touch PWNED3`",
    "&& touch PWNED4",
    "export X=a; touch PWNED5",
    "a b  c",
    "| touch PWNED6",
    "'; touch PWNED7; '",
    "$HOME",
    "*",
]

ECHO = (
    "import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': os.environ.get('PAYLOAD')}, "
    "open('seen.json', 'w'))"
)


def run_spec(tmp_path, steps, **kw) -> tuple[int, dict]:
    return run_spec_process(tmp_path, steps, **kw)[:2]


def run_spec_process(tmp_path, steps, preexec_fn=None, **kw) -> tuple[int, dict, str]:
    """The runner on a spec of ``steps`` (``kw``: the spec's other fields) in ``tmp_path``:
    (exit status, run record, standard error)."""
    spec = runner.Spec(steps=steps, **kw)
    runner.write_spec(tmp_path / runner.SPEC_FILE, spec)
    p = subprocess.run(
        [sys.executable, "-m", "apptune.core.run.runner", runner.SPEC_FILE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec_fn,
    )
    rec = runner.load_record(tmp_path)
    return p.returncode, rec.data() if rec else {}, p.stderr


@pytest.mark.parametrize("payload", PAYLOADS)
def test_recipe_words_reach_the_program_as_one_argument_and_nothing_runs(tmp_path, payload):
    rc, rec = run_spec(
        tmp_path,
        [runner.Step(label="run", argv=[sys.executable, "-c", ECHO, payload, "x"])],
        env={"PAYLOAD": payload},
    )
    assert rc == 0 and rec["exit_status"] == 0 and rec["completed"]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": [payload, "x"], "env": payload}
    assert not list(tmp_path.glob("PWNED*"))


def test_a_program_that_crashes_after_writing_its_output_fails_with_its_status(tmp_path):
    crash = (
        "open('out.txt', 'w').write('result=1\\n'); "
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    )
    rc, rec = run_spec(tmp_path, [runner.Step(label="run", argv=[sys.executable, "-c", crash])])
    assert (tmp_path / "out.txt").read_text() == "result=1\n"
    assert rc == 139 and rec["exit_status"] == 139 and not rec["completed"]
    assert rec["failed_step"] == "run" and "killed by signal SIGSEGV" in rec["message"]


def test_a_failing_prerun_step_stops_the_run_and_names_itself(tmp_path):
    rc, rec = run_spec(
        tmp_path,
        [
            runner.Step(
                label="run.prerun[0]",
                argv=[sys.executable, "-c", "print('parsing'); raise SystemExit(3)"],
                stdout="parse.log",
            ),
            runner.Step(label="run", argv=[sys.executable, "-c", "open('ran', 'w')"]),
        ],
    )
    assert rc == 3 and rec["failed_step"] == "run.prerun[0]"
    assert "exited with status 3" in rec["message"]
    assert (tmp_path / "parse.log").read_text() == "parsing\n" and not (tmp_path / "ran").exists()


READ_STDIN = "import sys; data = sys.stdin.read(); open(sys.argv[1], 'w').write(data.upper())"


def test_each_step_reads_its_stdin_from_a_file_of_the_run_directory(tmp_path):
    # the file's name and text are data: no shell sees either
    (tmp_path / "in; touch PWNED1").write_text("7\n$(touch PWNED2) `touch PWNED3`\n")
    (tmp_path / "params.txt").write_text("n=3\n")
    rc, rec = run_spec(
        tmp_path,
        [
            runner.Step(
                label="run.prerun[0]",
                argv=[sys.executable, "-c", READ_STDIN, "pre.out"],
                stdin="params.txt",
            ),
            runner.Step(
                label="run",
                argv=[sys.executable, "-c", READ_STDIN, "run.out"],
                stdin="in; touch PWNED1",
            ),
        ],
    )
    assert rc == 0 and rec["completed"], rec
    assert (tmp_path / "pre.out").read_text() == "N=3\n"
    assert (tmp_path / "run.out").read_text() == "7\n$(TOUCH PWNED2) `TOUCH PWNED3`\n"
    assert not list(tmp_path.glob("PWNED*"))


def test_a_missing_stdin_file_fails_the_step_naming_it(tmp_path):
    rc, rec = run_spec(
        tmp_path,
        [runner.Step(label="run", argv=[sys.executable, "-c", "open('ran', 'w')"], stdin="in.txt")],
    )
    assert rc == 1 and rec["failed_step"] == "run" and not (tmp_path / "ran").exists()
    assert rec["message"] == "run: cannot open its stdin 'in.txt': No such file or directory"


def test_the_recipes_stdin_is_the_stdin_of_its_steps(toy_root):
    from apptune.core.data import recipes
    from apptune.core.run import prepare

    f = toy_root / "build-recipes/toy.yaml"
    f.write_text(
        f.read_text().replace(
            "  executable: toy\n",
            "  executable: toy\n  stdin: params.txt\n"
            "  prerun:\n    - {command: [cat], stdin: params.txt, stdout: copy.txt}\n",
        )
    )
    steps = prepare.steps(recipes.load_recipe("toy"), {"n": 1}, Path("/b"), ["mpirun", "-np", "1"])
    assert [(s.label, s.argv, s.stdin) for s in steps] == [
        ("run.prerun[0]", ["cat"], "params.txt"),
        ("run", ["mpirun", "-np", "1", "/b/toy"], "params.txt"),
    ]


def test_a_missing_program_is_status_127_naming_it(tmp_path):
    rc, rec = run_spec(tmp_path, [runner.Step(label="run", argv=["./no-such-program", "x"])])
    assert rc == 127 and "cannot run './no-such-program'" in rec["message"]


@pytest.mark.slow
def test_sigterm_reaches_the_program_and_is_the_runs_status(tmp_path):
    spec = runner.Spec(
        steps=[runner.Step(label="run", argv=[sys.executable, "-c", "import time; time.sleep(60)"])]
    )
    runner.write_spec(tmp_path / runner.SPEC_FILE, spec)
    p = subprocess.Popen(
        [sys.executable, "-m", "apptune.core.run.runner", runner.SPEC_FILE],
        cwd=tmp_path,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _children(p.pid):
        time.sleep(0.05)
    child = _children(p.pid)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 143
    rec = runner.load_record(tmp_path)
    assert rec.exit_status == 143 and rec.message == "run ended by signal SIGTERM during run"
    assert child and not any(Path(f"/proc/{c}").exists() for c in child)


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_the_record_has_machine_quality_and_wall_time(tmp_path):
    rc, rec = run_spec(
        tmp_path,
        [runner.Step(label="run", argv=[sys.executable, "-c", "pass"])],
        limits={"max_outside_cpu": 0.5},
    )
    assert rc == 0
    assert rec["machine_id"] == machine.machine_id(machine.fingerprint())
    assert rec["wall_s"] > 0 and rec["quality"]["grade"] in quality.GRADES
    assert rec["quality"]["limits"]["max_outside_cpu"] == 0.5
    assert rec["quality"]["job_cpu_s"] > 0


ULIMIT_S = [
    sys.executable,
    "-c",
    "import resource; print(resource.getrlimit(resource.RLIMIT_STACK)[0])",
]


@pytest.mark.parametrize("stack,seen", [("64M", 64 << 20), ("unlimited", -1)])
def test_the_steps_run_with_the_recipes_stack_limit(tmp_path, stack, seen):
    step = runner.Step(label="run", argv=ULIMIT_S, stdout="limit.txt")
    rc, rec = run_spec(tmp_path, [step], stack=stack)
    assert rc == 0 and int((tmp_path / "limit.txt").read_text()) == seen
    assert rec["stack_limit"] == (None if stack == "unlimited" else seen)


def test_a_stack_limit_above_the_hard_limit_fails_the_run_naming_it(tmp_path):
    """The hard limit is the site's (ulimit -Hs): the run is not started, one line says why."""
    import resource

    hard = 16 << 20
    rc, rec, err = run_spec_process(
        tmp_path,
        [runner.Step(label="run", argv=ULIMIT_S)],
        lambda: resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, hard)),
        stack="unlimited",
    )
    assert rc == 1 and rec["failed_step"] == "stack" and not rec["steps"], rec
    assert err.strip() == (
        "apptune: error: run.stack: the stack limit cannot be raised to unlimited: "
        "the hard limit (ulimit -Hs) is 16384 KiB"
    ), err


def test_bad_spec_is_one_line(tmp_path):
    (tmp_path / "spec.json").write_text('{"steps": []}')
    p = subprocess.run(
        [sys.executable, "-m", "apptune.core.run.runner", "spec.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not a runner spec" in p.stderr


# ------------------------------------------------------------------------- quality
M = {
    "wall_s": 10.0,
    "cpus": 2,
    "steal_fraction": 0.0,
    "outside_cpu_fraction": 0.01,
    "freq_mhz": [2300, 2300],
    "others": [],
}


def test_clean_and_each_kind_of_disturbance_with_its_reason():
    lim = quality.Limits()
    assert quality.judge(M, lim) == ("clean", [])
    g, why = quality.judge(dict(M, steal_fraction=0.05), lim)
    assert g == "disturbed" and why == [
        "CPU steal 5.0% (limit 2%): the hypervisor ran other work on these CPUs"
    ]
    g, why = quality.judge(
        dict(M, outside_cpu_fraction=0.45, others=[{"pid": 7, "name": "stress-ng", "cpu_s": 8.9}]),
        lim,
    )
    assert g == "disturbed" and why == [
        "other processes used 45.0% of the 2 CPUs (limit 5%): stress-ng (8.9 s)"
    ]
    g, why = quality.judge(dict(M, freq_mhz=[1800, 2400]), lim)
    assert g == "disturbed" and why[0].startswith("CPU frequency varied 25%")


def test_bad_limits_name_the_limit():
    with pytest.raises(ValueError, match="unknown run-quality limit"):
        quality.Limits.from_dict({"max_stael": 0.1})
    with pytest.raises(ValueError, match="max_steal=2.0: must be more than 0 and at most 1"):
        quality.Limits.from_dict({"max_steal": 2})


@pytest.mark.integration
def test_a_cpu_hog_beside_a_run_is_measured_as_disturbance(tmp_path):
    """A busy loop on every CPU beside a short job: the record names it. (A real run,
    marked integration: it loads the machine for a few seconds.)"""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        time.sleep(0.5)
        rc, rec = run_spec(
            tmp_path,
            [runner.Step(label="run", argv=[sys.executable, "-c", "import time; time.sleep(2)"])],
        )
    finally:
        for h in hogs:
            h.kill()
    q = rec["quality"]
    assert rc == 0 and q["grade"] == "disturbed", q
    # the hypervisor's steal may be named too (first): the hogs must be named among the reasons
    hog = [r for r in q["reasons"] if r.startswith("other processes used")]
    assert len(hog) == 1 and "python" in hog[0], q["reasons"]


# ------------------------------------------------------------------------- machine
CPUINFO = """processor\t: {i}
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
stepping\t: 0
physical id\t: {sock}
core id\t\t: {core}
flags\t\t: fpu sse4_2 avx avx2 fma hypervisor

"""


def test_fingerprint_from_proc_and_sys(tmp_path):
    proc, sysfs = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir()
    (proc / "cpuinfo").write_text(
        "".join(CPUINFO.format(i=i, sock=i // 4, core=(i // 2) % 2) for i in range(8))
    )
    (proc / "meminfo").write_text("MemTotal:       65843720 kB\n")
    (sysfs / "devices/system/clocksource/clocksource0").mkdir(parents=True)
    (sysfs / "devices/system/clocksource/clocksource0/available_clocksource").write_text(
        "kvm-clock tsc\n"
    )
    fp = machine.fingerprint(proc, sysfs)
    assert {k: fp[k] for k in machine.KEY_FIELDS} == {
        "cpu_vendor": "AuthenticAMD",
        "cpu_model": "AMD EPYC 7B13",
        "cpu_id": "25/1/0",
        "isa": ["avx", "avx2", "fma", "sse4_2"],
        "sockets": 2,
        "cores_per_socket": 2,
        "threads_per_core": 2,
        "cpus": 8,
        "memory_gib": 63,
        "hypervisor": "KVM",
    }
    assert machine.describe(fp) == "AMD EPYC 7B13 (25/1/0, avx2), 2x2 cores x2 threads, 63 GiB, KVM"
    other = dict(fp, memory_gib=128, kernel="7.0")
    assert machine.machine_id(other) != machine.machine_id(fp)
    assert machine.machine_id(dict(fp, kernel="7.0")) == machine.machine_id(
        fp
    )  # kernel: recorded only


@pytest.mark.unit
def test_a_framed_mpi_message_gives_its_first_sentence(tmp_path):
    """`-S num_ranks=4` on 2 cores: Open MPI 4.1's real message (tests/data/stderr/) ends in a
    rule of dashes; the run's verdict names the cause, not the rule."""
    from apptune.core.run.outcome import last_line

    f = Path(__file__).parent / "data/stderr/openmpi-4.1-not-enough-slots.txt"
    assert last_line(f) == (
        "There are not enough slots available in the system to satisfy the 4 slots that were "
        "requested by the application"
    )
    plain = tmp_path / "err"
    plain.write_text("warming up\nSegmentation fault (core dumped)\n\n")
    assert last_line(plain) == "Segmentation fault (core dumped)"


# ------------------------------------------------------------------ accounting on a fake /proc
class FakeProc:
    """A /proc (and /sys CPU topology) written by the test: processes with their CPU
    seconds, parents, environments and command lines, changed between samples."""

    def __init__(self, root: Path, cpus: int = 2):
        self.proc, self.sysfs = root / "proc", root / "sys"
        self.proc.mkdir(parents=True)
        for c in range(cpus):
            d = self.sysfs / f"devices/system/cpu/cpu{c}/topology"
            d.mkdir(parents=True)
            (d / "physical_package_id").write_text("0\n")
            (d / "core_id").write_text(f"{c}\n")
        (self.proc / "sys/kernel/random").mkdir(parents=True)
        (self.proc / "sys/kernel/random/boot_id").write_text("boot-1\n")
        self.cpus = cpus
        self.busy(0)

    def busy(self, seconds: float) -> None:
        """/proc/stat with ``seconds`` of busy CPU time since boot."""
        t = round(seconds * quality.CLK_TCK)
        lines = [f"cpu  {t} 0 0 100000 0 0 0 0 0 0"]
        lines += [f"cpu{c} 0 0 0 0 0 0 0 0 0 0" for c in range(self.cpus)]
        (self.proc / "stat").write_text("\n".join(lines + ["procs_running 1", ""]))

    def process(self, pid, comm, ppid, own=0.0, kids=0.0, env=(), cmdline=None, **more):
        exe, cpus = more.get("exe"), more.get("cpus")
        d = self.proc / str(pid)
        d.mkdir(exist_ok=True)
        ticks = [round(x * quality.CLK_TCK) for x in (own, 0, kids, 0)]
        rest = ["S", ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, *ticks, 20, 0, 1, 0, 1000 + pid]
        (d / "stat").write_text(f"{pid} ({comm}) {' '.join(str(x) for x in rest)} 0 0\n")
        (d / "environ").write_bytes(b"\0".join(e.encode() for e in env) + b"\0")
        (d / "cmdline").write_bytes((cmdline or comm).encode() + b"\0")
        if exe and not (d / "exe").is_symlink():
            (d / "exe").symlink_to(exe)
        if cpus is not None:
            (d / "status").write_text(f"Name:\t{comm}\nCpus_allowed_list:\t{cpus}\n")

    def gone(self, pid) -> None:
        shutil.rmtree(self.proc / str(pid))


def _slurm_node(fake: FakeProc, program: str) -> None:
    """A quiet Slurm node at the start of a run of job 7: its batch step (slurmstepd, the job
    script, the runner: pid 60), the step of the application's ranks, an energy agent's step,
    ReFrame (pid 90) polling beside, another job's step and an idle make."""
    fake.process(1, "init", 0)
    fake.process(50, "slurmstepd", 1, cmdline="slurmstepd: [7.batch]")
    fake.process(51, "bash", 50, env=["SLURM_JOB_ID=7"])
    fake.process(60, "python3", 51, env=["SLURM_JOB_ID=7"])
    fake.process(70, "slurmstepd", 1, cmdline="slurmstepd: [7.0]")
    fake.process(81, "slurmstepd", 1, cmdline="slurmstepd: [7.1]")
    fake.process(80, "python3", 81, env=["SLURM_JOB_ID=7"])
    fake.process(90, "reframe", 1, own=100.0)
    fake.process(95, "slurmstepd", 1, cmdline="slurmstepd: [8.0]")
    fake.process(100, "make", 1)


def _monitor(fake: FakeProc, program: str) -> quality.Monitor:
    mon = quality.Monitor(
        fake.proc,
        fake.sysfs,
        harness_pid=90,
        harness_boot_id="boot-1",
        tag="t1",
        job_id="7",
        program=program,
    )
    mon.me = 60  # the runner of the fake node
    return mon


def test_the_harness_and_its_job_never_count_and_short_lived_processes_are_named(tmp_path):
    fake = FakeProc(tmp_path)
    program = str(tmp_path / "mpi-micro")
    Path(program).write_text("")
    _slurm_node(fake, program)
    mon = _monitor(fake, program)
    mon.start(watch=False)
    # mid-run: the ranks (tagged, started by the step's slurmstepd), a compiler of make's
    # seen once, CPU time of the harness, its agent and step daemons and another job's step
    ranks = ["APPTUNE_RUN_TAG=t1", "SLURM_JOB_ID=7"]
    for pid, cpu in ((71, "0"), (72, "1")):
        fake.process(pid, "mpi-micro", 70, own=3.0, env=ranks, exe=program, cpus=cpu)
    fake.process(101, "cc1", 100, own=0.5)
    fake.process(70, "slurmstepd", 1, own=0.1, cmdline="slurmstepd: [7.0]")
    fake.process(80, "python3", 81, own=0.2, env=["SLURM_JOB_ID=7"])
    fake.process(90, "reframe", 1, own=100.4)
    fake.process(95, "slurmstepd", 1, own=1.0, cmdline="slurmstepd: [8.0]")
    mon._sample()
    # the end: the ranks ended (3.5 s each; slurmstepd reaped them), so did cc1 (0.6 s) and
    # compilers no sample saw (2.0 s): make reaped them; ReFrame ran squeue (0.3 s)
    for pid in (71, 72, 101):
        fake.gone(pid)
    fake.process(70, "slurmstepd", 1, own=0.2, kids=7.0, cmdline="slurmstepd: [7.0]")
    fake.process(100, "make", 1, kids=2.6)
    fake.process(90, "reframe", 1, own=100.5, kids=0.3)
    # the ranks' last 0.5 s each (after the last sample) are the job's, found in slurmstepd's
    job, harness, others = 6.0 + 1.0, 0.2 + 0.2 + 0.5 + 0.3, 2.1 + 1.0 + 0.5
    fake.busy(job + harness + others)
    q = mon.stop(quality.Limits())
    assert q["job_cpu_s"] == pytest.approx(job, abs=0.05)
    assert q["harness_cpu_s"] == pytest.approx(harness, abs=0.01)
    assert q["others_cpu_s"] == pytest.approx(others, abs=0.01)
    assert q["outside_cpu_s"] == pytest.approx(others, abs=0.1)  # less the runner's own
    assert [(o["name"], o["cpu_s"]) for o in q["others"]] == [
        ("make's children (cc1)", 2.1),
        ("slurmstepd", 1.0),
        ("cc1", 0.5),
    ]
    assert q["grade"] == "disturbed" and "make's children (cc1) (2.1 s)" in q["reasons"][0]
    b = mon.binding()
    assert [(r["pid"], r["cpus"], r["cores"], r["sockets"]) for r in b["ranks"]] == [
        (71, "0", 1, 1),
        (72, "1", 1, 1),
    ]
    assert b["program"] == "mpi-micro"


def _npmpi_node(tmp_path, monkeypatch, reads: dict):
    """A Slurm node whose job runs NPmpi, watched from the start: (the fake /proc, the
    program, the monitor, the ranks' environment). ``reads``: per rank, what reading its
    mask gives first, read after read, before its real mask."""
    fake = FakeProc(tmp_path)
    program = str(tmp_path / "NPmpi")
    Path(program).write_text("")
    _slurm_node(fake, program)
    mon = _monitor(fake, program)
    mon.start(watch=False)
    real = ranks.allowed_cpus

    def mask(proc, pid):
        if reads.get(pid):
            return procfs.parse_cpulist(reads[pid].pop(0))
        return real(proc, pid)

    monkeypatch.setattr(ranks, "allowed_cpus", mask)
    return fake, program, mon, ["APPTUNE_RUN_TAG=t1", "SLURM_JOB_ID=7"]


def test_a_rank_moved_for_a_while_by_mpi_init_is_not_bound_there(tmp_path, monkeypatch):
    """Open MPI's MPI_Init binds a rank to CPU 0 and back (hwloc: microseconds; UCX timing
    its clock: 2 x 100 ms, strace); a sample that read the mask meanwhile failed an unbound
    NetPIPE run in about 1 of 24. A rank's binding is the last mask read of it, and a young
    rank is read again soon; one that stays (a launcher's binding, or Intel MPI's pinning
    inside MPI_Init) is its binding."""
    reads = {71: ["0", "0"]}  # 71: read twice while MPI_Init had it on CPU 0
    fake, program, mon, ranks = _npmpi_node(tmp_path, monkeypatch, reads)
    for pid, cpus in ((71, "0-1"), (72, "0")):  # 72: bound to CPU 0 for good
        fake.process(pid, "NPmpi", 70, own=1.0, env=ranks, exe=program, cpus=cpus)
    mon._sample()
    mon._recheck_young()
    assert [(r["pid"], r["cpus"]) for r in mon.binding()["ranks"]] == [(71, "0"), (72, "0")]
    mon._recheck_young()  # MPI_Init is over: the mask its launcher gave it, for the rest
    assert [(r["pid"], r["cpus"]) for r in mon.binding()["ranks"]] == [(71, "0-1"), (72, "0")]


def _two_launches(tmp_path, monkeypatch, first_reads: dict):
    """An unbound NetPIPE job on a 2-CPU node: its integrity pass (ranks 71, 72), then its
    timed run (73, 74), every rank on CPUs 0-1 for its life; ``first_reads``: what reading a
    rank's mask gave at first (MPI_Init's time on CPU 0, caught by a sample and by the read
    after). Returns the monitor after the job."""
    fake, program, mon, ranks = _npmpi_node(tmp_path, monkeypatch, dict(first_reads))
    for label, pids in (("run.prerun[0]", (71, 72)), ("run", (73, 74))):
        mon.begin_launch(label)
        for pid in pids:
            fake.process(pid, "NPmpi", 70, own=0.5, env=ranks, exe=program, cpus="0-1")
        mon._sample()
        for _ in range(3):  # read again while the ranks still run
            mon._recheck_young()
        for pid in pids:
            fake.gone(pid)
    return mon


def test_each_launch_of_a_job_is_judged_on_its_own_ranks(tmp_path, monkeypatch):
    """NetPIPE's integrity pass and its timed run are two launches of one job. A newcomer's
    run on the slower machine failed "2 of the 4 rank(s) ... could run on CPUs 0": the record
    held the ranks of both launches, two of them read while MPI_Init held them on CPU 0 (which
    the next read, a second later, was too late to see: they had ended). Each rank now says its
    launch, a young rank's mask is read again until it settles, and each launch is judged on
    its own ranks."""
    mon = _two_launches(tmp_path, monkeypatch, {71: ["0", "0"], 72: ["0", "0"]})
    b = mon.binding()
    assert [(r["pid"], r["launch"], r["cpus"]) for r in b["ranks"]] == [
        (71, "run.prerun[0]", "0-1"),
        (72, "run.prerun[0]", "0-1"),
        (73, "run", "0-1"),
        (74, "run", "0-1"),
    ]
    assert ranks.binding_problem(RunBinding(**b), "none") is None
    # the record of that run, as it would have been with its launches said: the launch whose
    # ranks were not where asked is named, with its own rank count
    b["ranks"][0]["cpus"] = b["ranks"][1]["cpus"] = "0"
    assert ranks.binding_problem(RunBinding(**b), "none") == (
        "the placement asked for ranks unbound (each on all CPUs the job has there, 0-1), but "
        "2 of the 2 rank(s) of run.prerun[0] seen on the job's first node could run on CPUs 0: "
        "the launcher did not place them as asked"
    )


def test_a_rank_that_stays_bound_to_one_cpu_is_still_seen_so(tmp_path, monkeypatch):
    """The second read does not wash out a real binding: a rank the launcher left on CPU 0
    reads CPU 0 every time, and its launch alone is named."""
    mon = _two_launches(tmp_path, monkeypatch, {73: ["0"] * 5, 74: ["0"] * 5})
    b = mon.binding()
    assert [r["cpus"] for r in b["ranks"]] == ["0-1", "0-1", "0", "0"]
    found = ranks.binding_problem(RunBinding(**b), "none")
    assert "but 2 of the 2 rank(s) of run seen on the job's first node could run on CPUs 0" in (
        found or ""
    ), found
    assert "prerun" not in found


def test_the_ranks_of_a_launch_shorter_than_a_sample_are_seen(tmp_path, monkeypatch):
    """MPICH's NetPIPE job: an integrity pass of 0.09 s and a timed run of 0.6 s, both
    between two of the once-a-second samples; its binding record held no rank, so its binding
    check could not fail. While a launch is young its ranks are looked for ten times a second."""
    fake, program, mon, rank_env = _npmpi_node(tmp_path, monkeypatch, {})
    for label, pids, cpus in (("run.prerun[0]", (71, 72), "0"), ("run", (73, 74), "1")):
        mon.begin_launch(label)
        fake.process(pids[0], "mpirun", 70)  # forked by the launcher, not yet the rank
        mon._recheck_young()
        for pid in pids:
            fake.process(pid, "NPmpi", 70, own=0.1, env=rank_env, exe=program, cpus=cpus)
        fake.process(75, "NPmpi", 70, cpus="0")  # another program of that name: not a rank
        mon._recheck_young()
        for pid in pids:
            fake.gone(pid)
    assert [(r["pid"], r["launch"], r["cpus"]) for r in mon.binding()["ranks"]] == [
        (71, "run.prerun[0]", "0"),
        (72, "run.prerun[0]", "0"),
        (73, "run", "1"),
        (74, "run", "1"),
    ]
    found = ranks.binding_problem(RunBinding(**mon.binding()), "none")  # asked unbound: both wrong
    assert found.endswith(
        "2 of the 2 rank(s) of run.prerun[0] seen on the job's first node could run on CPUs 0; "
        "the placement asked for ranks unbound (each on all CPUs the job has there, 0-1), but "
        "2 of the 2 rank(s) of run seen on the job's first node could run on CPUs 1: the "
        "launcher did not place them as asked"
    ), found
    assert ranks.binding_problem(RunBinding(**mon.binding()), "core") is None


def test_every_launch_of_a_run_gets_the_placements_launcher_options(tmp_path):
    """A pre-run step with ``launch: true`` (NetPIPE's integrity pass) is started as the
    measured program is: the same launcher, with the placement's options."""
    from apptune.core.data import recipes
    from apptune.core.run import prepare

    r = recipes.load_recipe("netpipe")
    p = placement.plan(
        2, launcher="mpirun", mpi="openmpi", placements=r.run.placements, name="unbound"
    )
    launch = ["mpirun", "-np", "2", *p.options]
    params = {"upper": 8, "perturbation": 0, "integrity_upper": 8, "repeats": 1}
    steps = prepare.steps(r, params, tmp_path, launch)
    launched = [s for s in steps if s.argv[0] == "mpirun"]
    assert p.options == ["--bind-to", "none"]
    assert [s.label for s in launched] == ["run.prerun[0]", "run"]
    assert all(s.argv[: len(launch)] == launch for s in launched)


def test_a_quiet_node_is_clean_whatever_the_harness_used(tmp_path):
    """ReFrame, the job's step daemons and the energy agent used 1.4 s: none of it is other work."""
    fake = FakeProc(tmp_path)
    _slurm_node(fake, "mpi-micro")
    mon = _monitor(fake, "mpi-micro")
    mon.start(watch=False)
    fake.process(50, "slurmstepd", 1, own=0.3, cmdline="slurmstepd: [7.batch]")
    fake.process(80, "python3", 81, own=0.6, env=["SLURM_JOB_ID=7"])
    fake.process(90, "reframe", 1, own=100.5)
    fake.busy(1.4)
    q = mon.stop(quality.Limits())
    assert q["grade"] == "clean" and q["outside_cpu_s"] == 0 and q["others"] == [], q
    assert q["harness_cpu_s"] == pytest.approx(1.4)


def test_a_step_daemon_seen_before_it_names_its_job_is_still_the_jobs(tmp_path):
    """srun's new step: its slurmstepd is sampled before it sets its title (then its command
    line is the bare program); it and the tasks it reaps are the job's, not other work (on
    short runs under srun they graded half of a night's runs disturbed)."""
    fake = FakeProc(tmp_path)
    _slurm_node(fake, "mpi-micro")
    mon = _monitor(fake, "mpi-micro")
    mon.start(watch=False)
    fake.process(75, "slurmstepd", 1, own=0.05, cmdline="/usr/sbin/slurmstepd")
    fake.process(76, "slurmstepd", 1, own=0.02, cmdline="/usr/sbin/slurmstepd")
    mon._sample()
    # 75 is this job's step; 76 was another job's (it names it once titled); an energy
    # agent's step (77) lived between two samples, untitled when seen
    fake.process(75, "slurmstepd", 1, own=0.1, kids=0.15, cmdline="slurmstepd: [7.2]")
    fake.process(76, "slurmstepd", 1, own=0.3, cmdline="slurmstepd: [8.1]")
    fake.process(77, "slurmstepd", 1, own=0.04, cmdline="/usr/sbin/slurmstepd")
    mon._sample()
    fake.gone(77)
    fake.process(1, "init", 0, kids=0.04)
    fake.busy(0.25 + 0.3 + 0.04)
    q = mon.stop(quality.Limits())
    assert [o["name"] for o in q["others"]] == ["slurmstepd"] and q["others"][0]["pid"] == 76, q
    assert q["others_cpu_s"] == pytest.approx(0.3, abs=0.01)


def test_the_harness_on_another_machine_is_not_this_nodes_process(tmp_path):
    """A harness pid from another boot (ReFrame on the login node) names no process here."""
    fake = FakeProc(tmp_path)
    _slurm_node(fake, "mpi-micro")
    mon = _monitor(fake, "mpi-micro")
    mon.harness_boot_id = "login-node"
    mon.start(watch=False)
    fake.process(90, "reframe", 1, own=101.0)
    fake.busy(1.0)
    q = mon.stop(quality.Limits())
    assert [o["name"] for o in q["others"]] == ["reframe"] and q["harness_cpu_s"] == 0


def test_a_wait_for_quiet_is_measured_like_a_run(tmp_path):
    fake = FakeProc(tmp_path)
    _slurm_node(fake, "x")
    w = quality.wait_for_quiet(0, proc=fake.proc, window_s=0.01, tag="t1", job_id="7")
    assert w["quiet"] and w["outside_cpu_fraction"] == 0 and w["others"] == []
