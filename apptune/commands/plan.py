"""``apptune plan``: the jobs to run under a time, energy and power budget, and
``apptune plan --check RUN_DIR...``: what they really took (apptune/tools/plan.py)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .. import paths
from ..errors import ApptuneError, expand
from ..history import store
from ..tools import plan, plan_report
from ..yamlio import atomic_write_json, atomic_write_text
from .options import COUNT, SECONDS, VOLTS, WATTS, budget, history_option


def register(sub) -> None:
    """The ``plan`` command on the CLI's subparsers."""
    p = sub.add_parser(
        "plan",
        help="choose the jobs, variants, layouts and frequencies that fit a time, energy and "
        "power budget best (docs/planning.md)",
    )
    p.add_argument("--tier", default="ci", help="the input tier of the jobs (default ci)")
    p.add_argument(
        "--system",
        help="plan from the runs of this system (or system:partition); default: the runs "
        "on this machine",
    )
    p.add_argument("--app", action="append", default=[], help="only this application (repeat)")
    p.add_argument(
        "--values", metavar="FILE", help="YAML {values: {APP: value}}; default: each job 1"
    )
    p.add_argument(
        "--time", type=budget("time", "s"), metavar="T", help="time budget, e.g. 12h, 90min, 600s"
    )
    p.add_argument(
        "--energy", type=budget("energy", "J"), metavar="E", help="energy budget, e.g. 15kWh, 500kJ"
    )
    p.add_argument(
        "--power-cap", metavar="P", help="power cap in W (3kW) or A (13A, with --voltage)"
    )
    p.add_argument("--voltage", type=VOLTS, metavar="V", help="supply voltage of an A cap")
    p.add_argument(
        "--nodes", type=COUNT, metavar="N", help="nodes of the cluster (default: each job's own)"
    )
    p.add_argument(
        "--idle-power",
        type=WATTS,
        metavar="W",
        help="measured idle power of one node (default: the partition's power_model.idle_W)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="where plan.json, plan.txt and plan.sh go (default runs/plan)",
    )
    p.add_argument(
        "--job-overhead",
        type=SECONDS,
        default=600,
        metavar="S",
        help="seconds each Slurm job gets beyond its planned time for the harness "
        "(restoring the build, ReFrame; default 600)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--submit", action="store_true", help="submit the script's jobs (sbatch)")
    p.add_argument(
        "--check",
        nargs="+",
        metavar="RUN_DIR",
        help="compare what the plan's jobs took in these run directories with the plan",
    )
    p.add_argument(
        "--plan", type=Path, metavar="FILE", help="the plan to check (default OUT/plan.json)"
    )
    history_option(p)
    p.set_defaults(func=cmd_plan)


def cmd_plan(a: argparse.Namespace) -> int:
    try:
        return _check(a) if a.check else _plan(a)
    except ApptuneError as e:
        for x in expand(e):  # one line each (every job without a run, every unknown app)
            print(f"apptune: error: {x}", file=sys.stderr)
        return 2


def _budget(a) -> plan.Budget:
    def parse(opt, fn, *args):
        try:
            return fn(*args)
        except ValueError as e:
            raise ApptuneError(None, opt, str(e)) from None

    b = plan.Budget(
        time_s=a.time,
        energy_J=a.energy,
        power_W=parse("--power-cap", plan.power_cap, a.power_cap, a.voltage)
        if a.power_cap
        else None,
        nodes=a.nodes,
    )
    if not (b.time_s or b.energy_J or b.power_W):
        raise ApptuneError(None, "budget", "give at least one of --time, --energy, --power-cap")
    return b


def _idle(a, b: plan.Budget, options: list[plan.Option]) -> None:
    """The idle power of a node: given, else the partition's power model (a nominal figure
    where the site wrote one, graded as such)."""
    if a.idle_power is not None:
        b.idle_W, b.idle_source = a.idle_power, "given with --idle-power"
        return
    if not (b.nodes or b.power_W):
        return
    systems = sorted({o.system for o in options})
    from ..core.data.site import load_reframe_config

    try:
        site = load_reframe_config(paths.root() / paths.DEFAULT_CONFIG)
    except ApptuneError:
        site = None
    for s in systems:
        name, _, part = s.partition(":")
        for sysconf in site["systems"] if site else []:
            for p in sysconf["partitions"] if sysconf["name"] == name else []:
                pm = (p.get("extras") or {}).get("power_model") if p["name"] == part else None
                if pm and "idle_W" in pm:
                    b.idle_W = float(pm["idle_W"])
                    b.idle_source = f"power_model of {s} in the site config, modelled"
                    return
    if b.nodes:
        raise ApptuneError(
            None, "--idle-power", "needed for a cluster of --nodes (the site config has none)"
        )


def _plan(a) -> int:
    b = _budget(a)
    mid = None if a.system else plan.this_machine()
    out = a.out or paths.root() / "runs" / "plan"
    with store.History(a.history, create=False) as h:
        options = plan.load_options(h, a.tier, system=a.system, machine_id=mid, apps=a.app or None)
    options, notes = plan.runnable(options, a.tier)
    values = plan.load_values(a.values, list(options))
    if a.app and not values:
        values = dict.fromkeys(a.app, 1.0)
    where = plan.where_label(a.system, mid)
    jobs = plan.build_jobs(options, values, a.tier, where, a.values)
    _idle(a, b, [o for j in jobs for o in j.options])
    p = plan.make_plan(jobs, b, where)
    p.notes += notes
    data = plan.asdict_plan(p)
    lines = plan_report.table(p)
    text = plan_report.slurm_script(p, out, a.job_overhead)  # refused before anything is written
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / plan_report.PLAN_FILE, data)
    atomic_write_text(out / plan_report.TABLE_FILE, "\n".join(lines) + "\n")
    script = out / plan_report.SCRIPT_FILE
    atomic_write_text(script, text)
    script.chmod(0o755)
    if a.json:
        print(json.dumps(data, indent=1))
    else:
        print("\n".join(lines))
        print(f"written: {out / plan_report.TABLE_FILE}, {out / plan_report.PLAN_FILE}, {script}")
        print(f"submit with: bash {script}" if not a.submit else "submitting ...")
    if a.submit:
        return subprocess.run(["bash", str(script)]).returncode
    return 0


def _check(a) -> int:
    f = a.plan or (a.out or paths.root() / "runs" / "plan") / plan_report.PLAN_FILE
    try:
        data = json.loads(Path(f).read_text())
    except FileNotFoundError:
        raise ApptuneError(
            f, None, "no plan here (apptune plan writes it; --plan names it)"
        ) from None
    except (OSError, json.JSONDecodeError) as e:
        raise ApptuneError(f, None, f"not a readable plan ({e})") from None
    if not isinstance(data, dict) or "chosen" not in data or "budget" not in data:
        raise ApptuneError(f, "chosen", "not a plan written by apptune plan")
    lines, ok = plan_report.check(data, a.check)
    print("\n".join(lines))
    return 0 if ok else 1
