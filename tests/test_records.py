"""The run record: one schema (apptune.models.RunRecord), one writer
(apptune.core.run.outcome.write_record) and one reader (apptune.history.records.load_record) for
checks and trials alike."""

import json
from pathlib import Path

import pytest

from apptune import machine
from apptune.constants import RESULT_FILE
from apptune.core.run import outcome
from apptune.errors import ApptuneError
from apptune.history import records
from apptune.models import RunRecord

pytestmark = pytest.mark.unit


def _record(**kw):
    rec = {
        "app": "toy",
        "tier": "ci",
        "variant": "baseline",
        "environment": "gnu",
        "input": {"n": 3},
        "figures": {"wall_time": 1.5, "rate": 123.5},
        "verification": {"ok": True, "summary": "verified 1 fields", "fields": []},
    }
    rec.update(kw)
    return rec


def test_a_written_record_reads_back_unchanged(tmp_path):
    path = outcome.write_record(tmp_path, _record())
    assert path == tmp_path / RESULT_FILE
    assert records.load_record(tmp_path).data() == _record()
    assert records.load_record(path).data() == _record()


def test_the_reader_gives_the_typed_record(tmp_path):
    outcome.write_record(tmp_path / "output", _record())
    rec = records.load_record(tmp_path / "output")
    assert rec.verification.ok and rec.verification.fields == [] and rec.figures["rate"] == 123.5
    assert records.record_of({"outputdir": str(tmp_path / "output")}) == rec


def test_a_run_directory_without_a_record_has_none(tmp_path):
    assert records.load_record(tmp_path) is None


def test_the_writer_refuses_a_key_the_schema_does_not_know(tmp_path):
    with pytest.raises(ApptuneError) as e:
        outcome.write_record(tmp_path, _record(figurez={}))
    assert str(e.value).endswith("figurez: not a field of a run record (apptune.models.RunRecord)")
    assert not (tmp_path / RESULT_FILE).exists()


def test_the_writer_refuses_a_record_without_a_verdict(tmp_path):
    rec = _record()
    del rec["verification"]["ok"]
    with pytest.raises(ApptuneError) as e:
        outcome.write_record(tmp_path, rec)
    assert "verification.ok" in str(e.value) and RESULT_FILE in str(e.value)
    assert not (tmp_path / RESULT_FILE).exists()


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"app": "toy"', "invalid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps(_record(figures={"rate": "fast"})), "figures.rate"),
        (json.dumps({k: v for k, v in _record().items() if k != "tier"}), "tier"),
        # the knobs, the machine's fingerprint and a compiler of the provenance are typed
        (
            json.dumps(_record(knobs={"asked": {"turbo": "off"}, "observed": {"boost": "on"}})),
            "knobs.observed.boost",
        ),
        (
            json.dumps(_record(knobs={"node": {"cpufreq": {"max_khz": "fast"}}})),
            "knobs.node.cpufreq.max_khz",
        ),
        (json.dumps(_record(knobs={"asked": {"smt": False}})), "knobs.asked.smt"),
        (json.dumps(_record(machine={"cpu_model": "AMD EPYC", "cpus": "two"})), "machine.cpus"),
        (
            json.dumps(_record(provenance={"compilers": {"cc": {"version": 12}}})),
            "provenance.compilers.cc.version",
        ),
    ],
)
def test_a_broken_record_is_one_line_naming_the_file_and_field(tmp_path, text, says):
    (tmp_path / RESULT_FILE).write_text(text)
    with pytest.raises(ApptuneError) as e:
        records.load_record(tmp_path)
    msg = str(e.value)
    assert RESULT_FILE in msg and says in msg and "\n" not in msg


