"""The runner's record (``.apptune-run.json``) read typed (apptune/models/runnerrecord.py):
a recorded real one and one the runner writes now load, unchanged, and one that is not a
runner's record is one line naming its file and field."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from apptune.core.run import outcome, quality, runner
from apptune.core.run.scratch import ScratchSpec
from apptune.errors import ApptuneError
from apptune.models import RunnerRecord
from apptune.yamlio import atomic_write_json

#: A NetPIPE check's runner record (two srun launches, a quiet wait, the ranks' binding and
#: libraries) from a ``reframe ... --mode ci -r`` of the hpcc and netpipe checks (gnu, tuned,
#: ``--system localslurm:exclusive``, 3 repeats) on m-558d23d960 (Intel Ice Lake, 2 CPUs, KVM).
NETPIPE = Path(__file__).parent / "data/runner/netpipe-2026-11-28.json"


def _rewritten(rec: RunnerRecord, tmp_path: Path) -> str:
    atomic_write_json(tmp_path / "again.json", rec.data())
    return (tmp_path / "again.json").read_text()


def test_a_recorded_runner_record_loads_typed_and_dumps_to_the_same_bytes(tmp_path):
    shutil.copy(NETPIPE, tmp_path / runner.RECORD_FILE)
    rec = runner.load_record(tmp_path)
    assert isinstance(rec, RunnerRecord)
    assert _rewritten(rec, tmp_path) == NETPIPE.read_text()
    assert rec.exit_status == 0 and rec.completed and rec.failed_step is None
    assert [s.label for s in rec.steps] == ["run.prerun[0]", "run"]
    assert rec.steps[-1].argv[-1] == "np.out" and rec.steps[-1].exit_status == 0
    assert rec.machine_id == "m-558d23d960" and rec.machine.cpus == 2
    assert rec.quality.grade == "clean" and rec.quality.job_cpu_s == 4.162
    assert rec.quiet_wait["quiet"] is True
    assert rec.binding.program == "NPmpi" and [r.cpus for r in rec.binding.ranks][-1] == "1"
    assert rec.libraries[0].role == "system" and len(rec.libraries[0].sha256) == 64
    assert rec.wall_s == pytest.approx(6.5767, abs=1e-4) and rec.scratch is None


def test_a_record_the_runner_writes_now_loads_unchanged(tmp_path):
    spec = runner.Spec(
        steps=[
            runner.Step(label="run.prerun[0]", argv=[sys.executable, "-c", "pass"]),
            runner.Step(label="run", argv=[sys.executable, "-c", "raise SystemExit(3)"]),
        ],
        program=sys.executable,
    )
    status, written = runner.run(spec, tmp_path)
    rec = runner.load_record(tmp_path)
    assert status == 3 and rec.data() == json.loads(json.dumps(written))
    text = (tmp_path / runner.RECORD_FILE).read_text()
    assert json.loads(_rewritten(rec, tmp_path)) == json.loads(text)
    assert rec.exit_status == 3 and rec.failed_step == "run" and rec.completed is False
    assert "exited with status 3" in rec.message
    assert [s.exit_status for s in rec.steps] == [0, 3]
    assert rec.quality.grade in quality.GRADES


def test_no_record_or_one_cut_short_is_none(tmp_path):
    assert runner.load_record(tmp_path) is None
    (tmp_path / runner.RECORD_FILE).write_text('{"exit_status": 0, "ste')
    assert runner.load_record(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"exit_status": 0, "steps": "run"}', "steps"),
        ('{"quality": {"grade": "clean", "cpus": "two"}}', "quality.cpus"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_record_that_is_not_a_runners_is_one_line_naming_its_file_and_field(tmp_path, text, said):
    (tmp_path / runner.RECORD_FILE).write_text(text)
    with pytest.raises(ApptuneError) as e:
        runner.load_record(tmp_path)
    assert runner.RECORD_FILE in str(e.value) and said in str(e.value)
    assert "\n" not in str(e.value)


def test_the_launch_is_read_from_the_runners_spec_and_nothing_from_one_that_is_not(tmp_path):
    spec = runner.Spec(
        steps=[
            runner.Step(label="run.prerun[0]", argv=["true"]),
            runner.Step(label="run", argv=["mpirun", "-np", "2", "/opt/x/prog", "-x"]),
        ],
        program="/opt/x/prog",
        env={"OUT": "/scratch/abc/out", "OMP_NUM_THREADS": "2"},
        scratch=ScratchSpec(root="/scratch", path="/scratch/abc"),
    )
    runner.write_spec(tmp_path / runner.SPEC_FILE, spec)
    site = {"modules": ["gcc/12"]}
    assert outcome.launch_facts(tmp_path, site) == {
        "modules": ["gcc/12"],
        "launcher": ["mpirun", "-np", "2"],
        # the run's own scratch directory is new each run: not a change of the launch
        "env_vars": {"OMP_NUM_THREADS": "2", "OUT": "{{ scratch }}/out"},
    }
    (tmp_path / runner.SPEC_FILE).write_text('{"steps": "mpirun -np 2 prog"}')
    assert outcome.launch_facts(tmp_path, site) == site
