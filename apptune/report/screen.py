"""The report's first screen: one row per application and tier, from its summary.

A summary (:func:`app_summary`) says how many variants verified, the fastest correct one
and its speed-up over the reference variant, the greenest where energy is measured and the
verdict against this machine's baseline, or why there is none.  The first screen
(:func:`first_screen`) adds to each the history's verdict (when the report has the history),
the regressions named with what changed (the largest first; the rest counted and linked),
the counts of expected failures and skips linking to their tables, and the headings of the
baseline and history sections, which say what they hold.

Every ranking says when its top is a tie (within :data:`~apptune.report.matrices.TIE` or the
noise); modelled energy ranks nothing, so it is never the greenest.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..core.data import recipes
from ..core.judge import baselines
from ..figures import fmt_pct
from .values import number_or_none, variant_key

if TYPE_CHECKING:
    from .row import Row

#: How many regressed variants a cell of the first screen names, and how many of each one's
#: figures; the others are counted.
NAMED, NAMED_FIGURES = 3, 2

#: The sections the first screen links to, by their HTML id.  Their Markdown headings are
#: fixed, so :func:`md_anchor` of the heading is the Markdown link.
SECTIONS = {
    "expected_failures": "expected-failures",
    "skipped": "skipped",
    "baseline": "baseline",
    "history": "history",
}


def md_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (lower case, punctuation dropped, each
    space a hyphen)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def app_anchor(app: str, tier: str) -> str:
    """The HTML id of an application's matrix."""
    return re.sub(r"[^\w-]", "-", f"app-{app}-{tier}")


def app_heading(app: str, tier: str) -> str:
    """The heading of an application's matrix (the same in both files)."""
    return f"{app} — tier {tier}"


def app_summary(a: dict) -> dict:
    """What a person wants first about one application and tier: how many variants verified,
    the fastest correct one and its speed-up over the reference variant, the greenest where
    energy is measured, and the performance verdict against this machine's baseline, or why
    there is none."""
    rows = a["rows"]
    ok = [r for r in rows if r.verified]
    p = a["primary"]
    fastest = a["best"].get(p)
    f_row = next((r for r in rows if variant_key(r) == fastest), None)
    out = {
        "app": a["app"],
        "tier": a["tier"],
        "variants": len(rows),
        "verified": len(ok),
        "not_verified": [variant_key(r) for r in rows if not r.verified],
        "primary": p,
        "fastest": fastest,
        "reference": a["reference_variant"],
        "speedup": (f_row.speedup or {}).get(p) if f_row else None,
        "tied": a.get("ties", {}).get(p, []),
        # verified runs left out of the ranking, and why (disturbed, too short to time)
        "unranked": [f"{k}: {w}" for k, w in a.get("unranked", {}).get(p, {}).items()],
        "no_ranking": None
        if fastest or not ok
        else no_ranking(p, a.get("unranked", {}).get(p, {})),
        # a variant's entry in this machine's baseline (the others are advised to record one)
        "baseline": "applies" if any(r.baseline and r.baseline.found for r in rows) else "none",
        # the report says how to record one (baseline_advice)
        "advice": any(r.baseline and r.baseline.advice for r in rows),
    }
    measured = [
        r
        for r in ok
        if r.energy
        and r.energy.trust == "measured"
        and r.quality
        and r.quality.grade == "clean"
        and number_or_none(r.figures.get("energy_J")) is not None
    ]
    green = min(measured, key=lambda r: r.figures["energy_J"]) if measured else None
    out["greenest"] = variant_key(green) if green else None
    out["greenest_tied"] = a.get("ties", {}).get("energy_J", []) if green else []
    out["greenest_why"] = (
        None
        if measured
        else "energy not measured here ("
        + ", ".join(sorted({r.energy.trust if r.energy else "none" for r in ok}) or ["no run"])
        + ")"
    )
    out.update(_baseline_verdict(rows))
    return out


def no_ranking(primary: str, why: dict[str, str], named: int = 3) -> str:
    """Why no variant is the fastest: each reason its verified runs were left out for,
    with the first of them named (``why``: variant -> reason)."""
    by: dict[str, list[str]] = {}
    for variant, w in why.items():
        by.setdefault(w, []).append(variant)
    parts = [
        ", ".join(vs[:named])
        + (f" and {len(vs) - named} more" if len(vs) > named else "")
        + f": {w}"
        for w, vs in by.items()
    ]
    return f"no ranking by {primary}: " + ("; ".join(parts) or "no verified figure")


def changed_since_baseline(row: Row) -> str:
    """What differs between a run and the runs of its baseline, in one line
    (apptune/core/judge/changes.py); what is unknown is said as such."""
    from ..core.judge import baselines, changes

    b = row.baseline
    if b is None or not b.found:
        return "no baseline entry to compare with"
    if b.changed is None:
        return baselines.NO_PROVENANCE
    return "changed: " + changes.short(b.changed) if b.changed else changes.NOTHING


