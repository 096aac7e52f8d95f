"""``apptune bisect``: which source files must keep the good variant's flags.

When an aggressive variant fails verification, bisect finds the smallest set of
object files that must come from the good build for the results to pass again,
and writes it as a ``per_file`` rule of the recipe.

How (details: docs/tuning.md; measured cases: docs/measurements.md#bisect-and-tune):

1. Build the good and the bad variant once each, with the same source, patches and
   library axes, keeping their trees (object files, archives) and the compile lines
   apptune's compiler wrapper recorded (``compile-lines.jsonl``: cwd, argv, source).
2. The units of the search are the objects the two builds compiled separately
   (``-c``) and that differ byte for byte; identical objects cannot matter.
3. A candidate takes the bad tree, copies the good object over the bad one for a
   subset of units, replaces those members in every static archive that held the
   bad object (``ar r``), re-runs the build's recorded link commands in their
   directories, and is run and verified like a check (:mod:`apptune.localrun`).
   Nothing is recompiled, so Fortran module order plays no role; mixing objects
   assumes module interfaces do not depend on the flags, which is checked: every
   ``.mod`` file must be identical in both builds (else a warning).
4. The search is FLiT's bisection (Bentley et al., HPDC 2019), with pass/fail
   verification instead of a numeric difference: with the failing set C known,
   test its first half; if that half alone (everything else good) fails, keep it,
   else keep the other half — one cycle per halving, ``ceil(log2 n)`` cycles per
   culprit. The found set is then verified (found files good, every other file bad
   must pass); if it does not, the search continues for the next culprit among the
   rest. With several culprits each is checked to be necessary (1-minimality).
5. Then, per culprit object, the same search over its global functions (FLiT's
   symbol bisection): a candidate object is the good and the bad object linked into
   one (``ld -r``) after ``objcopy --weaken-symbol`` has made every function weak in
   the copy it must not come from (and every global variable weak in the good
   copy), so the strong definition wins at the link. Functions with internal
   linkage (``static``, compiler clones) stay with the copy that calls them, and
   code inlined into another function moves with that function: the result names
   the global functions whose definitions must come from the good build.
6. Then good, bad and the mixed build are run ``--repeats`` times interleaved, and
   the primary figure and wall time are reported as medians and ratios.

A build+run cycle is counted for each end (build and run) and each candidate
(relink and run); timing repeats are counted apart.
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import hashlib
import json
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import build, localrun, paths, recipes, templating, yamlio
from .errors import ApptuneError
from .figures import finite_median
from .models import Recipe
from .yamlio import atomic_write_json, atomic_write_text


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
        if build.is_probe(e):
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
        plan: dict,
        good: Path,
        bad: Path,
        units: list[Unit],
        site: localrun.Site,
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
        ctx = dict(self.plan, cc="cc", cxx="c++", ftn="ftn")
        for rel, name in build.product_paths(self.recipe, ctx):
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


# -------------------------------------------------------------------------- search
class BudgetExhausted(Exception):
    pass


def bisect_search(units: list[str], fails, noun: str = "object") -> dict:
    """Smallest set of units that must be good for ``fails`` to turn false.

    ``fails(bad_units)`` is True when the build with exactly these units taken from
    the bad build (all others good) fails verification; ``fails(all)`` must be True.

    First FLiT's bisection for a single culprit (one test per halving: when the
    first half alone does not fail, the culprit is taken to be in the other half),
    then one test verifies it. When that fails (several culprits, or one that only
    fails together with another), Zeller's ddmin over the set of good units finds a
    1-minimal set (no unit of it can be dropped). Returns ``{"culprits", "verified",
    "one_minimal", "method", "notes"}``."""
    notes: list[str] = []
    c = list(units)
    while len(c) > 1:
        h1, h2 = c[: len(c) // 2], c[len(c) // 2 :]
        c = h1 if fails(h1) else h2
    x = c[0]
    if not fails([u for u in units if u != x]):
        return {
            "culprits": [x],
            "verified": True,
            "one_minimal": True,
            "method": "bisection",
            "notes": notes,
        }
    if fails([]):
        if noun != "object":
            raise ApptuneError(
                None,
                "bisect",
                f"the candidate with every {noun} from the good build "
                f"still fails: the cause is not in one {noun} (code inlined elsewhere, "
                "a function with internal linkage, or data)",
            )
        raise ApptuneError(
            None,
            "bisect",
            "the candidate with every object from the good build "
            "still fails: the cause is not in an object file's flags (the link "
            "line, the libraries or the run)",
        )
    notes.append(f"{x} alone is not enough: ddmin over the good {noun}s")
    good = ddmin(list(units), lambda s: not fails([u for u in units if u not in set(s)]))
    return {
        "culprits": good,
        "verified": True,
        "one_minimal": True,
        "method": "bisection, then ddmin",
        "notes": notes,
    }


def ddmin(c: list[str], passes) -> list[str]:
    """Zeller & Hildebrandt's ddmin: a 1-minimal subset of ``c`` for which ``passes``
    holds (``passes(c)`` must hold)."""
    n = 2
    while len(c) >= 2:
        size = len(c) / n
        parts = [c[round(i * size) : round((i + 1) * size)] for i in range(n)]
        for p in parts:
            if passes(p):
                c, n = p, 2
                break
        else:
            for p in parts:
                comp = [u for u in c if u not in set(p)]
                if n > 2 and passes(comp):
                    c, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c


# ---------------------------------------------------------------------- the recipe
def good_flags(plan: dict, source: str) -> dict:
    """The flags the good build gave ``source``, as a per_file rule's flags."""
    for r in plan["per_file"]:
        if any(fnmatch.fnmatch(source, g) for g in r["files"]):
            if r["ladder"] == "recipe":
                return {"cflags": list(r["cflags"]), "fflags": list(r["fflags"])}
            return {"flags": r["ladder"]}
    return {
        "flags": recipes.Variant.parse(
            plan["variant"].split()[0], recipes.load_recipe(plan["app"])
        ).ladder
    }