def test_a_broken_record_stops_no_report_it_is_a_warning(tmp_path, capsys):
    out, stage = tmp_path / "output", tmp_path / "stage"
    out.mkdir()
    stage.mkdir()
    (out / RESULT_FILE).write_text("{")
    outcome.write_record(stage, _record())
    assert records.record_of({"outputdir": str(out), "stagedir": str(stage)}).data() == _record()
    err = capsys.readouterr().err.strip()
    assert err.startswith("apptune: warning: ") and "invalid JSON" in err
    assert "\n" not in err


#: Records written by the checks of earlier nightlies (before and after ``launch`` was kept).
OLD_RECORDS = sorted((Path(__file__).parent / "data/records").glob("*.json"))


@pytest.mark.parametrize("path", OLD_RECORDS, ids=lambda p: p.stem)
def test_records_of_earlier_versions_load_with_their_parts_typed(path):
    data = json.loads(path.read_text())
    rec = RunRecord.model_validate(data)
    assert rec.model_dump(exclude_unset=True) == data  # nothing lost, nothing added
    assert rec.job.scheduler == "squeue" and rec.run.exit_status == 0
    assert rec.energy.trust and rec.quality.grade and rec.verification.fields
    assert rec.placement_layout.ranks == rec.ranks == len(rec.binding.ranks)
    assert rec.machine.cpus == 2 and rec.machine.isa and machine.machine_id(rec.machine.data())
    assert rec.machine_id == machine.machine_id(rec.machine.data())
    assert rec.provenance.compilers["cc"].mpi.startswith("mpicc: Open MPI")
    assert rec.baseline.advice and not rec.baseline.found and rec.baseline.changed is None
    assert {v.verdict for v in rec.baseline.figures.values()} == {"no verdict"}


def test_a_part_keeps_the_keys_of_a_newer_version(tmp_path):
    rec = _record(energy={"trust": "measured", "energy_J": 5.0, "meter_firmware": "2.1"})
    outcome.write_record(tmp_path, rec)
    assert RunRecord.model_validate(rec).energy.model_extra == {"meter_firmware": "2.1"}
    assert records.load_record(tmp_path).data() == rec


def test_the_fingerprint_and_the_compilers_as_written_read_back_unchanged(tmp_path):
    fp = machine.fingerprint()
    compilers = {
        "cc": {"command": "mpicc", "version": "gcc 12.2.0", "mpi": "mpicc: Open MPI 4.1.4"},
        "ftn": {"command": "gfortran", "version": "GNU Fortran 12.2.0", "flavour": "newer"},
    }
    rec = _record(
        machine=fp, machine_id=machine.machine_id(fp), provenance={"compilers": compilers}
    )
    written = outcome.write_record(tmp_path, rec)
    back = records.load_record(tmp_path)
    again = outcome.write_record(tmp_path / "again", back)  # the typed record, written back
    assert again.read_bytes() == written.read_bytes()
    assert back.data() == rec and machine.describe(back.machine.data()) == machine.describe(fp)
    assert back.machine.cpus == fp["cpus"] and back.provenance.compilers["ftn"].mpi is None
    assert back.provenance.compilers["ftn"].model_extra == {"flavour": "newer"}


def test_the_reader_sets_the_run_directory_and_the_writer_refuses_it(tmp_path):
    outcome.write_record(tmp_path / "output", _record())
    tc = {"display_name": "T", "unique_name": "T", "outputdir": str(tmp_path / "output")}
    (tmp_path / "report.json").write_text(json.dumps({"runs": [{"testcases": [tc]}]}))
    (case,) = records.cases(tmp_path)
    assert case.verified and case.record.run_id == tmp_path.name
    assert case.record.session == str(tmp_path.resolve())
    with pytest.raises(ApptuneError, match="run_id: not a field"):
        outcome.write_record(tmp_path, case.record)


def test_the_energy_part_is_the_record_the_sampler_writes():
    from apptune.energy import EnergyRecord

    assert RunRecord.model_fields["energy"].annotation == EnergyRecord | None
    written = EnergyRecord(trust="none").to_dict()
    assert EnergyRecord.model_validate(written).data() == written
