"""The build step of a variant: unpack, patch, configure, make, check flags, record provenance.

ReFrame's build fixture runs it as ``python -m apptune.core.builds.steps --plan plan.json ...``
inside its stage directory and the environment's modules/variables; every
command here is an argument list (recipes are data and never reach a shell).
On failure it prints one line ``apptune: error: FILE: FIELD: what`` and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jinja2

from ... import paths
from ...constants import XFAIL_FILE
from ...errors import ApptuneError
from ...templating import data_environment
from ...yamlio import atomic_write_json, atomic_write_text, inside
from ..data.recipes import expected_build_failure, load_recipe, recipe_path, sha256_file
from . import buildcache, buildcost, buildtree, envfile, sources
from .buildid import WRAPPER_MODES, compiler_identity, library_versions
from .compilelines import LANGS, check_compile_lines
from .patching import apply_patches


def make_flags(flags) -> str:
    """Flags for a Makefile variable: shell-quoted (make runs recipes in sh), '$' escaped."""
    return " ".join(shlex.quote(f).replace("$", "$$") for f in flags)


def write_wrappers(plan: dict, stage: Path, src: Path, compilers: dict) -> dict[str, str]:
    """Compiler shims that log every command line and apply per-file overrides; a language
    whose compiler is a wrapper that showed its command (``compilers[lang]["wrapper"]``,
    :func:`apptune.core.builds.buildid.wrapper_flags`) runs the compiler behind it directly, with
    what the wrapper adds less the flags the variant decides."""
    bindir = stage / ".apptune" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    log = stage / "compile-lines.jsonl"
    if log.exists():
        log.unlink()
    cfg = {
        "real": {"cc": plan["cc"], "cxx": plan["cxx"], "ftn": plan["ftn"]},
        "log": str(log),
        "source_root": str(src.resolve()),
        "ladder": {lang: plan[key] for lang, key in LANGS.items()},
        "resolved": {
            lang: c["wrapper"]
            for lang, c in compilers.items()
            if (c.get("wrapper") or {}).get("runs")
        },
        "per_file": [
            {
                "files": r["files"],
                "ladder": r["ladder"],
                "flags": {lang: r[key] for lang, key in LANGS.items()},
            }
            for r in plan["per_file"]
        ],
    }
    cfgfile = stage / ".apptune" / "ccwrap.json"
    cfgfile.write_text(json.dumps(cfg, indent=1))
    wrapper = Path(__file__).with_name("ccwrap.py")
    shims = {}
    for lang in LANGS:
        shim = bindir / f"apptune-{lang}"
        shim.write_text(
            "#!/bin/sh\n"
            f"APPTUNE_CCWRAP_CONFIG={shlex.quote(str(cfgfile))} "
            f'exec {shlex.quote(sys.executable)} -S {shlex.quote(str(wrapper))} {lang} "$@"\n'
        )
        shim.chmod(0o755)
        shims[lang] = str(shim)
    return shims


def jinja_env() -> jinja2.Environment:
    env = data_environment(jinja2.FileSystemLoader(paths.recipes_dir() / "templates"))
    env.filters["makeflags"] = make_flags
    return env


def render_word(word: str, ctx: dict, field: str, app: str) -> str:
    """One word of a build step or product path: a template, never split or shell-parsed."""
    try:
        return jinja_env().from_string(word).render(**ctx)
    except jinja2.TemplateError as e:
        raise ApptuneError(paths.recipes_dir() / f"{app}.yaml", field, f"{word!r}: {e}") from None


def steps_of(recipe) -> list:
    """The build's commands: ``steps``, or the single make step of directory/args/targets."""
    from ...models import BuildStep

    b = recipe.build
    return list(b.steps) or [BuildStep(directory=b.directory, make=[*b.args, *b.targets])]


def step_argv(recipe, step, i: int, ctx: dict) -> list[str]:
    words = [
        render_word(w, ctx, f"build.steps[{i}]", recipe.name)
        for w in (step.make if step.make is not None else step.command)
    ]
    if step.make is not None:
        return ["make", f"-j{1 if step.serial else recipe.build.jobs}", *words]
    return words


