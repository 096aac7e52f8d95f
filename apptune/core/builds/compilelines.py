"""The proof that a build's flags reached the compiler: every compile line the compiler
wrappers logged (``compile-lines.jsonl``), as the compiler got it (an MPI wrapper's own
additions included, :mod:`apptune.core.builds.ccwrap`), must carry the flags its plan resolved for
that file, the build system's own compiler probes aside; a wrapper must have added no
flag the variant decides, and a file under a per-file rule is compiled at the rule's
optimisation level."""

from __future__ import annotations

import fnmatch
import json
import shlex
from pathlib import Path

from ...errors import ApptuneError
from ..data.recipes import load_ladders, sha256_file

#: The compiler wrappers' languages and the plan's flags each one carries.
LANGS = {"cc": "cflags", "cxx": "cflags", "ftn": "fflags"}
#: Options whose value is the next word (``-Xlinker -O1`` is the linker's, not the
#: compiler's optimisation level).
VALUE_OPTIONS = frozenset(
    "-Xlinker -Xassembler -Xpreprocessor -Xclang -I -L -D -U -include -isystem -idirafter "
    "-iquote -o -x -MF -MT -MQ -J -module".split()
)


def option_of(flag: str) -> str:
    """The option a flag sets, whatever its value: ``-O3`` and ``-Ofast`` set ``-O``,
    ``-march=native`` sets ``-march=``, ``-fno-unroll-loops`` sets ``-funroll-loops``."""
    if flag.startswith("-O"):
        return "-O"
    if "=" in flag:
        return flag.split("=", 1)[0] + "="
    for neg, pos in (("-fno-", "-f"), ("-mno-", "-m"), ("-no-", "-")):
        if flag.startswith(neg):
            return pos + flag[len(neg) :]
    return flag


def owned_options(family: str) -> set[str]:
    """The options the variant decides in compiler family ``family``: the optimisation
    level, and every option a flag ladder of the family sets (``-march=``,
    ``-funroll-loops``, ``-fp-model=`` ...). A compiler wrapper's value for one is removed
    (:func:`apptune.core.builds.buildid.wrapper_flags`)."""
    ladders = load_ladders().families.get(family, {})
    return {"-O"} | {option_of(f) for lad in ladders.values() for f in [*lad.cflags, *lad.fflags]}


def removable(words: list[str], owned: set[str]) -> tuple[list[str], list[str]]:
    """(``words`` without the flags of ``owned`` options, those flags); an option's
    separate value (``-Xlinker -O1``) is never taken for a flag."""
    kept, gone, value = [], [], False
    for w in words:
        if not value and w.startswith("-") and option_of(w) in owned:
            gone.append(w)
        else:
            kept.append(w)
        value = not value and w in VALUE_OPTIONS
    return kept, gone


def opt_level(args: list[str]) -> str:
    """The optimisation level a compiler applies for ``args``: the last ``-O`` flag
    (``-O`` is ``-O1``), ``no -O flag`` without one (the compiler's default)."""
    level = "no -O flag"
    for a in args:
        if a.startswith("-O"):
            level = "-O1" if a == "-O" else a
    return level


def is_probe(entry: dict) -> bool:
    """A build system testing the compiler, not compiling the product: autoconf's
    conftest programs, CMake's compiler identification and try_compile projects
    (run under a ``CMakeFiles`` directory), and preprocessor-only runs (``-E``)."""
    if entry.get("sources") and all(Path(x).stem == "conftest" for x in entry["sources"]):
        return True
    if "CMakeFiles" in Path(entry.get("cwd", "")).parts:
        return True
    return "-E" in entry.get("argv", [])[1:]


def _rule_of(plan: dict, entry: dict) -> dict | None:
    return next(
        (
            r
            for r in plan["per_file"]
            if entry["source"] and any(fnmatch.fnmatch(entry["source"], g) for g in r["files"])
        ),
        None,
    )


def line_problems(plan: dict, entry: dict, owned: set[str]) -> list[str]:
    """What is wrong with one compile line's flags (none: it carries what it should)."""
    rule = _rule_of(plan, entry)
    key = LANGS[entry["lang"]]
    want = rule[key] if rule else plan[key]
    if rule is None:
        want = plan["app_" + key] + want + [f for f in plan["cppflags"] if f.startswith("-D")]
    argv = entry["argv"][1:]
    what = []
    if missing := [f for f in want if f not in argv]:
        what.append(f"missing {' '.join(missing)}")
    if rule is not None:
        other = set(plan[key]) - set(rule[key])
        if extra := [f for f in argv if f in other]:
            what.append(f"unexpected {' '.join(extra)}")
    added = removable(entry.get("added") or [], owned)[1]
    if added:
        what.append(
            f"{' '.join(added)} added by {entry.get('wrapper')} (the variant's flags decide it)"
        )
    if rule is not None and opt_level(argv) != opt_level(want):
        what.append(
            f"the compiler got {opt_level(argv)} where the per-file rule ({rule['ladder']}) "
            f"has {opt_level(want)}"
        )
    return what


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
    owned = owned_options(plan["family"])
    for e in compiles:
        if what := line_problems(plan, e, owned):
            raise ApptuneError(
                e["source"] or f"({shlex.join(e['argv'])[:120]})",
                "flags",
                f"flags did not reach the compiler: {'; '.join(what)}",
            )
    return {
        "log": log.name,
        "sha256": sha256_file(log),
        "compiles": len(compiles),
        "links": sum(e["kind"] == "link" for e in entries),
        "overridden": sorted({e["source"] for e in compiles if e["rule"]}),
        # compiled through a command that showed no command of its own (a compiler named
        # directly, a wrapper given its own options): what it added is not known
        "added_unknown": sum(e.get("added") is None for e in compiles),
    }