def covering_rule(recipe: Recipe, source: str) -> int | None:
    for i, r in enumerate(recipe.per_file):
        if any(fnmatch.fnmatch(source, g) for g in r.files):
            return i
    return None


def per_file_entries(plan_good: dict, sources: list[str], reason: str) -> list[dict]:
    groups: dict[str, dict] = {}
    for s in sources:
        fl = good_flags(plan_good, s)
        key = json.dumps(fl, sort_keys=True)
        groups.setdefault(key, {"files": [], **fl, "reason": reason})["files"].append(s)
    return list(groups.values())


def _rule(e: dict):
    """A rule in the recipes' own style: flow lists, the reason folded (``>-``) at 84."""
    import textwrap

    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import FoldedScalarString

    def flow(items):
        s = CommentedSeq(items)
        s.fa.set_flow_style()
        return s

    m = CommentedMap(files=flow(e["files"]))
    for k in ("flags", "cflags", "fflags"):
        if k in e:
            m[k] = flow(e[k]) if isinstance(e[k], list) else e[k]
    text = " ".join(e["reason"].split())
    reason, folds, at = FoldedScalarString(text), [], 0
    for line in textwrap.wrap(text, 84)[:-1]:
        at += len(line)
        folds.append(at)
        at += 1
    reason.fold_pos = folds
    m["reason"] = reason
    return m


