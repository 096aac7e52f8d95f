"""The report's plots (matplotlib, headless): power over time, curves and the history's
trends, one colour per variant across them; the figures are queued and then written on
every core (:func:`write_figures`).
"""

from __future__ import annotations

import math
from pathlib import Path

from .values import variant_key


def variant_styles(keys) -> dict[str, dict]:
    """Line colour and style per environment/variant for every plot of one application and
    tier (power, curves, trends): tab10 (tab20 beyond 10 variants) in sorted order of the
    keys, so a variant has the same colour in each panel and plot whichever others are drawn.
    Beyond 20 variants the colours repeat with another line style."""
    import matplotlib

    keys = sorted(set(keys))
    cmap = matplotlib.colormaps["tab10" if len(keys) <= 10 else "tab20"]
    dashes = ("-", "--", ":", "-.")
    return {
        k: {
            "color": matplotlib.colors.to_hex(cmap(i % cmap.N)),
            "linestyle": dashes[i // cmap.N % 4],
        }
        for i, k in enumerate(keys)
    }


def _styles(a: dict) -> dict[str, dict]:
    """The application's styles (set by render from its rows and history series), or ones
    from its rows for a summary that has none."""
    if not a.get("variant_styles"):
        a["variant_styles"] = variant_styles(variant_key(r) for r in a["rows"])
    return a["variant_styles"]


#: Figures of the report being rendered, written by :func:`write_figures`.
_PENDING: list[tuple] = []


def _save_figure(fig, out: Path) -> Path:
    """Queue a matplotlib figure to be written to ``out`` (:func:`write_figures`)."""
    import matplotlib

    # the queued figures stay open until they are written: that is intended
    matplotlib.rcParams["figure.max_open_warning"] = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    _PENDING.append((fig, out))
    return out


#: Margins of a plot with one axes, in inches (left, right, bottom, top): room for the tick
#: labels, the axis labels and the title at the font sizes used here. Fixed, because letting
#: matplotlib measure every text first (its tight layout) took half of a plot's time, and a
#: run's report has dozens of these plots; figures with panels use the tight layout.
ONE_AXES_MARGINS_IN = (0.9, 0.2, 0.55, 0.4)


def _one_axes(plt, size: tuple[float, float] = (8, 3.2)):
    """A figure of ``size`` inches with one axes placed by :data:`ONE_AXES_MARGINS_IN`."""
    fig, ax = plt.subplots(figsize=size, dpi=100)
    (w, h), (left, right, bottom, top) = size, ONE_AXES_MARGINS_IN
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    return fig, ax


def _binary(v: float, _pos=None) -> str:
    """A tick of a base-2 axis in plain text (no TeX to typeset): 512, 1 Ki, 64 Mi."""
    for size, unit in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if abs(v) >= size:
            return f"{v / size:g} {unit}"
    return f"{v:g}"


def _write_part(part: list[tuple]) -> None:
    for fig, out in part:
        # atomically: a reader never sees half a PNG
        tmp = out.with_suffix(".tmp.png")
        fig.savefig(tmp)
        tmp.replace(out)


def write_figures() -> None:
    """Write the queued figures, on every core: drawing and PNG encoding are most of a
    report's time. Forked workers share the figures without copying them; a part whose
    worker failed is written here instead."""
    import multiprocessing
    import os

    import matplotlib.pyplot as plt

    jobs = list(_PENDING)
    _PENDING.clear()
    try:
        n = min(len(jobs), os.cpu_count() or 1)
        parts = [jobs[i::n] for i in range(n)] if n else []
        if n > 1 and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            procs = [ctx.Process(target=_write_part, args=(part,)) for part in parts[1:]]
            for proc in procs:
                proc.start()
            try:
                _write_part(parts[0])
            finally:
                for proc in procs:
                    proc.join()
            for proc, part in zip(procs, parts[1:], strict=True):
                if proc.exitcode != 0:
                    _write_part(part)
        else:
            for part in parts:
                _write_part(part)
    finally:
        for fig, _ in jobs:
            plt.close(fig)


def power_plots(summary: dict, run_dir: Path) -> None:
    """One power-over-time plot per application and tier, a line per variant."""
    from ..energy import TRACE_FILE, read_trace

    for a in summary["apps"]:
        traces = []
        for r in a["rows"]:
            f = Path(r.outputdir or "") / TRACE_FILE
            if r.outputdir and f.is_file():
                try:
                    trust = r.energy.trust if r.energy else "?"
                    traces.append((variant_key(r), trust, read_trace(f)))
                except (OSError, ValueError, KeyError):
                    continue
        a["power_plot"] = None
        if not traces:
            continue
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = _one_axes(plt)
        styles = _styles(a)
        for label, trust, pts in traces:
            ax.plot(
                [t for t, _ in pts],
                [p for _, p in pts],
                label=f"{label} ({trust})",
                linewidth=1.2,
                **styles[label],
            )
        grades = sorted({t for _, t, _ in traces})
        ax.set_title(f"{a['app']} — tier {a['tier']}: power over time ({', '.join(grades)})", y=1.0)
        ax.set_xlabel("time since job start (s)")
        ax.set_ylabel("power (W)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        out = _save_figure(fig, run_dir / "plots" / f"power-{a['app']}-{a['tier']}.png")
        a["power_plot"] = str(out.relative_to(run_dir))


def _read_curve(f: Path) -> dict[str, list[float]]:
    lines = f.read_text().splitlines()
    cols = lines[0].split(",")
    rows = [[float(x) for x in ln.split(",")] for ln in lines[1:] if ln.strip()]
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


def curve_plots(summary: dict, run_dir: Path) -> None:
    """Curves (NetPIPE, micro-benchmarks): one plot per curve and y column, a line per variant."""
    for a in summary["apps"]:
        a["curve_plots"] = []
        found: dict[tuple[str, str], list] = {}
        for r in a["rows"]:
            for name, c in r.curves.items():
                plot = c.plot
                f = Path(r.outputdir or "") / c.file
                if plot is None or not r.outputdir or not f.is_file():
                    continue
                try:
                    data = _read_curve(f)
                except (OSError, ValueError, IndexError):
                    continue
                for y in plot.y:
                    # a column with no finite value (a placement class this system lacks)
                    # would be empty axes
                    if any(math.isfinite(v) for v in data.get(y, [])):
                        found.setdefault((name, y), []).append(
                            (variant_key(r), r.verified, plot, data)
                        )
        if not found:
            continue
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import LogFormatter

        styles = _styles(a)
        for (name, y), lines in found.items():
            plot = lines[0][2]
            fig, ax = _one_axes(plt)
            for label, ok, _, data in lines:
                ax.plot(
                    data[plot.x],
                    data[y],
                    label=label + ("" if ok else " (NOT verified)"),
                    linewidth=1.2,
                    marker=".",
                    markersize=3,
                    **styles[label],
                )
            if plot.xlog:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(_binary)
            if plot.ylog:
                ax.set_yscale("log")
                # matplotlib's default labels typeset 10^n as TeX: plain numbers are cheaper
                ax.yaxis.set_major_formatter(LogFormatter())
                ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
            ax.set_title(f"{a['app']} — tier {a['tier']}: {name} {y} vs {plot.x}", y=1.0)
            ax.set_xlabel(plot.x)
            ax.set_ylabel(y)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            out = _save_figure(
                fig, run_dir / "plots" / f"curve-{a['app']}-{a['tier']}-{name}-{y}.png"
            )
            a["curve_plots"].append(
                {"name": name, "y": y, "x": plot.x, "file": str(out.relative_to(run_dir))}
            )


def trend_plots(summary: dict, run_dir: Path, verdicts: list, order: dict) -> None:
    """Per application and tier, one trend plot of the history's verdicts: a panel per
    figure, a line per variant (one colour each across panels), change points marked."""
    for a in summary["apps"]:
        a["trend_plot"] = None
        vs = [
            v for v in verdicts if (v.app, v.tier) == (a["app"], a["tier"]) and len(v.points) >= 2
        ]
        names = [n for n in a["figures"] if any(v.figure == n for v in vs)]
        if not names:
            continue
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.ticker import MaxNLocator

        styles = _styles(a)
        cols = min(3, len(names))
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(
            rows, cols, figsize=(4.2 * cols, 2.4 * rows), dpi=80, squeeze=False, layout="tight"
        )
        for ax in axes.flat[len(names) :]:
            ax.set_visible(False)
        drawn = set()
        for ax, n in zip(axes.flat, names, strict=False):  # spare axes are hidden above
            for v in (v for v in vs if v.figure == n):
                xs = [order.get(p.run, i) for i, p in enumerate(v.points)]
                label = v.label
                drawn.add(label)
                ax.plot(
                    xs,
                    [p.value for p in v.points],
                    marker=".",
                    markersize=3,
                    linewidth=1,
                    label=label,
                    **styles[label],
                )
                for c in v.change_points:
                    bad = c["direction"] == "regression"
                    ax.axvline(
                        order.get(c["run"], c["index"]) - 0.5,
                        color="#b00020" if bad else "#1b7a1b",
                        linestyle="--",
                        linewidth=1,
                    )
                    if c["change"] is not None:
                        ax.annotate(
                            f"{c['change']:+.1%}",
                            (order.get(c["run"], c["index"]) - 0.5, c["after"]),
                            fontsize=6,
                            color="#b00020" if bad else "#1b7a1b",
                        )
            ax.set_title(
                f"{n} ({a['units'].get(n, '')}, {a['better'].get(n, 'higher')} is better)",
                fontsize=8,
            )
            ax.tick_params(labelsize=6)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        # one legend for every panel: each variant drawn anywhere, in its one colour
        axes.flat[0].legend(
            handles=[
                Line2D([], [], marker=".", markersize=3, linewidth=1, label=k, **styles[k])
                for k in sorted(drawn)
            ],
            fontsize=6,
        )
        out = _save_figure(fig, run_dir / "plots" / f"trend-{a['app']}-{a['tier']}.png")
        a["trend_plot"] = str(out.relative_to(run_dir))


def scaling_plots(summary: dict, run_dir: Path) -> None:
    """Per application and tier with a scaling series (``summary["scaling"]``): the speed-up
    over the fewest cores beside the ideal one, and the parallel efficiency, against the
    cores; a line per environment/variant, verified steps only."""
    by_app: dict[tuple[str, str], list[dict]] = {}
    for t in summary.get("scaling") or []:
        by_app.setdefault((t["app"], t["tier"]), []).append(t)
    if not by_app:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for (app, tier), tables in by_app.items():
        fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=100, layout="tight")
        styles = variant_styles(f"{t['environment']}/{t['variant']}" for t in tables)
        most = max(s["cores"] for t in tables for s in t["steps"])
        fewest = min(s["cores"] for t in tables for s in t["steps"])
        left.plot([fewest, most], [1, most / fewest], color="grey", linewidth=0.8, label="ideal")
        right.axhline(1.0, color="grey", linewidth=0.8)
        for t in tables:
            key = f"{t['environment']}/{t['variant']}"
            pts = [s for s in t["steps"] if s["speedup"] is not None]
            cores = [s["cores"] for s in pts]
            left.plot(cores, [s["speedup"] for s in pts], marker="o", label=key, **styles[key])
            right.plot(cores, [s["efficiency"] for s in pts], marker="o", **styles[key])
        left.set_title(f"{app} — tier {tier}: speed-up ({tables[0]['primary']})")
        right.set_title("parallel efficiency")
        for ax in (left, right):
            ax.set_xlabel("cores (ranks × threads per rank)")
            ax.set_xticks(sorted({s["cores"] for t in tables for s in t["steps"]}))
            ax.grid(alpha=0.3)
        right.set_ylim(0, 1.1)
        left.legend(fontsize=7)
        out = _save_figure(fig, run_dir / "plots" / f"scaling-{app}-{tier}.png")
        for t in tables:
            t["plot"] = str(out.relative_to(run_dir))
