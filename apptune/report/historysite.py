"""The history as a static site: plain HTML files with their plots inline, which any web
server (a cluster's, GitHub Pages) serves as they are, or a browser opens from disk.

* ``index.html``: machines × systems × applications × tiers with the latest verdicts
  over the history (those of ``apptune check-regressions``) and every stored result counted
  by how it stands (a disturbed or unverified run is counted, never drawn);
* a page per machine, system, application and tier: a trend per figure over the runs,
  one colour per variant in every panel, the change points marked and listed with
  their cause (what the provenance says changed at them), each point a link to its
  run's report where that report exists;
* ``since.html``: what changed since the last nightly, per machine;
* ``compare-A-B.html``: each pair of machines compared (apptune/history/compare.py).

Names, figures and reasons come from program output and data files: every page is a
template of the one jinja2 environment, escaped; the plots are SVG written by
matplotlib, which escapes the text and the links it writes.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import itertools
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from .. import machine, report, templating
from ..history import changepoint, compare, regressions
from ..yamlio import atomic_write_text

#: A figure whose change between the last two runs exceeds this many times its noise is
#: listed on the "since the last nightly" page.
SINCE_SIGMAS = 3.0
#: Pairs of machines compared on the site at most (the most measured machines first).
MAX_COMPARED_MACHINES = 4
#: How a stored result stands, in the order the pages list them: a verified result by its
#: run-quality grade (only ``clean`` ones are drawn), then those that did not verify.
STATES = ("clean", "disturbed", "unmeasured", "not verified", "skipped")
VERIFIED = {"clean", "disturbed", "unmeasured"}
#: Distinct reasons of disturbed runs the 'since' page names per machine at most.
MAX_REASONS = 3


def result_state(r) -> str:
    """One of :data:`STATES` for a stored result (a row of ``History.results``)."""
    if r["result"] == "skip":
        return "skipped"
    if not r["verified"]:
        return "not verified"
    return r["quality_grade"] if r["quality_grade"] in STATES else "unmeasured"


@dataclass
class Group:
    """The series of one machine, system, application and tier: one page."""

    machine_id: str
    system: str
    app: str
    tier: str
    verdicts: list[regressions.Verdict] = field(default_factory=list)
    #: every stored result of the group, graded or not: run uuid -> its results
    stored: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def drawn(self) -> bool:
        """Whether the group has a trend page (a series of clean verified runs)."""
        return bool(self.verdicts)

    @property
    def page(self) -> str:
        return "series-" + slug(self.machine_id, self.system, self.app, self.tier) + ".html"

    @property
    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in regressions.ORDER}
        for v in self.verdicts:
            out[v.verdict] = out.get(v.verdict, 0) + 1
        return {k: n for k, n in out.items() if n}

    @property
    def runs(self) -> set[str]:
        return set(self.stored) | {p.run for v in self.verdicts for p in v.points}

    @property
    def states(self) -> dict[str, int]:
        """How many of its stored results stand how (:data:`STATES`), over every run."""
        return _states([r for rs in self.stored.values() for r in rs])


def slug(*parts: str) -> str:
    """A file name from names that may hold anything: readable, and unique by a hash."""
    text = "-".join(parts)
    safe = re.sub(r"[^A-Za-z0-9_.+=@-]+", "_", text)[:80]
    return f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def link(target: Path, page_dir: Path) -> str | None:
    """A relative link from a page in ``page_dir`` to ``target``, if that file exists
    (always a path, never a scheme: ``./`` or ``../`` in front)."""
    if not target.is_file():
        return None
    try:
        rel = os.path.relpath(target, page_dir)
    except ValueError:  # another drive
        return None
    rel = urllib.parse.quote(Path(rel).as_posix())
    return rel if rel.startswith("../") else "./" + rel


def machine_label(mid: str, fingerprints: dict) -> str:
    fp = fingerprints.get(mid)
    return f"{mid}: {machine.describe(fp)}" if fp else f"{mid} (fingerprint not stored)"


def groups_of(verdicts: list[regressions.Verdict], stored: list[dict] = ()) -> list[Group]:
    """The groups of the verdicts (clean verified series) and of the ``stored`` results
    (rows of ``History.results`` with their run's ``uuid``): a group whose runs were all
    disturbed or unverified has results and no verdict."""
    by: dict[tuple, Group] = {}
    for v in verdicts:
        key = (v.machine_id or "?", v.system, v.app, v.tier)
        by.setdefault(key, Group(*key)).verdicts.append(v)
    for r in stored:
        key = (r["machine_id"] or "?", r["system"], r["app"], r["tier"])
        by.setdefault(key, Group(*key)).stored.setdefault(r["uuid"], []).append(r)
    return [by[k] for k in sorted(by)]


def stored_results(history, runs: dict) -> list[dict]:
    """Every result of an application in the ``runs`` (uuid -> run), with its run's uuid."""
    return [r | {"uuid": u} for u in runs for r in history.results(u) if r["app"] and r["tier"]]


def cause_text(cause: list[str]) -> str:
    return (
        "; ".join(cause)
        if cause
        else "no change in provenance between the runs on either side (the same build: "
        "look at the machine, the input or the load)"
    )


# ------------------------------------------------------------------------------- plots
def trend_svg(
    figure: str,
    vs: list[regressions.Verdict],
    styles: dict,
    order: dict[str, int],
    hrefs: dict[str, str],
    numbers: dict[tuple, int],
    salt: str,
) -> str:
    """One figure's trend over the runs as inline SVG: a line per variant in its colour,
    each point a link to its run's report, each change point a dashed line with its
    number in the page's list of change points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    v0 = vs[0]
    # the ids matplotlib writes must differ between the plots of one page
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig, ax = plt.subplots(figsize=(5.6, 2.4), dpi=72)
        for v in vs:
            label = v.label
            xs = [order.get(p.run, i) for i, p in enumerate(v.points)]
            ys = [p.value for p in v.points]
            ax.plot(xs, ys, linewidth=1, label=label, **styles[label])
            dots = ax.scatter(xs, ys, s=12, color=styles[label]["color"], zorder=3)
            dots.set_urls([hrefs.get(p.run) for p in v.points])
            for c in v.change_points:
                bad = c["direction"] == "regression"
                colour = "#b00020" if bad else "#1b7a1b"
                x = order.get(c["run"], c["index"]) - 0.5
                ax.axvline(x, color=colour, linestyle="--", linewidth=1)
                n = numbers[(v.environment, v.variant, v.figure, c["index"])]
                change = f" {c['change']:+.1%}" if c["change"] is not None else ""
                ax.annotate(f"[{n}]{change}", (x, c["after"]), fontsize=8, color=colour)
        ax.set_title(f"{figure} ({v0.unit or 'no unit'}, {v0.better} is better)", fontsize=9)
        ax.set_xlabel("run (oldest first)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]


# ------------------------------------------------------------------------------ the data
def index_rows(groups: list[Group], runs: dict, fingerprints: dict) -> list[dict]:
    rows = []
    for g in groups:
        last = max(g.runs, key=lambda u: runs[u]["order"])
        regs = [v for v in g.verdicts if v.verdict == "regression"]
        rs = g.stored.get(last, [])
        rows.append(
            {
                "group": g,
                "machine": machine_label(g.machine_id, fingerprints),
                "runs": len(g.runs),
                "last": runs[last],
                "state": {"results": len(rs), "verified": sum(bool(r["verified"]) for r in rs)},
                "states": g.states,
                "counts": g.counts,
                "regressions": [
                    f"{v.label} {v.figure} {'' if v.change is None else format(v.change, '+.1%')}"
                    for v in sorted(regs, key=lambda v: -abs(v.change or 0))
                ],
            }
        )
    return rows


def series_page(g: Group, styles: dict, order: dict, hrefs: dict, runs: dict) -> dict:
    """What a group's page shows: the panels (SVG), the change points with their cause,
    the verdict of every series."""
    cps, numbers = [], {}
    for v in sorted(g.verdicts, key=lambda v: (v.figure, v.environment, v.variant)):
        for c in v.change_points:
            numbers[(v.environment, v.variant, v.figure, c["index"])] = len(cps) + 1
            cps.append(
                {
                    "n": len(cps) + 1,
                    "verdict": v,
                    "cp": c,
                    "run": runs.get(c["run"]),
                    "href": hrefs.get(c["run"]),
                    "cause": c.get("cause") or [],
                }
            )
    figures = sorted({v.figure for v in g.verdicts})
    panels = []
    for i, f in enumerate(figures):
        vs = [v for v in g.verdicts if v.figure == f and v.points]
        panels.append(
            {
                "figure": f,
                "svg": trend_svg(f, vs, styles, order, hrefs, numbers, f"{g.page}-{i}"),
            }
        )
    verdicts = sorted(
        g.verdicts,
        key=lambda v: (regressions.ORDER.get(v.verdict, 9), v.figure, v.environment, v.variant),
    )
    variants = sorted({v.label for v in g.verdicts})
    return {"panels": panels, "change_points": cps, "verdicts": verdicts, "variants": variants}


def _result_states(history, uuid: str, mid: str) -> dict[tuple, bool]:
    out: dict[tuple, bool] = {}
    for r in history.results(uuid):
        if (r["machine_id"] or "?") == mid and r["app"]:
            key = (r["system"], r["app"], r["tier"], r["environment"], r["variant"])
            out[key] = out.get(key, True) and bool(r["verified"])
    return out


def _new_change_points(v: regressions.Verdict, last: str) -> list[dict]:
    """The change points of a series that its history without the run ``last`` did not
    show (a change shows once enough runs follow it)."""
    if not v.change_points or v.points[-1].run != last:
        return []
    before = {c.index for c in changepoint.detect([p.value for p in v.points[:-1]])}
    return [c for c in v.change_points if c["index"] not in before]


def since_last(history, groups: list[Group], runs: dict, hrefs: dict) -> list[dict]:
    """Per machine: its last run against the one before, the figures that moved beyond
    their noise, the results that changed state, the builds that changed, and the change
    points this run was the first to show."""
    out = []
    for mid, gs in itertools.groupby(groups, key=lambda g: g.machine_id):
        gs = list(gs)
        uuids = sorted(set().union(*(g.runs for g in gs)), key=lambda u: runs[u]["order"])
        last, prev = uuids[-1], (uuids[-2] if len(uuids) > 1 else None)
        moved, steady, builds, new_cps = [], 0, {}, []
        for v in (v for g in gs for v in g.verdicts):
            pts = {p.run: p for p in v.points}
            new_cps += [
                {"verdict": v, "cp": c, "cause": c.get("cause") or []}
                for c in _new_change_points(v, last)
            ]
            if last not in pts or prev not in pts:
                continue
            a, b = pts[prev], pts[last]
            change = (b.value - a.value) / abs(a.value) if a.value else None
            if change is not None and v.noise and abs(change) > SINCE_SIGMAS * v.noise:
                moved.append({"verdict": v, "before": a.value, "after": b.value, "change": change})
            else:
                steady += 1
            diff = regressions.provenance_diff(a.provenance, b.provenance)
            if diff:
                builds[(v.app, v.tier, v.environment, v.variant)] = diff
        last_results = [r for g in gs for r in g.stored.get(last, [])]
        before = _result_states(history, prev, mid) if prev else {}
        after = _result_states(history, last, mid)
        states = [
            {"key": k, "before": before.get(k), "after": after.get(k)}
            for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)
        ]
        out.append(
            {
                "machine_id": mid,
                "last": runs[last] | {"href": hrefs.get(last)},
                "prev": runs[prev] | {"href": hrefs.get(prev)} if prev else None,
                "moved": sorted(moved, key=lambda m: -abs(m["change"] / m["verdict"].noise)),
                "steady": steady,
                "states": states,
                "builds": builds,
                "new_change_points": new_cps,
                "last_states": _states(last_results),
                "reasons": _disturbances(last_results),
            }
        )
    return out


def _states(results: list[dict]) -> dict[str, int]:
    out = {k: 0 for k in STATES}
    for r in results:
        out[result_state(r)] += 1
    return {k: n for k, n in out.items() if n}


def _disturbances(results: list[dict]) -> list[tuple[str, int]]:
    """The reasons the run-quality monitor gave for the disturbed results, the most
    frequent first (at most :data:`MAX_REASONS`), each with how many results it names."""
    counts: dict[str, int] = {}
    for r in results:
        if r["verified"] and r["quality_grade"] != "clean" and r["quality"]:
            for reason in json.loads(r["quality"]).get("reasons") or []:
                counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_REASONS]


def _runs(history, mode: str | None, out: Path) -> tuple[dict, dict, dict]:
    """The stored runs (uuid -> what a page says of it), their order, and the links to
    their reports from the site's directory."""
    runs, hrefs = {}, {}
    for i, r in enumerate(history.runs(mode=mode)):
        runs[r["session_uuid"]] = {
            "order": i,
            "uuid": r["session_uuid"],
            "started": r["started"],
            "mode": r["mode"],
            "run_dir": r["run_dir"],
        }
        href = link(Path(r["run_dir"] or "/nonexistent") / "report.html", out)
        if href:
            hrefs[r["session_uuid"]] = href
    return runs, {u: r["order"] for u, r in runs.items()}, hrefs


def _comparisons(history, groups: list[Group], mode: str | None) -> list[dict]:
    counts: dict[str, int] = {}
    for g in groups:
        if g.drawn or set(g.states) & VERIFIED:  # compare reads verified results only
            counts[g.machine_id] = counts.get(g.machine_id, 0) + len(g.runs)
    ids = sorted(counts, key=lambda m: (-counts[m], m))[:MAX_COMPARED_MACHINES]
    out = []
    for a, b in itertools.combinations(ids, 2):
        c = compare.compare(history, a, b, mode=mode)
        out.append({"page": f"compare-{slug(a, b)}.html", "comparison": c})
    return out


def build(history, out: str | os.PathLike, mode: str | None = None) -> list[Path]:
    """Write the site of ``history`` (runs of ``mode``, default every mode) into ``out``;
    returns the pages written."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    runs, order, hrefs = _runs(history, mode, out)
    verdicts = [v for v in regressions.check(history, mode=mode) if v.points]
    groups = groups_of(verdicts, stored_results(history, runs))
    fingerprints = history.machines()
    env = templating.environment(keep_trailing_newline=False, finalize=report.printable_value)
    env.filters["pct"] = lambda x: "–" if x is None else f"{x:+.1%}"
    env.filters["cause"] = cause_text
    env.filters["short"] = lambda u: (u or "?")[:8]
    common = {
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "history": str(history.path),
    }
    comparisons = _comparisons(history, groups, mode)
    pages: list[tuple[str, str, dict]] = [
        (
            "index.html",
            "site-index.html.j2",
            {
                "rows": index_rows(groups, runs, fingerprints),
                "comparisons": comparisons,
                "runs": len(runs),
            },
        ),
        (
            "since.html",
            "site-since.html.j2",
            {
                "machines": since_last(history, groups, runs, hrefs),
                "labels": {g.machine_id: machine_label(g.machine_id, fingerprints) for g in groups},
            },
        ),
    ]
    styles_of = {
        (app, tier): report.variant_styles(
            v.label for v in verdicts if (v.app, v.tier) == (app, tier)
        )
        for app, tier in {(v.app, v.tier) for v in verdicts}
    }
    for g in (g for g in groups if g.drawn):
        styles = styles_of[(g.app, g.tier)]
        data = series_page(g, styles, order, hrefs, runs)
        data |= {
            "g": g,
            "machine": machine_label(g.machine_id, fingerprints),
            "styles": styles,
        }
        pages.append((g.page, "site-series.html.j2", data))
    for c in comparisons:
        pages.append((c["page"], "site-compare.html.j2", {"c": c["comparison"]}))
    written = []
    for name, template, data in pages:
        html = env.get_template(template).render(**common, **data)
        atomic_write_text(out / name, html)
        written.append(out / name)
    return written


# ---------------------------------------------------------------------------- command line