def product_paths(recipe, ctx: dict) -> list[tuple[str, str]]:
    """(path under the source root, installed name) of every product."""
    out = []
    for p in recipe.build.products:
        src = p if isinstance(p, str) else p.src
        src = render_word(src, ctx, "build.products", recipe.name)
        out.append((src, Path(src).name if isinstance(p, str) else p.name))
    return out


def tree_paths(recipe, ctx: dict) -> list[str]:
    """The install tree's paths (``build.tree.paths``) rendered for ``ctx``."""
    tree = recipe.build.tree
    words = tree.paths if tree else []
    return [render_word(p, ctx, "build.tree.paths", recipe.name) for p in words]


def rendered_templates(recipe, ctx: dict) -> dict[str, str]:
    """The build's template files (``build.templates``) rendered for ``ctx``: dest -> text."""
    env = jinja_env()
    out = {}
    for t in recipe.build.templates:
        try:
            out[t.dest] = env.get_template(t.src).render(**ctx)
        except jinja2.TemplateError as e:
            raise ApptuneError(
                paths.recipes_dir() / "templates" / t.src, "template", str(e)
            ) from None
    return out


def render_templates(recipe, plan: dict, src: Path, shims: dict) -> None:
    ctx = dict(plan, cc=shims["cc"], cxx=shims["cxx"], ftn=shims["ftn"])
    for i, (name, text) in enumerate(rendered_templates(recipe, ctx).items()):
        dest = src / name
        if not inside(src, dest):
            raise ApptuneError(
                recipe_path(recipe.name),
                f"build.templates[{i}].dest",
                f"{name} leads outside the source tree (an absolute path, '..' or a "
                "symbolic link on the way)",
            )
        # a link the source tree has at dest is replaced, never written through
        atomic_write_text(dest, text)


#: What the build's words see as the compiler wrappers when its cache key is computed: the
#: wrappers live in each build's own stage, and the compilers behind them are in the plan.
KEY_WRAPPERS = {
    "cc": "<apptune cc wrapper>",
    "cxx": "<apptune cxx wrapper>",
    "ftn": "<apptune ftn wrapper>",
}


def cache_inputs(recipe, plan: dict, source_sha256: str, compilers: dict, libraries: dict) -> dict:
    """What the build cache keys this build by: what resolves into this one build, not whole
    data files. The plan holds its environment's compilers, its ladder's flags, its family's
    flags from the recipe, its axes' libraries and flags, its patches and per-file rules;
    the build's commands, product paths and template files are keyed as rendered for this
    plan. So a change to another environment's flags (another family's ladder or
    ``family_flags``, a template's branch for another family) keeps this build's key."""
    ctx = dict(plan, **KEY_WRAPPERS)
    b = recipe.build
    build = {
        "system": b.system,
        "languages": list(b.languages),
        "env_file": b.env_file.model_dump() if b.env_file else None,
        "steps": [
            {"directory": st.directory, "argv": step_argv(recipe, st, i, ctx)}
            for i, st in enumerate(steps_of(recipe))
        ],
        "products": product_paths(recipe, ctx),
    }
    if b.tree is not None:  # only where declared: other builds keep their keys' shape
        build["tree"] = {"paths": tree_paths(recipe, ctx), **b.tree.model_dump(exclude={"paths"})}
    return buildcache.key_inputs(
        plan, source_sha256, build, rendered_templates(recipe, ctx), compilers, libraries
    )


def component_tarball(recipe, tarball: Path, index: int) -> Path:
    """The source's component ``index``, fetched beside the main tarball
    (:func:`apptune.core.builds.sources.fetch`)."""
    c = recipe.source.components[index]
    f = tarball.parent / c.file
    if not f.is_file():
        raise ApptuneError(
            recipe_path(recipe.name),
            f"source.components[{index}]",
            f"{c.file} is not in {tarball.parent} (python -m apptune.core.builds.sources "
            f"{recipe.name} fetches it)",
        )
    return f