def add_per_file(text: str, entries: list[dict], where: str = "recipe") -> str:
    """The recipe's text with ``entries`` appended to ``per_file``; comments, order and
    style of everything else stay (ruamel.yaml round trip)."""
    from ruamel.yaml.comments import CommentedSeq

    def change(doc):
        rules = doc.get("per_file")
        if not rules:  # absent, or an empty flow list: a block list, before `run`
            rules = CommentedSeq()
            keys = list(doc)
            if "per_file" in doc:
                doc["per_file"] = rules
            else:
                doc.insert(keys.index("run") if "run" in keys else len(keys), "per_file", rules)
        last = rules[-1] if len(rules) else None
        for e in entries:
            rules.append(_rule(e))
        # the blank lines and comments after the list stay after it
        if last is not None and hasattr(last, "ca") and len(last):
            key = list(last)[-1]
            tail = last.ca.items.pop(key, None)
            if tail:
                token = tail[2]
                block = type(last[key]).__name__ in ("FoldedScalarString", "LiteralScalarString")
                if token is not None and not block and token.value.startswith("\n"):
                    # after a plain value the token also ends its line; a folded reason
                    # (the new rule's) ends its own
                    token.value = token.value[1:]
                    if not token.value:
                        tail = None
                if tail:
                    new = rules[-1]
                    new.ca.items[list(new)[-1]] = tail

    out = yamlio.edit_yaml_text(text, change)
    old_n = len((yaml.safe_load(text) or {}).get("per_file") or [])
    data = yaml.safe_load(out)
    Recipe.model_validate(data)
    if len(data.get("per_file") or []) != old_n + len(entries):
        raise ApptuneError(where, "per_file", "could not add the rule to the recipe's text")
    return out


# ---------------------------------------------------------------------------- main
@dataclass
class Cycle:
    n: int
    what: str
    good_objects: int
    bad_objects: int
    ok: bool
    summary: str
    seconds: float


@dataclass
class BisectResult:
    app: str
    environment: str
    tier: str
    good: str
    bad: str
    ignore_per_file: bool
    units: int
    left_out: dict
    cycles: list[Cycle] = field(default_factory=list)
    culprits: list[dict] = field(default_factory=list)
    verified: bool = False
    one_minimal: bool = False
    already_covered: dict = field(default_factory=dict)
    entries: list[dict] = field(default_factory=list)
    diff: str = ""
    timing: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    relink_identical: bool | None = None
    method: str = ""
    modules_differing: list[str] = field(default_factory=list)
    #: per culprit object: the global functions that must come from the good build
    functions: list[dict] = field(default_factory=list)

    @property
    def n_cycles(self) -> int:
        return len(self.cycles)


