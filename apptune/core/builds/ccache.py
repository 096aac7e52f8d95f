"""Compiler cache for long builds: a build stopped after an hour resumes where it stopped.

With ``APPTUNE_CCACHE_DIR`` set, every build of a ReFrame run goes through `ccache
<https://ccache.dev>`_ with that directory as its cache: an object compiled once with the same
preprocessed source, flags and compiler is taken from the cache, so a build that was killed
(the end of a session, a node's reboot, a job's time limit) costs only its compiles that never
finished when it runs again, and a second variant shares nothing it should not (the flags are
part of ccache's hash).

The proof of flags is unchanged: apptune's compiler shims (:mod:`apptune.core.builds.ccwrap`) run
first and record every compile line, then run the compiler behind the environment's MPI
wrapper by its name (``gcc``, ``g++`` ...; the wrapper itself when it shows no command), which
finds ccache's masquerading links first on ``PATH``; ccache then runs the real compiler or
returns the cached object. The links are made for the compilers ccache can cache
(C and C++; Fortran compiles pass through uncached).

Paths under the build's source tree are rewritten relative (``CCACHE_BASEDIR``), so a build in
another run directory hits the objects of an earlier one. Each build logs ccache's counters
to :data:`STATS_LOG` in its stage; the build cache keeps them beside the build's time
(:func:`apptune.core.builds.buildcache.store`), so a time with cache hits is never taken for what a
cold build costs (:mod:`apptune.core.builds.buildcost`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The environment variable naming ccache's directory; unset: no compiler cache.
VARIABLE = "APPTUNE_CCACHE_DIR"
#: ccache's per-compile counters of one build, in the build's stage.
STATS_LOG = "ccache-stats.log"
#: Masquerading links, in the build's stage.
BIN_DIR = ".apptune/ccache-bin"
#: The compiler names linked to ccache (MPI wrappers run these by name); versioned names
#: (``gcc-12``, ``clang++-14``) found on ``PATH`` are linked too.
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "icx", "icpx", "nvc", "nvc++")
_VERSIONED = ("gcc-", "g++-", "clang-", "clang++-")


def requested(environ=os.environ) -> str | None:
    """The compiler cache directory asked for, None when none is."""
    return environ.get("APPTUNE_CCACHE_DIR") or None


def _versioned_on(path: str) -> set[str]:
    names = set()
    for d in path.split(os.pathsep):
        try:
            for f in os.listdir(d or "."):
                rest = next((f[len(p) :] for p in _VERSIONED if f.startswith(p)), None)
                if rest and rest.replace(".", "").isdigit():
                    names.add(f)
        except OSError:
            continue
    return names


def environment(stage: Path, cache_dir: str, environ=os.environ) -> tuple[dict, str | None]:
    """(the variables the build job runs with, a warning) for a build in ``stage`` whose
    source tree is ``stage/src``. No ccache installed: no variables and the warning."""
    exe = shutil.which("ccache", path=environ.get("PATH"))
    if exe is None:
        return {}, (
            f"{VARIABLE} is set but ccache is not installed (apt-get install ccache): "
            "building without a compiler cache"
        )
    bin_dir = Path(stage) / BIN_DIR
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(set(COMPILERS) | _versioned_on(environ.get("PATH", ""))):
        link = bin_dir / name
        if not link.is_symlink():
            link.symlink_to(exe)
    log = Path(stage) / STATS_LOG
    log.unlink(missing_ok=True)  # this build's counters only
    return {
        "PATH": f"{bin_dir}{os.pathsep}$PATH",
        "CCACHE_DIR": str(Path(cache_dir).resolve()),
        "CCACHE_BASEDIR": str((Path(stage) / "src").resolve()),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_STATSLOG": str(log.resolve()),
    }, None


def counts(stage: Path) -> dict | None:
    """This build's ccache counters from :data:`STATS_LOG` (``{"hits", "misses",
    "uncacheable"}``); None when the build did not use ccache."""
    try:
        lines = (Path(stage) / STATS_LOG).read_text(errors="replace").splitlines()
    except OSError:
        return None
    hits = sum(ln in ("direct_cache_hit", "preprocessed_cache_hit") for ln in lines)
    misses = sum(ln == "cache_miss" for ln in lines)
    calls = sum(ln.startswith("# ") or ln == "#" for ln in lines)
    return {"hits": hits, "misses": misses, "uncacheable": max(0, calls - hits - misses)}
