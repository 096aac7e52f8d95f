"""``apptune``: run the suite through ReFrame, list what it holds, report, validate data.

Every command is a thin layer: ``apptune run`` builds the same ``reframe``
command line a user would type (and prints it), so plain ReFrame keeps working.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from . import baselines, paths, recipes
from .errors import ApptuneError

DEFAULT_CONFIG = "site-config/settings.py"


def runs_dir() -> Path:
    return Path(os.environ.get("APPTUNE_RUNS", paths.root() / "runs"))


def reframe_command(root: Path, mode: str, checks: list[str], run_dir: Path, config: str,
                    extra: list[str]) -> list[str]:
    exe = Path(sys.executable).with_name("reframe")
    cmd = [str(exe) if exe.exists() else "reframe", "-C", str(root / config)]
    for c in checks or ["reframe-checks"]:
        p = Path(c)
        cmd += ["-c", str(p if p.is_absolute() else root / p)]
    cmd += ["-R", "--mode", mode, "-r",
            "--report-file", str(run_dir / "report.json"),
            "--stage", str(run_dir / "stage"), "--output", str(run_dir / "output"),
            "--perflogdir", str(run_dir / "perflogs"), *extra]
    return cmd


def cmd_run(a) -> int:
    root = paths.root()
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    run_dir = (Path(a.run_dir) if a.run_dir else runs_dir() / f"{stamp}-{a.mode}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for app in recipes.list_recipes():  # fail fast, with one line, on bad data
        recipes.load_recipe(app)
    cmd = reframe_command(root, a.mode, a.checks, run_dir, a.config, a.reframe_args)
    print("apptune: " + shlex.join(cmd), flush=True)
    env = dict(os.environ, APPTUNE_ROOT=str(root))
    rc = subprocess.run(cmd, cwd=run_dir, env=env).returncode
    latest = runs_dir() / "latest"
    # runs/latest follows runs kept under runs/; an explicit --run-dir elsewhere leaves it alone
    if run_dir.parent == runs_dir().resolve():
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(run_dir)
        except OSError as e:
            print(f"apptune: note: could not point {latest} at this run ({e.strerror})", file=sys.stderr)
    if (run_dir / "report.json").exists():
        from . import report
        md, html = report.write(run_dir)[1:]
        print(f"apptune: report {md} and {html}")
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
                f.write(md.read_text())
    else:
        # ReFrame exits 0 when the options select nothing; a run that ran nothing is not a pass
        print(f"apptune: error: ReFrame wrote no run report (exit {rc}): no test case ran "
              f"(do the -n/-t/-S options and --mode select anything? `apptune list`)", file=sys.stderr)
        return rc or 1
    return rc


def cmd_list(a) -> int:
    for app in recipes.list_recipes():
        r = recipes.load_recipe(app)
        print(f"{r.name} {r.version}: {r.description}")
        if r.source.path:
            print(f"  source: {r.source.path}/ (this repository)")
        else:
            print(f"  source: {r.source.file} sha256 {r.source.sha256[:16]}…")
        for p in r.patches:
            print(f"  patch: {p.file} — {p.reason}")
        for tname, t in r.tiers.items():
            print(f"  tier {tname} ({t.ranks} ranks):")
            for env, specs in t.variants.items():
                print(f"    {env}: {', '.join(specs)}")
    return 0


def cmd_report(a) -> int:
    from . import report
    run_dir = Path(a.run_dir or runs_dir() / "latest").resolve()
    paths_ = report.write(run_dir, Path(a.report_file) if a.report_file else None)
    for p in paths_:
        print(p)
    if a.print:
        print(paths_[1].read_text())
    return 0


def site_environments(config: Path) -> set[str]:
    import runpy
    try:
        site = runpy.run_path(str(config))["site_configuration"]
    except (OSError, KeyError, SyntaxError) as e:
        raise ApptuneError(config, "site_configuration", f"cannot load: {e}") from None
    return {e["name"] for e in site.get("environments", [])}


def cmd_validate(a) -> int:
    from . import inputs, outputs, verify
    n = 0
    recipes.load_ladders()
    recipes.load_libraries()
    config = paths.root() / a.config
    known_envs = site_environments(config)
    for app in recipes.list_recipes():
        r = recipes.load_recipe(app)
        recipes.all_variants(r)
        for tname, tier in r.tiers.items():
            for env in tier.variants:
                if env not in known_envs:
                    raise ApptuneError(recipes.recipe_path(app), f"tiers.{tname}.variants.{env}",
                                       f"unknown environment (site config {a.config} has: "
                                       f"{', '.join(sorted(known_envs))})")
        for tier in r.tiers:
            inputs.load_input(app, tier)
            ref = paths.reference_file(app, tier)
            if not ref.exists():
                raise ApptuneError(ref, None, f"no stored reference for {app} tier '{tier}': "
                                   "every tier's numbers are verified")
            verify.load_reference(app, tier)
            for o in r.run.outputs:
                if o.format == "newick_rf":
                    tree = outputs.reference_tree(o, tier)
                    if not tree.is_file():
                        raise ApptuneError(recipes.recipe_path(app), "run.output.reference",
                                           f"reference tree {tree} for tier '{tier}' is missing")
            n += 1
        for bdir in (paths.root() / "reference" / "baselines").glob("*"):
            baselines.load(bdir.name, app)
        n += 1
    print(f"apptune: all data files valid ({n} recipes/references checked)")
    return 0


def cmd_baseline_update(a) -> int:
    results = []
    for d in a.run_dirs:
        run_dir = Path(d).resolve()
        found = sorted((run_dir / "output").rglob("apptune-result.json"))
        if not found:
            raise ApptuneError(run_dir, "output", "no apptune results in this run")
        for f in found:
            r = json.loads(f.read_text())
            r["run_id"] = run_dir.name
            results.append(r)
    by = {}
    for r in results:
        by.setdefault((a.system or r["system"], r["app"]), []).append(r)
    for (system, app), rs in by.items():
        before = paths.baselines_file(system, app)
        old = before.read_text() if before.exists() else ""
        f = baselines.update(system, app, rs, figures=recipes.figure_specs(recipes.load_recipe(app)))
        import difflib
        diff = "".join(difflib.unified_diff(old.splitlines(True), f.read_text().splitlines(True),
                                            str(f) + " (before)", str(f) + " (after)"))
        print(diff or f"{f}: unchanged")
    return 0


def cmd_cache(a) -> int:
    from . import buildcache
    if a.ccmd == "list":
        es = buildcache.entries()
        total = 0
        for e in es:
            m = e.manifest
            total += e.size
            print(f"{e.key[:16]}  {m.get('app', '?'):<8} {m.get('environment', '?'):<8} "
                  f"{m.get('variant', '?'):<24} {e.size / 2**20:8.1f} MiB")
        print(f"{len(es)} entries, {total / 2**20:.1f} MiB in {buildcache.root()} "
              f"(limit {buildcache.max_bytes() / 2**30:.1f} GiB)")
        return 0
    if a.ccmd == "prune":
        limit = None if a.max_gb is None else int(a.max_gb * 2**30)
        removed = buildcache.prune(limit)
        print(f"removed {len(removed)} entries ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
        return 0
    bad = buildcache.verify_all()
    for e, why in bad:
        print(f"{e.key[:16]}: {why}")
    print(f"{len(buildcache.entries())} entries checked, {len(bad)} corrupted"
          + (" (they are rebuilt on next use)" if bad else ""))
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="apptune", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run checks through ReFrame and write the report")
    r.add_argument("--mode", default="ci", help="ReFrame execution mode: ci, nightly, dev (default ci)")
    r.add_argument("-c", "--checks", action="append", default=[], help="check file or directory")
    r.add_argument("-C", "--config", default=DEFAULT_CONFIG, help="ReFrame site config")
    r.add_argument("--run-dir", help="where to put stage, output, report (default runs/<time>-<mode>)")
    r.add_argument("reframe_args", nargs="*", help="extra ReFrame options after --, e.g. -- -n HPCC -p gnu")
    r.set_defaults(func=cmd_run)
    l = sub.add_parser("list", help="list applications, patches, tiers and variants")
    l.set_defaults(func=cmd_list)
    rp = sub.add_parser("report", help="(re)write the Markdown/HTML report of a run")
    rp.add_argument("run_dir", nargs="?", help="run directory (default runs/latest)")
    rp.add_argument("--report-file", help="ReFrame run report (default RUN_DIR/report.json)")
    rp.add_argument("--print", action="store_true", help="print the Markdown report")
    rp.set_defaults(func=cmd_report)
    v = sub.add_parser("validate", help="validate every recipe, input, reference and baseline")
    v.add_argument("-C", "--config", default=DEFAULT_CONFIG, help="ReFrame site config")
    v.set_defaults(func=cmd_validate)
    b = sub.add_parser("baseline", help="baselines")
    bs = b.add_subparsers(dest="bcmd", required=True)
    bu = bs.add_parser("update", help="merge verified figures of runs (median of repeats) "
                       "into reference/baselines/")
    bu.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    bu.add_argument("--system", help="baseline system name (default: the ReFrame system)")
    bu.set_defaults(func=cmd_baseline_update)
    c = sub.add_parser("cache", help="the content-addressed build cache")
    cs = c.add_subparsers(dest="ccmd", required=True)
    cs.add_parser("list", help="entries with app, environment, variant and size")
    cp = cs.add_parser("prune", help="drop least recently used entries beyond the size limit")
    cp.add_argument("--max-gb", type=float, help="size limit (default $APPTUNE_BUILD_CACHE_MAX_GB or 5)")
    cs.add_parser("verify", help="check every entry's checksums; exit 1 if any is corrupted")
    c.set_defaults(func=cmd_cache)
    a = ap.parse_args(argv)
    try:
        return a.func(a)
    except ApptuneError as e:
        print(f"apptune: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
