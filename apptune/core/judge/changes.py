"""What changed between two runs: the facts of a run record that can move a figure.

A performance verdict against a baseline is only half an answer without the other half:
what is different from the runs the baseline was recorded with. :func:`facts` reduces a
run record to flat ``name -> value`` facts (compilers and their versions, each flag set,
libraries, patches, source, input parameters, launcher and placement, the modules and
environment variables the site sets, the machine's fingerprint fields); :func:`describe`
says how two such sets differ, in the shortest words a user reads (``flags -O3 → -O0``).
What a build produces (object checksums, cache paths, build times) is a consequence, not
a cause, and is left out.
"""

from __future__ import annotations

from ...models import BuildFlags, Provenance, RunLaunch, RunRecord
from ..run import envrecord, loaded

#: Flag sets of a build, compared token by token.
FLAG_SETS = ("cflags", "fflags", "cppflags", "ldflags")


def facts(record: RunRecord) -> dict[str, str]:
    """The comparable facts of one run record (see the module docstring)."""
    prov = record.provenance or Provenance()
    out = _build_facts(prov)
    for k, v in sorted(record.input.items()):
        out[f"input {k}"] = _text(v)
    lay = record.placement_layout
    for k in ("binding", "nodes", "ranks", "ranks_per_node", "threads_per_rank"):
        if lay is not None and getattr(lay, k) is not None:
            out[f"placement {k}"] = _text(getattr(lay, k))
    out.update(_launch_facts(record.launch or prov.launch))
    for k, v in sorted((record.machine.data() if record.machine else {}).items()):
        out[f"machine {k}"] = _text(v)
    return out


def provenance_facts(prov: Provenance | dict) -> dict[str, str]:
    """The comparable facts of a build's provenance (as the history keeps it: a dict, read
    here as :class:`~apptune.models.Provenance`), with the input and launch of its run."""
    if isinstance(prov, dict):
        prov = Provenance.model_validate(prov)
    inputs = {f"input {k}": _text(v) for k, v in sorted(prov.input.items())}
    return _build_facts(prov) | inputs | _launch_facts(prov.launch)


def _build_facts(prov: Provenance) -> dict[str, str]:
    """Compilers, flags, libraries, patches, source and axes of a build's provenance."""
    out: dict[str, str] = {}
    for name, c in sorted(prov.compilers.items()):
        out[f"compiler {name}"] = " / ".join(x for x in (c.version, c.mpi) if x) or (
            c.command or ""
        )
    flags = prov.flags or BuildFlags()
    for name in FLAG_SETS:
        if getattr(flags, name) is not None:
            out[f"flags {name}"] = " ".join(str(f) for f in getattr(flags, name))
    for i, pf in enumerate(flags.per_file):
        if isinstance(pf, dict):
            files = " ".join(str(f) for f in pf.get("files") or []) or str(i)
            rest = {k: v for k, v in pf.items() if k not in ("files", "reason") and v}
            out[f"per-file flags {files}"] = _text(rest)
    for name, lib in sorted(prov.libraries.items()):
        out[f"library {name}"] = _text(lib)
    for name, version in sorted(prov.packages.items()):
        out[f"package {name}"] = str(version)
    for p in prov.patches:
        out[f"patch {p.file}"] = str(p.sha256 or "")[:12]
    if prov.source and prov.source.sha256:
        src = prov.source
        out["source"] = " ".join(x for x in (src.file, src.sha256[:12]) if x)
    for k, v in sorted(prov.axes.items()):
        out[f"axis {k}"] = _text(v)
    return out


def _launch_facts(launch: RunLaunch | None) -> dict[str, str]:
    """The launcher, the modules and the environment variables a run was launched with."""
    out = {}
    if launch is None:
        return out
    if launch.launcher:
        out["launcher"] = " ".join(launch.launcher)
    for m in launch.modules:
        out[f"module {str(m).split('/')[0]}"] = str(m)
    for k, v in sorted(launch.env_vars.items()):
        out[f"env {k}"] = str(v)
    out.update(loaded.facts(launch.loaded))
    return out


def _text(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in sorted(v.items()))
    if isinstance(v, (list, tuple)):
        return " ".join(_text(x) for x in v)
    return str(v)


def common(all_facts: list[dict[str, str]]) -> dict[str, str]:
    """The facts several runs (a baseline's) share; one that differs among them is kept
    as ``"(varied)"`` so that it is never named as this run's change."""
    if not all_facts:
        return {}
    keys = sorted({k for f in all_facts for k in f})
    out = {}
    for k in keys:
        vals = {f.get(k) for f in all_facts}
        out[k] = vals.pop() if len(vals) == 1 and None not in vals else VARIED
    return out


#: A fact the baseline's own runs disagree on.
VARIED = "(varied)"


def describe(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """How ``after`` differs from ``before``, one short line per change: flag sets as the
    tokens removed → added (one line for every flag set with the same change: ``flags -O3
    → -O0``), everything else as ``name: old → new``."""
    lines: list[str] = []
    flag_changes: dict[tuple[str, str], list[str]] = {}
    # the libraries loaded are compared where both sides recorded them
    libs = all(any(k.startswith(LOADED) for k in f) for f in (before, after))
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a == b or a == VARIED or (k.startswith(LOADED) and not libs):
            continue
        if k.startswith("env ") and (envrecord.is_hidden(a) or envrecord.is_hidden(b)):
            if envrecord.compare(a, b) == "changed":
                lines.append(_hidden_change(k, a, b))
            continue
        if k.startswith("flags ") and a is not None and b is not None:
            old, new = a.split(), b.split()
            gone = [t for t in old if t not in new]
            came = [t for t in new if t not in old]
            if not gone and not came:  # the same tokens in another order
                gone, came = old, new
            change = (" ".join(gone) or "(none)", " ".join(came) or "(none)")
            flag_changes.setdefault(change, []).append(k.split(" ", 1)[1])
            continue
        lines.append(
            f"{k}: {a if a is not None else '(none)'} → {b if b is not None else '(none)'}"
        )
    flag_lines = []
    for (gone, came), sets in flag_changes.items():
        where = "flags" if len(sets) > 1 else sets[0]
        flag_lines.append(f"{where} {gone} → {came}")
    if libs and not any(x.startswith(LOADED) for x in lines):
        lines = [x + SAME_LIBRARIES if x.startswith(FINDS_LIBRARIES) else x for x in lines]
    return flag_lines + lines


#: The facts of the libraries a run's ranks loaded (:func:`apptune.core.run.loaded.facts`).
LOADED = "loaded "
#: Changes that can only change a run through the libraries it loads ...
FINDS_LIBRARIES = ("env LD_LIBRARY_PATH:", "env LD_PRELOAD:", "module ")
#: ... said so when those did not change.
SAME_LIBRARIES = " (the libraries the ranks loaded are the same: paths and contents)"


def _hidden_change(k: str, a: str | None, b: str | None) -> str:
    """A variable whose value a record keeps only as a keyed hash: named, never shown."""
    if a is not None and b is not None:
        return f"{k}: changed (its value is not recorded)"
    return f"{k}: {envrecord.shown(a)} → {envrecord.shown(b)}"


def short(lines: list[str], most: int = 3) -> str:
    """One line for a summary: the first ``most`` changes and how many more."""
    if not lines:
        return NOTHING
    more = f" (+{len(lines) - most} more)" if len(lines) > most else ""
    return "; ".join(lines[:most]) + more


#: What a verdict says when no recorded fact differs.
NOTHING = "nothing recorded changed (the machine or the system did)"