def bisect(
    app: str,
    good: str,
    bad: str,
    site: localrun.Site,
    tier: str = "ci",
    work: Path | None = None,
    ignore_per_file: bool = False,
    repeats: int = 3,
    max_cycles: int = 40,
    ranks: int | None = None,
    functions: bool = True,
    log=None,
    on_trial=None,
) -> BisectResult:
    """Bisect ``bad`` against ``good`` on ``tier``; ``on_trial`` is called with the run
    directory of each run once it ran."""
    log = log or (lambda m: print(m, flush=True))
    recipe = recipes.load_recipe(app)
    rfile = recipes.recipe_path(app)
    if tier not in recipe.tiers:
        raise ApptuneError(
            rfile, "tiers", f"unknown tier '{tier}' (allowed: {', '.join(recipe.tiers)})"
        )
    pg = localrun.plan_for(recipe, good, site)
    pb = localrun.plan_for(recipe, bad, site, ladder_everywhere=ignore_per_file)
    if pg["axes"] != pb["axes"] or pg["patches"] != pb["patches"]:
        diff = {
            a: (pg["axes"][a], pb["axes"][a]) for a in pg["axes"] if pg["axes"][a] != pb["axes"][a]
        }
        raise ApptuneError(
            rfile,
            "variant",
            f"--good {good} and --bad {bad} differ in more than flags "
            f"({diff or 'patches'}): bisect mixes objects of builds of the same source, "
            "patches and library axes",
        )
    if pg == pb:
        raise ApptuneError(rfile, "variant", f"--good {good} and --bad {bad} are the same build")
    work = Path(
        work
        or paths.root()
        / "runs"
        / "bisect"
        / f"{app}-{site.environment}-{good}-vs-{bad}{'-ignore-per-file' if ignore_per_file else ''}"
    )
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    res = BisectResult(
        app=app,
        environment=site.environment,
        tier=tier,
        good=good,
        bad=bad,
        ignore_per_file=ignore_per_file,
        units=0,
        left_out={},
    )
    figure = recipe.run.primary

    def run_trial(build_dir: Path, name: str, variant: str) -> localrun.RunResult:
        r = localrun.run_tier(
            recipe, tier, build_dir, work / "runs" / name, site, ranks=ranks, variant=variant
        )
        if on_trial:
            on_trial(r.run_dir)
        return r

    def cycle(what, n_good, n_bad, r, t0):
        c = Cycle(
            len(res.cycles) + 1,
            what,
            n_good,
            n_bad,
            r.ok,
            r.summary,
            round(time.monotonic() - t0, 1),
        )
        res.cycles.append(c)
        log(
            f"apptune: bisect: cycle {c.n}: {what}: {'verified' if r.ok else 'FAILED'} "
            f"({c.seconds} s)" + ("" if r.ok else f": {r.summary[:160]}")
        )
        return c

    ends = {}
    for name, variant, plan in (("good", good, pg), ("bad", bad, pb)):
        t0 = time.monotonic()
        log(f"apptune: bisect: building {name} end {plan['variant']} with {site.environment}")
        localrun.build_variant(recipe, plan, site, work / name, use_cache=False)
        r = run_trial(work / name, name, variant)
        cycle(f"{name} build {variant}", 0, 0, r, t0)
        ends[name] = r
    if not ends["good"].ok:
        raise ApptuneError(
            None,
            "--good",
            f"{good} fails verification itself on tier {tier}: {ends['good'].summary}",
        )
    if ends["bad"].ok:
        raise ApptuneError(
            None, "--bad", f"{bad} passes verification on tier {tier}: nothing to bisect"
        )
    units, left = units_of(work / "good", work / "bad")
    res.units, res.left_out = len(units), left
    if not units:
        raise ApptuneError(
            work / "bad" / "compile-lines.jsonl",
            "compile lines",
            "no separately compiled object differs between the builds "
            "(a build that compiles and links in one command has no objects to mix)",
        )
    res.modules_differing = module_differences(work / "good", work / "bad")
    if res.modules_differing:
        res.notes.append(
            "Fortran module files differ between the builds (mixing objects assumes "
            f"identical interfaces): {', '.join(res.modules_differing[:5])}"
        )
    log(
        f"apptune: bisect: {len(units)} objects differ ({left['identical']} identical, "
        f"{len(left['missing'])} not in the tree)"
    )
    mixer = Mixer(recipe, pb, work / "good", work / "bad", units, site)
    # the relink replays the build: all-bad objects must give the bad build's product back
    check = mixer.make(set(), work / "mix-relink-check")
    exe = recipe.run.executable
    res.relink_identical = (check / exe).read_bytes() == (work / "bad" / exe).read_bytes()
    if not res.relink_identical:
        res.notes.append(
            f"relinking the bad build's own objects did not reproduce {exe} byte for byte"
        )
    shutil.rmtree(check)

    order = [u.obj for u in units]
    memo: dict[frozenset, bool] = {frozenset(order): True}

    def candidate(goods: set[str], replace: dict, what: str, n_bad: int) -> bool:
        """Relink, run and verify one mixed build; True when it fails verification."""
        if len(res.cycles) >= max_cycles:
            raise BudgetExhausted()
        t0 = time.monotonic()
        n = len(res.cycles) + 1
        d = mixer.make(goods, work / f"mix-{n:02d}", replace)
        r = run_trial(d, f"mix-{n:02d}", f"{bad} with {len(goods)} good objects")
        cycle(what, len(goods), n_bad, r, t0)
        if r.ok:
            (d / "passed").touch()
        else:
            shutil.rmtree(d)
        return not r.ok

    def fails(bad_objs) -> bool:
        key = frozenset(bad_objs)
        if key not in memo:
            goods = set(order) - key
            what = (
                f"{len(key)} bad: " + ", ".join(units_by[o].source for o in sorted(key))
                if len(key) <= 3
                else f"{len(key)} bad objects, {len(goods)} good"
            )
            memo[key] = candidate(goods, {}, what, len(key))
        return memo[key]

    units_by = {u.obj: u for u in units}
    try:
        found = bisect_search(order, fails)
    except BudgetExhausted:
        res.notes.append(f"stopped: the budget of {max_cycles} build+run cycles is used up")
        _save(res, work)
        return res
    res.notes += found["notes"]
    res.method = found["method"]
    res.verified, res.one_minimal = found["verified"], found["one_minimal"]
    culprit_sources = sorted({units_by[o].source for o in found["culprits"]})
    res.culprits = [
        {
            "object": o,
            "source": units_by[o].source,
            "good_flags": good_flags(pg, units_by[o].source),
        }
        for o in found["culprits"]
    ]
    reason = (
        f"apptune bisect ({datetime.date.today()}): with {bad}'s flags these files fail "
        f"verification on tier {tier} ({ends['bad'].summary[:120]}); "
        f"{len(res.cycles)} build+run cycles"
    )
    new_sources = []
    for s in culprit_sources:
        i = covering_rule(recipe, s)
        if i is not None:
            res.already_covered[s] = i
        else:
            new_sources.append(s)
    res.entries = per_file_entries(pg, new_sources, reason)
    if res.entries:
        text = rfile.read_text()
        new = add_per_file(text, res.entries, str(rfile))
        rel = str(rfile.relative_to(paths.root()))
        res.diff = "".join(
            difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"
            )
        )
    if not res.verified:
        res.notes.append("no set of good objects was found that passes: no rule proposed")
        _save(res, work)
        return res
    if functions:
        for obj in found["culprits"]:
            try:
                res.functions.append(
                    _function_level(
                        obj,
                        units_by[obj].source,
                        set(found["culprits"]),
                        work,
                        mixer,
                        candidate,
                        log,
                    )
                )
            except BudgetExhausted:
                res.notes.append(
                    f"function-level search of {units_by[obj].source} stopped: the budget "
                    f"of {max_cycles} build+run cycles is used up"
                )
                break
            except ApptuneError as e:  # the file-level result stands
                res.functions.append(
                    {
                        "object": obj,
                        "source": units_by[obj].source,
                        "of": 0,
                        "functions": [],
                        "verified": False,
                        "cycles": 0,
                        "note": f"not searched at function level: {e}",
                    }
                )
    # timing: good, bad and the mixed build of the override, interleaved, same session
    mixed = work / "mix-final"
    mixer.make(set(found["culprits"]), mixed)
    builds = {"good": work / "good", "bad": work / "bad", "mixed": mixed}
    samples = {k: {"primary": [], "wall_time": []} for k in builds}
    for i in range(repeats):
        for k, d in builds.items():
            r = run_trial(d, f"time-{k}-{i}", k)
            if k == "mixed" and not r.ok:
                res.notes.append(
                    f"timing repeat {i + 1}: the mixed build failed verification: {r.summary}"
                )
            samples[k]["primary"].append(r.figures.get(figure))
            samples[k]["wall_time"].append(r.wall_time)
            log(
                f"apptune: bisect: timing {k} {i + 1}/{repeats}: {figure} = {r.figures.get(figure)}"
            )
    res.timing = timing_table(samples, figure, recipe.run.figures.get(figure), repeats)
    _save(res, work)
    return res


