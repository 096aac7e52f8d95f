"""Compiler wrapper: applies per-file flag overrides and records every compile line.

Run as ``python -S ccwrap.py LANG ARGS...`` by small shims the build writes
(``.apptune/bin/cc`` and friends), with ``APPTUNE_CCWRAP_CONFIG`` naming a JSON
file::

    {"real": {"cc": "mpicc", ...}, "log": ".../compile-lines.jsonl",
     "source_root": "...", "ladder": {"cc": [...], "ftn": [...]},
     "per_file": [{"files": ["src/x.c"], "flags": {"cc": [...], "ftn": [...]},
                   "ladder": "baseline"}]}

It works with any build system that lets CC/FC be set (make, CMake, autotools),
and it is deliberately standalone (stdlib only, no apptune import) so that it
starts fast for each of hundreds of compiles.
"""

import fnmatch
import json
import os
import sys

SOURCE_EXT = {
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".C",
    ".f",
    ".F",
    ".f90",
    ".F90",
    ".f95",
    ".F95",
    ".f03",
    ".F03",
    ".f08",
    ".F08",
    ".for",
    ".FOR",
}


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
    # "compile" is any line that compiles a source (also compile-and-link in one command,
    # e.g. NetPIPE's `$(MPICC) $(CFLAGS) netpipe.c mpi.c -o NPmpi`); "link" only links.
    record = {
        "cwd": os.getcwd(),
        "lang": lang,
        "kind": "compile" if ("-c" in args or srcs) else "link",
        "source": rel,
        "sources": [os.path.relpath(os.path.realpath(x), root) for x in srcs],
        "rule": rule["ladder"] if rule else None,
        "argv": [real] + args,
    }
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(cfg["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    os.execvp(real, [real] + args)


if __name__ == "__main__":
    main(sys.argv)
