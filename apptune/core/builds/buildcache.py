"""Content-addressed build cache: rebuild only what changed, never use a corrupted entry.

A build's key is the sha256 of everything that decides its binaries, as resolved
for that one build: the build plan (its environment's compilers, its ladder's and
its family's flags, flags per file, libraries, patch hashes, make arguments), the
source tarball's sha256, the recipe's build commands, product paths and template
files as rendered for the plan, the identities of the compilers and libraries
(``--version`` lines, package versions), the environment variables that steer
compiler wrappers, and apptune's own build code. Another environment's flags
(its family's ladder, the recipe's flags for its family) are not part of it.
Same key: the installed products are copied (or hard-linked) from the cache into
the stage; different key: build and store.

Layout under ``$APPTUNE_BUILD_CACHE`` (default ``<download cache>/builds``)::

    <key[:2]>/<key>/manifest.json      key, inputs, products with sha256, size, build time
    <key[:2]>/<key>/last-used          touched on every use (pruning weighs it)
    <key[:2]>/<key>/files/...          products, provenance.json, compile-lines.jsonl,
                                       tree/... (an install tree, symbolic links kept)
    locks/<key>.lock                   one builder per key at a time (fcntl), and who
                                       builds it (pid, host, since) for those who wait
    build-times.jsonl                  every stored build's time, kept after its entry

Beyond its size limit (``APPTUNE_BUILD_CACHE_MAX_GB``, 5 by default) the cache removes
the entries whose loss costs least: recorded build time, halved for every two weeks unused
(:func:`prune`), so an hour of compiling is not thrown away to keep a minute's.

Entries are written to a temporary directory and renamed into place, so a
crash never leaves a half entry; each product's sha256 is checked on every
use, and a mismatching entry is removed and rebuilt.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ... import locks, paths
from ..data.recipes import sha256_file
from . import ccache

#: Environment variables that change what a compiler wrapper runs.
STEERING_VARS = (
    "OMPI_CC",
    "OMPI_CXX",
    "OMPI_FC",
    "MPICH_CC",
    "MPICH_CXX",
    "MPICH_FC",
    "I_MPI_CC",
    "I_MPI_CXX",
    "I_MPI_F90",
    "I_MPI_FC",
    "CPATH",
    "LIBRARY_PATH",
)
MANIFEST = "manifest.json"
#: Touched on every use; its mtime orders entries for pruning (atime is unreliable
#: under relatime/noatime mounts).
LAST_USED = "last-used"


def root() -> Path:
    env = os.environ.get("APPTUNE_BUILD_CACHE")
    return Path(env) if env else paths.cache_dir() / "builds"


def max_bytes() -> int:
    return int(float(os.environ.get("APPTUNE_BUILD_CACHE_MAX_GB", "5")) * 2**30)


def digest(obj) -> str:
    """sha256 of a JSON-able object, key order ignored."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


#: apptune's modules whose code decides how a build is made.
BUILD_CODE = (
    "buildid.py",
    "buildtree.py",
    "ccwrap.py",
    "compilelines.py",
    "envfile.py",
    "patching.py",
    "sources.py",
    "steps.py",
)


def code_identity(files: tuple[str, ...] = BUILD_CODE) -> str:
    """apptune's own build code: a change to how apptune builds is a different build. The
    code is compared as Python's syntax tree without docstrings, so reformatting, comments
    and documentation do not throw away every cached build (an hour of compiling)."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in files:
        h.update(syntax_of((here / name).read_text()).encode())
    return h.hexdigest()


def syntax_of(source: str) -> str:
    """Python ``source`` as its syntax tree without docstrings: equal for two sources
    that differ only in formatting, comments and documentation."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def key_inputs(
    plan: dict,
    source_sha256: str,
    build: dict,
    templates: dict[str, str],
    compilers: dict,
    libraries: dict,
    environ: dict | None = None,
) -> dict:
    """The inputs of one build's key (:func:`apptune.core.builds.steps.cache_inputs`): its resolved
    ``plan``, the source, the recipe's ``build`` commands and products and its ``templates``
    (dest -> text) as rendered for this plan, compilers, libraries, steering variables and
    apptune's build code."""
    environ = os.environ if environ is None else environ
    return {
        "plan": plan,
        "source_sha256": source_sha256,
        "build": build,
        "templates": {
            k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(templates.items())
        },
        "compilers": compilers,
        "libraries": libraries,
        "environment": {v: environ.get(v) for v in STEERING_VARS if environ.get(v) is not None},
        "apptune_build_code": code_identity(),
    }


def key_of(inputs: dict) -> str:
    return digest(inputs)


def entry_dir(key: str) -> Path:
    return root() / key[:2] / key


def locked(key: str, what: str | None = None, waiting=None):
    """One builder per key at a time: a second run that needs the same build waits for the
    one in progress and then finds it stored (``what``: the build, for whoever waits;
    ``waiting(holder)``: told who builds it before the wait, :func:`apptune.locks.locked`).
    A builder that dies gives up the lock with its life; the one waiting then builds."""
    return locks.locked(root() / "locks" / f"{key}.lock", what, waiting)


