"""A compiled build's install tree (``build.tree``): what its run needs beside the programs.

A large C++ code does not run from one file: OpenFOAM's solvers load their shared
libraries (``platforms/<arch>/lib``) and read their configuration (``etc/``) at run time;
a CMake project installs ``bin/``, ``lib/`` and ``share/`` under a prefix. The recipe
names those paths (``build.tree.paths``, relative to the source root); after the build
they are copied, with their relative paths and symbolic links, under the stage's
``tree/`` directory, which the build cache stores and restores like the products.

The run finds the tree through the same file an install's run reads
(:data:`ENV_FILE` in the build's stage): after every build and every
restore, ``build.tree.env_file`` (inside the tree) is read by apptune's one fixed bash
command (:mod:`apptune.core.builds.envfile`) and ``build.tree.env`` is applied after it, with
``{{ tree }}`` the tree's absolute path wherever it landed. A tree is never used through
the paths of the stage it was built in.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jinja2

from ...errors import ApptuneError
from ...templating import data_environment
from ...yamlio import atomic_write_json, inside
from ..data.recipes import recipe_path

#: The build's install tree, under its stage directory.
TREE = "tree"
#: The variables the run of a build gets, in its stage: an install's (its environment file's
#: and ``env``, :mod:`apptune.core.builds.installed`) or a compiled build's tree's.
ENV_FILE = "install-env.json"


def copy_tree(rels: list[str], src: Path, stage: Path, app: str) -> Path:
    """Copy each of ``rels`` (paths under ``src``) to ``stage/tree`` with its relative path;
    symbolic links stay links (one pointing out of the tree is refused)."""
    dest = stage / TREE
    if dest.exists() or dest.is_symlink():
        shutil.rmtree(dest) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
    dest.mkdir()
    for i, rel in enumerate(rels):
        p = src / rel
        if not inside(src, p) or not (p.exists() or p.is_symlink()):
            why = "leads outside the source tree" if not inside(src, p) else "was not built"
            raise ApptuneError(recipe_path(app), f"build.tree.paths[{i}]", f"{rel} {why}")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir() and not p.is_symlink():
            shutil.copytree(p, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(p, target, follow_symlinks=False)
    for f in tree_entries(stage):
        if "link" in f and not link_stays_inside(dest, stage / f["file"], f["link"]):
            raise ApptuneError(
                recipe_path(app),
                "build.tree.paths",
                f"{f['file']} is a symbolic link to {f['link']}, outside the tree",
            )
    return dest


def link_stays_inside(root: Path, link: Path, target: str) -> bool:
    """Whether a link's ``target`` (relative to the link) names a path inside ``root``."""
    if os.path.isabs(target):
        return False
    resolved = Path(os.path.normpath(link.parent / target))
    return resolved == root or root in resolved.parents


def tree_entries(stage: Path) -> list[dict]:
    """Every file and link of the stage's tree: ``{"file": "tree/...", "link": target}`` for
    a symbolic link, ``{"file": "tree/..."}`` for a regular file (empty directories are not
    kept)."""
    root = stage / TREE
    out = []
    if not root.is_dir():
        return out
    for d, dirs, files in os.walk(root):
        for name in sorted(files) + sorted(x for x in dirs if (Path(d) / x).is_symlink()):
            p = Path(d) / name
            rel = p.relative_to(stage).as_posix()
            out.append({"file": rel, "link": os.readlink(p)} if p.is_symlink() else {"file": rel})
        dirs[:] = sorted(x for x in dirs if not (Path(d) / x).is_symlink())
    return sorted(out, key=lambda f: f["file"])


def run_environment(recipe, stage: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variables the run of the build in ``stage`` gets from its tree (its environment
    file's, then ``build.tree.env`` with ``{{ tree }}``), written to ``stage``'s
    :data:`ENV_FILE`; {} and no file for a build without a tree."""
    from . import envfile

    spec = recipe.build.tree
    (stage / ENV_FILE).unlink(missing_ok=True)
    if spec is None:
        return {}
    root = (stage / TREE).resolve()
    out: dict[str, str] = {}
    if spec.env_file is not None:
        out = envfile.read(
            root / spec.env_file.file,
            spec.env_file.args,
            dict(os.environ if base is None else base),
            where=(recipe_path(recipe.name), "build.tree.env_file"),
        )
    env = data_environment()
    for name, value in spec.env.items():
        try:
            out[name] = env.from_string(value).render(tree=str(root))
        except jinja2.TemplateError as e:
            raise ApptuneError(recipe_path(recipe.name), f"build.tree.env.{name}", str(e)) from None
    atomic_write_json(stage / ENV_FILE, out)
    return out
