"""Build and run one variant on this node outside ReFrame, with the checks' own steps.

``apptune bisect`` and ``apptune tune`` run dozens of candidates that ReFrame's
checks cannot express: a build tree whose object files are mixed from two builds
(the build cache keeps only products), and input parameters no tier has (tune's
knobs, e.g. HPL's N). They call the same package functions the checks call —
:func:`recipes.resolve`, ``python -m apptune.build``, :func:`inputs.render`, the run
core (:func:`apptune.run.steps` and :func:`apptune.run.evaluate`, which write the same
run record, ``apptune-result.json``, flagged ``trial``) and the energy sampler — with the
environment and launcher taken from the ReFrame site config, so a candidate is built,
run and verified exactly as a check would do it on a local partition.
"""

from __future__ import annotations

import json
import os
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import energy, inputs, paths, placement, recipes, runner, sources
from . import run as runcore
from .constants import XFAIL_FILE
from .errors import ApptuneError, last_error_line
from .models import Recipe
from .recipes import time_limit_seconds

#: Launchers a candidate can be started with on this node (ReFrame's names).
LAUNCHERS = ("mpirun", "local")
#: The job's standard output in a run directory (``file: stdout`` outputs).
STDOUT = "run.out"


@dataclass
class Site:
    """One ReFrame environment on one partition of the site config, outside ReFrame."""

    environment: str
    toolchain: recipes.Toolchain
    #: Variables of the partition, then the environment (``$VAR`` expanded).
    env: dict[str, str]
    launcher: str
    partition: str
    extras: dict = field(default_factory=dict)

    def environ(self, extra: dict | None = None) -> dict[str, str]:
        return {**os.environ, "APPTUNE_ROOT": str(paths.root()), **self.env, **(extra or {})}

    def launch(self, ranks: int) -> list[str]:
        return ["mpirun", "-np", str(ranks)] if self.launcher == "mpirun" else []


def _env_pairs(pairs, where: str, config: Path) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        if not (isinstance(p, (list, tuple)) and len(p) == 2):
            raise ApptuneError(config, where, f"{p!r} is not a [NAME, value] pair")
        out[str(p[0])] = os.path.expandvars(str(p[1]))
    return out


def load_site(
    environment: str,
    config: str | os.PathLike = paths.DEFAULT_CONFIG,
    system: str = "local",
    languages: list[str] | None = None,
) -> Site:
    """The environment ``environment`` on the first partition of ``system`` that offers it;
    its tools for ``languages`` (None: every language) must be found."""
    config = Path(config)
    if not config.is_absolute():
        config = paths.root() / config
    try:
        site = runpy.run_path(str(config))["site_configuration"]
    except (OSError, KeyError, SyntaxError) as e:
        raise ApptuneError(config, "site_configuration", f"cannot load: {e}") from None
    envs = {e["name"]: e for e in site.get("environments", [])}
    if environment not in envs:
        raise ApptuneError(
            config,
            "environments",
            f"unknown environment '{environment}' (known: {', '.join(sorted(envs))})",
        )
    systems = {s["name"]: s for s in site.get("systems", [])}
    if system not in systems:
        raise ApptuneError(
            config, "systems", f"unknown system '{system}' (known: {', '.join(systems)})"
        )
    part = next(
        (p for p in systems[system].get("partitions", []) if environment in p.get("environs", [])),
        None,
    )
    if part is None:
        raise ApptuneError(
            config,
            f"systems.{system}.partitions",
            f"no partition of '{system}' offers environment '{environment}'",
        )
    if part.get("launcher", "local") not in LAUNCHERS:
        raise ApptuneError(
            config,
            f"systems.{system}.partitions.{part['name']}.launcher",
            f"'{part['launcher']}': candidates run on this node with {' or '.join(LAUNCHERS)} only",
        )
    e = envs[environment]

    class _Environ:  # what Toolchain.from_environ reads from a ReFrame environment
        name = environment
        cc, cxx, ftn = e.get("cc", "cc"), e.get("cxx", "CC"), e.get("ftn", "ftn")
        extras = e.get("extras", {})

    tc = recipes.Toolchain.from_environ(_Environ)
    env = _env_pairs(
        part.get("env_vars"), f"systems.{system}.partitions.{part['name']}.env_vars", config
    )
    env.update(_env_pairs(e.get("env_vars"), f"environments.{environment}.env_vars", config))
    missing = tc.missing_tools(path=env.get("PATH", os.environ.get("PATH")), languages=languages)
    if missing:
        raise ApptuneError(
            config,
            f"environments.{environment}.extras.requires",
            f"compiler/tool {', '.join(missing)} not found on PATH",
        )
    return Site(
        environment=environment,
        toolchain=tc,
        env=env,
        launcher=part.get("launcher", "local"),
        partition=f"{system}:{part['name']}",
        extras=dict(part.get("extras", {})),
    )