def source_identity(recipe, tarball: Path) -> str:
    """The source's sha256, and each component's after it: a change to any is another build."""
    digests = [sha256_file(tarball)] + [
        sha256_file(component_tarball(recipe, tarball, i))
        for i in range(len(recipe.source.components))
    ]
    return ";".join(digests)


def unpack_components(recipe, tarball: Path, src: Path) -> list[dict]:
    """Unpack each component into its ``dest`` of the source tree; return their file names
    and sha256 for the provenance."""
    out = []
    for i, c in enumerate(recipe.source.components):
        f = component_tarball(recipe, tarball, i)
        if not inside(src, src / c.dest):
            raise ApptuneError(
                recipe_path(recipe.name),
                f"source.components[{i}].dest",
                f"{c.dest} leads outside the source tree",
            )
        sources.unpack(f, src / c.dest, c.strip_components)
        out.append({"file": c.file, "sha256": sha256_file(f)})
    return out


class ExpectedFailure(Exception):
    """The build failed the way the recipe's ``build.expected_failures`` entry says."""

    def __init__(self, index: int, reason: str, matched: str, step: int):
        super().__init__(reason)
        self.record = {
            "expected_failure": index,
            "reason": reason,
            "compiler_said": matched,
            "step": step,
        }


def run_streamed(cmd: list[str], cwd: Path, env: dict, pattern=None) -> tuple[int, str | None]:
    """Run a command, passing its output through; return its status and the first
    output line matching ``pattern`` (a known compiler failure), if any."""
    import threading

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    found: list[str] = []

    def pump(src, dest):
        for raw in iter(src.readline, b""):
            dest.buffer.write(raw)
            dest.flush()
            if pattern is not None and not found:
                line = raw.decode(errors="replace").strip()
                if pattern.search(line):
                    found.append(line)
        src.close()

    threads = [
        threading.Thread(target=pump, args=(proc.stdout, sys.stdout)),
        threading.Thread(target=pump, args=(proc.stderr, sys.stderr)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return proc.wait(), (found[0] if found else None)


def build(plan: dict, tarball: Path, stage: Path, use_cache: bool = True) -> dict:
    """Build the plan in ``stage`` (or restore it from the build cache); return provenance."""
    recipe = load_recipe(plan["app"])
    t0 = time.monotonic()
    compilers = compiler_identity(plan, recipe.build.languages)
    libraries = library_versions(plan)
    inputs = cache_inputs(recipe, plan, source_identity(recipe, tarball), compilers, libraries)
    key = buildcache.key_of(inputs)
    if not use_cache:
        prov = _build(recipe, plan, tarball, stage, compilers, libraries, t0)
        prov["cache"] = {"hit": False, "key": key, "used": False}
        atomic_write_json(stage / "provenance.json", prov)
        return prov
    what = f"{recipe.name} {plan.get('environment')}/{plan.get('variant')}"
    # a second run that needs this build while another builds it waits, saying so, and uses it
    wait = buildcost.Waiting(stage, what)
    with buildcache.locked(key, f"the build of {what} into {stage.resolve()}", wait):
        entry, note = buildcache.lookup(key)
        if note:
            print(f"apptune: {note}", flush=True)
        wait.ended(stored=entry is not None)
        if entry is not None and _is_expected_failure(entry):
            replay = _replay_expected_failure(entry, recipe, plan)
            if replay is not None:
                raise replay
            entry = None  # the recipe no longer expects this failure: build again
        if entry is not None:
            buildcache.restore(entry, stage)
            buildtree.run_environment(recipe, stage)  # the tree's paths where it landed
            prov = json.loads((stage / "provenance.json").read_text())
            prov["cache"] = {
                "hit": True,
                "key": key,
                "entry": str(entry.path),
                "restore_seconds": round(time.monotonic() - t0, 2),
            }
            atomic_write_json(stage / "provenance.json", prov)
            print(f"apptune: build cache hit {key[:16]}: restored {restored(entry)}", flush=True)
            return prov
        buildcost.announce(recipe, plan, stage)
        try:
            prov = _build(recipe, plan, tarball, stage, compilers, libraries, t0)
        except ExpectedFailure as e:
            # the same inputs fail the same way: later runs replay the failure (the
            # compiler's message included) instead of compiling up to it again
            atomic_write_json(stage / XFAIL_FILE, e.record)
            buildcache.store(key, inputs, stage, [XFAIL_FILE])
            raise
        prov["cache"] = {"hit": False, "key": key}
        atomic_write_json(stage / "provenance.json", prov)
        files = [p["file"] for p in prov["products"]] + ["provenance.json", "compile-lines.jsonl"]
        files += [f["file"] for f in buildtree.tree_entries(stage)]
        seconds, compiles = prov["build_seconds"], prov["compile_lines"]["compiles"]
        buildcache.store(key, inputs, stage, files, build_seconds=seconds, compiles=compiles)
    buildcache.prune()
    return prov


def restored(entry) -> str:
    """The restored files, by name; an install tree's as a count."""
    names = [f["file"] for f in entry.manifest["files"]]
    tree = [n for n in names if n.startswith(buildtree.TREE + "/")]
    out = ", ".join(n for n in names if n not in tree)
    return out + (f" and an install tree of {len(tree)} files" if tree else "")


def _is_expected_failure(entry) -> bool:
    return [f["file"] for f in entry.manifest["files"]] == [XFAIL_FILE]


def _replay_expected_failure(entry, recipe, plan: dict) -> ExpectedFailure | None:
    """The cached expected failure, if the recipe still expects it (its pattern still
    matches what the compiler said); None when it no longer does."""
    record = json.loads((entry.path / "files" / XFAIL_FILE).read_text())
    xfail = expected_build_failure(recipe, plan["environment"], plan["variant"])
    if not xfail or not re.search(xfail[1].match, record["compiler_said"]):
        return None
    print(
        f"apptune: build cache hit {entry.key[:16]}: this build failed before with the same "
        "sources, flags and compilers; replaying its expected failure",
        flush=True,
    )
    e = ExpectedFailure(xfail[0], xfail[1].reason, record["compiler_said"], record["step"])
    e.record["cached"] = True
    return e


def _build(
    recipe, plan: dict, tarball: Path, stage: Path, compilers: dict, libraries: dict, t0: float
) -> dict:
    src = stage / "src"
    if (stage / XFAIL_FILE).exists():
        (stage / XFAIL_FILE).unlink()
    if src.exists():
        shutil.rmtree(src)  # a flag change must never reuse stale objects
    sources.unpack(tarball, src, recipe.source.strip_components)
    components = unpack_components(recipe, tarball, src)
    apply_patches(plan, src)
    shims = write_wrappers(plan, stage, src, compilers)
    render_templates(recipe, plan, src, shims)
    env = dict(
        os.environ,
        CC=shims["cc"],
        CXX=shims["cxx"],
        FC=shims["ftn"],
        F77=shims["ftn"],
        MPICC=shims["cc"],
        MPICXX=shims["cxx"],
        MPIF90=shims["ftn"],
    )
    ctx = dict(plan, cc=shims["cc"], cxx=shims["cxx"], ftn=shims["ftn"])
    rfile = paths.recipes_dir() / f"{plan['app']}.yaml"
    if (ef := recipe.build.env_file) is not None:  # e.g. OpenFOAM's etc/bashrc, read safely
        env.update(envfile.read(src / ef.file, ef.args, env, where=(rfile, "build.env_file")))
    xfail = expected_build_failure(recipe, plan["environment"], plan["variant"])
    pattern = re.compile(xfail[1].match) if xfail else None
    matched = None  # the known message, from any step so far (a makefile may carry on past it)
    for i, step in enumerate(steps_of(recipe)):
        cmd = step_argv(recipe, step, i, ctx)
        print(f"apptune: running (in {step.directory}) " + shlex.join(cmd), flush=True)
        try:
            rc, found = run_streamed(
                cmd, src / step.directory, env, pattern if matched is None else None
            )
        except OSError as e:
            raise ApptuneError(rfile, f"build.steps[{i}]", f"cannot run {cmd[0]}: {e}") from None
        matched = matched or found
        if rc != 0:
            if matched:
                raise ExpectedFailure(xfail[0], xfail[1].reason, matched, i)
            raise ApptuneError(
                rfile,
                f"build.steps[{i}]" if recipe.build.steps else "build",
                f"{cmd[0]} exited with status {rc} (its output is above in the build log)",
            )
    products = []
    for rel, name in product_paths(recipe, ctx):
        f = src / rel
        if not f.is_file():
            raise ApptuneError(rfile, "build.products", f"{rel} was not produced by the build")
        shutil.copy2(f, stage / name)
        products.append({"file": name, "sha256": sha256_file(f)})
    tree = None
    if recipe.build.tree is not None:
        buildtree.copy_tree(tree_paths(recipe, ctx), src, stage, recipe.name)
        entries = buildtree.tree_entries(stage)
        tree = {
            "paths": tree_paths(recipe, ctx),
            "files": len(entries),
            "bytes": sum((stage / f["file"]).stat().st_size for f in entries if "link" not in f),
        }
    buildtree.run_environment(recipe, stage)
    lines = check_compile_lines(plan, stage / "compile-lines.jsonl")
    return {
        "app": plan["app"],
        "version": plan["version"],
        "variant": plan["variant"],
        "environment": plan["environment"],
        "family": plan["family"],
        "source": {"file": tarball.name, "sha256": sha256_file(tarball)}
        | ({"components": components} if components else {}),
        "patches": [{"file": p["file"], "sha256": p["sha256"]} for p in plan["patches"]],
        "flags": {
            "cflags": plan["cflags"],
            "fflags": plan["fflags"],
            "cppflags": plan["cppflags"],
            "ldflags": plan["ldflags"],
            "per_file": plan["per_file"],
        },
        "axes": plan["axes"],
        "compilers": compilers,
        "libraries": libraries,
        "compile_lines": lines,
        "products": products,
        "tree": tree,
        "build_seconds": round(time.monotonic() - t0, 2),
        "host": platform.node(),
        "plan_sha256": buildcache.digest(plan),
    }


def removed_said(prov: dict) -> str:
    """``; removed from what the wrappers add: -O2 (mpifort)``, or nothing."""
    gone: dict[str, list[str]] = {}
    for c in prov.get("compilers", {}).values():
        w = c.get("wrapper") or {}
        for f in (f for mode in WRAPPER_MODES for f in (w.get(mode) or {}).get("removed", [])):
            if f not in gone.setdefault(c["command"], []):
                gone[c["command"]].append(f)
    said = ", ".join(f"{' '.join(fs)} ({cmd})" for cmd, fs in gone.items() if fs)
    return f"; removed from what the wrappers add: {said}" if said else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apptune.core.builds.steps")
    ap.add_argument("--plan", required=True, type=Path)
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--stage", default=Path.cwd(), type=Path)
    ap.add_argument("--no-cache", action="store_true", help="build even if the build cache has it")
    a = ap.parse_args(argv)
    try:
        plan = json.loads(a.plan.read_text())
        # APPTUNE_USE_BUILD_CACHE=0 in the environment of `apptune run` or `reframe` reaches
        # every build job (ReFrame's -S does not reach the checks' build fixtures)
        off = a.no_cache or os.environ.get("APPTUNE_USE_BUILD_CACHE", "1") == "0"
        prov = build(plan, a.source.resolve(), a.stage.resolve(), use_cache=not off)
    except ApptuneError as e:
        print(f"apptune: error: {e}", file=sys.stderr, flush=True)
        return 1
    except ExpectedFailure as e:
        # not an error of this run: the check reports it as XFAIL with the reason
        atomic_write_json(a.stage.resolve() / XFAIL_FILE, e.record)
        print(
            f"apptune: expected build failure: {e.record['reason']} "
            f"(compiler said: {e.record['compiler_said']})",
            flush=True,
        )
        return 0
    how = (
        "restored from the build cache"
        if prov["cache"]["hit"]
        else f"built in {prov['build_seconds']} s"
    )
    print(
        f"apptune: {prov['app']} {prov['variant']} with {prov['environment']} {how}; "
        f"{prov['compile_lines']['compiles']} compile lines checked{removed_said(prov)}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
