"""The build of an install: a variant that is not compiled here (``installs.NAME`` of a
recipe): the distribution's packages, or a site's module.

    python -m apptune.core.builds.installed --app APP --variant NAME --environment ENV [--stage DIR]

ReFrame's :class:`apptune.rfm.InstalledBuild` fixture runs it in its stage directory, in the
job environment of its ReFrame environment with the install's modules loaded. It

* reads the install's environment file (:mod:`apptune.core.builds.envfile`: sourced by one fixed
  bash command, its path an argument) and applies its explicit ``env`` after it;
* finds each of the install's ``programs`` on that environment's PATH and links it into
  the stage under its name, where the run finds a build's products;
* unpacks the parts of the recipe's source its run reads (``source_paths``: GROMACS's
  regression tests) from the tarballs that hold them, fetched and checked against their
  pinned sha256, under the stage's ``tree/`` as a compiled build keeps its tree;
* writes ``install-env.json`` (the variables the run gets) and ``provenance.json``: the
  Debian packages and their versions, the modules, the environment file's sha256, the
  variables set and each program's path and sha256, like a compiled build's provenance.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...errors import ApptuneError
from ...yamlio import atomic_write_json, inside
from ..data.recipes import install_of, load_recipe, recipe_path, sha256_file
from . import envfile, sources
from .buildtree import ENV_FILE, TREE, link_stays_inside, tree_entries


def package_versions(packages: list[str]) -> dict[str, str | None]:
    """Each Debian package's installed version (None: not installed, or no dpkg)."""
    out: dict[str, str | None] = {}
    for p in packages:
        try:
            q = subprocess.run(
                ["dpkg-query", "-W", "-f=${Status}\t${Version}", p],
                capture_output=True,
                text=True,
            )
        except OSError:
            out[p] = None
            continue
        status, _, version = q.stdout.partition("\t")
        out[p] = version if "install ok installed" in status else None
    return out


def environment(install, base: dict[str, str], where: str) -> dict[str, str]:
    """The variables the install sets: its environment file's, then its ``env``."""
    out: dict[str, str] = {}
    if install.env_file is not None:
        out = envfile.read(
            install.env_file.file,
            install.env_file.args,
            base,
            where=(where, "env_file"),
        )
    out.update(install.env)
    return out


def build(app: str, variant: str, env_name: str, stage: Path) -> dict:
    """Resolve the install in ``stage``; return its provenance."""
    t0 = time.monotonic()
    recipe = load_recipe(app)
    rfile = recipe_path(app)
    install = install_of(recipe, variant)
    field = f"installs.{variant}"
    if install is None:
        raise ApptuneError(rfile, "installs", f"no install named '{variant}'")
    versions = package_versions(install.debian)
    absent = [p for p, v in versions.items() if v is None]
    if absent:
        raise ApptuneError(
            rfile,
            f"{field}.debian",
            f"Debian package {', '.join(absent)} not installed (ci/bootstrap.sh installs it)",
        )
    env_set = environment(install, dict(os.environ), f"{rfile}: {field}")
    path = env_set.get("PATH", os.environ.get("PATH", ""))
    products = []
    for name in install.programs:
        found = shutil.which(name, path=path)
        if found is None:
            raise ApptuneError(
                rfile,
                f"{field}.programs",
                f"{name} not found on the install's PATH ({path})",
            )
        link = stage / name
        link.unlink(missing_ok=True)
        link.symlink_to(found)
        products.append({"file": name, "path": found, "sha256": sha256_file(found)})
    source, tree = source_tree(recipe, install, field, stage)
    atomic_write_json(stage / ENV_FILE, env_set)
    ef = install.env_file
    prov = {
        "app": app,
        "version": recipe.version,
        "variant": variant,
        "environment": env_name,
        "install": {
            "name": variant,
            "description": install.description,
            "env_file": (
                {"file": ef.file, "args": ef.args, "sha256": sha256_file(ef.file)} if ef else None
            ),
            "env": env_set,
        },
        "packages": versions,
        "modules": list(install.modules) + _loaded_modules(),
        "products": products,
        **({"source": source, "tree": tree} if install.source_paths else {}),
        "build_seconds": round(time.monotonic() - t0, 2),
        "host": platform.node(),
    }
    atomic_write_json(stage / "provenance.json", prov)
    return prov