# ----------------------------------------------------------------------------- build
def plan_for(
    recipe: Recipe,
    variant: str,
    site: Site,
    ladder_everywhere: bool = False,
    extra_cflags: list[str] = (),
    extra_fflags: list[str] = (),
) -> dict:
    """The build plan of ``variant``; ``ladder_everywhere`` compiles the files of the
    recipe's per_file rules with the variant's ladder too (bisect's way to rediscover
    why a rule exists); extra flags are appended to the ladder (tune's extra flags)."""
    plan = recipes.resolve(recipe, variant, site.toolchain).to_dict()
    plan["cflags"] = plan["cflags"] + list(extra_cflags)
    plan["fflags"] = plan["fflags"] + list(extra_fflags)
    if extra_cflags or extra_fflags:
        plan["variant"] = variant_label(variant, extra_cflags, extra_fflags)
    if ladder_everywhere:
        ladder = recipes.Variant.parse(variant, recipe).ladder
        plan["per_file"] = [
            dict(
                r,
                cflags=list(plan["cflags"]),
                fflags=list(plan["fflags"]),
                ladder=ladder,
                reason=f"ignored: the whole build uses the {ladder} ladder",
            )
            for r in plan["per_file"]
        ]
    return plan


def variant_label(variant: str, extra_cflags=(), extra_fflags=()) -> str:
    extra = sorted(set(extra_cflags) | set(extra_fflags))
    return variant + (f" {' '.join(extra)}" if extra else "")


def build_variant(
    recipe: Recipe, plan: dict, site: Site, stage: Path, use_cache: bool = True
) -> dict:
    """Build ``plan`` in ``stage`` as the checks' build fixture does (``python -m
    apptune.build``); return its provenance. A build that already happened in
    ``stage`` for the same plan is kept (bisect's ends survive a restart)."""
    stage = Path(stage)
    prov_file = stage / "provenance.json"
    if prov_file.is_file() and (stage / "plan.json").is_file():
        if json.loads((stage / "plan.json").read_text()) == plan and (
            use_cache or (stage / "src").is_dir()
        ):
            return json.loads(prov_file.read_text())
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    (stage / "plan.json").write_text(json.dumps(plan, indent=1))
    tarball = sources.fetch(recipe)
    cmd = [
        sys.executable,
        "-m",
        "apptune.build",
        "--plan",
        str(stage / "plan.json"),
        "--source",
        str(tarball),
        "--stage",
        str(stage),
    ] + ([] if use_cache else ["--no-cache"])
    with open(stage / "build.log", "w") as log:
        rc = subprocess.run(
            cmd, cwd=stage, env=site.environ(), stdout=log, stderr=subprocess.STDOUT
        ).returncode
    if (stage / XFAIL_FILE).is_file():
        rec = json.loads((stage / XFAIL_FILE).read_text())
        raise ApptuneError(
            recipes.recipe_path(recipe.name),
            "build.expected_failures",
            f"{plan['variant']} with {site.environment} is an expected build failure: "
            f"{rec['reason']}",
        )
    if rc != 0 or not prov_file.is_file():
        err = last_error_line(stage / "build.log") or f"build exited with status {rc}"
        raise ApptuneError(stage / "build.log", plan["variant"], f"build failed: {err}")
    return json.loads(prov_file.read_text())


