"""A plan as people and schedulers read it: the table, the Slurm script, and the check of
what the jobs really took (``apptune plan --check``).

Every energy figure carries its grade: a modelled figure is followed by ``(modelled)``
wherever it is shown, and the plan's first line says when it rests on modelled energy.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .. import paths
from ..constants import RESULT_FILE
from ..core.run import knobs
from ..errors import LINE_BREAKING, ApptuneError, escape_line_breaks
from ..figures import fmt_seconds
from ..history import records
from ..models import RunRecord
from .plan import (
    METERED,
    SIGMAS,
    Option,
    Plan,
    fmt_energy,
    grade_tag,
    max_loaded_nodes,
)

SCRIPT_FILE = "plan.sh"
PLAN_FILE = "plan.json"
TABLE_FILE = "plan.txt"
#: Where plan.sh's jobs write Slurm's output (``N-APP.out``); their run directories are in
#: ``jobs/``, which ``apptune plan --check OUT/jobs/*`` reads.
LOGS_DIR = "logs"


def first_line(grade: str, uses_energy: bool = True) -> str:
    """What the plan's energy is: said first, so nobody takes a model for a meter."""
    if grade == "modelled":
        return (
            "ENERGY MODELLED: this plan's energy and power come from a power model (grade "
            "'modelled'), not from a meter; every line using them says so"
        )
    if grade == "none":
        return "NO ENERGY FIGURE: this plan weighs time only"
    if grade == "measured-shared":
        return "energy measured on shared nodes (grade 'measured-shared')"
    return "energy measured (grade 'measured')" if uses_energy else "energy measured"


def _pm(x: float | None, sd: float | None, fmt) -> str:
    if x is None:
        return "-"
    return fmt(x) + (f" ± {fmt(sd)}" if sd is not None else "")


def _freq(o: Option) -> str:
    if o.freq is None:
        return "default"
    return f"{int(o.freq) / 1e6:.3g} GHz" if str(o.freq).isdigit() else str(o.freq)