def source_tree(recipe, install, field: str, stage: Path) -> tuple[dict, dict]:
    """Unpack the install's ``source_paths`` under ``stage/tree`` with their paths in the
    source tree, from the tarballs that hold them (a component's path under its ``dest``,
    any other in the main tarball); return the tarballs taken and the tree, as a compiled
    build's provenance records them. Nothing is fetched for an install without them."""
    rfile = recipe_path(recipe.name)
    dest = stage / TREE
    if dest.exists():
        shutil.rmtree(dest)
    if not install.source_paths:
        return {}, {}
    comps = recipe.source.components
    holder = {}  # source path -> index of the component that holds it (None: the main tarball)
    for rel in install.source_paths:
        found = [i for i, c in enumerate(comps) if rel == c.dest or rel.startswith(c.dest + "/")]
        holder[rel] = found[0] if found else None
    taken: dict = {"components": []}
    with tempfile.TemporaryDirectory(prefix=".source-", dir=stage) as tmp:
        src = Path(tmp)
        if None in holder.values():
            tarball = sources.fetch(recipe)
            sources.unpack(tarball, src, recipe.source.strip_components)
            taken.update(file=tarball.name, sha256=sha256_file(tarball))
        for i in sorted({i for i in holder.values() if i is not None}):
            c = comps[i]
            tarball = sources.fetch_component(recipe, i)
            if not inside(src, src / c.dest):
                raise ApptuneError(
                    rfile, f"source.components[{i}].dest", f"{c.dest} leads outside the source tree"
                )
            sources.unpack(tarball, src / c.dest, c.strip_components)
            taken["components"].append({"file": c.file, "sha256": sha256_file(tarball)})
        for k, rel in enumerate(install.source_paths):
            p = src / rel
            if not p.exists():
                where = comps[holder[rel]].file if holder[rel] is not None else recipe.source.file
                raise ApptuneError(
                    rfile, f"{field}.source_paths[{k}]", f"{rel} is not in {where or 'the source'}"
                )
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, dest / rel)
    entries = tree_entries(stage)
    for f in entries:
        if "link" in f and not link_stays_inside(dest, stage / f["file"], f["link"]):
            raise ApptuneError(
                rfile,
                f"{field}.source_paths",
                f"{f['file']} is a symbolic link to {f['link']}, outside the tree",
            )
    tree = {
        "paths": list(install.source_paths),
        "files": len(entries),
        "bytes": sum((stage / f["file"]).stat().st_size for f in entries if "link" not in f),
    }
    return taken, tree


def _loaded_modules() -> list[str]:
    """What the module system says is loaded (``LOADEDMODULES``), besides the install's."""
    return [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]


def run_environment(build_dir: str | os.PathLike) -> dict[str, str]:
    """The variables the run of the build in ``build_dir`` gets: an install's, or a compiled
    build's install tree's (:mod:`apptune.core.builds.buildtree`); {} for a build of single
    files."""
    f = Path(build_dir, ENV_FILE)
    return json.loads(f.read_text()) if f.is_file() else {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m apptune.core.builds.installed")
    ap.add_argument("--app", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--environment", required=True)
    ap.add_argument("--stage", default=Path.cwd(), type=Path)
    a = ap.parse_args(argv)
    try:
        prov = build(a.app, a.variant, a.environment, a.stage.resolve())
    except ApptuneError as e:
        print(f"apptune: error: {e}", file=sys.stderr, flush=True)
        return 1
    pkgs = ", ".join(f"{p} {v}" for p, v in prov["packages"].items()) or "no Debian package"
    print(
        f"apptune: {a.app} {a.variant} with {a.environment}: installed ({pkgs}); "
        f"{len(prov['products'])} programs found",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
