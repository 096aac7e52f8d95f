"""Which jobs to run, and how, under a time, energy and power budget (``apptune plan``).

A *job* is one application's tier; its *options* are the ways the history shows it ran
verified on one system or machine: environment and variant, layout (ranks, threads,
nodes) and the CPU frequency asked for. Each option's expected time and energy are the
median of its runs (the clean ones where there are any), with their standard deviation
as the spread. The plan counts each option at median + 2 σ, so a plan holds for runs
within the noise the history saw.

Jobs run one after the other on a cluster of ``nodes`` nodes: a job on ``x`` of them
draws ``x`` nodes' recorded power plus ``(nodes - x) * idle_W`` (the node-power model
``(n - x)·p_idle + x·p_load``), and its energy is its own plus the idle nodes'. A power
cap leaves out the options whose power exceeds it: the highest peak their runs recorded
(``peak_power_W``, the largest sample of the meter's trace), or, where no run recorded a
peak, their mean power (energy / time), said as such wherever it is shown. The choice of
at most one option per job that maximises the jobs' total value within the time and
energy budget is a 0-1 integer program, solved exactly (:func:`solve`,
``scipy.optimize.milp``). Among plans of equal value, the one that needs the least time
and energy is taken.

Energy keeps the grade of the runs it comes from (``measured``, ``measured-shared``,
``modelled``): a plan resting on modelled energy says so in its first line and on every
line that shows such a figure.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import machine
from ..core.data import recipes
from ..core.run import knobs
from ..errors import LINE_BREAKING, ApptuneError, escape_line_breaks, first_of
from ..figures import fmt_seconds
from ..history import store
from ..models import PlanValues
from ..yamlio import load_model

#: An option's planned figure: the median plus this many standard deviations of its runs.
SIGMAS = 2.0
#: Grades of energy that was measured by a meter (``measured-shared`` is a meter too).
METERED = ("measured", "measured-shared")


@dataclass
class Option:
    """One way to run a job: a group of verified runs with the same variant and layout."""

    app: str
    tier: str
    environment: str
    variant: str
    system: str
    mode: str | None
    layout: dict
    nodes: int
    freq: str | None
    time_s: float
    time_sd: float | None
    energy_J: float | None
    energy_sd: float | None
    grade: str  # of the energy: measured, measured-shared, modelled, none
    runs: int
    clean: bool  # the figures come from clean runs
    # what the plan counts (set by :func:`apply_budget`)
    plan_time_s: float = 0.0
    plan_energy_J: float | None = None
    power_W: float | None = None
    #: The highest peak power the runs recorded (None: no run recorded one).
    peak_W: float | None = None

    @property
    def power_basis(self) -> str:
        """What :attr:`power_W` is: the recorded peak, or the mean where there is none."""
        return "recorded peak" if self.peak_W is not None else "mean power, no peak recorded"

    @property
    def label(self) -> str:
        return f"{self.environment}/{self.variant}"

    @property
    def layout_label(self) -> str:
        lay = self.layout
        if not lay.get("ranks"):
            return "not recorded"
        text = f"{lay['ranks']}x{lay.get('threads_per_rank') or 1}"
        return text + (f" bind={lay['binding']}" if lay.get("binding") else "")


@dataclass
class Job:
    app: str
    tier: str
    value: float
    options: list[Option]
    chosen: Option | None = None
    why_not: str | None = None


@dataclass
class Budget:
    time_s: float | None = None
    energy_J: float | None = None
    power_W: float | None = None
    #: Nodes of the cluster (None: each job's own; idle nodes are then not counted).
    nodes: int | None = None
    #: Idle power of one node, and where it comes from.
    idle_W: float | None = None
    idle_source: str = ""


@dataclass
class Plan:
    budget: Budget
    jobs: list[Job]
    where: str
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> list[Job]:
        return [j for j in self.jobs if j.chosen]

    def energy_grade(self) -> str:
        """The least trusted grade of the energy of the chosen options."""
        grades = {j.chosen.grade for j in self.chosen}
        for g in ("none", "modelled", "measured-shared", "measured"):
            if g in grades:
                return g
        return "none"


# ------------------------------------------------------------------------- units
_UNITS = {
    "time": {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400},
    "energy": {"j": 1, "kj": 1e3, "mj": 1e6, "wh": 3600, "kwh": 3.6e6, "mwh": 3.6e9},
    "power": {"w": 1, "kw": 1e3, "mw": 1e6},
}


def quantity(text: str, kind: str, default_unit: str) -> float:
    """``12h``, ``90min``, ``15kWh``, ``3.5kW`` as seconds, joules or watts."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = (m.group(2) if m else "") or default_unit
    factor = _UNITS[kind].get(unit.lower())
    if not m or factor is None:
        units = ", ".join(_UNITS[kind])
        raise ValueError(f"{text!r} is not a {kind} (a number with one of: {units})")
    value = float(m.group(1)) * factor
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite {kind}")
    if value <= 0:
        raise ValueError(f"{text!r}: a budget must be more than 0")
    return value


