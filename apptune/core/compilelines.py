"""The proof that a build's flags reached the compiler: every compile line the compiler
wrappers logged (``compile-lines.jsonl``) must carry the flags its plan resolved for that
file, the build system's own compiler probes aside."""

from __future__ import annotations

import fnmatch
import json
import shlex
from pathlib import Path

from ..errors import ApptuneError
from .recipes import sha256_file

#: The compiler wrappers' languages and the plan's flags each one carries.
LANGS = {"cc": "cflags", "cxx": "cflags", "ftn": "fflags"}


def is_probe(entry: dict) -> bool:
    """A build system testing the compiler, not compiling the product: autoconf's
    conftest programs, CMake's compiler identification and try_compile projects
    (run under a ``CMakeFiles`` directory), and preprocessor-only runs (``-E``)."""
    if entry.get("sources") and all(Path(x).stem == "conftest" for x in entry["sources"]):
        return True
    if "CMakeFiles" in Path(entry.get("cwd", "")).parts:
        return True
    return "-E" in entry.get("argv", [])[1:]


def check_compile_lines(plan: dict, log: Path) -> dict:
    """Every compile line must carry its resolved flags; return a summary for provenance."""
    if not log.exists():
        raise ApptuneError(
            log,
            "compile lines",
            "the build compiled nothing through the apptune "
            "compiler wrappers (does the template set CC to {{ cc }}?)",
        )
    entries = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    compiles = [e for e in entries if e["kind"] == "compile" and not is_probe(e)]
    if not compiles:
        raise ApptuneError(log, "compile lines", "no compile commands were recorded")
    for e in compiles:
        rule = next(
            (
                r
                for r in plan["per_file"]
                if e["source"] and any(fnmatch.fnmatch(e["source"], g) for g in r["files"])
            ),
            None,
        )
        key = LANGS[e["lang"]]
        want = rule[key] if rule else plan[key]
        if rule is None:
            want = plan["app_" + key] + want + [f for f in plan["cppflags"] if f.startswith("-D")]
        argv = e["argv"][1:]
        missing = [f for f in want if f not in argv]
        extra = []
        if rule is not None:
            other = set(plan[key]) - set(rule[key])
            extra = [f for f in argv if f in other]
        if missing or extra:
            what = []
            if missing:
                what.append(f"missing {' '.join(missing)}")
            if extra:
                what.append(f"unexpected {' '.join(extra)}")
            raise ApptuneError(
                e["source"] or f"({shlex.join(e['argv'])[:120]})",
                "flags",
                f"flags did not reach the compiler: {'; '.join(what)}",
            )
    return {
        "log": log.name,
        "sha256": sha256_file(log),
        "compiles": len(compiles),
        "links": len(entries) - len(compiles),
        "overridden": sorted({e["source"] for e in compiles if e["rule"]}),
    }
