"""Performance baselines per system: ReFrame references, and their update from a run."""
from __future__ import annotations

import datetime
from pathlib import Path

from . import paths
from .errors import ApptuneError
from .models import BaselineFile, Figure
from .yamlio import atomic_write_text, dump_yaml, load_model

HEADER = ("# Performance baselines, one entry per (environment, variant, tier).\n"
          "# Thresholds are the allowed relative change in the bad direction.\n"
          "# Update with `apptune baseline update RUN_DIR` and review the diff.\n")


def load(system: str, app: str) -> tuple[Path, BaselineFile | None]:
    f = paths.baselines_file(system, app)
    if not f.exists():
        return f, None
    b = load_model(f, BaselineFile)
    if b.app != app or b.system != system:
        raise ApptuneError(f, "app/system", f"file says {b.app}/{b.system}, expected {app}/{system}")
    return f, b


def threshold(b: BaselineFile, figure: str) -> float:
    return (b.thresholds.get(figure) or b.thresholds["default"]).regression


def lookup(b: BaselineFile | None, env: str, variant: str, tier: str):
    if b is None:
        return None
    return next((e for e in b.entries if (e.environment, e.variant, e.tier) == (env, variant, tier)), None)


def reframe_reference(b: BaselineFile | None, entry, figures: dict[str, Figure],
                      skip: set[str] = frozenset()) -> dict:
    """``{'*': {fig: (value, lower, upper, unit)}}`` in ReFrame's reference format."""
    if entry is None:
        return {}
    ref = {}
    for name, fig in figures.items():
        if name not in entry.figures or name in skip:
            continue
        thr = threshold(b, name)
        bounds = (-thr, None) if fig.better == "higher" else (None, thr)
        ref[name] = (entry.figures[name], *bounds, fig.unit)
    return {"*": ref} if ref else {}


def compare(b: BaselineFile | None, entry, figures: dict[str, Figure], values: dict,
            energy_trust: str | None = None) -> dict:
    """Per-figure change against the baseline and the verdict, for the report.

    Energy figures of a shared node (trust ``measured-shared``) get no verdict.
    """
    from .recipes import is_energy_figure
    out = {}
    for name, fig in figures.items():
        v = values.get(name)
        if v is None:
            continue
        if is_energy_figure(name) and energy_trust == "measured-shared":
            out[name] = {"value": v, "baseline": None, "change": None,
                         "verdict": "no verdict (node shared)"}
            continue
        if entry is None or name not in entry.figures:
            out[name] = {"value": v, "baseline": None, "change": None, "verdict": "no baseline"}
            continue
        base = entry.figures[name]
        change = (v - base) / base if base else None
        thr = threshold(b, name)
        bad = change is not None and ((fig.better == "higher" and change < -thr) or
                                      (fig.better == "lower" and change > thr))
        good = change is not None and ((fig.better == "higher" and change > thr) or
                                       (fig.better == "lower" and change < -thr))
        out[name] = {"value": v, "baseline": base, "change": change, "threshold": thr,
                     "verdict": "regression" if bad else "improvement" if good else "within threshold"}
    return out


def update(system: str, app: str, results: list[dict], **kw) -> Path:
    """Merge verified results into the system's baseline file (atomically); see ``merge``."""
    f, text = merge(system, app, results, **kw)
    atomic_write_text(f, text)
    return f


def merge(system: str, app: str, results: list[dict], default_threshold: float = 0.3,
          noise_factor: float = 3.0, max_threshold: float = 0.8, max_threshold_lower: float = 3.0,
          figures: dict[str, Figure] | None = None) -> tuple[Path, str]:
    """The system's baseline file with verified results merged in: (path, new text).

    Several results of the same (environment, variant, tier), e.g. from repeated
    runs, are reduced to their median.  Where repeats exist, a figure's
    threshold is widened to ``noise_factor`` times its observed relative
    spread ((max - min) / median) when that exceeds the current threshold, so
    noisy figures do not raise false alarms; it never narrows a threshold.
    """
    import statistics
    f, b = load(system, app)
    data = b.model_dump(mode="json", exclude_defaults=False) if b else {
        "app": app, "system": system, "thresholds": {"default": {"regression": default_threshold}},
        "entries": []}
    entries = {(e["environment"], e["variant"], e["tier"]): e for e in data["entries"]}
    today = datetime.date.today().isoformat()
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r["app"] != app or not r.get("verification", {}).get("ok"):
            continue
        groups.setdefault((r["environment"], r["variant"], r["tier"]), []).append(r)
    default = data["thresholds"]["default"]["regression"]
    for key, rs in groups.items():
        figs, spread = {}, {}
        names = {k for r in rs for k, v in r.get("figures", {}).items() if isinstance(v, (int, float))}
        for n in sorted(names):
            vals = [r["figures"][n] for r in rs if isinstance(r["figures"].get(n), (int, float))]
            med = statistics.median(vals)
            if med == 0:
                # below the output's resolution (QE prints 0.00 s for a tiny input's routine
                # times): a relative threshold on zero cannot judge anything
                continue
            figs[n] = round(med, 6)
            if len(vals) > 1 and med:
                spread[n] = (max(vals) - min(vals)) / abs(med)
        if not figs:
            continue
        runs = sorted({str(r.get("run_id", "?")) for r in rs})
        entries[key] = {"environment": key[0], "variant": key[1], "tier": key[2],
                        "recorded": f"{today}, median of {len(rs)} run(s): {', '.join(runs)}",
                        "figures": figs}
        for n, sp in spread.items():
            lower = figures is not None and n in figures and figures[n].better == "lower"
            want = min(max_threshold_lower if lower else max_threshold, round(noise_factor * sp, 2))
            have = data["thresholds"].get(n, {}).get("regression", default)
            if want > have:
                data["thresholds"][n] = {"regression": want}
    data["entries"] = sorted(entries.values(), key=lambda e: (e["tier"], e["environment"], e["variant"]))
    BaselineFile.model_validate(data)
    return f, HEADER + dump_yaml(data)
