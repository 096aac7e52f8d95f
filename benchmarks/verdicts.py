"""How trustworthy the performance verdicts are on this machine (docs/measurements.md).

Runs HPCC's ci tier (one variant, default gnu/tuned) through ``apptune run`` in a
throw-away copy of the tree, with its own history, and measures:

1. **noise**: one session of ``--repeats N`` on a quiet node (waiting for quiet), and one
   with a CPU hog on one core beside it: the robust CV of each figure, the grades;
2. **false alarms**: a baseline recorded from the quiet session, then ``--sessions`` more
   single-run sessions of the unchanged build: how many judged figures got a regression or
   improvement verdict, and how many figures were judged at all;
3. **a real slip**: ``--slip`` sessions of gnu/baseline, then as many with the baseline
   ladder's ``-O2`` replaced by ``-O1``; ``apptune check-regressions`` over that history.

    .venv/bin/python benchmarks/verdicts.py --work /tmp/verdicts          # ~25 min here

Nothing here is a pass/fail test; it prints Markdown tables and writes ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from apptune.figures import fmt_pct  # the venv's editable install of this tree
from apptune.history import records

REPO = Path(__file__).resolve().parent.parent
APPTUNE = [sys.executable, "-m", "apptune"]


def sh(args, env, cwd, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(APPTUNE + args, env=env, cwd=cwd, capture_output=True, text=True)
    if check and p.returncode not in (0, 1):
        sys.exit(f"{' '.join(args)} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def results(run_dir: Path) -> list[dict]:
    return [c.record for c in records.cases(run_dir) if c.record]


def rcv(values: list[float]) -> float | None:
    if len(values) < 3:
        return None
    med = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - med) for v in values) / abs(med) if med else None


def run(tree: Path, env: dict, name: str, *extra, variant="tuned") -> Path:
    d = tree / "runs" / name
    sh(
        [
            "run",
            "--mode",
            "ci",
            "--run-dir",
            str(d),
            *extra,
            "-c",
            "reframe-checks/hpcc",
            "--",
            "-n",
            f"HPCCCheck.*build.variant={variant}$",
            "-S",
            "valid_prog_environs=gnu",
        ],
        env,
        tree,
    )
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument(
        "--slip", type=int, default=6, help="sessions before and after the -O1 slip (0: skip)"
    )
    ap.add_argument("--quiet-wait", type=float, default=120)
    ap.add_argument(
        "--rules-only",
        action="store_true",
        help="only compare the rules on the sessions already in --work",
    )
    a = ap.parse_args()
    if a.rules_only:
        for r in compare_rules(a.work / "tree", [f"same-{i}" for i in range(a.sessions)]):
            print(f"| {r['rule']} | {r['runs']} | {r['judged']} | {r['alarms']} |")
        return 0
    tree = a.work / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    for d in (
        "build-recipes",
        "patches",
        "inputs",
        "reference",
        "site-config",
        "reframe-checks",
        "src",
    ):
        shutil.copytree(REPO / d, tree / d, symlinks=True)
    shutil.rmtree(tree / "reference/baselines", ignore_errors=True)
    env = dict(
        os.environ,
        APPTUNE_ROOT=str(tree),
        APPTUNE_HISTORY=str(a.work / "history"),
        APPTUNE_RUNS=str(tree / "runs"),
    )
    shutil.rmtree(a.work / "history", ignore_errors=True)
    out: dict = {"machine": None, "started": time.strftime("%Y-%m-%d %H:%M")}
    from apptune import machine

    fp = machine.fingerprint()
    out["machine"] = {"id": machine.machine_id(fp), "describe": machine.describe(fp)}

    # 1. noise, quiet and loaded
    quiet = run(
        tree, env, "quiet", "--repeats", str(a.repeats), "--wait-for-quiet", str(a.quiet_wait)
    )
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = run(tree, env, "loaded", "--repeats", str(a.repeats))
    finally:
        hog.kill()
    noise = {}
    for label, d in (("quiet", quiet), ("loaded", loaded)):
        rs = results(d)
        grades = [r["quality"]["grade"] for r in rs]
        use = [r for r in rs if r["quality"]["grade"] == "clean"] if label == "quiet" else rs
        figs = sorted({n for r in use for n in r["figures"]})
        noise[label] = {
            "grades": {g: grades.count(g) for g in set(grades)},
            "cv": {
                n: rcv([r["figures"][n] for r in use if isinstance(r["figures"].get(n), float)])
                for n in figs
            },
        }
    out["noise"] = noise

    # 2. false alarms: baseline from the quiet session, then unchanged single-run sessions
    sh(["baseline", "update", str(quiet)], env, tree)
    counts = {"judged": 0, "alarms": 0, "not judged": 0, "disturbed runs": 0}
    per_fig: dict[str, list[str]] = {}
    for i in range(a.sessions):
        for r in results(run(tree, env, f"same-{i}", "--wait-for-quiet", str(a.quiet_wait))):
            if r["quality"]["grade"] != "clean":
                counts["disturbed runs"] += 1
            for n, c in (r["baseline"].get("figures") or {}).items():
                per_fig.setdefault(n, []).append(c["verdict"])
                if c["verdict"] in ("regression", "improvement"):
                    counts["alarms"] += 1
                if c["verdict"] == "no verdict":
                    counts["not judged"] += 1
                else:
                    counts["judged"] += 1
    out["false_alarms"] = {"counts": counts, "per_figure": per_fig}

    # 3. a real -O1 slip into gnu/baseline, over a fresh history
    if a.slip:
        env3 = dict(env, APPTUNE_HISTORY=str(a.work / "history-slip"))
        shutil.rmtree(a.work / "history-slip", ignore_errors=True)
        for i in range(a.slip):
            run(
                tree,
                env3,
                f"slip-before-{i}",
                "--wait-for-quiet",
                str(a.quiet_wait),
                variant="baseline",
            )
        ladders = tree / "site-config/flag-ladders.yaml"
        text = ladders.read_text()
        gnu = text.index("  gnu:")
        base = text.index("baseline:", gnu)
        end = text.index("\n    ", text.index("fflags", base))
        ladders.write_text(text[:base] + text[base:end].replace("-O2", "-O1") + text[end:])
        for i in range(a.slip):
            run(
                tree,
                env3,
                f"slip-after-{i}",
                "--wait-for-quiet",
                str(a.quiet_wait),
                variant="baseline",
            )
        ladders.write_text(text)
        p = sh(
            [
                "check-regressions",
                "--history",
                str(a.work / "history-slip"),
                "--json",
                str(a.work / "slip-verdicts.json"),
            ],
            env3,
            tree,
        )
        out["slip"] = {
            "summary": p.stdout.strip().splitlines()[-1],
            "verdicts": [
                {k: v[k] for k in ("figure", "verdict", "change", "reason")}
                for v in json.loads((a.work / "slip-verdicts.json").read_text())
                if v["verdict"] in ("regression", "improvement")
            ],
        }
    out["rules"] = compare_rules(tree, [f"same-{i}" for i in range(a.sessions)])
    (a.work / "results.json").write_text(json.dumps(out, indent=1))

    print(f"machine: {out['machine']['describe']} ({out['machine']['id']}), {out['started']}\n")
    print("| figure | robust CV, quiet (clean runs) | robust CV, one core loaded |\n|---|---|---|")
    for n, v in noise["quiet"]["cv"].items():
        lv = noise["loaded"]["cv"].get(n)
        print(f"| {n} | {fmt_pct(v, signed=False)} | {fmt_pct(lv, signed=False)} |")
    print(f"\ngrades: quiet {noise['quiet']['grades']}, loaded {noise['loaded']['grades']}")
    print(f"\nfalse alarms over {a.sessions} unchanged sessions: {counts}")
    for n, vs in sorted(per_fig.items()):
        print(f"  {n}: " + ", ".join(f"{v} {vs.count(v)}" for v in sorted(set(vs))))
    print("\n| rule | runs compared | judged comparisons | false alarms |\n|---|---|---|---|")
    for r in out["rules"]:
        print(f"| {r['rule']} | {r['runs']} | {r['judged']} | {r['alarms']} |")
    if a.slip:
        print(f"\n-O1 slip: {out['slip']['summary']}")
        for v in out["slip"]["verdicts"]:
            print(f"  {v['verdict']}: {v['figure']} {v['reason']}")
    return 0


def compare_rules(tree: Path, sessions: list[str]) -> list[dict]:
    """False alarms of unchanged sessions against a baseline of the other half of them (in
    time order, and interleaved), under the rule apptune uses and simpler ones."""
    import yaml

    from apptune.core.data import recipes
    from apptune.core.judge import baselines

    specs = recipes.figure_specs(recipes.load_recipe("hpcc"))
    recs = {n: results(tree / "runs" / n) for n in sessions}
    h = len(sessions) // 2
    splits = [
        (sessions[:h], sessions[h:]),
        (sessions[h:], sessions[:h]),
        (sessions[0::2], sessions[1::2]),
        (sessions[1::2], sessions[0::2]),
    ]
    now = (baselines.SIGMAS, baselines.FLOOR, baselines.run_noise)

    def robust(values):
        return rcv(values)

    rules = [
        ("max(3 %, 3 sd), noise = robust CV", 3.0, 0.03, robust),
        ("max(3 %, 3 sd), noise = sd at its upper 80 % bound", 3.0, 0.03, now[2]),
        ("max(5 %, 3 sd), the same noise", 3.0, 0.05, now[2]),
        ("max(5 %, 4 sd), the same noise (apptune's rule)", *now),
    ]
    out = []
    try:
        for label, sig, floor, noise in rules:
            baselines.SIGMAS, baselines.FLOOR, baselines.run_noise = sig, floor, noise
            runs = judged = alarms = 0
            for base, test in splits:
                _, text, _ = baselines.merge("local", "hpcc", [r for n in base for r in recs[n]])
                b = baselines.BaselineFile.model_validate(yaml.safe_load(text))
                for r in (r for n in test for r in recs[n] if r["quality"]["grade"] == "clean"):
                    runs += 1
                    e = baselines.lookup(
                        b, r["machine_id"], r["environment"], r["variant"], r["tier"]
                    )
                    for j in baselines.compare(
                        b, e, specs, r["figures"], energy_trust=r["energy"]["trust"]
                    ).values():
                        judged += j["verdict"] != "no verdict"
                        alarms += j["verdict"] in ("regression", "improvement")
            out.append({"rule": label, "runs": runs, "judged": judged, "alarms": alarms})
    finally:
        baselines.SIGMAS, baselines.FLOOR, baselines.run_noise = now
    return out


if __name__ == "__main__":
    sys.exit(main())
