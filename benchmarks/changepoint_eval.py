"""How often the regression verdict is wrong, on series with noise measured on this machine.

Synthetic histories: ``--before`` runs, then a step (by default a slowdown of 1 %, 5 % or
10 % in the figure's bad direction; ``--steps 3,10``: three and ten times worse) and
``--after`` runs; each run is the
median of ``--repeats`` values, each value the figure's median times (1 + r)
with r drawn (bootstrap) from the relative residuals the figure really showed
here (benchmarks/data/noise-local.json: whole ci-tier runs of HPCC on this
2-core VM, while other builds ran).  Every series goes through the same code
as ``apptune check-regressions`` (apptune.history.regressions.analyse).

* false alarm: a series without a step gets a regression or improvement verdict;
* miss: a series with a step does not get a regression verdict whose first bad
  run is within 2 runs of the true one.

    # the tables in docs/measurements.md#change-points
    .venv/bin/python benchmarks/changepoint_eval.py
    # re-measure the noise from runs
    .venv/bin/python benchmarks/changepoint_eval.py --record /tmp/bl/run*
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from apptune.history import regressions
from apptune.history.regressions import Point, Verdict

NOISE = Path(__file__).with_name("data") / "noise-local.json"
STEPS = (0.01, 0.05, 0.10)


def record(run_dirs: list[str], out: Path, all_runs: bool = False) -> None:
    """Every verified figure value of the runs' clean results (``all_runs``: disturbed ones
    too), per (app, tier, environment, variant, figure)."""
    from apptune.history import store

    series: dict[tuple, dict] = {}
    sources = []
    for d in run_dirs:
        try:
            run = store.read_run(Path(d))
        except Exception as e:  # an unfinished run directory: say so and go on
            print(f"skipped {d}: {e}", file=sys.stderr)
            continue
        sources.append(
            {
                "run_dir": str(run.run_dir),
                "session": run.uuid,
                "started": run.started,
                "mode": run.mode,
            }
        )
        for r in run.results:
            grade = r.quality.grade if r.quality else None
            if not r.verified or (not all_runs and grade != "clean"):
                continue
            for f in r.figures:
                s = series.setdefault(
                    (r.app, r.tier, r.environment, r.variant, f.name),
                    {"better": f.better, "unit": f.unit, "values": [], "sessions": []},
                )
                s["values"].append(f.value)
                s["sessions"].append(run.uuid[:8])
    data = {
        "how": "apptune benchmarks/changepoint_eval.py --record " + " ".join(run_dirs),
        "sources": sources,
        "series": [
            {"app": k[0], "tier": k[1], "environment": k[2], "variant": k[3], "figure": k[4], **v}
            for k, v in sorted(series.items())
        ],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{out}: {len(data['series'])} series from {len(sources)} runs")


def residual_pools(data: dict, min_values: int) -> dict[str, dict]:
    """Relative residuals (value / series median - 1) per figure, pooled over variants."""
    pools: dict[str, dict] = {}
    for s in data["series"]:
        v = np.asarray(s["values"], dtype=float)
        med = float(np.median(v))
        if len(v) < min_values or med == 0:
            continue
        p = pools.setdefault(
            f"{s['app']}/{s['tier']} {s['figure']}", {"better": s["better"], "r": [], "series": 0}
        )
        p["r"] += list(v / med - 1)
        p["series"] += 1
    for p in pools.values():
        r = np.asarray(p["r"])
        p["r"] = r
        p["cv"] = float(1.4826 * np.median(np.abs(r - np.median(r))))
    return pools


def series_points(
    rng, r: np.ndarray, n_before: int, n_after: int, repeats: int, step: float, better: str
) -> list[Point]:
    n = n_before + n_after
    draws = 1.0 + rng.choice(r, size=(n, repeats))
    factor = np.ones(n)
    factor[n_before:] = worse_by(step, better)
    values = np.median(draws, axis=1) * factor
    return [
        Point(f"run{i}", None, None, float(x), None, repeats, None) for i, x in enumerate(values)
    ]


def worse_by(step: float, better: str) -> float:
    """The factor a step makes a figure worse by: a slowdown of ``step`` (0.05: 5 %), or,
    from 1 on, ``step`` times worse (10: a rate ten times lower, a time ten times longer)."""
    if step >= 1:
        return 1 / step if better == "higher" else step
    return (1 - step) if better == "higher" else (1 + step)


def step_name(step: float) -> str:
    return f"{step:g}x" if step >= 1 else f"{step:.0%}"


def oracle_detects(
    values: np.ndarray,
    n_before: int,
    better: str,
    rng,
    alpha: float = 0.01,
    permutations: int = 499,
) -> bool:
    """A detector that is told where the step is: a one-sided permutation test of the
    difference of means at that split, at the same significance as check-regressions.
    Its misses are what the noise alone costs; no detector that must also find the
    run can do better."""
    sign = -1.0 if better == "higher" else 1.0

    def diff(x):
        return sign * (x[n_before:].mean() - x[:n_before].mean())

    d0 = diff(values)
    hits = sum(diff(rng.permutation(values)) >= d0 for _ in range(permutations))
    return (hits + 1) / (permutations + 1) < alpha


def evaluate(
    pool: dict,
    n_before: int,
    n_after: int,
    repeats: int,
    trials: int,
    seed: int,
    oracle: bool = False,
    steps: tuple[float, ...] = STEPS,
) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for step in (0.0, *steps):
        wrong, loc, oracle_miss = 0, [], 0
        for _ in range(trials):
            pts = series_points(rng, pool["r"], n_before, n_after, repeats, step, pool["better"])
            if oracle and step:
                oracle_miss += not oracle_detects(
                    np.array([p.value for p in pts]), n_before, pool["better"], rng
                )
            v = regressions.analyse(
                Verdict("s", "a", "t", "e", "v", "f", None, pool["better"], pts)
            )
            if step == 0.0:
                wrong += v.verdict in ("regression", "improvement")
            else:
                idx = int(v.first_bad.run[3:]) if v.first_bad else None
                hit = v.verdict == "regression" and idx is not None and abs(idx - n_before) <= 2
                wrong += not hit
                if hit:
                    loc.append(abs(idx - n_before))
        out[step] = {
            "rate": wrong / trials,
            "location_error": statistics.mean(loc) if loc else None,
            "oracle_misses": oracle_miss / trials if oracle and step else None,
        }
    return out


def o1_series(out: Path, pools: dict, cv: float = 0.015, seed: int = 6) -> None:
    """The recorded series of tests/test_regressions.py: nightly HPCC, gnu/baseline and
    gnu/tuned, 3 repeats per run; from run 10 on, gnu/baseline was built with -O1 (a flag
    ladder edit slipped in) and its StarFFT and wall time are 5 % worse.  Noise: the
    measured wall_time residuals of this machine, scaled to a robust CV of ``cv``."""
    rng = np.random.default_rng(seed)
    shape = pools["hpcc/ci wall_time"]
    r = shape["r"] * (cv / shape["cv"])
    prov = json.loads(
        (Path(__file__).with_name("data") / "hpcc-gnu-baseline-provenance.json").read_text()
    )
    o1 = json.loads(json.dumps(prov))
    o1["flags"]["cflags"] = ["-O1"]
    o1["flags"]["fflags"] = ["-O1"]
    tuned = json.loads(json.dumps(prov))
    tuned["variant"] = "tuned"
    tuned["flags"]["cflags"] = tuned["flags"]["fflags"] = ["-O3", "-march=native", "-funroll-loops"]
    base = {
        "baseline": {"HPL": 16.9, "StarFFT": 2.85, "wall_time": 95.0},
        "tuned": {"HPL": 17.1, "StarFFT": 2.94, "wall_time": 93.0},
    }
    better = {"HPL": "higher", "StarFFT": "higher", "wall_time": "lower"}
    change_at, n = 10, 16
    runs = []
    for i in range(n):
        results = []
        for variant in ("baseline", "tuned"):
            slipped = variant == "baseline" and i >= change_at
            for rep in range(3):
                figs = {}
                for f, v in base[variant].items():
                    step = (
                        0.05 if slipped and f != "HPL" else 0.0
                    )  # HPL is OpenBLAS: flags do not matter
                    figs[f] = round(
                        v
                        * (1 + rng.choice(r))
                        * ((1 - step) if better[f] == "higher" else (1 + step)),
                        4,
                    )
                results.append(
                    {
                        "app": "hpcc",
                        "tier": "nightly",
                        "environment": "gnu",
                        "variant": variant,
                        "repeat": rep,
                        "figures": figs,
                        "provenance": "tuned" if variant == "tuned" else "O1" if slipped else "O2",
                    }
                )
        runs.append(
            {
                "uuid": f"5e55{i:04d}-0000-4000-8000-{i:012d}",
                "start": 1795300000 + 86400 * i,
                "results": results,
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "description": " ".join(o1_series.__doc__.split()).replace("``cv``", f"{cv:.1%}"),
                "made_by": f"benchmarks/changepoint_eval.py --o1-series {out} (seed {seed})",
                "change_at": change_at,
                "provenance": {"O2": prov, "O1": o1, "tuned": tuned},
                "runs": runs,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"{out}: {n} runs, -O1 from run {change_at}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--record", nargs="+", metavar="RUN_DIR", help="re-measure the noise from these runs"
    )
    ap.add_argument(
        "--all-runs",
        action="store_true",
        help="with --record: disturbed runs too (default: the runs graded clean only)",
    )
    ap.add_argument("--noise", type=Path, default=NOISE)
    ap.add_argument(
        "--o1-series", type=Path, metavar="OUT", help="write the -O1 test series (test data)"
    )
    ap.add_argument(
        "--figures",
        default="all",
        help="comma-separated 'app/tier figure' pools (default all with enough values)",
    )
    ap.add_argument(
        "--min-values", type=int, default=8, help="values a series needs to enter a pool"
    )
    ap.add_argument(
        "--steps",
        default=",".join(str(x) for x in STEPS),
        help="the steps, in the figure's bad direction: fractions (0.05: 5 %% worse) or, "
        "from 1 on, factors (10: ten times worse); default %(default)s",
    )
    ap.add_argument("--before", type=int, default=20)
    ap.add_argument("--after", type=int, default=5)
    ap.add_argument("--repeats", default="1,3,5")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--oracle",
        action="store_true",
        help="also give the misses of a test that is told where the step is "
        "(the noise's own limit)",
    )
    ap.add_argument(
        "--scale-cv",
        metavar="CV,...",
        help="rescale each pool's measured residuals to these robust CVs (e.g. 0.01,0.02): "
        "the noise's shape from here, the size of a quieter machine",
    )
    a = ap.parse_args(argv)
    steps = tuple(float(x) for x in a.steps.split(","))
    if a.record:
        record(a.record, a.noise, a.all_runs)
        return 0
    data = json.loads(a.noise.read_text())
    pools = residual_pools(data, a.min_values)
    if a.o1_series:
        o1_series(a.o1_series, pools)
        return 0
    if a.figures != "all":
        pools = {k: pools[k] for k in a.figures.split(",")}
    if a.scale_cv:
        scaled = {}
        for name, pool in pools.items():
            for cv in (float(x) for x in a.scale_cv.split(",")):
                scaled[f"{name} shape scaled to CV {cv:.1%}"] = dict(
                    pool, r=pool["r"] * (cv / pool["cv"]), cv=cv
                )
        pools = scaled
    t0 = time.monotonic()
    print(
        f"{len(data['sources'])} measured runs ({a.noise}); {a.before} runs before the step, "
        f"{a.after} after, {a.trials} series per cell; false alarms on series without a step, "
        f"misses on series with one\n"
    )
    print(
        "| figure (pooled residuals) | noise per value (robust CV) | repeats per run | false "
        "alarms | "
        + " | ".join(f"misses, {step_name(s)} step" for s in steps)
        + "".join(f" | told where: misses, {step_name(s)}" for s in steps if a.oracle)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(steps) * (2 if a.oracle else 1))
    summary = {}
    for name, pool in sorted(pools.items(), key=lambda kv: kv[1]["cv"]):
        for rep in (int(x) for x in a.repeats.split(",")):
            res = evaluate(pool, a.before, a.after, rep, a.trials, a.seed, a.oracle, steps)
            summary[(name, rep)] = res
            print(
                f"| {name} ({len(pool['r'])} values, {pool['series']} variants) | {pool['cv']:.1%} "
                f"| {rep} | {res[0.0]['rate']:.1%} | "
                + " | ".join(f"{res[s]['rate']:.1%}" for s in steps)
                + "".join(f" | {res[s]['oracle_misses']:.1%}" for s in steps if a.oracle)
                + " |",
                flush=True,
            )
    print(f"\n({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