def table(plan: Plan) -> list[str]:
    """The plan as lines of text; the first says how its energy was obtained."""
    b = plan.budget
    grade = plan.energy_grade()
    lines = [first_line(grade, bool(b.energy_J or b.power_W))]
    total_value = sum(j.value for j in plan.jobs)
    got = sum(j.value for j in plan.chosen)
    lines.append(
        f"plan: {len(plan.chosen)} of {len(plan.jobs)} jobs, value {got:g} of "
        f"{total_value:g}, from the verified runs on {plan.where}"
    )
    head = (
        "job",
        "app",
        "variant",
        "layout",
        "nodes",
        "frequency",
        "time",
        "energy",
        "runs",
        "value",
    )
    rows = [head]
    for i, j in enumerate(plan.chosen, 1):
        o = j.chosen
        energy = _pm(o.energy_J, o.energy_sd, fmt_energy)
        rows.append(
            (
                str(i),
                j.app,
                o.label,
                o.layout_label,
                str(o.nodes),
                _freq(o),
                _pm(o.time_s, o.time_sd, fmt_seconds),
                energy + (grade_tag(o.grade) if o.energy_J is not None else ""),
                f"{o.runs}" + ("" if o.clean else " disturbed"),
                f"{j.value:g}",
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    for r in rows:
        lines.append("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
    lines += budget_lines(plan)
    lines += tradeoff_lines(plan)
    for j in plan.jobs:
        if not j.chosen:
            lines.append(f"left out: {j.app} (value {j.value:g}): {j.why_not}")
    lines += plan.notes
    return [escape_line_breaks(x) for x in lines]


def budget_lines(plan: Plan) -> list[str]:
    b, chosen = plan.budget, [j.chosen for j in plan.chosen]
    tag = grade_tag(plan.energy_grade())
    t = sum(o.plan_time_s for o in chosen)
    out = [
        f"budget used: time {fmt_seconds(t)}" + (f" of {fmt_seconds(b.time_s)}" if b.time_s else "")
    ]
    energies = [o.plan_energy_J for o in chosen]
    if None not in energies:
        e = sum(energies)
        out.append(
            f"budget used: energy {fmt_energy(e)}"
            + (f" of {fmt_energy(b.energy_J)}" if b.energy_J else "")
            + tag
        )
    if b.power_W:
        top = max(chosen, key=lambda o: o.power_W)
        out.append(
            f"budget used: power {top.power_W:.0f} W ({top.power_basis}, {top.app}) of the "
            f"cap {b.power_W:.0f} W{tag}"
        )
        unpeaked = sorted({o.app for o in chosen if o.peak_W is None})
        if unpeaked:
            out.append(
                f"power: no peak recorded for {', '.join(unpeaked)}: its mean power is "
                "counted, and its peaks may exceed the cap"
            )
        for o in chosen:
            p_load = (o.power_W - ((b.nodes or o.nodes) - o.nodes) * (b.idle_W or 0)) / o.nodes
            x = max_loaded_nodes(b, p_load)
            if x is not None:
                out.append(
                    f"power model: {o.app} at {p_load:.0f} W per loaded node{grade_tag(o.grade)}, "
                    f"idle {b.idle_W:g} W ({b.idle_source}): the cap allows {x} of "
                    f"{b.nodes} nodes loaded"
                )
    out.append(
        f"expected figures: median of the runs ± their standard deviation (none with 1 run; "
        f"clean runs where there are any, else disturbed ones); the budget counts median + "
        f"{SIGMAS:g} σ; times are the applications' timed runs"
    )
    return out


def tradeoff_lines(plan: Plan) -> list[str]:
    """Where a job ran at several frequencies: time, energy and power at each."""
    out = []
    for j in plan.jobs:
        by = {}
        for o in j.options:
            by.setdefault((o.environment, o.variant, o.nodes), []).append(o)
        for (env, variant, nodes), opts in sorted(by.items(), key=str):
            if len({o.freq for o in opts}) < 2:
                continue
            parts = [
                f"{_freq(o)}: {fmt_seconds(o.time_s)}, {fmt_energy(o.energy_J)}{grade_tag(o.grade)}"
                for o in sorted(opts, key=lambda o: o.time_s)
            ]
            out.append(
                f"frequency: {j.app} {env}/{variant} on {nodes} node(s): " + "; ".join(parts)
            )
    return out


# ------------------------------------------------------------------- the script
def launch(o: Option, run_dir: Path, python: str = sys.executable) -> list[str]:
    """The ``apptune run`` that repeats an option's recorded run: its mode, application,
    environment, build variant, placement and system, at its frequency (the check's
    ``cpu_freq``: srun's ``--cpu-freq`` on a cluster, else the node's cpufreq files)."""
    build, *places = o.variant.split("@")
    argv = [python, "-m", "apptune", "run", "--mode", o.mode or o.tier, "--run-dir", str(run_dir)]
    argv += ["--app", o.app, "--env", o.environment, "--variant", build]
    rf = ["--system", o.system]
    names = {"rpn": "ranks_per_node", "tpr": "threads_per_rank", "bind": "binding"}
    for p in places:
        if "=" not in p:
            argv += ["--placement", p]
            continue
        for kv in p.split(","):
            k, _, v = kv.partition("=")
            rf += ["-S", f"{names.get(k, k)}={v}"]
    if o.freq is not None:
        rf += ["-S", f"cpu_freq={o.freq}"]
    return [*argv, "--", *rf]


def slurm_script(plan: Plan, out_dir: Path, overhead_s: float, python: str = sys.executable) -> str:
    """A bash script of ``sbatch`` lines, one job after the other (each waits for the one
    before, as the budget assumes); writing it submits nothing."""
    out_dir = out_dir.resolve()
    lines = [
        "#!/usr/bin/env bash",
        f"# {first_line(plan.energy_grade())}",
        "# apptune plan: the chosen jobs, one after the other (bash this file to submit them);",
        "# check what they took with: apptune plan --check "
        f"{shlex.quote(str(out_dir / 'jobs'))}/* --plan {shlex.quote(str(out_dir / PLAN_FILE))}",
        "set -euo pipefail",
        f"cd {shlex.quote(str(paths.root()))}",
        f"mkdir -p {shlex.quote(str(out_dir / 'jobs'))} {shlex.quote(str(out_dir / LOGS_DIR))}",
        "prev=",
    ]
    for i, j in enumerate(plan.chosen, 1):
        o = j.chosen
        name = f"{i}-{j.app}"
        limit_min = max(1, -(-int(o.plan_time_s + overhead_s) // 60))
        energy = f"{fmt_energy(o.plan_energy_J)}{grade_tag(o.grade)}" if o.plan_energy_J else "-"
        sb = [
            "sbatch",
            "--parsable",
            f"--job-name=apptune-plan-{name}",
            f"--nodes={o.nodes}",
            f"--time={limit_min}",
            # Slurm's own output beside jobs/, which holds only the run directories
            f"--output={out_dir / LOGS_DIR / name}.out",
        ]
        lay = o.layout
        if lay.get("ranks"):  # the ranks the recorded run had (mpirun inside counts them)
            sb.append(f"--ntasks={lay['ranks']}")
        if lay.get("ranks_per_node"):
            sb.append(f"--ntasks-per-node={lay['ranks_per_node']}")
        if (lay.get("threads_per_rank") or 1) > 1:
            sb.append(f"--cpus-per-task={lay['threads_per_rank']}")
        if o.freq is not None:
            sb.append(f"--cpu-freq={o.freq}")
        wrap = shlex.join(launch(o, out_dir / "jobs" / name, python))
        recorded = [str(w) for w in o.layout.get("launcher") or ["(not recorded)"]]
        lines += [
            _comment(
                f"job {i}: {j.app} {o.label}, {o.nodes} node(s), frequency {_freq(o)}, "
                f"expected {fmt_seconds(o.plan_time_s)}, {energy}, value {j.value:g}"
            ),
            _comment(f"  recorded launch: {shlex.join(recorded)}"),
            f"prev=$({shlex.join(sb)} ${{prev:+--dependency=afterany:$prev}} "
            f"--wrap={shlex.quote(wrap)})",
            f'echo {shlex.quote(f"job {i} ({j.app}): Slurm job")} "$prev"',
        ]
    # the options' words were checked (plan.unscriptable); what is left is the command's
    # own arguments (--out)
    for x in lines:
        if LINE_BREAKING.search(x):
            raise ApptuneError(
                None, "plan.sh", f"a line would hold a line break or NUL: {escape_line_breaks(x)}"
            )
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """A comment line of the script: what it shows from the records stays on it."""
    return "# " + escape_line_breaks(text)


# -------------------------------------------------------------------- the check
def run_records(run_dirs: list[str | Path], notes: list[str] | None = None) -> list[RunRecord]:
    """The run records in run directories (a test's record once, from output/ first); a
    path that is not a directory (a job's Slurm output an older plan.sh wrote among them)
    is left out with a line in ``notes``, an error when no path is a directory."""
    found: dict[tuple, RunRecord] = {}
    dirs = [d for d in map(Path, run_dirs) if d.is_dir()]
    if not dirs:
        raise ApptuneError(run_dirs[0] if run_dirs else None, None, "not a run directory")
    for d in map(Path, run_dirs):
        if d not in dirs:
            if notes is not None:
                notes.append(f"left out: {d}: not a run directory")
            continue
        for base in ("output", "stage"):
            for f in sorted((d / base).rglob(RESULT_FILE)):
                r = records.load_record(f)
                if r:
                    found.setdefault((str(d), r.test), r)
    return list(found.values())


def _err(actual: float | None, expected: float | None) -> str:
    if actual is None or not expected:
        return "-"
    return f"{(actual - expected) / expected:+.1%}"


def _job_key(r: RunRecord) -> tuple:
    """A run as a planned job names it: its variant without the frequency, and that apart."""
    freq = None if r.cpu_freq is None else str(r.cpu_freq)
    return (r.app, r.tier, r.environment, knobs.without_freq(r.variant or ""), freq)


def check(plan: dict, run_dirs: list[str | Path]) -> tuple[list[str], bool]:
    """What each planned job took against what the plan expected, and whether the plan
    kept its time (and energy) budget."""
    notes: list[str] = []
    recs = run_records(run_dirs, notes)
    budget = plan["budget"]
    lines = [first_line(plan["energy_grade"]), *notes]
    ok, t_sum, e_sum, e_grades = True, 0.0, 0.0, set()
    peaks: list[tuple[float | None, str, str]] = []  # (recorded peak, app, grade)
    for job in plan["chosen"]:
        key = (job["app"], job["tier"], job["environment"], job["variant"], job.get("freq"))
        mine = [r for r in recs if _job_key(r) == key]
        verified = [r for r in mine if r.verification.ok]
        if not verified:
            ok = False
            why = "its run did not verify" if mine else "no run of it in the run directories"
            lines.append(f"{job['app']} {job['environment']}/{job['variant']}: {why}")
            continue
        r = verified[-1]
        figs = r.figures or {}
        t, e = figs.get("wall_time"), figs.get("energy_J")
        grade = r.energy.trust if r.energy else "none"
        t_sum += t or 0.0
        if e is not None:
            e_sum += e
            e_grades.add(grade)
        peaks.append((r.energy.peak_power_W if r.energy else None, job["app"], grade))
        lines.append(
            f"{job['app']} {job['environment']}/{job['variant']}: time {fmt_seconds(t)}, expected "
            f"{fmt_seconds(job['time_s'])} ({_err(t, job['time_s'])}; planned "
            f"{fmt_seconds(job['plan_time_s'])})"
            + (
                f"; energy {fmt_energy(e)}{grade_tag(grade)}, expected "
                f"{fmt_energy(job['energy_J'])}{grade_tag(job['energy_grade'])} "
                f"({_err(e, job['energy_J'])})"
                if e is not None and job.get("energy_J")
                else ""
            )
        )
    if budget.get("time_s"):
        within = t_sum <= budget["time_s"]
        ok = ok and within
        lines.append(
            f"total time {fmt_seconds(t_sum)} of the budget's {fmt_seconds(budget['time_s'])}: "
            + ("within the budget" if within else "OVER the budget")
        )
    if budget.get("energy_J"):
        # the runs' own energy: idle nodes of the cluster are the plan's model, not measured
        tag = "" if e_grades <= set(METERED[:1]) else f" ({', '.join(sorted(e_grades))})"
        within = e_sum <= budget["energy_J"]
        ok = ok and within
        lines.append(
            f"total energy of the runs {fmt_energy(e_sum)}{tag} of the budget's "
            f"{fmt_energy(budget['energy_J'])}: "
            + ("within the budget" if within else "OVER the budget")
        )
    if budget.get("power_W"):
        line, within = _peak_line(peaks, budget)
        ok = ok and within
        lines.append(line)
    return lines, ok


def _peak_line(peaks: list[tuple[float | None, str, str]], budget: dict) -> tuple[str, bool]:
    """The highest peak power the jobs' runs recorded against the cap (a job's idle nodes
    counted at the plan's idle power), and whether it held."""
    recorded = [(p, app, g) for p, app, g in peaks if p is not None]
    cap = budget["power_W"]
    if not recorded:
        return f"no run recorded a peak power: the cap of {cap:.0f} W cannot be checked", True
    p, app, grade = max(recorded)
    within = p <= cap
    missing = sorted({app for p_, app, _ in peaks if p_ is None})
    return (
        f"highest recorded peak power {p:.0f} W{grade_tag(grade)} ({app}) of the cap "
        f"{cap:.0f} W: "
        + ("within the cap" if within else "OVER the cap")
        + (f"; no peak recorded for {', '.join(missing)}" if missing else "")
    ), within
