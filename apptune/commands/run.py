"""``apptune run``: validate the data, run the checks through ReFrame, store and report."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

from .. import paths
from ..constants import REPEATS_ENV, RUN_NOTES_FILE
from ..errors import ApptuneError
from .options import COUNT, SECONDS
from .workflow import (
    checks_without,
    judged,
    new_run_dir,
    reframe_command,
    reframe_storage_env,
    runs_dir,
    store_run,
)


@dataclass(frozen=True)
class RunOptions:
    """The options of one session of ``apptune run`` (named as its command line's), from
    that command line (:meth:`from_args`) or from ``apptune baseline record``'s sessions."""

    mode: str
    #: ``-c``: check files or directories (none: all of ``reframe-checks/``).
    checks: list[str]
    config: str
    reframe_args: list[str]
    no_history: bool = False
    #: The run directory (None: a new ``runs/<time>-<mode>``).
    run_dir: str | None = None
    repeats: int = 1
    wait_for_quiet: float | None = None
    #: The selection: ``--app``, ``--env``, ``--variant``, ``--placement``.
    app: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    variant: list[str] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)

    @classmethod
    def from_args(cls, a) -> RunOptions:
        """The options of the parsed ``apptune run`` command line ``a``."""
        return cls(**{f.name: getattr(a, f.name) for f in fields(cls)})


def cmd_run(a) -> int:
    return run_session(RunOptions.from_args(a))