def regressed(found: list[tuple[str, str, float | None, str]]) -> list[dict]:
    """``(variant, figure, change, what changed)`` of each regressed figure as one entry per
    variant: ``{variant, figures: [{figure, change}], changed}``, the largest change first."""
    by: dict[str, dict] = {}
    for variant, figure, change, changed in found:
        g = by.setdefault(variant, {"variant": variant, "figures": [], "changed": changed})
        g["figures"].append({"figure": figure, "change": change})

    def size(f: dict) -> float:
        return abs(number_or_none(f["change"]) or 0.0)

    for g in by.values():
        g["figures"].sort(key=lambda f: -size(f))
    return sorted(by.values(), key=lambda g: -size(g["figures"][0]))


def _baseline_verdict(rows: list[Row]) -> dict:
    """The verdict of an application's rows against this machine's baseline: the
    regressions per variant with what changed since the baseline's runs (the largest change
    first), the number of figures judged, or why none was."""
    judged, found, whys, shifted = 0, [], {}, []
    for r in rows:
        if not r.verified:  # a wrong number is no performance: only the failure counts
            continue
        b = r.baseline
        for n, c in b.figures.items() if b else ():
            if c.verdict == "regression":
                found.append((variant_key(r), n, c.change, changed_since_baseline(r)))
            if c.verdict == "unexplained":
                shifted.append(f"{variant_key(r)} {n} {fmt_pct(c.change)}")
            if c.verdict in ("regression", "improvement", "unexplained", "within noise"):
                judged += 1
            elif c.why:
                # why the time figures are not judged matters more than the energy ones
                weight = 1 if recipes.is_energy_figure(n) else 10
                whys[c.why] = whys.get(c.why, 0) + weight
        if b and b.why:
            whys[b.why] = whys.get(b.why, 0) + 100
    out = {"judged": judged, "regressions": regressed(found)}
    if found:
        out["verdict"] = "regression"
        out["verdict_text"] = "REGRESSION: " + "; ".join(
            f"{g['variant']} "
            + ", ".join(f"{f['figure']} {fmt_pct(f['change'])}" for f in g["figures"])
            + f" ({g['changed']})"
            for g in out["regressions"]
        )
    elif judged:
        out["verdict"] = "no regression"
        out["verdict_text"] = (
            f"no regression ({judged} figure(s) judged against this machine's baseline)"
        )
        if shifted:
            out["verdict_text"] += (
                f"; {len(shifted)} beyond noise that no change since the baseline explains "
                f"(unexplained: a regression, or an improvement, once {baselines.CONFIRM} "
                "runs in a row hold it): "
                + ", ".join(shifted[:3])
                + (f" and {len(shifted) - 3} more" if len(shifted) > 3 else "")
            )
    else:
        out["why"] = max(whys, key=whys.get) if whys else "no baseline"
        out["verdict"], out["verdict_text"] = "no verdict", f"no verdict: {out['why']}"
    return out


def untested_summaries(
    cases: list[dict],
    apps: list[dict],
    failures: list[dict],
    expected: list[dict] = (),
    skipped: list[dict] = (),
    aborted: list[dict] = (),
) -> list[dict]:
    """A summary entry for each application whose test cases all ended before a result (its
    source or every build failed, or each was an expected failure or skipped): nothing
    verified, and the first reason (a failure's before an expected failure's or a skip's)."""
    shown = {a["app"] for a in apps}
    out, reasons = {}, {}
    for kind, entries in (("skipped", skipped), ("expected failure", expected)):
        reasons |= {e["test"]: f"{kind}: {e['reason']}" for e in entries}
    reasons |= {e["test"]: f"{e['what']} (the run was stopped)" for e in aborted}
    reasons |= {f["test"]: f.get("brief") or f["reason"] for f in failures}
    for tc in cases:
        app = tc.get("app")
        if not isinstance(app, str) or app == "<undefined>" or app in shown:
            continue
        why = reasons.get(tc.get("display_name"))
        if app not in out or (why and not out[app]["why"]):
            out[app] = {"why": why, "test": tc.get("display_name")}
    return [
        {
            "app": app,
            "tier": "-",
            "variants": 0,
            "verified": 0,
            "not_verified": [v["test"]],
            "verdict": "no verdict",
            "nothing_verified": f"{v['test']}: {v['why']}" if v["why"] else "no test case ran",
        }
        for app, v in sorted(out.items())
    ]


