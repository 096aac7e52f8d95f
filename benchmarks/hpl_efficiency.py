#!/usr/bin/env python3
"""HPL against the DGEMM of the same run (HPL efficiency), one configuration at a time.

Builds an HPCC variant (build cache used) and runs the ci tier's input with the
given N, NB, P x Q and layout, outside ReFrame, exactly as `apptune tune` does
(apptune.core.run.localrun); prints one JSON line with HPL, SingleDGEMM, StarDGEMM, the
ratio HPL / (ranks x SingleDGEMM), MPIFFT, wall time and whether it verified.
Not a test: timings here are noisy, run it several times on a quiet node.

    .venv/bin/python benchmarks/hpl_efficiency.py --n 5280 --nb 192 --grid 1x2
    .venv/bin/python benchmarks/hpl_efficiency.py --n 7040 --nb 256 --grid 2x1 \\
        --set DEPTH=0 --set PFACT=1
    .venv/bin/python benchmarks/hpl_efficiency.py --n 7040 --nb 256 --grid 1x2 \\
        --extra-cflags=-DHPL_DETAILED_TIMING
    .venv/bin/python benchmarks/hpl_efficiency.py --n 5280 --nb 192 --ranks 1 --threads 2 \\
        --variant aggressive+blas=mkl-threaded+fft=fftw3
"""

import argparse
import json
import sys
from pathlib import Path

from apptune.core.data import recipes
from apptune.core.data.site import load_site
from apptune.core.run import localrun


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="aggressive+blas=mkl+fft=fftw3")
    ap.add_argument("-e", "--environment", default="gnu")
    ap.add_argument("--n", type=int, default=5280)
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument(
        "--grid", default=None, help="PxQ (default: the tier's rule for the rank count)"
    )
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--binding", default=None, choices=["core", "socket", "none"])
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="another input parameter, e.g. DEPTH=0 or PFACT=1 (inputs/hpcc/ci/input.yaml)",
    )
    ap.add_argument(
        "--extra-cflags",
        default="",
        metavar="FLAGS",
        help="appended to the ladder's C flags, e.g. -DHPL_DETAILED_TIMING (HPL's time per phase)",
    )
    ap.add_argument("--work", type=Path, default=Path("runs/hpl-efficiency"))
    a = ap.parse_args(argv)
    recipe = recipes.load_recipe("hpcc")
    site = load_site(a.environment)
    cflags_extra = a.extra_cflags.split()
    plan = localrun.plan_for(recipe, a.variant, site, extra_cflags=cflags_extra)
    # the variant and its extra flags (localrun.variant_label)
    label = f"{a.environment}-{plan['variant']}"
    stage = a.work / "builds" / label.replace("+", "_").replace("=", "-").replace(" ", "-")
    localrun.build_variant(recipe, plan, site, stage, use_cache=True)
    overrides = {"N": a.n, "NB": a.nb}
    if a.grid:
        p, q = (int(x) for x in a.grid.lower().split("x"))
        overrides |= {"P": p, "Q": q}
    for kv in a.set:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            ap.error(f"--set {kv}: expected KNOB=VALUE")
        overrides[k] = int(v) if v.lstrip("-").isdigit() else v
    knobs = "".join(f"-{k}{v}" for k, v in overrides.items() if k not in ("N", "NB", "P", "Q"))
    name = f"{a.ranks}x{a.threads}-N{a.n}-NB{a.nb}-{a.grid or 'auto'}{knobs}" + "".join(
        cflags_extra
    )
    r = localrun.run_tier(
        recipe,
        "ci",
        stage,
        a.work / "runs" / name,
        site,
        ranks=a.ranks,
        overrides=overrides,
        changed_inputs=set(overrides) | {"ranks"},
        threads=a.threads,
        binding=a.binding,
    )
    f = r.figures
    hpl, dgemm = f.get("HPL"), f.get("SingleDGEMM")
    print(
        json.dumps(
            {
                "variant": a.variant,
                "layout": f"{a.ranks}x{a.threads}",
                "N": a.n,
                "NB": a.nb,
                "grid": a.grid,
                "set": a.set,
                "verified": r.ok,
                "HPL": hpl,
                "SingleDGEMM": dgemm,
                "StarDGEMM": f.get("StarDGEMM"),
                "HPL_per_ranks_SingleDGEMM": round(hpl / (a.ranks * dgemm), 3)
                if hpl and dgemm
                else None,
                "MPIFFT": f.get("MPIFFT"),
                "wall_s": round(f["wall_time"], 1),
            }
        )
    )
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