def run_session(a: RunOptions) -> int:
    """Validate the data, run the checks through ReFrame, store and report: the exit
    status."""
    from ..core.validation import validate

    root = paths.root()
    # every data file is checked before ReFrame starts; an application with a problem is
    # left out (its check directory), the others run, and the run's exit status says so
    found = validate.check(root / a.config)
    for p in found.of_runs():
        print(f"apptune: error: {p}", file=sys.stderr)
    if found.site:
        print(
            "apptune: run refused: the site config has problems (apptune validate)", file=sys.stderr
        )
        return 2
    from ..core.data import selection

    sel = selection.Selection(a.app, a.env, a.variant, a.placement)
    sel_opts: list[str] = []
    chosen = a.checks
    if sel:
        if a.checks and sel.apps:
            raise ApptuneError(None, "--app", "give the checks with -c or with --app, not both")
        envs = found.site_facts.environments if found.site_facts else None
        sel_checks, sel_opts = selection.reframe_options(sel, list(envs) if envs else None)
        chosen = a.checks or sel_checks
    withheld = [app for app, ps in found.baselines.items() if ps and app not in found.bad_apps]
    if withheld:
        print(
            f"apptune: baseline problems (above) withhold the performance verdict of "
            f"{', '.join(withheld)}: built, run and verified all the same",
            file=sys.stderr,
        )
    checks = checks_without(root, chosen, found.bad_apps)
    if found.bad_apps:
        print(
            f"apptune: left out of the run: {', '.join(found.bad_apps)} (problems above)",
            file=sys.stderr,
        )
        if not checks:
            print("apptune: run refused: no check left to run", file=sys.stderr)
            return 2
    refused = 2 if found.of_runs() else 0
    where = Path(a.run_dir).resolve() if a.run_dir else runs_dir()
    free = paths.free_mib(where)
    if free is not None and free < paths.MIN_FREE_MIB:
        print(
            f"apptune: error: {where}: {free:.0f} MiB free on its file system; a run needs "
            f"{paths.MIN_FREE_MIB} MiB for its stage and output directories (free some, or "
            "choose another --run-dir)",
            file=sys.stderr,
        )
        return paths.NO_SPACE_STATUS
    if a.run_dir:
        run_dir = Path(a.run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = new_run_dir(runs_dir(), a.mode)
    from ..yamlio import atomic_write_json

    atomic_write_json(run_dir / RUN_NOTES_FILE, {"left_out": found.bad_apps})
    extra = (["--repeat", str(a.repeats)] if a.repeats > 1 else []) + sel_opts + a.reframe_args
    cmd = reframe_command(root, a.mode, checks, run_dir, a.config, extra)
    env = dict(os.environ, APPTUNE_ROOT=str(root))
    if a.wait_for_quiet is not None:
        env["APPTUNE_QUIET_WAIT"] = str(a.wait_for_quiet)
    env[REPEATS_ENV] = str(a.repeats)
    storage = reframe_storage_env(env) if not a.no_history else {}
    env.update(storage)
    print("apptune: " + shlex.join([f"{k}={v}" for k, v in storage.items()] + cmd), flush=True)
    first = empty_cache_line(a, sel, [x for x in found.apps if x not in found.bad_apps], checks)
    if first:  # said once here: the builds' own lines would all say the same
        print(f"apptune: {first}", flush=True)
    from ..core.run import progress, supervise

    # SIGTERM/SIGINT/SIGHUP go to ReFrame, which aborts and writes its report; what
    # completed is then stored and reported, and the exit status is 128 + the signal
    with supervise.Supervisor() as sup:
        follow = lambda p: progress.relay(p, run_dir, first_run=bool(first))  # noqa: E731
        rc = sup.run(cmd, cwd=run_dir, env=env, follow=follow)
        if sup.leftovers:
            print(
                f"apptune: note: stopped what the run left running: {', '.join(sup.leftovers)}",
                file=sys.stderr,
            )
        rc = store_run(
            run_dir,
            rc,
            history=not a.no_history,
            judged=judged(a.mode, a.reframe_args),
            stopped_by=sup.signum,
        )
    return 128 + sup.signum if sup.signum else (rc or refused)


def empty_cache_line(a: RunOptions, sel, apps: list[str], checks: list[str]) -> str | None:
    """What a run on an empty build cache will build and what that costs, in one line
    (:func:`apptune.core.builds.buildcost.empty_cache_line`); None when the cache holds a build.
    The builds are those of the run's mode (its tags in the site config) and selection, in
    the environments whose tools are found."""
    from types import SimpleNamespace

    from ..core.builds import buildcache, buildcost
    from ..core.data import recipes, site

    if buildcache.entries():
        return None
    try:
        cfg = site.load_reframe_config(paths.root() / a.config)
    except ApptuneError:  # validate said why; the run says it again
        return None

    # -c reframe-checks/hpcc (or --app hpcc): that application; -c reframe-checks/: those
    # with a check directory in it (a recipe without one, npb-official's, builds nothing)
    def has_check(x: str, c: str) -> bool:
        where = Path(c) if Path(c).is_absolute() else paths.root() / c
        return x in Path(c).with_suffix("").parts[-2:] or (where / x).is_dir()

    apps = [
        x for x in apps if any(has_check(x, c) for c in checks) and (not sel.apps or x in sel.apps)
    ]
    system = next((x.split("=", 1)[1] for x in a.reframe_args if x.startswith("--system=")), None)
    options = [
        o
        for m in cfg["modes"]
        if m["name"] == a.mode
        and (system in (m.get("target_systems") or []) if system else not m.get("target_systems"))
        for o in m.get("options", [])
    ]
    tcs = {}
    for e in cfg["environments"]:
        if e["name"] in tcs or e.get("target_systems"):
            continue
        try:
            tcs[e["name"]] = recipes.Toolchain.from_environ(
                SimpleNamespace(**{k: e.get(k) for k in ("name", "cc", "cxx", "ftn", "extras")})
            )
        except ApptuneError:
            continue

    def usable(r, env: str) -> bool:
        tc = tcs.get(env)
        return tc is not None and not tc.missing_tools(languages=list(r.build.languages))

    loaded = [recipes.load_recipe(x) for x in apps]
    builds = buildcost.run_builds(
        loaded, buildcost.mode_tiers(options + a.reframe_args), usable, sel.envs, sel.variants
    )
    return buildcost.empty_cache_line(builds)


def register(subparsers) -> None:
    """Add ``apptune run``."""
    r = subparsers.add_parser("run", help="run checks through ReFrame and write the report")
    r.add_argument(
        "--mode", default="ci", help="ReFrame execution mode: ci, nightly, dev (default ci)"
    )
    r.add_argument("-c", "--checks", action="append", default=[], help="check file or directory")
    r.add_argument("-C", "--config", default=paths.DEFAULT_CONFIG, help="ReFrame site config")
    r.add_argument(
        "--run-dir", help="where to put stage, output, report (default runs/<time>-<mode>)"
    )
    r.add_argument(
        "--repeats",
        type=COUNT,
        default=1,
        metavar="N",
        help="run each test N times (ReFrame --repeat); verdicts use the median",
    )
    r.add_argument(
        "--wait-for-quiet",
        type=SECONDS,
        metavar="SECONDS",
        help="before each timed run, wait at most SECONDS for the node to be quiet "
        "(apptune/core/run/quality.py; default: the partition's extras.quiet_wait_s, else 0)",
    )
    r.add_argument(
        "--no-history",
        action="store_true",
        help="do not store the run in the history (nor in ReFrame's results database)",
    )
    for opt, what in (
        ("--app", "an application (its check directory)"),
        ("--env", "an environment of the site config"),
        ("--variant", "a build variant, e.g. tuned or tuned+fft=fftw3"),
        ("--placement", "a placement, e.g. bound"),
    ):
        r.add_argument(
            opt,
            action="append",
            default=[],
            metavar=opt[2:].upper(),
            help=f"run only {what}; repeat for several; different options must all hold "
            "(a name that does not exist is refused, listing those that do)",
        )
    r.add_argument(
        "reframe_args", nargs="*", help="extra ReFrame options after --, e.g. -- -n HPCC -p gnu"
    )
    r.set_defaults(func=cmd_run)