@dataclass
class Entry:
    key: str
    path: Path
    manifest: dict

    @property
    def size(self) -> int:
        return self.manifest.get("size", 0)


def _check(entry_path: Path) -> tuple[dict | None, str | None]:
    """(manifest, None) when the entry is intact, else (manifest or None, reason)."""
    try:
        m = json.loads((entry_path / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as e:
        return None, f"unreadable manifest ({e.__class__.__name__})"
    for f in m.get("files", []):
        p = entry_path / "files" / f["file"]
        if "link" in f:  # a symbolic link of an install tree: its target is what it was
            if not p.is_symlink() or os.readlink(p) != f["link"]:
                return m, f"{f['file']} is not the link to {f['link']} it was"
            continue
        if not p.is_file():
            return m, f"{f['file']} is missing"
        if sha256_file(p) != f["sha256"]:
            return m, f"{f['file']} does not match its sha256"
    return m, None


def lookup(key: str) -> tuple[Entry | None, str | None]:
    """The intact entry for ``key``; a corrupted one is removed and reported."""
    d = entry_dir(key)
    if not d.exists():
        return None, None
    m, bad = _check(d)
    if bad:
        shutil.rmtree(d, ignore_errors=True)
        return None, f"build cache entry {key[:16]} was corrupted ({bad}); removed, rebuilding"
    (d / LAST_USED).touch()
    return Entry(key, d, m), None


def restore(entry: Entry, stage: Path) -> list[str]:
    """Put the entry's files into the stage (hard links where possible), an install tree's
    with their relative paths and symbolic links; a tree already in the stage is replaced
    whole, never merged."""
    out = []
    files = entry.manifest["files"]
    for top in sorted({f["file"].split("/", 1)[0] for f in files if "/" in f["file"]}):
        d = stage / top
        if d.is_dir() and not d.is_symlink():
            shutil.rmtree(d)
    for f in files:
        src = entry.path / "files" / f["file"]
        dst = stage / f["file"]
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)  # a link there too: replaced, never written through
        if "link" in f:
            dst.symlink_to(f["link"])
        else:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
        out.append(f["file"])
    return out


def store(
    key: str,
    inputs: dict,
    stage: Path,
    files: list[str],
    build_seconds: float | None = None,
    compiles: int | None = None,
) -> Entry | None:
    """Copy the build's files (paths under ``stage``; a symbolic link is kept as a link) into
    a new entry, atomically (rename into place). ``build_seconds``: what the build took,
    what a rebuild costs (:func:`prune` weighs it), and ``compiles``, its compile lines, are
    also kept in :data:`TIMES` after the entry is gone.

    Best effort: a cache that cannot take the entry (a full disk, no permission) is a
    warning, the partial entry is removed and None is returned; the build itself is good."""
    try:
        entry = _store(key, inputs, stage, files, build_seconds, compiles)
    except OSError as e:
        print(
            f"apptune: warning: build not stored in the build cache {root()} "
            f"({e.strerror or e}; {_free_space(root())}): the build is used as it is, "
            "a later run builds it again",
            flush=True,
        )
        return None
    record_time(entry.manifest)
    return entry


def _free_space(d: Path) -> str:
    for p in (d, *d.parents):
        try:
            return f"{shutil.disk_usage(p).free / 2**20:.0f} MiB free"
        except OSError:
            continue
    return "free space unknown"


def _store(
    key: str,
    inputs: dict,
    stage: Path,
    files: list[str],
    build_seconds: float | None,
    compiles: int | None,
) -> Entry:
    final = entry_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", dir=final.parent))
    try:
        (tmp / "files").mkdir()
        recs, size = [], 0
        for name in files:
            src, dst = stage / name, tmp / "files" / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                recs.append({"file": name, "link": os.readlink(src)})
                dst.symlink_to(recs[-1]["link"])
                continue
            shutil.copy2(src, dst)
            recs.append({"file": name, "sha256": sha256_file(src)})
            size += src.stat().st_size
        manifest = {
            "key": key,
            "inputs": inputs,
            "files": recs,
            "size": size,
            "created": time.time(),
            "app": inputs["plan"].get("app"),
            "variant": inputs["plan"].get("variant"),
            "environment": inputs["plan"].get("environment"),
            "build_seconds": build_seconds,
            "compiles": compiles,
            # hits of a compiler cache: then build_seconds is not what a cold build costs
            "ccache": ccache.counts(stage),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
        (tmp / LAST_USED).touch()
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Entry(key, final, manifest)


def entries() -> list[Entry]:
    out = []
    for m in root().glob("??/*/" + MANIFEST):
        try:
            out.append(Entry(m.parent.name, m.parent, json.loads(m.read_text())))
        except (OSError, json.JSONDecodeError):
            out.append(Entry(m.parent.name, m.parent, {}))
    return sorted(out, key=lambda e: e.manifest.get("created", 0))


def last_used(e: Entry) -> float:
    try:
        return (e.path / LAST_USED).stat().st_mtime
    except OSError:
        return 0.0


#: An entry's worth (:func:`worth`) halves for every this many days it goes unused.
HALF_LIFE_DAYS = 14.0


#: At most this share of a build's cacheable compiles may be compiler-cache hits for its time
#: to stand for a cold build: a build system's probes (CMake's try_compile of a check another
#: build already ran) hit ccache in a build that compiles every object of its own.
COLD_HITS_SHARE = 0.01


def cold(record: dict) -> bool:
    """Whether a build's record (a manifest, a line of :data:`TIMES`) timed a cold build: no
    object, or no more than :data:`COLD_HITS_SHARE` of its compiles, came from a compiler cache
    (:mod:`apptune.core.builds.ccache`)."""
    counts = record.get("ccache") or {}
    hits = counts.get("hits") or 0
    return hits <= COLD_HITS_SHARE * (hits + (counts.get("misses") or 0))


def rebuild_seconds(e: Entry, times: list[dict] | None = None) -> float:
    """What building the entry again costs: its recorded build time (an entry stored before
    the manifest kept it: its provenance's; an expected failure's: 0). A build that took
    objects from a compiler cache costs what its last cold build took, when one is
    recorded (``times``: :func:`recorded_times`), since the compiler cache may be gone."""
    s = e.manifest.get("build_seconds")
    if s is None:
        try:
            s = json.loads((e.path / "files" / "provenance.json").read_text()).get("build_seconds")
        except (OSError, json.JSONDecodeError, AttributeError):
            s = None
    s = float(s or 0.0)
    if not cold(e.manifest):
        same = ("app", "variant", "environment")
        colds = [
            float(t["seconds"])
            for t in (recorded_times() if times is None else times)
            if cold(t) and t.get("seconds") and all(t.get(k) == e.manifest.get(k) for k in same)
        ]
        s = max([s, *colds[-1:]])
    return s


def worth(e: Entry, now: float | None = None) -> float:
    """What removing the entry loses: its rebuild seconds, halved for every
    :data:`HALF_LIFE_DAYS` it has gone unused (an hour of build used today outweighs a
    minute's, and a build nobody used for months gives way in the end)."""
    now = time.time() if now is None else now
    idle_days = max(0.0, now - last_used(e)) / 86400
    return rebuild_seconds(e) * 0.5 ** (idle_days / HALF_LIFE_DAYS)


def eviction(es: list[Entry], limit: int, now: float | None = None) -> list[Entry]:
    """The entries to remove so that the others fit in ``limit`` bytes: the least worth
    first (the least recently used among equals) until the rest fit; then each of those,
    the dearest first, is kept again if the rest still fit with it (a large cheap entry's
    removal can spare a dear one it was ranked before)."""
    total = sum(e.size for e in es)
    out = []
    for e in sorted(es, key=lambda e: (worth(e, now), last_used(e))):
        if total <= limit:
            break
        out.append(e)
        total -= e.size
    for e in sorted(out, key=lambda e: worth(e, now), reverse=True):
        if total + e.size <= limit:
            out.remove(e)
            total += e.size
    return out


def prune(limit: int | None = None) -> list[Entry]:
    """Remove entries until the cache fits in ``limit`` bytes, the cheapest to rebuild and
    longest unused first (:func:`eviction`)."""
    limit = max_bytes() if limit is None else limit
    removed = eviction(entries(), limit)
    for e in removed:
        with locked(e.key):
            shutil.rmtree(e.path, ignore_errors=True)
    return removed


#: Every build stored, one JSON line each (app, variant, environment, seconds, compiles):
#: the time of a build outlives its entry, for the estimate of the next one.
TIMES = "build-times.jsonl"


def record_time(manifest: dict) -> None:
    """Append a stored build's time to :data:`TIMES` (best effort: an estimate is lost)."""
    if manifest.get("build_seconds") is None:
        return
    line = {
        "app": manifest.get("app"),
        "variant": manifest.get("variant"),
        "environment": manifest.get("environment"),
        "seconds": manifest["build_seconds"],
        "compiles": manifest.get("compiles"),
        "when": manifest.get("created"),
        "key": manifest.get("key"),
    }
    if manifest.get("ccache"):
        line["ccache"] = manifest["ccache"]
    try:
        with open(root() / TIMES, "a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
    except OSError:
        pass


def recorded_times() -> list[dict]:
    """The builds :data:`TIMES` holds, oldest first."""
    try:
        text = (root() / TIMES).read_text()
    except OSError:
        return []
    out = []
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            continue
    return out


def verify_all() -> list[tuple[Entry, str]]:
    """Every corrupted entry with the reason (entries are left in place)."""
    bad = []
    for e in entries():
        _, why = _check(e.path)
        if why:
            bad.append((e, why))
    return bad
