"""What bisect mixes: the archives and objects of the two builds, the units that differ
(:func:`units_of`), the global symbols of an object and an object mixed from two at the
function level (:func:`symbol_mix`), and a build mixed from good and bad objects and
relinked (:class:`Mixer`)."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...core.builds import steps
from ...core.builds.compilelines import is_probe
from ...core.data.site import Site
from ...errors import ApptuneError
from ...models import BuildPlan, Recipe


# ------------------------------------------------------------------------ archives
def read_archive(path: Path) -> list[tuple[str, bytes]]:
    """Members (name, bytes) of a System V / GNU ``ar`` archive, in order."""
    data = Path(path).read_bytes()
    if data.startswith(b"!<thin>\n"):
        raise ApptuneError(
            path, "archive", "thin archives are not supported (members live elsewhere)"
        )
    if not data.startswith(b"!<arch>\n"):
        raise ApptuneError(path, "archive", "not an ar archive")
    pos, longnames, out = 8, b"", []
    while pos + 60 <= len(data):
        hdr = data[pos : pos + 60]
        if hdr[58:60] != b"`\n":
            raise ApptuneError(path, "archive", f"malformed member header at byte {pos}")
        name = hdr[:16].decode("latin-1").rstrip()
        size = int(hdr[48:58].decode().strip())
        body = data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name in ("/", "/SYM64/"):
            continue
        if name == "//":
            longnames = body
            continue
        if name.startswith("#1/"):
            raise ApptuneError(path, "archive", "BSD-format archives are not supported")
        if name.startswith("/") and name[1:].isdigit():
            off = int(name[1:])
            end = longnames.index(b"/\n", off)
            name = longnames[off:end].decode("latin-1")
        elif name.endswith("/"):
            name = name[:-1]
        out.append((name, body))
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- units
@dataclass
class Unit:
    """One separately compiled object file of both builds."""

    obj: str  # path under the source root
    source: str  # the compiled source, under the source root
    lang: str
    good_sha: str
    bad_sha: str


def object_of(entry: dict) -> str | None:
    """Where a ``-c`` compile line wrote its object (``-o`` or the source's stem + .o)."""
    argv = entry["argv"]
    for i, a in enumerate(argv):
        if a == "-o" and i + 1 < len(argv):
            return str(Path(entry["cwd"], argv[i + 1]))
        if a.startswith("-o") and len(a) > 2:
            return str(Path(entry["cwd"], a[2:]))
    if entry.get("sources"):
        src = next(
            a
            for a in argv[1:]
            if not a.startswith("-") and Path(a).name == Path(entry["sources"][0]).name
        )
        return str(Path(entry["cwd"], Path(src).stem + ".o"))
    return None


def compile_lines(stage: Path) -> list[dict]:
    f = Path(stage) / "compile-lines.jsonl"
    if not f.is_file():
        raise ApptuneError(f, None, "no compile lines: was this built by apptune?")
    return [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()]


def objects(stage: Path) -> dict[str, dict]:
    """Object path (under ``stage/src``) -> its compile line, for every ``-c`` compile."""
    root = (Path(stage) / "src").resolve()
    out = {}
    for e in compile_lines(stage):
        if e["kind"] != "compile" or "-c" not in e["argv"] or len(e.get("sources") or []) != 1:
            continue
        if is_probe(e):
            continue  # the build system testing the compiler (configure, CMake)
        obj = object_of(e)
        if obj is None:
            continue
        p = Path(obj).resolve()
        try:
            rel = str(p.relative_to(root))
        except ValueError:
            continue  # written outside the tree (a probe): not part of the product
        out[rel] = e
    return out


def units_of(good: Path, bad: Path) -> tuple[list[Unit], dict]:
    """The units of the search and what was left out (identical, missing)."""
    g, b = objects(good), objects(bad)
    only = sorted(set(g) ^ set(b))
    if only:
        raise ApptuneError(
            Path(bad) / "compile-lines.jsonl",
            only[0],
            f"compiled in only one of the two builds ({len(only)} such objects): "
            "bisect mixes objects of builds of the same source, patches and axes",
        )
    units, same, missing = [], [], []
    for rel in sorted(b):
        go, bo = Path(good, "src", rel), Path(bad, "src", rel)
        if not (go.is_file() and bo.is_file()):
            missing.append(rel)
            continue
        gs, bs = _sha(go.read_bytes()), _sha(bo.read_bytes())
        if gs == bs:
            same.append(rel)
            continue
        units.append(
            Unit(obj=rel, source=b[rel]["source"], lang=b[rel]["lang"], good_sha=gs, bad_sha=bs)
        )
    return units, {"identical": len(same), "missing": missing}


def module_differences(good: Path, bad: Path) -> list[str]:
    """Fortran module files (``*.mod``) that differ between the two builds."""
    import gzip

    out = []
    for m in sorted(Path(bad, "src").rglob("*.mod")):
        rel = m.relative_to(Path(bad, "src"))
        other = Path(good, "src", rel)
        if not other.is_file():
            out.append(f"{rel} (only in the bad build)")
            continue
        a, b = m.read_bytes(), other.read_bytes()
        if a != b:
            try:
                a, b = gzip.decompress(a), gzip.decompress(b)
            except OSError:
                pass
            if a != b:
                out.append(str(rel))
    return out


def _output_exists(entry: dict) -> bool:
    argv = entry["argv"]
    out = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-o"), "a.out")
    return Path(entry["cwd"], out).is_file()


# ------------------------------------------------------------------------- symbols
def defined_globals(obj: Path) -> tuple[list[str], list[str]]:
    """(functions, variables) with external linkage defined in an object file (``nm``).

    Weak definitions are left out: they already give way to a strong one."""
    head = Path(obj).read_bytes()
    if head.startswith(b"BC\xc0\xde") or b".gnu.lto_" in head:
        raise ApptuneError(
            obj,
            "nm",
            "a link-time-optimisation object (GCC or LLVM IR): its "
            "functions are compiled at link time and cannot be mixed",
        )
    p = subprocess.run(["nm", "-P", "--defined-only", str(obj)], capture_output=True, text=True)
    if p.returncode != 0:
        raise ApptuneError(obj, "nm", f"cannot list the symbols: {p.stderr.strip()[:200]}")
    funcs, data = [], []
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "T":
            funcs.append(name)
        elif kind in ("D", "B", "R", "G", "S"):
            data.append(name)
    return sorted(funcs), sorted(data)


def pretty_symbol(name: str) -> str:
    """A Fortran module procedure as ``module::name`` (gfortran's and flang's mangling)."""
    for sep in ("_MOD_", "_MP_"):
        if sep in name:
            mod, _, proc = name.lstrip("_").partition(sep)
            return f"{mod}::{proc.rstrip('_')}"
    return name


def symbol_mix(
    good_obj: Path,
    bad_obj: Path,
    good_funcs: set[str],
    funcs: list[str],
    dest: Path,
    env: dict | None = None,
    log=None,
) -> Path:
    """One relocatable object: the functions in ``good_funcs`` as the good object
    defines them, every other function and every variable as the bad object does."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _, good_data = defined_globals(good_obj)
    unknown = sorted(set(good_funcs) - set(funcs))
    if unknown:
        raise ApptuneError(good_obj, unknown[0], "not a global function of both objects")
    steps, parts = [], []
    for name, obj, weak in (
        ("good", good_obj, sorted((set(funcs) - set(good_funcs)) | set(good_data))),
        ("bad", bad_obj, sorted(good_funcs)),
    ):
        lst = dest.with_name(f"{dest.name}.{name}.weak")
        lst.write_text("".join(f"{w}\n" for w in weak))
        parts.append(str(dest.with_name(f"{dest.name}.{name}.o")))
        # objcopy fails on an empty list file: then the copy is the object itself
        steps.append(
            ["objcopy", *([f"--weaken-symbols={lst}"] if weak else []), str(obj), parts[-1]]
        )
    steps.append(["ld", "-r", "-o", str(dest), *parts])
    for argv in steps:
        p = subprocess.run(argv, env=env, capture_output=True, text=True)
        if log is not None:
            log.write(f"{shlex.join(argv)}\n{p.stdout}{p.stderr}")
        if p.returncode != 0:
            raise ApptuneError(
                bad_obj,
                argv[0],
                f"mixing functions failed (exit {p.returncode}): "
                f"{(p.stderr or p.stdout).strip()[:200]}",
            )
    return dest


# -------------------------------------------------------------------------- mixing
class Mixer:
    """Mixed builds: the bad tree with some objects taken from the good tree."""

    def __init__(
        self,
        recipe: Recipe,
        plan: BuildPlan,
        good: Path,
        bad: Path,
        units: list[Unit],
        site: Site,
    ):
        self.recipe, self.plan, self.site = recipe, plan, site
        self.good, self.bad = Path(good).resolve(), Path(bad).resolve()
        self.units = {u.obj: u for u in units}
        # the link commands to replay: those whose output is still in the tree (a build
        # system's probes, e.g. configure's conftest, linked programs that are gone)
        self.lines = [
            e
            for e in compile_lines(self.bad)
            if (e["kind"] == "link" or (e["kind"] == "compile" and "-c" not in e["argv"]))
            and _output_exists(e)
        ]
        if not self.lines:
            raise ApptuneError(
                self.bad / "compile-lines.jsonl",
                "link",
                "no link command was recorded: nothing to relink",
            )
        self.members = self._archive_index()

    def _archive_index(self) -> dict[str, list[str]]:
        """Object -> archives (under src) that hold it as a member, by content."""
        by_sha = {u.bad_sha: u.obj for u in self.units.values()}
        where: dict[str, list[str]] = {}
        src = self.bad / "src"
        for a in sorted(src.rglob("*.a")):
            if not a.is_file():
                continue
            members = read_archive(a)
            names = [n for n, _ in members]
            for name, body in members:
                obj = by_sha.get(_sha(body))
                if obj is None:
                    continue
                if Path(obj).name != name:
                    raise ApptuneError(
                        a, name, f"member holds {obj} under another name: cannot replace it"
                    )
                if names.count(name) > 1:
                    raise ApptuneError(
                        a, name, "two members of this name: cannot replace one of them"
                    )
                where.setdefault(obj, []).append(str(a.relative_to(src)))
        return where

    def make(self, good_objs: set[str], dest: Path, replace: dict[str, Path] | None = None) -> Path:
        """A mixed build in ``dest``: products installed there as a build stage would have them.

        ``replace``: objects (path under src -> a file) to use instead of either build's,
        e.g. a function-level mix from :func:`symbol_mix`."""
        dest = Path(dest)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        src = dest / "src"
        shutil.copytree(self.bad / "src", src, symlinks=True)
        touched: dict[str, list[str]] = {}
        chosen = {obj: self.good / "src" / obj for obj in good_objs} | dict(replace or {})
        for obj, f in sorted(chosen.items()):
            shutil.copy2(f, src / obj)
            for a in self.members.get(obj, []):
                touched.setdefault(a, []).append(obj)
        env = self.site.environ()
        log = open(dest / "relink.log", "w")
        try:
            for a, objs in sorted(touched.items()):
                self._run(["ar", "rs", str(src / a), *(str(src / o) for o in objs)], src, env, log)
            old = str(self.bad / "src")
            for e in self.lines:
                cwd = Path(e["cwd"].replace(old, str(src), 1))
                self._run([w.replace(old, str(src)) for w in e["argv"]], cwd, env, log)
        finally:
            log.close()
        # the products' paths as the build step renders them, from plan.json
        ctx = dict(self.plan.to_dict(), cc="cc", cxx="c++", ftn="ftn")
        for rel, name in steps.product_paths(self.recipe, ctx):
            shutil.copy2(src / rel, dest / name)
        (dest / "mix.json").write_text(
            json.dumps(
                {"good_objects": sorted(good_objs), "replaced": sorted(replace or {})}, indent=1
            )
        )
        return dest

    @staticmethod
    def _run(argv, cwd, env, log):
        log.write(f"(in {cwd}) {shlex.join(argv)}\n")
        log.flush()
        p = subprocess.run(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise ApptuneError(
                Path(log.name),
                argv[0],
                f"relinking failed (exit {p.returncode}): {shlex.join(argv)[:200]}",
            )