#: What an application of which nothing was verified has in each column of the first screen.
_NOTHING = dict.fromkeys(
    ("primary", "fastest", "reference", "speedup", "greenest", "greenest_why"), None
) | {
    "tied": [],
    "greenest_tied": [],
    "unranked": [],
    "no_ranking": None,
    "regressions": [],
    "baseline": "none",
}


def first_screen(s: dict) -> dict:
    """The first table of a report from its collected summary ``s`` (``summary``, ``apps``,
    ``expected_failures``, ``skipped`` and, once the history is read, ``history_verdicts``):
    a row per application and tier, and the headings of the baseline and history sections
    with their Markdown anchors (the links of the rows)."""
    heading = baseline_heading(s["summary"])
    apps = {(a["app"], a["tier"]): a for a in s["apps"]}
    history = s.get("history_verdicts")
    rows = []
    for x in s["summary"]:
        a = apps.get((x["app"], x["tier"]))
        row = dict(
            _NOTHING,
            **x,
            anchor=app_anchor(x["app"], x["tier"]) if a else None,
            md_anchor=md_anchor(app_heading(x["app"], x["tier"])) if a else None,
            **_named(x.get("regressions") or []),
            record_one=x["verdict"] == "no verdict" and bool(x.get("advice")),
            history=_history(a, history) if history is not None and a else None,
        )
        for k in ("expected_failures", "skipped", "aborted"):  # a build counts in each tier
            tiers = (x["tier"], None)
            row[k] = sum(
                e.get("app") == x["app"] and (x["tier"] == "-" or e.get("tier") in tiers)
                for e in s.get(k, [])
            )
        rows.append(row)
    hist_heading = history_heading(history)
    return {
        "rows": rows,
        "history": history is not None,
        "baseline_heading": heading,
        "baseline_md_anchor": md_anchor(heading),
        "history_heading": hist_heading,
        "history_md_anchor": md_anchor(hist_heading),
        "sections": SECTIONS,
    }


def history_heading(history: dict | None) -> str:
    """What the history section holds: verdicts, or too few runs for any."""
    if not history:
        return "Performance history"
    c = history["counts"]
    if c.get("regression") or c.get("improvement") or c.get("unchanged"):
        return "Performance history"
    return f"Performance history: too few runs to judge yet ({history['runs']} stored)"


def baseline_heading(summaries: list[dict]) -> str:
    """What the baseline section holds: this machine's baseline, none, or which
    applications have one."""
    tested = [x for x in summaries if x.get("variants")]
    applies = [f"{x['app']}/{x['tier']}" for x in tested if x.get("baseline") == "applies"]
    none = [f"{x['app']}/{x['tier']}" for x in tested if x.get("baseline") != "applies"]
    if not applies:
        return "No baseline for this machine"
    if not none:
        return "Against this machine's baseline"
    return f"Against this machine's baseline: {', '.join(applies)} (none for {', '.join(none)})"


def _named(groups: list[dict]) -> dict:
    """The regressions a cell names (the first variants, each with its largest changes and
    the count of its others, and what changed: once for all when it is the same) and how
    many variants it leaves to the section it links to."""
    causes = {g["changed"] for g in groups}
    common = causes.pop() if len(groups) > 1 and len(causes) == 1 else None
    named = [
        dict(
            g,
            figures=g["figures"][:NAMED_FIGURES],
            more=max(0, len(g["figures"]) - NAMED_FIGURES),
            changed=None if common else g["changed"],
        )
        for g in groups[:NAMED]
    ]
    return {"named": named, "more": max(0, len(groups) - NAMED), "changed_all": common}


def _history(a: dict, history: dict) -> dict:
    """The history's verdict on an application and tier: its regressions (change points)
    named with what changed in provenance, the number of series it judged, or why it judged
    none."""
    from ..core.judge import changes

    regs = regressed(
        [
            (
                f"{c['environment']}/{c['variant']}",
                c["figure"],
                c.get("change"),
                "changed: " + changes.short(c["provenance_diff"])
                if c.get("provenance_diff")
                else "no provenance change",
            )
            for c in history.get("changes") or []
            if c.get("verdict") == "regression" and (c["app"], c["tier"]) == (a["app"], a["tier"])
        ]
    )
    verdicts = [v for r in a["rows"] for v in (r.history_verdicts or {}).values()]
    judged = sum(v in ("unchanged", "improvement", "regression") for v in verdicts)
    if regs:
        out = {"verdict": "regression", "text": None}
    elif judged:
        out = {"verdict": "no regression", "text": f"no regression ({judged} series judged)"}
    elif verdicts:
        out = {
            "verdict": "no verdict",
            "text": "insufficient data (a change needs 3 runs on each side)",
        }
    else:
        out = {"verdict": "no verdict", "text": "fewer than 2 runs of it stored"}
    return out | _named(regs)
