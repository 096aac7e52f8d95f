"""A cluster file is data shared by everyone who runs the suite at a site: a value that
ends a line, a variable whose value runs a command, a module name with shell punctuation
is refused in one line naming the file and field, and `apptune validate`, `reframe --list`
and `reframe --dry-run` execute nothing of a cluster file (its prepare commands run in the
job only)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from apptune.core.data import site
from apptune.core.validation import validate
from apptune.errors import ApptuneError

REPO = Path(__file__).resolve().parent.parent
REFRAME = str(Path(sys.executable).with_name("reframe"))
BASE_ENVS = [{"name": "gnu", "cc": "mpicc", "env_vars": [], "extras": {"mpi": "openmpi"}}]

#: Every character that ends a line for some reader, or a C string.
BREAKS = ["\n", "\x00", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\x1c", "\x1b"]


def cluster(**over) -> dict:
    data = {
        "descr": "a cluster",
        "hostnames": ["login[0-9]+"],
        "partitions": {
            "p": {
                "descr": "compute",
                "sbatch": ["--partition=cpu"],
                "env_vars": {"OMPI_MCA_btl": "self,tcp"},
                "energy_meters": ["slurm"],
                "scratch_dir": "/scratch/$USER",
            }
        },
        "environments": {
            "gnu": {
                "modules": ["gcc/12.2"],
                "env_vars": {"SLURM_MPI_TYPE": "pmix"},
                "prepare_cmds": ["source /opt/spack/setup-env.sh"],
            }
        },
    }
    for path, value in over.items():
        *parents, last = path.split(".")
        node = data
        for k in parents:
            node = node[k]
        node[last] = value
    return data


def write(d: Path, data: dict, name: str = "c") -> Path:
    d.mkdir(exist_ok=True)
    f = d / f"{name}.yaml"
    f.write_text(yaml.safe_dump(data))
    return f


@pytest.mark.parametrize("ch", BREAKS, ids=[repr(c) for c in BREAKS])
@pytest.mark.parametrize(
    "path, value, field",
    [
        ("partitions.p.sbatch", ["--comment=x{}touch /tmp/x"], "partitions.p.sbatch[0]"),
        ("partitions.p.env_vars", {"A": "1{}touch /tmp/x"}, "partitions.p.env_vars.A"),
        ("environments.gnu.env_vars", {"A": "{}"}, "environments.gnu.env_vars.A"),
        ("environments.gnu.modules", ["gcc/12{}"], "environments.gnu.modules[0]"),
        ("environments.gnu.prepare_cmds", ["true{}touch x"], "environments.gnu.prepare_cmds[0]"),
        ("descr", "a{}b", "descr"),
        ("partitions.p.descr", "a{}b", "partitions.p.descr"),
        ("hostnames", ["login{}"], "hostnames[0]"),
        ("partitions.p.scratch_dir", "/scratch{}", "partitions.p.scratch_dir"),
        ("partitions.p.energy_meters", ["slurm{}"], "partitions.p.energy_meters[0]"),
    ],
)
def test_a_value_that_ends_a_line_is_refused_naming_file_and_field(
    tmp_path, ch, path, value, field
):
    value = (
        value.format(ch)
        if isinstance(value, str)
        else [v.format(ch) for v in value]
        if isinstance(value, list)
        else {k: v.format(ch) for k, v in value.items()}
    )
    f = write(tmp_path, cluster(**{path: value}))
    assert yaml.safe_load(f.read_text()) == cluster(**{path: value})  # YAML carries it
    with pytest.raises(ApptuneError) as e:
        site.load_clusters(tmp_path, BASE_ENVS)
    assert (e.value.file, e.value.field) == (str(f), field), str(e.value)
    assert "a line break or NUL" in e.value.message
    assert len(str(e.value).splitlines()) == 1 and "\x00" not in str(e.value)


@pytest.mark.parametrize("ch", ["\n", "\x00", "\u2028"], ids=repr)
def test_a_key_that_ends_a_line_is_refused_in_one_line(tmp_path, ch):
    f = write(tmp_path, cluster(**{"partitions.p.env_vars": {f"A{ch}touch x": "1"}}))
    with pytest.raises(ApptuneError) as e:
        site.load_clusters(tmp_path, BASE_ENVS)
    assert e.value.file == str(f) and e.value.field.startswith("partitions.p.env_vars.A")
    assert len(str(e.value).splitlines()) == 1 and "\x00" not in str(e.value)


@pytest.mark.parametrize(
    "path, value, field, words",
    [
        ("partitions.p.env_vars", {"A": "$(touch x)"}, "partitions.p.env_vars.A", "prepare_cmds"),
        ("environments.gnu.env_vars", {"A": "`id`"}, "environments.gnu.env_vars.A", "command"),
        ("environments.gnu.env_vars", {"A=$(x);B": "1"}, "environments.gnu.env_vars", "name"),
        ("partitions.p.env_vars", {"A B": "1"}, "partitions.p.env_vars", "name"),
        ("environments.gnu.modules", ["gcc;touch x"], "environments.gnu.modules[0]", "pattern"),
        ("environments.gnu.modules", ["gcc 12"], "environments.gnu.modules[0]", "pattern"),
    ],
)
def test_a_value_that_would_run_a_command_is_refused(tmp_path, path, value, field, words):
    f = write(tmp_path, cluster(**{path: value}))
    with pytest.raises(ApptuneError) as e:
        site.load_clusters(tmp_path, BASE_ENVS)
    assert (e.value.file, e.value.field) == (str(f), field), str(e.value)
    assert words in e.value.message


def test_variables_still_expand_in_the_job_as_reframes_do(tmp_path):
    """``$HOME`` and ``${SLURM_JOB_ID}`` are the documented use: kept as written."""
    env = {"WORK": "$HOME/w", "JOBDIR": "/scratch/${SLURM_JOB_ID}", "OMP_NUM_THREADS": "2"}
    write(tmp_path, cluster(**{"environments.gnu.env_vars": env}))
    (e,) = site.load_clusters(tmp_path, BASE_ENVS)["environments"]
    assert dict(e["env_vars"]) == env


def _site_copy(tmp_path: Path, data: dict) -> Path:
    cfg = tmp_path / "site-config"
    shutil.copytree(REPO / "site-config", cfg)
    for f in (cfg / "clusters").glob("*.yaml"):
        f.unlink()
    data = dict(data, partitions={"p": {"sbatch": ["--partition=batch"], "environs": ["gnu"]}})
    write(cfg / "clusters", data, "evil")
    return cfg / "settings.py"


def _reframe(cfg: Path, cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [REFRAME, "-C", str(cfg), "-c", str(REPO / "reframe-checks/hpcc"), "--system", "evil"]
        + ["--mode", "ci", "-n", "HPCCCheck%tier=ci%build.variant=tuned$", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_validate_list_and_dry_run_execute_nothing_of_a_cluster_file(tmp_path):
    """The prepare commands are the job's: a dry run writes them into its job scripts and
    runs none (it used to run them, to find the environment's compilers); a variable
    whose value runs a command is refused before ReFrame expands it."""
    run = tmp_path / "run"
    run.mkdir()
    ran = tmp_path / "RAN"
    cfg = _site_copy(
        tmp_path,
        {"environments": {"gnu": {"prepare_cmds": [f"touch {ran}-prepare"]}}},
    )
    for args in (["-l"], ["--dry-run"]):
        p = _reframe(cfg, run, *args)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        assert not list(tmp_path.glob("RAN*")), args
    scripts = list(run.glob("stage/evil/p/gnu/HPCCBuild_*/rfm_build.sh"))
    assert scripts and f"touch {ran}-prepare" in scripts[0].read_text()  # the job's own

    cfg = _site_copy(
        tmp_path / "b", {"environments": {"gnu": {"env_vars": {"A": f"$(touch {ran}-env)"}}}}
    )
    for args in (["-l"], ["--dry-run"]):
        p = _reframe(cfg, run, *args)
        assert p.returncode != 0
        assert "clusters/evil.yaml: environments.gnu.env_vars.A: command substitution" in (
            p.stdout + p.stderr
        )
    v = subprocess.run(
        [sys.executable, "-m", "apptune", "validate", "-C", str(cfg)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert v.returncode == 1
    assert "clusters/evil.yaml: environments.gnu.env_vars.A: command substitution" in v.stderr
    assert not list(tmp_path.glob("RAN*"))


def test_validate_refuses_a_line_break_in_the_site_configs_values(tmp_path):
    """settings.py is the site's own Python (code), but what it hands ReFrame for the job
    script is held to the cluster file's rule: one line per value."""
    cfg = tmp_path / "site-config"
    shutil.copytree(REPO / "site-config", cfg)
    s = cfg / "settings.py"
    s.write_text(
        s.read_text()
        .replace("['OMPI_FC', 'gfortran']]", "['OMPI_FC', 'gfortran\\ntouch x']]", 1)
        .replace("'descr': 'All cores of this node'", "'descr': 'All\\x00cores'")
    )
    _, found = validate.load_site_facts(s)
    msgs = [str(p) for p in found]
    assert any(
        "environments.gnu.env_vars.OMPI_FC: holds the control character \\n" in m for m in msgs
    ), msgs
    assert any(
        "systems.local.partitions.default.descr: holds the control character \\x00" in m
        for m in msgs
    ), msgs


@pytest.mark.parametrize(
    "extras, field, words",
    [
        ("{'max_outside_cpu': 5}", "run_quality", "at most 1"),
        ("{'max_steal': float('nan')}", "run_quality", "at most 1"),
        ("{'max_stael': 0.1}", "run_quality", "unknown run-quality limit"),
        ("0.3", "run_quality", ""),
    ],
)
def test_validate_checks_a_site_partitions_run_quality(tmp_path, extras, field, words):
    """An out-of-range limit in settings.py is refused by validate, naming the partition,
    instead of failing every run of it (blaming the run)."""
    cfg = tmp_path / "site-config"
    shutil.copytree(REPO / "site-config", cfg)
    s = cfg / "settings.py"
    s.write_text(
        s.read_text().replace(
            "'energy_sample_hz': 10,", f"'energy_sample_hz': 10, 'run_quality': {extras},", 1
        )
    )
    _, found = validate.load_site_facts(s)
    (p,) = [p for p in found if p.field.endswith(field)]
    assert p.field == f"systems.local.partitions.default.extras.{field}"
    assert p.file == str(s) and words in p.message


def test_a_limit_of_one_turns_it_off(tmp_path):
    from apptune.core.run import quality

    limits = quality.Limits.from_dict({"max_outside_cpu": 1.0})
    m = {"steal_fraction": 0.0, "outside_cpu_fraction": 1.02, "cpus": 2, "others": []}
    assert quality.judge(m, limits) == ("clean", [])
    assert quality.judge(m, quality.Limits())[0] == "disturbed"
    write(tmp_path, cluster(**{"partitions.p.run_quality": {"max_outside_cpu": 1.0}}))
    (system,) = site.load_clusters(tmp_path, BASE_ENVS)["systems"]
    assert system["partitions"][0]["extras"]["run_quality"] == {"max_outside_cpu": 1.0}


@pytest.mark.parametrize("file", ["flag-ladders.yaml", "libraries.yaml"])
def test_validate_refuses_a_line_break_in_the_sites_data_files(toy_root, file):
    """The site's flags reach Makefiles (``CFLAGS = ...``) and command lines: a newline in
    one would end the Makefile's line."""
    f = toy_root / "site-config" / file
    data = yaml.safe_load(f.read_text())
    if file == "flag-ladders.yaml":
        data["families"]["gnu"]["baseline"]["cflags"] = ["-O2\n\ttouch x"]
        field = "families.gnu.baseline.cflags[0]"
    else:
        name = next(iter(data["libraries"]))
        data["libraries"][name]["ldflags"] = ["-lfoo\n\ttouch x"]
        field = f"libraries.{name}.ldflags[0]"
    f.write_text(yaml.safe_dump(data))
    _, found = validate.load_site_facts(environments=BASE_ENVS)
    (p,) = [p for p in found if p.file == str(f)]
    assert p.field == field and "a line break or NUL" in p.message
    assert len(str(p).splitlines()) == 1
