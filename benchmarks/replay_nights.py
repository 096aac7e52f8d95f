"""Replay ``apptune check-regressions`` night by night over a recorded nightly benchmark.

``benchmarks/nightly_slurm.sh WORK`` leaves the nights' history (``WORK/history``) and
the tree with the baseline it recorded (``WORK/tree``). This runs the check-regressions
of *this* tree's code as it would have run after each night (the history cut after that
night, in a copy), and prints per night the REGRESSION and UNEXPLAINED lines; and it
judges each night's stored run records against the recorded baseline as ``apptune run``
does (:func:`apptune.core.judge.baselines.verdicts` over each variant's repeats): how the rules
judge recorded unchanged nights and the planted one, without running them again.

    .venv/bin/python benchmarks/replay_nights.py /tmp/apptune-nightly-slurm [--mode ci]

Not a test; what it prints goes into docs/measurements.md with the recorded run it replayed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cut(src: Path, dst: Path, keep: int) -> None:
    """A copy of the history ``src`` with only its first ``keep`` runs."""
    shutil.copytree(src, dst)
    db = sqlite3.connect(dst / "history.sqlite")
    db.execute("PRAGMA foreign_keys = ON")
    ids = [r[0] for r in db.execute("SELECT id FROM runs ORDER BY started_unix")]
    db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in ids[keep:]])
    db.commit()
    db.close()


def judge_night(run_dir: Path) -> collections.Counter:
    """The figure verdicts ``apptune run`` gives a stored night (in this process: run with
    APPTUNE_ROOT set to the benchmark's tree, whose baseline the night was judged by)."""
    from apptune.core.data import recipes
    from apptune.core.judge import baselines

    groups = collections.defaultdict(list)
    for f in sorted(run_dir.glob("stage/**/apptune-result.json")):
        r = json.loads(f.read_text())
        groups[(r["system"], r["app"], r["tier"], r["environment"], r["variant"])].append(r)
    out: collections.Counter = collections.Counter()
    for (system, app, _tier, _env, _variant), rs in groups.items():
        specs = recipes.figure_specs(recipes.load_recipe(app))
        for j in baselines.verdicts(system, app, rs, specs)["figures"].values():
            out[j["verdict"]] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="the work directory of benchmarks/nightly_slurm.sh")
    ap.add_argument("--mode", default="ci")
    ap.add_argument("--first", type=int, default=1, help="the first night to replay")
    a = ap.parse_args()
    hist = a.work / "history"
    nights = sqlite3.connect(hist / "history.sqlite").execute("SELECT count(*) FROM runs")
    n = nights.fetchone()[0]
    env = dict(os.environ, APPTUNE_ROOT=str(a.work / "tree"))
    os.environ["APPTUNE_ROOT"] = env["APPTUNE_ROOT"]
    nights_dirs = sorted(
        d for d in (a.work / "runs").iterdir() if d.is_dir() and d.name[:1].isdigit()
    )
    total = {"REGRESSION": 0, "UNEXPLAINED": 0}
    print(
        "| night | apptune run: regression / unexplained / within noise / no verdict "
        "| check-regressions: exit | REGRESSION | UNEXPLAINED | what was flagged |"
    )
    print("|---|---|---|---|---|---|")
    for k in range(a.first, n + 1):
        with tempfile.TemporaryDirectory() as tmp:
            cut(hist, Path(tmp) / "h", k)
            p = subprocess.run(
                [sys.executable, "-m", "apptune", "check-regressions"]
                + ["--history", str(Path(tmp) / "h"), "--mode", a.mode],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
            )
        lines = p.stdout.splitlines()
        got = {w: [x for x in lines if x.startswith(w + ":")] for w in total}
        for w in total:
            total[w] += len(got[w]) if k < n else 0
        named = "; ".join(
            " ".join(x.split(": ", 1)[1].split(" (")[0].split()[-2:]) for x in got["REGRESSION"][:3]
        ) + ("; …" if len(got["REGRESSION"]) > 3 else "")
        run = judge_night(nights_dirs[k - 1]) if k <= len(nights_dirs) else {}
        said = " / ".join(
            str(run.get(w, 0)) for w in ("regression", "unexplained", "within noise", "no verdict")
        )
        print(
            f"| {k} | {said} | {p.returncode} | {len(got['REGRESSION'])} "
            f"| {len(got['UNEXPLAINED'])} | {named or '-'} |"
        )
    print(f"\nnights {a.first}-{n - 1} (the last is the planted one): {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