# ------------------------------------------------------------------------------- run
@dataclass
class RunResult:
    ok: bool
    summary: str
    figures: dict
    wall_time: float | None
    verification: dict
    energy: dict
    params: dict
    run_dir: str
    #: The runner's run-quality record (apptune/quality.py) and the machine's id.
    quality: dict | None = None
    machine_id: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def run_tier(
    recipe: Recipe,
    tier: str,
    build_dir: Path,
    run_dir: Path,
    site: Site,
    ranks: int | None = None,
    overrides: dict | None = None,
    env: dict | None = None,
    label: str | None = None,
    changed_inputs: set[str] = frozenset(),
    threads: int = 1,
    binding: str | None = None,
) -> RunResult:
    """Run the build in ``build_dir`` on ``tier`` in a fresh ``run_dir`` and verify it.

    ``overrides`` replace input parameters and ``changed_inputs`` names those that
    differ from the tier's (reference fields that depend on them are not compared).
    ``threads`` (per rank) and ``binding`` are applied as the checks' placement
    variables are (:mod:`apptune.placement`)."""
    if tier not in recipe.tiers:
        raise ApptuneError(
            recipes.recipe_path(recipe.name),
            "tiers",
            f"unknown tier '{tier}' (allowed: {', '.join(recipe.tiers)})",
        )
    t = recipe.tiers[tier]
    ranks = ranks or t.ranks
    build_dir, run_dir = Path(build_dir).resolve(), Path(run_dir).resolve()
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    params = inputs.render(
        recipe.name, tier, run_dir, ranks, build_dir=build_dir, overrides=overrides
    )
    run = recipe.run
    threads_env = placement.thread_env(run.env, threads) if threads != 1 else {}
    environ = site.environ({**run.env, **threads_env, **(env or {})})
    try:
        bind = (
            placement.binding_options(binding, site.launcher, site.toolchain.mpi, threads)
            if site.launcher == "mpirun" or binding
            else []
        )
    except placement.PlacementError as e:
        raise ApptuneError(None, "binding", str(e)) from None
    launch = site.launch(ranks)
    launch = launch[:1] + bind + launch[1:] if launch else launch
    steps = runcore.steps(recipe, params, build_dir, launch, stdout=STDOUT, stderr="run.err")
    (run_dir / "command.txt").write_text(shlex.join(steps[-1].argv) + "\n")
    # the same runner as the checks' job script: no shell, exit status, run quality
    spec = runner.Spec(
        steps=steps,
        env={**run.env, **threads_env, **(env or {})},
        harness_pid=os.getpid(),
        limits=dict(site.extras.get("run_quality", {})),
        quiet_wait_s=float(site.extras.get("quiet_wait_s", 0)),
    )
    runner.write_spec(run_dir / runner.SPEC_FILE, spec)
    deadline = time_limit_seconds(t.time_limit)
    sampler = _sampler(site, run_dir, ranks)
    try:
        _run(
            [sys.executable, "-m", "apptune.runner", runner.SPEC_FILE],
            run_dir,
            environ,
            deadline + spec.quiet_wait_s if deadline else None,
            sampler,
        )
    finally:
        rec_energy = sampler.stop()
    identity = {
        "app": recipe.name,
        "tier": tier,
        "variant": label,
        "environment": site.environment,
        "partition": site.partition,
        "ranks": ranks,
        "input": params,
        "trial": True,  # a tune or bisect candidate, not a check of a tier
    }
    record = runcore.evaluate(
        recipe,
        tier,
        run_dir,
        identity,
        build_dir=build_dir,
        stdout=STDOUT,
        energy_record=rec_energy,
        environment=site.environment,
        variant=label,
        changed_inputs=changed_inputs,
        stderr=run_dir / "run.err",
        no_record="killed by its time limit?",
        require_provenance=False,
    )
    runcore.write_record(run_dir, record)
    v = record["verification"]
    figures = record.get("figures") or {"wall_time": (record.get("run") or {}).get("wall_s")}
    result = RunResult(
        ok=bool(v["ok"]),
        summary=v["summary"],
        figures=figures,
        wall_time=figures.get("wall_time"),
        verification=v,
        energy=record["energy"],
        params=params,
        run_dir=str(run_dir),
        quality=record.get("quality"),
        machine_id=record.get("machine_id"),
    )
    return result


def _sampler(site: Site, run_dir: Path, ranks: int):
    ex = site.extras
    state = {"pid": None}
    context = {
        "power_model": ex.get("power_model"),
        "scheduler": "local",
        "ncpus": os.cpu_count(),
        "nodes": 1,
        "pid": lambda: state["pid"],
        "jobid": lambda: state["pid"],
    }
    s = energy.Sampler(
        list(ex.get("energy_meters", [])),
        site.partition,
        run_dir,
        hz=float(ex.get("energy_sample_hz", 10)),
        options=ex.get("energy_meter_options", {}),
        context=context,
        exclusive=bool(ex.get("exclusive_node", False)),
    )
    s.state = state
    s.start()
    return s


def _run(argv, cwd, environ, deadline, sampler) -> int:
    """Start the runner in its own session (its log: runner.log) and wait; at the deadline
    the whole session is killed (the runner and every step it started)."""
    with open(Path(cwd) / "runner.log", "w") as log:
        try:
            p = subprocess.Popen(
                argv,
                cwd=cwd,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            raise ApptuneError(None, argv[0], f"cannot run: {e.strerror}") from None
        sampler.state["pid"] = p.pid
        try:
            return p.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            return -9
