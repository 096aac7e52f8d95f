"""Compiler wrapper: applies per-file flag overrides and records every compile line as the
compiler got it.

Run as ``python -S ccwrap.py LANG ARGS...`` by small shims the build writes
(``.apptune/bin/cc`` and friends), with ``APPTUNE_CCWRAP_CONFIG`` naming a JSON
file::

    {"real": {"cc": "mpicc", ...}, "log": ".../compile-lines.jsonl",
     "source_root": "...", "ladder": {"cc": [...], "ftn": [...]},
     "resolved": {"ftn": {"runs": "gfortran",
                          "compile": {"before": [...], "after": [...]},
                          "preprocess": {...}, "link": {...}}},
     "per_file": [{"files": ["src/x.c"], "flags": {"cc": [...], "ftn": [...]},
                   "ladder": "baseline"}]}

A language under ``resolved`` has an MPI or site compiler wrapper that showed the command it
runs (:func:`apptune.core.builds.buildid.wrapper_command`): its compiler is run here directly, with
the words the wrapper adds in that mode less those the variant's flags decide (Debian
MPICH's ``mpifort`` adds ``-O2`` to every Fortran compile), so the log's ``argv`` is what
the compiler got and ``added`` what the wrapper put in it. Any other language, a call that
compiles nothing (``-show``, ``--version``: kind ``query``) and one with an option of the
wrapper's own (``-static``) run the wrapper as given (``added`` null: not known).

It works with any build system that lets CC/FC be set (make, CMake, autotools),
and it is deliberately standalone (stdlib only, no apptune import) so that it
starts fast for each of hundreds of compiles.
"""

import fnmatch
import json
import os
import sys

#: Source file suffixes -> language, the one list of them: what the wrapper counts as a
#: source (a per-file rule applies to it) and what ``apptune new`` guesses languages from.
SOURCE_LANGUAGE = {
    ".c": "c",
    **dict.fromkeys((".cc", ".cpp", ".cxx", ".C", ".c++"), "cxx"),
    **dict.fromkeys(
        (
            ".f",
            ".F",
            ".f77",
            ".F77",
            ".for",
            ".FOR",
            ".f90",
            ".F90",
            ".f95",
            ".F95",
            ".f03",
            ".F03",
            ".f08",
            ".F08",
        ),
        "fortran",
    ),
}
SOURCE_EXT = frozenset(SOURCE_LANGUAGE)

#: Options of the MPI wrappers themselves (MPICH's, Intel MPI's, Open MPI's), by prefix,
#: that make the wrapper print what it would run instead of running it.
SHOW_OPTIONS = ("-show", "--showme", "-compile-info", "-compile_info", "-link-info", "-link_info")
#: Those that change what it adds (``-static`` adds MPICH's own libraries, ``-fc=`` another
#: compiler): a call with one is run through the wrapper as given.
WRAPPER_OPTIONS = (
    "-static",
    "-nativelinking",
    "-profile=",
    "-config=",
    "-cc=",
    "-cxx=",
    "-fc=",
    "-f77=",
    "-f90=",
    "-ilp64",
    "-mt_mpi",
    "-link_mpi=",
)


def sources_of(args):
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-I", "-D", "-L", "-include", "-J", "-module"):
            skip = True
            continue
        if not a.startswith("-") and os.path.splitext(a)[1] in SOURCE_EXT:
            out.append(a)
    return out


def mode_of(args):
    """The wrapper's mode for ``args``, as MPICH's and Open MPI's wrappers choose it."""
    if any(a in ("-E", "-M", "-MM") for a in args):
        return "preprocess"
    if any(a in ("-c", "-S") for a in args):
        return "compile"
    return "link"


def is_query(args):
    """A call that compiles nothing: it names no file (``--version``, ``-v``,
    ``-dumpversion``) or asks the wrapper what it would run (``-show``)."""
    return any(a.startswith(SHOW_OPTIONS) for a in args) or all(
        a.startswith("-") and a != "-" for a in args
    )


def main(argv):
    lang, args = argv[1], argv[2:]
    with open(os.environ["APPTUNE_CCWRAP_CONFIG"], encoding="utf-8") as f:
        cfg = json.load(f)
    real = cfg["real"][lang]
    root = cfg["source_root"]
    srcs = sources_of(args)
    rule = None
    rel = None
    if "-c" in args and len(srcs) == 1:
        rel = os.path.relpath(os.path.realpath(srcs[0]), root)
        for r in cfg.get("per_file", []):
            if any(fnmatch.fnmatch(rel, g) for g in r["files"]):
                rule = r
                break
    if rule is not None:
        drop = set(cfg["ladder"].get(lang, []))
        args = [a for a in args if a not in drop] + list(rule["flags"].get(lang, []))
    shown = cfg.get("resolved", {}).get(lang)
    query = is_query(args)
    if shown is None or query or any(a.startswith(WRAPPER_OPTIONS) for a in args):
        command, added = [real] + args, None
    else:
        mode = shown[mode_of(args)]
        command = [shown["runs"], *mode["before"], *args, *mode["after"]]
        added = mode["before"] + mode["after"]
    # "compile" is any line that compiles a source (also compile-and-link in one command,
    # e.g. NetPIPE's `$(MPICC) $(CFLAGS) netpipe.c mpi.c -o NPmpi`); "link" only links
    kind = "query" if query else "compile" if ("-c" in args or srcs) else "link"
    record = {
        "cwd": os.getcwd(),
        "lang": lang,
        "kind": kind,
        "source": rel,
        "sources": [os.path.relpath(os.path.realpath(x), root) for x in srcs],
        "rule": rule["ladder"] if rule else None,
        "argv": command,
        "wrapper": real,
        "added": added,
    }
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(cfg["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
