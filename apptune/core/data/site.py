"""The ReFrame site config: Slurm clusters from a few values per cluster, the config as
ReFrame loads it (:func:`load_reframe_config`), the variables of a job of its
environments (:func:`job_environment`), and one environment on one partition as a check
sees it (:class:`Site`, :func:`load_site`: what tune and bisect trials run with).

``site-config/clusters/NAME.yaml`` describes one Slurm cluster (the system
``NAME``); ``site-config/settings.py`` turns every such file into ReFrame
systems, environments and execution modes with :func:`load_clusters`. A site
writes what differs (hostnames, sbatch options, cores per node, modules); the
rest has defaults chosen for regression runs:

* scheduler ``squeue``: ReFrame polls with squeue, so no slurmdbd is needed
  (``slurm`` polls with sacct where accounting exists);
* ``--no-requeue``: a job on a node that fails is reported as such instead of
  silently running again;
* every check watches its job (apptune/core/run/slurm.py ``JobWatch``): a job pending on
  DOWN/DRAINED nodes is cancelled after ``down_node_wait`` seconds, and a failed
  squeue is retried for up to ``slurmctld_timeout`` seconds instead of ending the job;
* ``srun`` launcher; ``mpirun`` per partition where the MPI lacks PMI support;
* modes ``ci``, ``dev``, ``nightly`` (energy-grade: nodes exclusive),
  ``placement`` (nightly fully vs half-subscribed) and ``nodes`` (the ci tier
  on every idle node, ReFrame's ``--distribute``).

The schema is apptune/models/cluster.py; docs/slurm.md has it with an example.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ... import paths
from ...errors import ApptuneError, first_of
from ...models.cluster import Cluster, line_break_problems
from ...yamlio import load_model, load_yaml
from . import recipes

#: Matches no host name: a cluster without hostnames is selected only with ``--system``.
NEVER = r"(?!)"


def _cores(v):
    return (os.cpu_count() or 1) if v == "this-host" else v


def cluster_system(name: str, c: Cluster, base_envs: dict[str, dict], file: Path) -> dict:
    """The ReFrame ``systems`` entry of one cluster."""
    parts = []
    for pname, p in c.partitions.items():
        envs = p.environs if p.environs is not None else (list(c.environments) or list(base_envs))
        for e in envs:
            if e not in base_envs:
                raise ApptuneError(
                    file,
                    f"partitions.{pname}.environs",
                    f"unknown environment {e!r} (site config has: {', '.join(sorted(base_envs))})",
                )
        access = list(p.sbatch)
        if not c.requeue:
            access.append("--no-requeue")
        if p.exclusive:
            access.append("--exclusive")
        cores = _cores(p.cores_per_node)
        extras = {
            "energy_meters": list(p.energy_meters),
            "exclusive_node": p.exclusive,
            "energy_sample_hz": 10,
            "slurm_watch": {
                "slurmctld_timeout": c.slurmctld_timeout,
                "down_node_wait": c.down_node_wait,
            },
        }
        if p.power_model is not None:
            extras["power_model"] = dict(p.power_model)
        limits = p.run_quality.model_dump(exclude_none=True)
        if limits:
            extras["run_quality"] = limits
        if p.quiet_wait_s:
            extras["quiet_wait_s"] = p.quiet_wait_s
        if p.scratch_dir:
            extras["scratch_dir"] = p.scratch_dir
        if p.record_env:
            extras["record_env"] = list(p.record_env)
        part = {
            "name": pname,
            "descr": p.descr or f"{name}: {' '.join(p.sbatch) or 'default partition'}",
            "scheduler": c.scheduler,
            "launcher": p.launcher,
            "access": access,
            "environs": envs,
            "max_jobs": p.max_jobs,
            "env_vars": [[k, v] for k, v in p.env_vars.items()],
            "extras": extras,
            # ReFrame cancels a job pending on a partition an administrator set DOWN or
            # INACTIVE at once. Pending on nodes is left to apptune's watch (bounded wait,
            # node states checked): ReFrame's default also cancels on ReqNodeNotAvail at
            # the first poll, which Slurm's backfill sometimes reports for healthy nodes.
            "sched_options": {"slurm_job_cancel_reasons": ["PartitionDown", "PartitionInactive"]},
        }
        if cores:
            part["processor"] = {"num_cpus": cores, "num_cpus_per_core": 1}
        parts.append(part)
    return {
        "name": name,
        "descr": c.descr or f"Slurm cluster {name} ({file.name})",
        "hostnames": list(c.hostnames) or [NEVER],
        "modules_system": c.modules_system,
        "partitions": parts,
    }


def cluster_environments(
    name: str, c: Cluster, base_envs: dict[str, dict], file: Path
) -> list[dict]:
    """Per-cluster definitions of the base environments (modules, extra variables)."""
    out = []
    for ename, e in c.environments.items():
        base = base_envs.get(ename)
        if base is None:
            raise ApptuneError(
                file,
                f"environments.{ename}",
                f"unknown environment (site config has: {', '.join(sorted(base_envs))})",
            )
        env = copy.deepcopy(base)
        env["target_systems"] = [name]
        env["modules"] = list(base.get("modules", [])) + list(e.modules)
        env["env_vars"] = list(base.get("env_vars", [])) + [[k, v] for k, v in e.env_vars.items()]
        if e.prepare_cmds:
            env["prepare_cmds"] = list(base.get("prepare_cmds", [])) + list(e.prepare_cmds)
        out.append(env)
    return out


def cluster_modes(names: list[str]) -> list[dict]:
    """Execution modes of the Slurm systems: one word for the options of each use."""
    if not names:
        return []
    async_ = ["--exec-policy=async", "--keep-stage-files"]
    modes = {
        # reduced inputs; jobs in parallel up to each partition's max_jobs
        "ci": ["--tag=^ci$", *async_],
        # ci inputs, no performance verdict
        "dev": ["--tag=^ci$", "--skip-performance-check", *async_],
        # full inputs, nodes exclusive: energy figures are measured-grade where a meter exists
        "nightly": ["--tag=^nightly$", "-S", "exclusive_access=true", *async_],
        # nightly fully vs half-subscribed (the same ranks on twice the nodes)
        "placement": [
            "--tag=^nightly$",
            "-P",
            "ranks_per_node=full,half",
            "-S",
            "exclusive_access=true",
            *async_,
        ],
        # the ci tier once on every idle node: a slow or broken node stands out
        "nodes": ["--tag=^ci$", "--distribute=idle", "--skip-performance-check", *async_],
    }
    return [
        {"name": m, "target_systems": list(names), "options": opts} for m, opts in modes.items()
    ]


def load_clusters(directory: str | os.PathLike, base_environments: list[dict]) -> dict:
    """Systems, environments and modes of every ``*.yaml`` in ``directory``."""
    base = {e["name"]: e for e in base_environments if "target_systems" not in e}
    systems, envs, names = [], [], []
    d = Path(directory)
    for f in sorted(d.glob("*.yaml")) if d.is_dir() else []:
        name = f.stem
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
            raise ApptuneError(
                f, None, "the file name is the ReFrame system name: letters, digits, '-', '_'"
            )
        # a value with a line break would be a command line of the job script: refused
        # before anything reads it (every one named)
        breaks = line_break_problems(f, load_yaml(f))
        if breaks:
            raise first_of(breaks, hint=None)
        c = load_model(f, Cluster)
        envs.extend(cluster_environments(name, c, base, f))
        systems.append(cluster_system(name, c, base, f))
        names.append(name)
    return {"systems": systems, "environments": envs, "modes": cluster_modes(names)}


def load_reframe_config(cfg: Path):
    """The site config file ``cfg`` loaded and checked by ReFrame's own loader, as
    ``reframe -C CFG`` does (``reframe.core.config.load_config``, then its schema); its
    parts read as ``site["environments"]``, ``site["systems"]``."""
    from reframe.core import config as rconfig
    from reframe.core.exceptions import ReframeError

    if not cfg.is_file():
        raise ApptuneError(cfg, None, "site config not found (give it with -C)")
    try:
        site = rconfig.load_config(str(cfg))
        site.validate()
        return site
    except SystemExit as e:  # the config's own one-line error (e.g. a bad cluster file)
        msg = str(e.code).removeprefix("apptune: error: ")
        raise (
            ApptuneError(None, None, msg) if ": " in msg else ApptuneError(cfg, None, msg)
        ) from None
    except ReframeError as e:  # its message names the reasons under it
        raise ApptuneError(cfg, "site_configuration", " ".join(str(e).split())) from None
    except Exception as e:  # the file is Python: any error in it is reported, in one line
        raise ApptuneError(cfg, None, f"cannot load: {type(e).__name__}: {e}") from None


def job_environment(modules_system, prepare_cmds, environs, login: bool = False):
    """The variables a job script of these ReFrame environments runs with, as
    (set or changed, unset), against this process's environment.

    The script is the one ReFrame writes (``Job.prepare``): the partition's
    ``prepare_cmds``, then per environment its ``prepare_cmds``, the modules system's load
    commands and ``export NAME=value`` of its ``env_vars``; it is run by the shell a job
    script runs in, so modules, ``$VAR`` and everything else expand exactly as there.
    The lines come from the site config (the site's own code, and its cluster files' values,
    checked as data: :mod:`apptune.models.cluster`), never from a recipe; they run only
    where the job's own script would run them (a build or a trial), never for a listing or
    a dry run."""
    lines = list(prepare_cmds)
    for e in environs:
        lines += list(e.prepare_cmds)
        for m in e.modules_detailed:
            lines += modules_system.emit_load_commands(**m)
        lines += [f"export {k}={v}" for k, v in e.env_vars.items()]
    # the environment before and after, NUL-separated on fd 3 (the lines may print)
    script = "\n".join(["exec 3>&1 1>&2", "env -0 >&3", "printf '\\0' >&3", *lines, "env -0 >&3"])
    shell = ["bash", "-l"] if login else ["bash", "--noprofile", "--norc"]
    p = subprocess.run([*shell, "-c", script], capture_output=True)
    before, _, after = p.stdout.partition(b"\0\0")

    def parse(blob: bytes) -> dict[str, str]:
        pairs = (x.decode(errors="surrogateescape").partition("=") for x in blob.split(b"\0"))
        return {k: v for k, _, v in pairs if k}

    was, now = parse(before), parse(after)
    if p.returncode != 0 or not now:
        err = p.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(err[-1] if err else f"the shell exited with status {p.returncode}")
    changed = {k: v for k, v in now.items() if was.get(k) != v and k != "_"}
    return changed, sorted(set(was) - set(now))


# ------------------------------------------------------- one environment, as a check sees it
#: Schedulers whose jobs run on this node (ReFrame's names).
LOCAL_SCHEDULERS = ("local",)

#: Slurm's schedulers: inside an allocation (``SLURM_JOB_ID`` set) a trial starts its
#: ranks in it, with these launchers; ``srun`` is given the trial's sizes (``srunalloc``).
SLURM_SCHEDULERS = ("slurm", "squeue")
SLURM_LAUNCHERS = {"srun": "srunalloc", "srunalloc": "srunalloc", "mpirun": "mpirun"}
SLURM_LAUNCHERS |= {"mpiexec": "mpiexec"}


@dataclass
class Site:
    """One ReFrame environment on one partition of the site config, as a check sees it."""

    environment: str
    toolchain: recipes.Toolchain
    #: The variables the job's environment sets or changes (the partition's, then the
    #: environment's: modules loaded, ``env_vars``).
    env: dict[str, str]
    #: ReFrame's registered name of the launcher that starts the ranks.
    launcher: str
    #: The partition's name and its system's (a check's ``partition`` and ``system``).
    partition: str
    extras: dict = field(default_factory=dict)
    system: str = "local"
    scheduler: str = "local"
    #: The partition's ``processor.num_cpus`` (None: not configured).
    num_cpus: int | None = None
    #: The partition's ``access`` options (read by the ssh, pdsh and clush launchers).
    access: list[str] = field(default_factory=list)
    #: Variables the job's environment unsets (a module unloaded).
    unset: list[str] = field(default_factory=list)
    #: The modules and variables the site declares for the job (:func:`declared_environment`).
    declared: dict = field(default_factory=dict)

    @property
    def fullname(self) -> str:
        return f"{self.system}:{self.partition}"

    def environ(self, extra: dict | None = None) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if k not in self.unset}
        return {**base, "APPTUNE_ROOT": str(paths.root()), **self.env, **(extra or {})}


def _site_config(config: Path, system: str):
    """ReFrame's configuration of ``config`` with ``system`` selected, and the runtime
    context built from it (the system, its partitions and environments, the modules
    system), exactly as ``reframe -C CONFIG --system SYSTEM`` would build them."""
    from reframe.core.exceptions import ReframeError
    from reframe.core.runtime import RuntimeContext

    site = load_reframe_config(config)
    known = [s["name"] for s in site["systems"]]
    if system not in known:
        raise ApptuneError(
            config, "systems", f"unknown system '{system}' (known: {', '.join(known)})"
        )
    try:
        site.select_subconfig(system)
        return site, RuntimeContext(site)
    except ReframeError as e:
        raise ApptuneError(config, f"systems.{system}", str(e)) from None


def load_site(
    environment: str,
    config: str | os.PathLike = paths.DEFAULT_CONFIG,
    system: str = "local",
    languages: list[str] | None = None,
) -> Site:
    """The environment ``environment`` on a partition of ``system`` (``SYSTEM:PARTITION``:
    that partition; ``SYSTEM``: the first that offers the environment), read from the
    ReFrame site config ``config`` by ReFrame's own loader; its tools for ``languages``
    (None: every language) must be found with its variables and modules."""
    config = Path(config)
    if not config.is_absolute():
        config = paths.root() / config
    sysname, _, partname = system.partition(":")
    site_config, ctx = _site_config(config, sysname)
    envs = [e["name"] for e in site_config.get("environments") or []]
    if environment not in envs:
        raise ApptuneError(
            config,
            "environments",
            f"unknown environment '{environment}' (known: {', '.join(sorted(envs))})",
        )
    parts = ctx.system.partitions
    if partname:
        named = [p for p in parts if p.name == partname]
        if not named:
            raise ApptuneError(
                config,
                f"systems.{sysname}.partitions",
                f"unknown partition '{partname}' of '{sysname}' "
                f"(known: {', '.join(p.name for p in parts)})",
            )
        parts = named
    part = next((p for p in parts if any(e.name == environment for e in p.environs)), None)
    if part is None:
        raise ApptuneError(
            config,
            f"systems.{sysname}.partitions",
            f"no partition of '{system}' offers environment '{environment}'",
        )
    where = f"systems.{sysname}.partitions.{part.name}"
    launcher = _trial_launcher(part, config, where)
    environ = next(e for e in part.environs if e.name == environment)
    try:
        tc = recipes.Toolchain.from_environ(environ)
    except ApptuneError as e:  # name the config that was read
        raise ApptuneError(config, e.field, e.message) from None
    try:
        env, unset = job_environment(
            ctx.modules_system,
            part.prepare_cmds,
            [part.local_env, environ],
            login=bool(site_config.get("general/0/use_login_shell")),
        )
    except RuntimeError as e:
        raise ApptuneError(
            config, f"environments.{environment}", f"cannot load the environment: {e}"
        ) from None
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
        launcher=launcher,
        partition=part.name,
        extras=dict(part.extras),
        system=sysname,
        scheduler=part.json()["scheduler"],
        num_cpus=part.processor.num_cpus,
        access=list(part.access),
        unset=unset,
        declared=declared_environment(part.local_env, environ),
    )


def declared_environment(*scopes) -> dict:
    """The modules and environment variables ReFrame environments declare (a partition's
    ``local_env``, then the programming environment), as a run record keeps them."""
    out: dict = {"modules": [], "env_vars": {}}
    for scope in scopes:
        out["modules"] += [str(m) for m in scope.modules]
        out["env_vars"].update({k: str(v) for k, v in scope.env_vars.items()})
    return out


def _trial_launcher(part, config: Path, where: str) -> str:
    """The launcher a trial on this node starts its ranks with: the partition's, when its
    jobs run on this node; inside a Slurm allocation, one that starts ranks in it."""
    # the names, without starting the scheduler backend (it needs a ReFrame session)
    sched, launcher = part.json()["scheduler"], part.launcher_type.registered_name
    if sched in LOCAL_SCHEDULERS:
        return launcher
    if sched in SLURM_SCHEDULERS and launcher in SLURM_LAUNCHERS:
        if os.environ.get("SLURM_JOB_ID"):
            return SLURM_LAUNCHERS[launcher]
        raise ApptuneError(
            config,
            f"{where}.scheduler",
            f"'{sched}': this partition's jobs go to Slurm and a trial runs on this node: "
            "run it inside an allocation (salloc), or choose a partition with the local "
            "scheduler",
        )
    raise ApptuneError(
        config,
        f"{where}.scheduler",
        f"'{sched}' with launcher '{launcher}': a trial runs on this node only with the "
        "local scheduler, or inside a Slurm allocation with srun, mpirun or mpiexec",
    )