def _function_level(
    obj: str, source: str, culprits: set[str], work: Path, mixer: Mixer, candidate, log
) -> dict:
    """Which global functions of the culprit object ``obj`` must come from the good build
    (the other culprit objects good, every other object bad)."""
    g, b = mixer.good / "src" / obj, mixer.bad / "src" / obj
    gf, bf = defined_globals(g)[0], defined_globals(b)[0]
    funcs = sorted(set(gf) & set(bf))
    out = {
        "object": obj,
        "source": source,
        "of": len(funcs),
        "functions": [],
        "verified": False,
        "cycles": 0,
        "note": "",
    }
    notes = []
    if set(gf) ^ set(bf):
        notes.append(
            "defined in one build only, left as built: "
            + ", ".join(pretty_symbol(x) for x in sorted(set(gf) ^ set(bf)))
        )
    if len(funcs) < 2:
        notes.append(f"{len(funcs)} global function(s): nothing to narrow at function level")
        return out | {
            "functions": [pretty_symbol(x) for x in funcs],
            "verified": len(funcs) == 1,
            "note": "; ".join(notes),
        }
    others = culprits - {obj}
    memo: dict[frozenset, bool] = {frozenset(funcs): True}  # the whole object bad: known to fail
    counter = [0]
    logf = open(work / f"symbols-{paths.slug(obj, 8)}.log", "a")

    def fails(bad_funcs) -> bool:
        key = frozenset(bad_funcs)
        if key not in memo:
            counter[0] += 1
            mixed = symbol_mix(
                g,
                b,
                set(funcs) - key,
                funcs,
                work / "symbols" / f"{paths.slug(obj, 8)}-{counter[0]:02d}" / Path(obj).name,
                mixer.site.environ(),
                logf,
            )
            names = ", ".join(pretty_symbol(x) for x in sorted(key))
            what = f"{source}: {len(key)} of {len(funcs)} functions bad" + (
                f": {names}" if 0 < len(key) <= 3 else ""
            )
            memo[key] = candidate(others, {obj: mixed}, what, len(key))
        return memo[key]

    try:
        found = bisect_search(funcs, fails, noun="global function")
    except ApptuneError as e:
        notes.append(f"not separable at function level: {e.message}")
        return out | {"cycles": counter[0], "note": "; ".join(notes)}
    finally:
        logf.close()
    out.update(
        functions=[pretty_symbol(x) for x in found["culprits"]],
        symbols=found["culprits"],
        verified=found["verified"],
        method=found["method"],
        cycles=counter[0],
        note="; ".join(notes),
    )
    log(
        f"apptune: bisect: {source}: {len(found['culprits'])} of {len(funcs)} global functions "
        f"must keep the good flags: {', '.join(out['functions'])} ({counter[0]} cycles)"
    )
    return out


def timing_table(samples: dict, figure: str, spec, repeats: int) -> dict:
    better = spec.better if spec is not None else "lower"
    unit = spec.unit if spec is not None else "s"
    med = {k: {m: finite_median(v[m]) for m in v} for k, v in samples.items()}
    out = {
        "figure": figure,
        "unit": unit,
        "better": better,
        "repeats": repeats,
        "medians": med,
        "samples": samples,
        "ratios": {},
    }
    for m in ("primary", "wall_time"):
        mx, g, b = med["mixed"][m], med["good"][m], med["bad"][m]
        out["ratios"][m] = {
            "mixed/good": mx / g if mx and g else None,
            "mixed/bad": mx / b if mx and b else None,
        }
    return out


def _save(res: BisectResult, work: Path) -> None:
    from dataclasses import asdict

    atomic_write_json(work / "bisect.json", asdict(res) | {"n_cycles": res.n_cycles})
    atomic_write_text(work / "bisect-report.md", report_md(res))


def report_md(res: BisectResult) -> str:
    """The bisect's report (apptune/templates/bisect-report.md.j2)."""
    return templating.environment().get_template("bisect-report.md.j2").render(r=res)
