"""Shared fixtures: a throw-away apptune tree with a tiny C application ("toy")."""

import hashlib
import io
import shutil
import tarfile
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TOY_MAIN = r"""
#include <stdio.h>
double accumulate(int n);
int main(void) {
    double s = accumulate(1000000);
    FILE *f = fopen("toy.out", "w");
    fprintf(f, "chatter before the block\nBEGIN\nsum=%.10f\nn=1000000\nrate=%.3f\nEND\n", s, 123.5);
    fclose(f);
    return 0;
}
"""
TOY_ACC = r"""
double accumulate(int n) {
    double s = 0.0;
    for (int i = 1; i <= n; i++) s += 1.0 / ((double)i * (double)i);
    return s;
}
"""
TOY_MAKEFILE = (
    "include config.mk\n"
    "toy: main.o acc.o\n\t$(CC) $(CFLAGS) -o toy main.o acc.o\n"
    "main.o: main.c\n\t$(CC) $(CFLAGS) -c main.c\n"
    "acc.o: acc.c\n\t$(CC) $(CFLAGS) -c acc.c\n"
)


def pytest_collection_modifyitems(items):
    """Every test that is neither ``integration`` nor ``slow`` is ``unit`` (make unit)."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in ("integration", "slow")):
            item.add_marker(pytest.mark.unit)


def make_tarball(files: dict, top: str = "toy-1.0") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def toy_component(root: Path, mirror: Path, files: dict) -> bytes:
    """The toy recipe of the tree at ``root`` given a source component (``dest: tests``)
    holding ``files``, its tarball in ``mirror``; returns the tarball."""
    extra = make_tarball(files, top="toy-tests-1.0")
    (mirror / "toy-tests.tar.gz").write_bytes(extra)
    sha = hashlib.sha256(extra).hexdigest()
    f = root / "build-recipes/toy.yaml"
    f.write_text(
        f.read_text().replace(
            "  sha256:",
            "  components:\n    - {file: toy-tests.tar.gz, url: https://example.invalid/t.tgz, "
            f"sha256: {sha}, dest: tests}}\n  sha256:",
            1,
        )
    )
    return extra


def toy_recipe(sha: str, **over) -> str:
    text = f"""
    name: toy
    version: "1.0"
    description: a tiny C program for apptune's own tests
    source:
      url: https://example.invalid/toy-1.0.tar.gz
      file: toy-1.0.tar.gz
      sha256: {sha}
    build:
      system: make
      args: []
      jobs: 1
      templates:
        - {{src: toy/config.mk.j2, dest: config.mk}}
      products: [toy]
    patches:
      - file: 0001-comment.patch
        reason: exercises the patch series
    axes:
      blas:
        openblas: {{library: openblas}}
    defaults: {{blas: openblas}}
    per_file:
      - files: [acc.c]
        flags: baseline
        reason: keep the reduction in IEEE order
    run:
      executable: toy
      output: {{file: toy.out, format: keyvalue, begin: BEGIN, end: END, keys: [sum, n, rate]}}
      figures:
        rate: {{field: rate, unit: op/s, better: higher}}
    tiers:
      ci:
        ranks: 1
        variants:
          gnu: [baseline, tuned]
    """
    return textwrap.dedent(text)


# one line a list item: the context line of main.c's empty first line is a lone space
PATCH = "\n".join(
    [
        "--- a/main.c",
        "+++ b/main.c",
        "@@ -1,3 +1,4 @@",
        "+/* patched by apptune's test */",
        " ",
        " #include <stdio.h>",
        " double accumulate(int n);",
        "",
    ]
)


@pytest.fixture
def toy_root(tmp_path, monkeypatch):
    """An apptune tree with the toy app; APPTUNE_ROOT, cache and mirror point into tmp."""
    root = tmp_path / "tree"
    for d in (
        "build-recipes/templates/toy",
        "patches/toy",
        "inputs/toy/ci",
        "reference/toy",
        "reference/baselines/local",
        "site-config",
    ):
        (root / d).mkdir(parents=True)
    for f in ("flag-ladders.yaml", "libraries.yaml"):
        shutil.copy(REPO / "site-config" / f, root / "site-config" / f)
    tarball = make_tarball({"main.c": TOY_MAIN, "acc.c": TOY_ACC, "Makefile": TOY_MAKEFILE})
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy-1.0.tar.gz").write_bytes(tarball)
    sha = hashlib.sha256(tarball).hexdigest()
    (root / "build-recipes/toy.yaml").write_text(toy_recipe(sha))
    (root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ (app_cflags + cflags) | makeflags }}\n"
    )
    (root / "patches/toy/0001-comment.patch").write_text(PATCH)
    (root / "inputs/toy/ci/input.yaml").write_text(
        "description: toy\nfiles: {params.txt: params.txt.j2}\nparameters: {n: 1000000}\n"
    )
    (root / "inputs/toy/ci/params.txt.j2").write_text("n={{ n }}\n")
    (root / "reference/toy/ci.yaml").write_text(
        textwrap.dedent("""
        app: toy
        tier: ci
        recorded: test
        fields:
          sum: {value: 1.6449330668, rel: 1.0e-9}
          n: {value: 1000000, abs: 0}
        """)
    )
    monkeypatch.setenv("APPTUNE_ROOT", str(root))
    monkeypatch.setenv("APPTUNE_CACHE", str(tmp_path / "cache"))
    # the build cache under that download cache, whatever the user's environment says
    monkeypatch.delenv("APPTUNE_BUILD_CACHE", raising=False)
    monkeypatch.setenv("APPTUNE_SOURCE_MIRROR", str(mirror))
    monkeypatch.chdir(tmp_path)
    return root


def gnu_mpi_toolchain():
    """The gnu environment of the site: Open MPI's compiler wrappers, OpenBLAS."""
    from apptune.core.data.recipes import Toolchain

    return Toolchain(
        environment="gnu",
        family="gnu",
        cc="mpicc",
        cxx="mpicxx",
        ftn="mpifort",
        mpi="openmpi",
        mpi_standard="3.1",
        blas="openblas",
    )