def power_cap(text: str, voltage: float | None) -> float:
    """A power cap in W (``3000``, ``3kW``) or a current in A (``13A``) times ``voltage``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*[aA]\s*", str(text))
    if not m:
        return quantity(text, "power", "W")
    if not voltage:
        raise ValueError(f"{text!r} is a current: give the supply's voltage with --voltage")
    watts = float(m.group(1)) * voltage
    if not math.isfinite(watts) or watts <= 0:
        raise ValueError(f"{text!r} at {voltage:g} V is not a power more than 0 and finite")
    return watts


# ---------------------------------------------------------------- from the history
def _median_sd(xs: list[float]) -> tuple[float, float | None]:
    return statistics.median(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def load_options(
    h: store.History,
    tier: str,
    system: str | None = None,
    machine_id: str | None = None,
    apps: list[str] | None = None,
) -> dict[str, list[Option]]:
    """Every application's options on ``system`` (or, without one, on the machine
    ``machine_id``), from its verified runs of ``tier``."""
    groups: dict[tuple, list] = {}
    for r in h.verified_runs(tier, system=system, machine_id=machine_id):
        if r["wall_time"] is None or (apps and r["app"] not in apps):
            continue
        lay = store.json_field(r["layout"]) or {}
        freq = lay.get("cpu_freq")
        # a frequency is the option's, not its variant's (``-P cpu_freq=...`` names it there)
        variant = knobs.without_freq(r["variant"])
        key = (r["app"], r["environment"], variant, r["system"], lay.get("nodes") or 1, freq)
        groups.setdefault(key, []).append((r, lay))
    out: dict[str, list[Option]] = {}
    for (app, env, variant, sysname, nodes, freq), rows in sorted(groups.items(), key=str):
        clean = [x for x in rows if x[0]["quality_grade"] == "clean"]
        use = clean or rows
        t, t_sd = _median_sd([r["wall_time"] for r, _ in use])
        metered = [r for r, _ in use if r["energy_J"] is not None and r["trust"] != "none"]
        e, e_sd, grade, peak = None, None, "none", None
        if metered:
            e, e_sd = _median_sd([r["energy_J"] for r in metered])
            order = ("modelled", "measured-shared", "measured")
            grade = min((r["trust"] for r in metered), key=lambda g: order.index(g))
            peaks = [r["peak_power_W"] for r in metered if r["peak_power_W"] is not None]
            peak = max(peaks) if peaks else None
        last = use[-1]
        out.setdefault(app, []).append(
            Option(
                app=app,
                tier=tier,
                environment=env,
                variant=variant,
                system=sysname,
                mode=last[0]["mode"],
                layout={k: v for k, v in last[1].items() if k != "cpu_freq"},
                nodes=int(nodes),
                freq=freq,
                time_s=t,
                time_sd=t_sd,
                energy_J=e,
                energy_sd=e_sd,
                grade=grade,
                runs=len(use),
                clean=bool(clean),
                peak_W=peak,
            )
        )
    return out


def runnable(
    options: dict[str, list[Option]], tier: str
) -> tuple[dict[str, list[Option]], list[str]]:
    """The options whose build variant the recipe's tier still lists for their environment
    (the plan's script reruns them with ``apptune run --mode``, which runs nothing else),
    and one line for each application, environment and variant left out for that."""
    kept: dict[str, list[Option]] = {}
    notes = []
    for app, opts in options.items():
        try:
            recipe = recipes.load_recipe(app)
            spec = recipe.tiers.get(tier)
        except ApptuneError as e:
            notes.append(f"left out: {app}: its recipe is unusable ({e})")
            continue
        listed = {
            env: {recipes.Variant.parse(s, recipe).name for s in specs}
            for env, specs in (spec.variants.items() if spec else ())
        }
        for o in opts:
            bad = unscriptable(o)
            if bad:  # a hostile or damaged record: its words go on a line of plan.sh
                notes.append(
                    escape_line_breaks(
                        f"left out: {app} {o.environment}/{o.variant}: its recorded {bad} "
                        "holds a line break or NUL (no line of a script may carry it)"
                    )
                )
                continue
            if o.variant.split("@")[0] in listed.get(o.environment, ()):
                kept.setdefault(app, []).append(o)
                continue
            line = (
                f"left out: {app} {o.environment}/{o.variant.split('@')[0]}: in the history, "
                f"no longer on the {tier} tier of {recipes.recipe_path(app).name}"
            )
            if line not in notes:
                notes.append(line)
    return kept, notes


def unscriptable(o: Option) -> str | None:
    """The first recorded word of ``o`` that the plan's script would write on one of its
    command lines and that holds a character ending a line (a newline, NUL, ...), by name;
    None when there is none."""
    words = {
        "application": o.app,
        "environment": o.environment,
        "variant": o.variant,
        "system": o.system,
        "mode": o.mode,
        "tier": o.tier,
        "CPU frequency": o.freq,
        "binding": o.layout.get("binding"),
    }
    for name, w in words.items():
        if w is not None and LINE_BREAKING.search(str(w)):
            return name
    return None


def load_values(path: str | Path | None, apps: list[str]) -> dict[str, float] | None:
    """The value file's values (None without a file: every job is worth 1); an application
    without a recipe is refused, one line naming the file and the field."""
    if path is None:
        return None
    v = load_model(path, PlanValues)
    known = set(recipes.list_recipes()) | set(apps)
    bad = [
        ApptuneError(
            path, f"values.{a}", f"unknown application (known: {', '.join(sorted(known))})"
        )
        for a in v.values
        if a not in known
    ]
    if bad:
        raise first_of(bad, None)
    return dict(v.values)


# ------------------------------------------------------------------- the budget
def grade_tag(grade: str) -> str:
    """What follows a figure of energy or power that no meter measured: `` (modelled)``."""
    return "" if grade == "measured" else f" ({grade})"


def _upper(x: float | None, sd: float | None) -> float | None:
    return None if x is None else x + SIGMAS * (sd or 0.0)


def apply_budget(job: Job, b: Budget) -> list[tuple[Option, str]]:
    """Set each option's planned time, energy and power; return the options the budget
    cannot take at all, each with the reason."""
    out = []
    for o in job.options:
        o.plan_time_s = _upper(o.time_s, o.time_sd)
        idle = (b.nodes - o.nodes) * b.idle_W if b.nodes and b.idle_W is not None else 0.0
        run_e = _upper(o.energy_J, o.energy_sd)
        # a cap holds at the peak: the recorded one, the mean only where none was recorded
        if run_e is None:
            o.power_W = None
        else:
            o.power_W = (o.peak_W if o.peak_W is not None else run_e / o.plan_time_s) + idle
        o.plan_energy_J = None if run_e is None else run_e + idle * o.plan_time_s
        if b.nodes and o.nodes > b.nodes:
            out.append((o, f"needs {o.nodes} nodes, the cluster has {b.nodes}"))
        elif (b.energy_J or b.power_W) and o.plan_energy_J is None:
            out.append((o, "no energy figure in its runs (the budget needs one)"))
        elif b.power_W and o.power_W > b.power_W:
            out.append(
                (
                    o,
                    f"draws {o.power_W:.0f} W ({o.power_basis}){grade_tag(o.grade)} on "
                    f"{b.nodes or o.nodes} node(s), cap {b.power_W:.0f} W",
                )
            )
        elif b.time_s and o.plan_time_s > b.time_s:
            out.append((o, f"takes {fmt_seconds(o.plan_time_s)}, more than the whole budget"))
        elif b.energy_J and o.plan_energy_J > b.energy_J:
            need = f"{fmt_energy(o.plan_energy_J)}{grade_tag(o.grade)}"
            out.append((o, f"needs {need}, more than the whole budget"))
    return out


def max_loaded_nodes(b: Budget, p_load: float) -> int | None:
    """The most nodes that may run loaded (``p_load`` W each) under the power cap with
    the rest idle: the largest x with ``(n - x)·p_idle + x·p_load <= cap``."""
    if not (b.power_W and b.nodes and b.idle_W is not None) or p_load <= b.idle_W:
        return b.nodes if b.power_W and b.nodes and b.nodes * b.idle_W <= b.power_W else None
    x = math.floor((b.power_W - b.nodes * b.idle_W) / (p_load - b.idle_W))
    return max(0, min(b.nodes, x))


def solve(
    values: list[float],
    choices: list[list[tuple[float, ...]]],
    limits: tuple[float | None, ...],
) -> list[int | None]:
    """The most valuable choice of at most one option per job (``choices[j]``: each
    option's use of every resource) whose sums stay within ``limits`` (None: unlimited);
    of equally valuable ones, the one using the least of the resources (relative to their
    limits). Returns the chosen option's index per job, None for a job left out."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    index = [(j, k) for j, opts in enumerate(choices) for k in range(len(opts))]
    if not index:
        return [None] * len(values)
    n = len(index)
    rows, ub = [], []
    for j in range(len(values)):  # at most one option per job
        rows.append([1.0 if jj == j else 0.0 for jj, _ in index])
        ub.append(1.0)
    used = [r for r, lim in enumerate(limits) if lim is not None]
    for r in used:
        rows.append([choices[j][k][r] for j, k in index])
        ub.append(limits[r])
    a = np.array(rows)
    cons = [LinearConstraint(a, -np.inf, np.array(ub))]
    value = np.array([values[j] for j, _ in index], dtype=float)
    opts = {"time_limit": 60}
    best = milp(-value, constraints=cons, integrality=np.ones(n), bounds=Bounds(0, 1), options=opts)
    if not best.success:
        raise ApptuneError(None, "plan", f"the integer program found no solution: {best.message}")
    # second pass: as valuable, with the least (relative) time and energy
    scale = [
        limits[r] if limits[r] else max(1e-12, max(c[r] for c in sum(choices, [])))
        for r in range(len(limits))
    ]
    cost = np.array(
        [sum(choices[j][k][r] / scale[r] for r in range(len(limits))) for j, k in index]
    )
    tol = 1e-9 * max(1.0, abs(best.fun))
    cons.append(LinearConstraint(value.reshape(1, -1), -best.fun - tol, np.inf))
    lean = milp(cost, constraints=cons, integrality=np.ones(n), bounds=Bounds(0, 1), options=opts)
    x = (lean if lean.success else best).x
    out: list[int | None] = [None] * len(values)
    for (j, k), xi in zip(index, x, strict=True):
        if xi > 0.5:
            out[j] = k
    return out


def make_plan(jobs: list[Job], b: Budget, where: str) -> Plan:
    """Choose the jobs and their options (the jobs keep the reason of those left out)."""
    plan = Plan(budget=b, jobs=jobs, where=where)
    if b.power_W and b.nodes and b.idle_W is not None and b.nodes * b.idle_W > b.power_W:
        raise ApptuneError(
            None,
            "--power-cap",
            f"infeasible budget: {b.nodes} idle nodes draw {b.nodes * b.idle_W:.0f} W, "
            f"more than the cap of {b.power_W:.0f} W",
        )
    fits: list[list[Option]] = []
    for j in jobs:
        refused = apply_budget(j, b)
        ok = [o for o in j.options if all(o is not r for r, _ in refused)]
        if not ok:
            j.why_not = "; ".join(sorted({why for _, why in refused}))
        fits.append(ok)
    if not any(fits):
        why = "; ".join(f"{j.app}: {j.why_not}" for j in jobs)
        raise ApptuneError(None, "budget", f"infeasible budget: no job fits ({why})")
    choices = [[(o.plan_time_s, o.plan_energy_J or 0.0) for o in ok] for ok in fits]
    picked = solve([j.value for j in jobs], choices, (b.time_s, b.energy_J))
    for j, ok, k in zip(jobs, fits, picked, strict=True):
        if k is not None:
            j.chosen = ok[k]
        elif ok and not j.why_not:
            j.why_not = (
                f"does not fit beside the chosen jobs (needs at least "
                f"{fmt_seconds(min(o.plan_time_s for o in ok))}"
                + (
                    f", {fmt_energy(min(o.plan_energy_J for o in ok))}"
                    + grade_tag(min(ok, key=lambda o: o.plan_energy_J).grade)
                    if b.energy_J
                    else ""
                )
                + f"; value {j.value:g})"
            )
    return plan


def build_jobs(
    options: dict[str, list[Option]],
    values: dict[str, float] | None,
    tier: str,
    where: str,
    values_file: str | Path | None = None,
) -> list[Job]:
    """One job per application with options (every application the value file names
    must have one: one line each for those without)."""
    names = sorted(values) if values else sorted(options)
    missing = [
        ApptuneError(
            values_file,
            f"values.{a}" if values_file else "--app",
            f"no verified run of {a} (tier {tier}) on {where} in the history",
        )
        for a in names
        if not options.get(a)
    ]
    if missing:
        raise first_of(missing, None)
    if not names:
        raise ApptuneError(None, "history", f"no verified run of tier {tier} on {where}")
    return [Job(a, tier, (values or {}).get(a, 1.0), options[a]) for a in names]


def where_label(system: str | None, machine_id: str | None) -> str:
    return f"system {system}" if system else f"this machine ({machine_id})"


def this_machine() -> str:
    return machine.machine_id(machine.fingerprint())


# ------------------------------------------------------------------- formatting
def fmt_energy(j: float | None) -> str:
    if j is None:
        return "-"
    for unit, f in (("kWh", 3.6e6), ("Wh", 3600.0), ("kJ", 1e3)):
        if j >= f:
            return f"{j / f:.3g} {unit}"
    return f"{j:.3g} J"


def asdict_plan(plan: Plan) -> dict:
    """The plan as JSON data (every energy figure with its grade)."""

    def opt(o: Option) -> dict:
        return asdict(o) | {"energy_grade": o.grade}

    return {
        "where": plan.where,
        "energy_grade": plan.energy_grade(),
        "budget": asdict(plan.budget),
        "chosen": [dict(opt(j.chosen), value=j.value) for j in plan.chosen],
        "left_out": [
            {"app": j.app, "tier": j.tier, "value": j.value, "why": j.why_not}
            for j in plan.jobs
            if not j.chosen
        ],
        "notes": plan.notes,
    }
