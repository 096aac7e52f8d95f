"""What a search leaves: its trials as rows, the winner as a diff of
``site-config/recommended.yaml`` and the Markdown report."""

from __future__ import annotations

import difflib

import yaml

from ... import paths, templating
from ...core.data.spaces import recommended_path
from ...yamlio import edit_yaml_text


def trial_row(tr) -> dict:
    return {
        "number": tr.number,
        "state": tr.state.name,
        "value": tr.value,
        "label": tr.user_attrs.get("label"),
        "verified": tr.user_attrs.get("verified"),
        "runs": tr.user_attrs.get("runs", 0),
        "summary": tr.user_attrs.get("summary") or tr.user_attrs.get("note", ""),
    }


# --------------------------------------------------------------------------- output
def recommended_diff(app: str, winner: dict, result: dict) -> tuple[str, str]:
    """The winner as a diff of site-config/recommended.yaml (one entry per application)."""
    f = recommended_path()
    old = (
        f.read_text()
        if f.is_file()
        else (
            "# Recommended configuration per application on this site, written by\n"
            "# `apptune tune APP --write` (docs/tuning.md). Review it as a diff.\n"
        )
    )
    entry = dict(winner["config"])
    entry["tier"] = result["tier"]
    entry["evidence"] = {
        "date": result["date"],
        "objective": f"{result['objective']} ({', '.join(result['objective_figures'])})",
        "score_vs_baseline": round(winner["score"], 3) if winner["score"] else None,
        "medians": {k: _round(winner["medians"].get(k)) for k in result["objective_figures"]},
        "targets": {t["name"]: _round(t["value"]) for t in winner["targets"]},
        "verified": f"{result['confirm']} confirmation runs",
        "search": f"{result['cost']['trials']} trials, {result['cost']['builds']} builds, "
        f"{result['cost']['runs']} runs",
    }

    def change(data):
        data[app] = entry  # the other applications' entries and every comment stay

    # a file of comments only is an empty mapping to edit
    new = edit_yaml_text(old if yaml.safe_load(old) else old + "{}\n", change)
    rel = str(f.relative_to(paths.root()))
    diff = "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}")
    )
    return diff, new


def _round(v):
    return round(v, 4) if isinstance(v, float) else v


def report_md(res: dict) -> str:
    """The search's report (apptune/templates/tune-report.md.j2)."""
    return templating.environment().get_template("tune-report.md.j2").render(r=res)
