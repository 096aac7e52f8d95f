"""Source tarballs: local mirror first, then the download cache, then the origin.

Every file is checked against the recipe's pinned sha256 before it is used or
cached; a mismatch is refused, never "fixed" by downloading again silently.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from . import paths
from .errors import ApptuneError
from .models import Recipe
from .recipes import recipe_path, sha256_file


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _check(path: Path, recipe: Recipe, origin: str) -> None:
    got = sha256_file(path)
    if got != recipe.source.sha256:
        raise ApptuneError(recipe_path(recipe.name), "source.sha256",
                           f"checksum mismatch for {path.name} from {origin}: expected "
                           f"{recipe.source.sha256}, got {got}; refusing to use it")


def debian_orig_uri(recipe: Recipe) -> str:
    """Ask apt (with the machine's deb-src entries) where the orig tarball is."""
    deb = recipe.source.debian
    spec = f"{deb.package}={deb.version}"
    if shutil.which("apt-get") is None:
        raise ApptuneError(recipe_path(recipe.name), "source.debian",
                           "apt-get not found: cannot fetch Debian source packages on this machine; "
                           "put the tarball in $APPTUNE_SOURCE_MIRROR")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(["apt-get", "source", "--print-uris", "--only-source", spec],
                              cwd=tmp, capture_output=True, text=True)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise ApptuneError(recipe_path(recipe.name), "source.debian",
                           f"apt-get source {spec} failed: {reason} (is deb-src enabled? "
                           f"ci/bootstrap.sh enables it)")
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("'") and parts[1] == recipe.source.file:
            return parts[0].strip("'")
    raise ApptuneError(recipe_path(recipe.name), "source.file",
                       f"{recipe.source.file} is not among the files of Debian source {spec}")


def _download(uri: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(uri, timeout=120) as r, open(dest, "wb") as f:
            shutil.copyfileobj(r, f)
    except OSError as e:
        raise ApptuneError(None, "source", f"download of {uri.rsplit('/', 1)[-1]} failed: {e}") from None


def fetch(recipe: Recipe, cache: Path | None = None, mirror: Path | None = None) -> Path:
    """Return the path of the verified tarball in the download cache."""
    cache = cache or paths.cache_dir()
    mirror = mirror if mirror is not None else paths.mirror_dir()
    name = recipe.source.file
    target = cache / "sources" / name
    with _locked(cache / "sources" / f".{name}.lock"):
        if mirror is not None and (mirror / name).is_file():
            _check(mirror / name, recipe, f"mirror {mirror}")
            if not target.exists() or sha256_file(target) != recipe.source.sha256:
                _copy_atomic(mirror / name, target)
            return target
        if target.is_file():
            _check(target, recipe, f"cache {target.parent}")
            return target
        uri = debian_orig_uri(recipe) if recipe.source.debian else recipe.source.url
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=target.parent)
        os.close(fd)
        try:
            _download(uri, Path(tmp))
            _check(Path(tmp), recipe, "download")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target


def _copy_atomic(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def unpack(tarball: Path, dest: Path, strip_components: int) -> None:
    """Unpack with Python's tarfile ('data' filter: no absolute paths or links out)."""
    import tarfile
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tf:
        members = []
        for m in tf.getmembers():
            parts = Path(m.name).parts[strip_components:]
            if not parts:
                continue
            m.name = str(Path(*parts))
            if m.islnk():
                lparts = Path(m.linkname).parts[strip_components:]
                m.linkname = str(Path(*lparts)) if lparts else m.linkname
            members.append(m)
        tf.extractall(dest, members=members, filter="data")


def main(argv=None) -> int:
    """``python -m apptune.sources APP``: fetch and verify an application's source."""
    import sys
    from .recipes import load_recipe
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m apptune.sources APP", file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(args[0])
        path = fetch(recipe)
    except ApptuneError as e:
        print(f"apptune: error: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"apptune: source {path} verified (sha256 {recipe.source.sha256})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
