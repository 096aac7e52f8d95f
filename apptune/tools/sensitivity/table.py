"""What a battery saw, in words: one line per fault and sweep on the terminal, and the row of
docs/applications.md's table ("catches: ...; cannot see: ...") for each application."""

from __future__ import annotations

from pathlib import Path

from ... import paths
from ...core.data import faults
from ...models import FaultsFile, SensitivityFile
from ...yamlio import atomic_write_text

#: The fields named per fault; more are counted.
NAMED = 3
#: The docs' table header.
HEADER = (
    "| application (clean build) | catches (what failed) | cannot see (most tolerance used) "
    "| smallest change seen | recorded |\n|---|---|---|---|---|"
)


def _by(by: list[str]) -> str:
    more = f" and {len(by) - NAMED} more" if len(by) > NAMED else ""
    return ", ".join(f"`{b}`" for b in by[:NAMED]) + more


def _percent(change: float) -> str:
    p = change * 100
    return f"{p:+.2g} %" if abs(p) < 1 else f"{p:+.3g} %"


def caught_text(data: FaultsFile, seen: SensitivityFile) -> list[str]:
    return [
        f"{data.faults[n].what} ({_by(s.by)})"
        for n, s in seen.faults.items()
        if n in data.faults and s.caught
    ]


def unseen_text(data: FaultsFile, seen: SensitivityFile) -> list[str]:
    out = []
    for n, s in seen.faults.items():
        if n in data.faults and not s.caught:
            used = f"{s.used:.0%} of `{s.closest}`" if s.used is not None else "nothing compared"
            out.append(f"{data.faults[n].what} ({used})")
    return out


def sweep_text(data: FaultsFile, seen: SensitivityFile) -> list[str]:
    out = []
    for n, sw in seen.sweeps.items():
        if n not in data.sweeps:
            continue
        what = data.sweeps[n].what
        if sw.smallest is None:
            largest = max((st.change for st in sw.steps), key=abs, default=None)
            tried = f" up to {_percent(largest)}" if largest is not None else ""
            out.append(f"{what}: none seen{tried}")
        else:
            by = _by(sw.smallest_run.by) if sw.smallest_run else ""
            out.append(f"{what}: {_percent(sw.smallest)} ({by})")
    return out


def docs_row(app: str) -> str | None:
    """``app``'s row of the docs' table, None when its battery has not run."""
    seen = faults.load_seen(app)
    if seen is None:
        return None
    data = faults.load(app)
    cells = [
        f"{app} ({seen.environment}/{seen.variant}, tier {seen.tier})",
        "; ".join(caught_text(data, seen)) or "nothing",
        "; ".join(unseen_text(data, seen)) or "nothing planted went unseen",
        "; ".join(sweep_text(data, seen)) or "(no physical parameter in the input)",
        f"{seen.date}, `{seen.machine}`",
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def docs_table(apps: list[str]) -> str:
    rows = [r for r in (docs_row(a) for a in apps) if r]
    return "\n".join([HEADER, *rows])


def docs_file() -> Path:
    return paths.root() / "docs" / "applications.md"


def update_docs(f: Path | None = None) -> Path | None:
    """Rewrite the docs' table (its header, and the table's lines after it) from what every
    battery recorded, atomically; the file, or None when it has no such table."""
    f = f or docs_file()
    try:
        text = f.read_text()
    except OSError:
        return None
    start = text.find(HEADER)
    if start < 0:
        return None
    end = start + len(HEADER)
    while end < len(text) and text.startswith("\n|", end):
        nl = text.find("\n", end + 1)
        end = len(text) if nl < 0 else nl
    table = docs_table(faults.apps_with_faults())
    if text[start:end] != table:
        atomic_write_text(f, text[:start] + table + text[end:])
    return f


def terminal(data: FaultsFile, seen: SensitivityFile) -> list[str]:
    """One line per fault and sweep, then the totals."""
    lines = [f"clean {seen.environment}/{seen.variant}: {seen.clean}"]
    for n, s in seen.faults.items():
        mark = "caught" if s.caught else "NOT SEEN"
        said = _by(s.by) if s.caught else (f"{s.closest} {s.used:.0%}" if s.used else "")
        lines.append(f"  {mark:8} {n}: {data.faults[n].what}" + (f" [{said}]" if said else ""))
    for line in sweep_text(data, seen):
        lines.append(f"  sweep    {line}")
    caught = sum(s.caught for s in seen.faults.values())
    lines.append(f"{caught} of {len(seen.faults)} planted faults caught")
    return lines