@pytest.fixture
def gnu_toolchain():
    from apptune.core.data.recipes import Toolchain

    return Toolchain(
        environment="gnu",
        family="gnu",
        cc="gcc",
        cxx="g++",
        ftn="gfortran",
        mpi="none",
        mpi_standard="3.1",
        blas="openblas",
        requires={"all": ["gcc"]},
    )


@pytest.fixture(autouse=True)
def _private_history(tmp_path_factory, monkeypatch):
    """Runs made by tests (``apptune run`` in the integration tests) go to a throw-away
    history and ReFrame results database, never the user's."""
    monkeypatch.setenv("APPTUNE_HISTORY", str(tmp_path_factory.mktemp("history")))


def this_machine() -> tuple[str, dict]:
    """(machine id, fingerprint) of the machine the tests run on."""
    from apptune import machine

    fp = machine.fingerprint()
    return machine.machine_id(fp), fp


CLEAN = {"grade": "clean", "reasons": [], "steal_fraction": 0.0, "outside_cpu_fraction": 0.01}


def write_run(
    run_dir: Path,
    uuid: str,
    start: float,
    results: list[dict],
    mode: str = "nightly",
    system: str = "local",
) -> Path:
    """A run directory as ``apptune run`` leaves it: ReFrame's report.json and one
    apptune-result.json per test, in output/ for a passed test and, as ReFrame leaves
    them, in stage/ for a failed one.  ``results``: dicts with app, tier,
    environment, variant, figures and optionally ok, provenance, repeat, result,
    quality (default clean), machine (default this machine's (id, fingerprint))."""
    import json

    cases = []
    for i, r in enumerate(results):
        rep = r.get("repeat")
        name = (
            f"{r['app'].upper()}Check %tier={r['tier']}"
            + (f" %.repeat_no={rep}" if rep is not None else "")
            + f" %build.variant={r['variant']}"
        )
        ok = r.get("ok", True)
        result = r.get("result", "pass" if ok else "fail")
        out = (
            run_dir
            / ("output" if result == "pass" else "stage")
            / system
            / "default"
            / r["environment"]
            / f"T{i}"
        )
        out.mkdir(parents=True)
        (out / "apptune-result.json").write_text(
            json.dumps(
                {
                    "app": r["app"],
                    "tier": r["tier"],
                    "variant": r["variant"],
                    "environment": r["environment"],
                    "system": system,
                    "partition": "default",
                    "test": f"T{i}",
                    "figures": r["figures"],
                    "verification": {
                        "ok": ok,
                        "summary": "verified 2 fields" if ok else "sum = nan, expected 1.64 ± 1e-9",
                        "fields": r.get("fields", []),
                    },
                    "energy": r.get("energy", {"trust": "none"}),
                    "provenance": r.get("provenance", {}),
                    "baseline": {},
                    "quality": r.get("quality", CLEAN),
                    "machine_id": (r.get("machine") or this_machine())[0],
                    "machine": (r.get("machine") or this_machine())[1],
                    **{
                        k: r[k]
                        for k in ("placement_layout", "cpu_freq", "knobs", "job", "launch", "input")
                        if k in r
                    },
                }
            )
        )
        cases.append(
            {
                "display_name": name,
                "unique_name": f"T{i}",
                "environ": r["environment"],
                "system": system,
                "partition": "default",
                "result": result,
                "fail_phase": r.get("fail_phase", None if ok else "sanity"),
                "fail_reason": None if ok else "sanity",
                "fixture": False,
                "outputdir": str(out) if result == "pass" else None,
                "stagedir": str(out),
            }
        )
    (run_dir / "report.json").write_text(
        json.dumps(
            {
                "session_info": {
                    "uuid": uuid,
                    "time_start_unix": start,
                    "time_start": "x",
                    "hostname": "vm",
                    "version": "4.10.4",
                    "num_cases": len(cases),
                    "num_failures": 0,
                    "cmdline": f"reframe -C site-config/settings.py --mode {mode} -r",
                },
                "runs": [{"testcases": cases}],
            }
        )
    )
    return run_dir


def hpcc_ci_run(run_dir: Path, **row) -> Path:
    """A ci run of one verified HPCC variant (gnu/tuned); ``row`` overrides its fields."""
    base = {
        "app": "hpcc",
        "tier": "ci",
        "environment": "gnu",
        "variant": "tuned",
        "figures": {"HPL": 40.0, "wall_time": 9.0},
    }
    return write_run(run_dir, "u1", 1.7e9, [{**base, **row}], mode="ci")


@pytest.fixture
def fake_trials(monkeypatch, gnu_toolchain):
    """``tune`` and ``bisect`` of the toy without compilers or processes: the site is the
    gnu toolchain on a local partition, a build is a directory with its plan and provenance,
    and a run writes the toy's output (a wrong sum where the build's variant is in
    ``fake.wrong``) and the runner's record (clean, this machine). The rest is the real
    ``localrun.run_tier`` and run core: each trial leaves the run record they write.
    ``fake.interrupt_at = N`` interrupts the Nth run (Ctrl-C)."""
    import json
    from types import SimpleNamespace

    from apptune.core.data import site as site_config
    from apptune.core.run import localrun, runner
    from apptune.models import Provenance
    from apptune.yamlio import atomic_write_json

    fake = SimpleNamespace(wrong=set(), interrupt_at=None, runs=0)
    site = site_config.Site("gnu", gnu_toolchain, {}, "local", "local", {}, system="test")

    def build_variant(recipe, plan, site, stage, use_cache=True):
        stage.mkdir(parents=True, exist_ok=True)
        prov = {"variant": plan.variant, "flags": {"cflags": plan.cflags}, "cache": {}}
        (stage / "plan.json").write_text(plan.to_json())
        (stage / "provenance.json").write_text(json.dumps(prov))
        (stage / "wrong").write_text("1" if plan.variant in fake.wrong else "")
        return Provenance.model_validate(prov)

    def run(argv, cwd, environ, deadline, sampler):
        fake.runs += 1
        if fake.runs == fake.interrupt_at:
            raise KeyboardInterrupt
        spec = json.loads((cwd / runner.SPEC_FILE).read_text())
        build = Path(spec["steps"][-1]["argv"][0]).parent
        total = 1.7 if (build / "wrong").read_text() else 1.6449330668
        (cwd / "toy.out").write_text(f"BEGIN\nsum={total:.10f}\nn=1000000\nrate=123.5\nEND\n")
        mid, fp = this_machine()
        atomic_write_json(
            cwd / runner.RECORD_FILE,
            {
                "machine": fp,
                "machine_id": mid,
                "t_start": 1.0,
                "wall_s": 0.25,
                "quality": CLEAN,
                "exit_status": 0,
                "failed_step": None,
                "message": None,
                "steps": [],
                "completed": True,
            },
        )
        return 0

    monkeypatch.setattr(site_config, "load_site", lambda *a, **k: site)
    monkeypatch.setattr(localrun, "build_variant", build_variant)
    monkeypatch.setattr(localrun, "_run", run)
    fake.site = site
    return fake


def run_records(run_dir: Path) -> list[dict]:
    """The run records of a run directory: those of passed tests (under ``output``) and of
    the others, which keep their stage directory (an expected failure)."""
    import json

    found = [*(run_dir / "stage").rglob("apptune-result.json")]
    found += (run_dir / "output").rglob("apptune-result.json")
    return [json.loads(f.read_text()) for f in found]


def own_check_failed(message: str, v) -> bool:
    """Whether the recipe's own check whose message is ``message`` failed in verification
    ``v`` (a failure says what passing would have meant, and what was seen instead)."""
    return any(m.startswith(f"own check failed: expected “{message}”; ") for m in v.failures)
