"""Source tarballs: local mirror first, then the download cache, then the origin.

Every file is checked against the recipe's pinned sha256 before it is used or
cached. A copy that does not match is never deleted (the copy may be right and the
pin mistyped): the download cache's copy is kept aside under its own sha256 and
fetched again; a bad mirror copy is passed over when the cache has a good one. The
unpacked tree has no link leading out of it (:func:`unpack`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from ... import paths
from ...errors import ApptuneError
from ...locks import locked
from ...models import Recipe
from ...models.source import url_problem
from ...yamlio import atomic_copy
from ..data.recipes import recipe_path, sha256_file


def debian_orig_uri(recipe: Recipe, file: str | None = None) -> str:
    """Ask apt (with the machine's deb-src entries) where the orig tarball is (or ``file``,
    another file of the same source package: an ``orig-COMPONENT`` tarball)."""
    file = file or recipe.source.file
    deb = recipe.source.debian
    spec = f"{deb.package}={deb.version}"
    if shutil.which("apt-get") is None:
        raise ApptuneError(
            recipe_path(recipe.name),
            "source.debian",
            "apt-get not found: cannot fetch Debian source packages on this machine; "
            "put the tarball in $APPTUNE_SOURCE_MIRROR",
        )
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["apt-get", "source", "--print-uris", "--only-source", spec],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise ApptuneError(
            recipe_path(recipe.name),
            "source.debian",
            f"apt-get source {spec} failed: {reason} (is deb-src enabled? "
            f"ci/bootstrap.sh enables it)",
        )
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("'") and parts[1] == file:
            return parts[0].strip("'")
    raise ApptuneError(
        recipe_path(recipe.name),
        "source.file" if file == recipe.source.file else "source.components",
        f"{file} is not among the files of Debian source {spec}",
    )


def _download(uri: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(uri, timeout=120) as r, open(dest, "wb") as f:
            shutil.copyfileobj(r, f)
    except OSError as e:
        name = urllib.parse.unquote(uri.rsplit("/", 1)[-1])
        raise ApptuneError(None, "source", f"download of {name} failed: {e}") from None


def tree_digest(directory: Path) -> str:
    """sha256 over the relative paths, modes and contents of every file, in order."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file() and not _ignored(p, directory)):
        rel = f.relative_to(directory).as_posix()
        h.update(f"{rel}\0{f.stat().st_mode & 0o111 and 1}\0".encode())
        h.update(sha256_file(f).encode())
    return h.hexdigest()


def _ignored(p: Path, root: Path) -> bool:
    parts = p.relative_to(root).parts
    return any(x.startswith(".") or x == "__pycache__" for x in parts) or p.suffix in (
        ".o",
        ".mod",
        ".pyc",
    )


def local_source(recipe: Recipe) -> Path:
    d = (paths.root() / recipe.source.path).resolve()
    if paths.root().resolve() not in d.parents:
        raise ApptuneError(
            recipe_path(recipe.name),
            "source.path",
            f"{recipe.source.path} is outside the repository",
        )
    if not d.is_dir():
        raise ApptuneError(recipe_path(recipe.name), "source.path", f"directory {d} does not exist")
    return d


def tarball_path(recipe: Recipe, cache: Path | None = None) -> Path:
    """Where the build takes the source tarball from (after :func:`fetch`)."""
    cache = cache or paths.cache_dir()
    if recipe.source.path is not None:
        return cache / "sources" / f"{recipe.name}-{tree_digest(local_source(recipe))[:16]}.tar.gz"
    return cache / "sources" / recipe.source.file


def _pack_local(recipe: Recipe, target: Path) -> Path:
    """A reproducible tarball of a repository directory (sorted, owner 0, mtime 0)."""
    import gzip

    d = local_source(recipe)
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.parent / f".{target.name}.lock"):
        if target.is_file():
            return target
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            with (
                open(tmp, "wb") as raw,
                gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf,
            ):
                for f in sorted(p for p in d.rglob("*") if p.is_file() and not _ignored(p, d)):
                    info = tf.gettarinfo(
                        str(f), arcname=f"{recipe.name}/{f.relative_to(d).as_posix()}"
                    )
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.mtime = 0
                    info.mode = 0o755 if f.stat().st_mode & 0o111 else 0o644
                    with open(f, "rb") as fh:
                        tf.addfile(info, fh)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target


def fetch(recipe: Recipe, cache: Path | None = None, mirror: Path | None = None) -> Path:
    """Return the path of the verified tarball in the download cache, after fetching and
    verifying each of the source's ``components`` beside it (:func:`fetch_file`)."""
    if recipe.source.path is not None:
        return _pack_local(recipe, tarball_path(recipe, cache))
    for i in range(len(recipe.source.components)):
        fetch_component(recipe, i, cache, mirror)
    uri = (lambda: debian_orig_uri(recipe)) if recipe.source.debian else recipe.source.url
    return fetch_file(
        recipe, recipe.source.file, recipe.source.sha256, uri, cache, mirror, "source.sha256"
    )


def fetch_component(
    recipe: Recipe, index: int, cache: Path | None = None, mirror: Path | None = None
) -> Path:
    """Return the path of the source's verified component ``index`` in the download cache,
    fetched alone (what an install's run reads of the source: GROMACS's regression tests)."""
    c = recipe.source.components[index]
    uri = (lambda: debian_orig_uri(recipe, c.file)) if recipe.source.debian else c.url
    field = f"source.components[{index}].sha256"
    return fetch_file(recipe, c.file, c.sha256, uri, cache, mirror, field)


def fetch_file(
    recipe: Recipe,
    name: str,
    pin: str,
    uri,
    cache: Path | None = None,
    mirror: Path | None = None,
    field: str = "source.sha256",
) -> Path:
    """Return the path of the verified tarball ``name`` (pinned by ``pin``; ``uri`` its
    address, or a function that finds it) in the download cache.

    A copy that does not match the pin is never deleted: the cache's copy (and a
    download) is kept aside under its own sha256 (:func:`kept_path`), where it is found
    again once a recipe pins that hash (a mistyped pin, corrected), and the mirror's copy
    is left alone: a good copy in the cache is used instead, with a warning."""
    cache = cache or paths.cache_dir()
    mirror = mirror if mirror is not None else paths.mirror_dir()
    target = cache / "sources" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(cache / "sources" / f".{name}.lock"):
        kept = ""
        if target.is_file():
            got = sha256_file(target)
            if got != pin:
                aside = _keep_aside(target, got, cache)
                print(
                    f"apptune: cached {target} has sha256 {got}, not the pinned {pin}: "
                    f"kept it as {aside}",
                    flush=True,
                )
                kept = f" (the cached copy, sha256 {got}, is kept as {aside})"
        if not target.is_file():
            pinned = kept_path(cache, pin, name)
            if pinned.is_file() and sha256_file(pinned) == pin:
                os.replace(pinned, target)  # a copy kept aside before: the pin names it now
        have = target.is_file()
        theirs = mirror / name if mirror is not None else None
        if theirs is not None and theirs.is_file():
            got = sha256_file(theirs)
            if got == pin:
                if not have:
                    atomic_copy(theirs, target)
                return target
            if have:
                print(
                    f"apptune: warning: mirror copy {theirs} has sha256 {got}, not the pinned "
                    f"{pin}: using the good copy in the download cache; replace the mirror's "
                    f"copy with it: cp {target} {theirs}",
                    flush=True,
                )
                return target
            raise ApptuneError(
                theirs,
                "sha256",
                f"this copy (in $APPTUNE_SOURCE_MIRROR) is not the tarball "
                f"build-recipes/{recipe.name}.yaml pins: expected {pin}, got {got}; replace "
                f"it with the file whose sha256 is {pin}, or remove it and apptune downloads "
                f"it{kept}",
            )
        if have:
            return target
        if not callable(uri):  # the recipe's own address (apt's are apt's)
            _check_address(recipe, uri, pin, field)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=target.parent)
        os.close(fd)
        try:
            if callable(uri):
                uri = uri()
            try:
                _download(uri, Path(tmp))
            except ApptuneError as e:
                raise ApptuneError(e.file, e.field, e.message + kept) from None
            got = sha256_file(tmp)
            if got != pin:
                aside = _keep_aside(Path(tmp), got, cache, name)
                raise ApptuneError(
                    recipe_path(recipe.name),
                    field,
                    f"the download of {name} has sha256 {got}, not the pinned {pin}; kept "
                    f"it as {aside} (if the pin is mistyped, correct it: the kept copy is "
                    f"used){kept}",
                )
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target


def _check_address(recipe: Recipe, uri: str | None, pin: str, field: str) -> None:
    """A source's ``url`` before anything is fetched from it: https:// or file://
    (:func:`apptune.models.source.url_problem`); a file:// one must be a tarball whose
    sha256 is the pin, or nothing of it is copied (a file that is not the source, say
    /etc/passwd, never reaches the download cache, not even kept aside)."""
    where = recipe_path(recipe.name)
    why = url_problem(uri or "")
    if why:
        raise ApptuneError(where, field.replace("sha256", "url"), why)
    if not uri.lower().startswith("file://"):
        return
    local = Path(urllib.request.url2pathname(urllib.parse.urlparse(uri).path))
    if not local.is_file():
        raise ApptuneError(where, field.replace("sha256", "url"), f"{local}: no such file")
    if not tarfile.is_tarfile(local):
        raise ApptuneError(
            where, field.replace("sha256", "url"), f"{local} is not a tarball: nothing copied"
        )
    got = sha256_file(local)
    if got != pin:
        raise ApptuneError(
            where,
            field,
            f"{local} has sha256 {got}, not the pinned {pin}: nothing copied",
        )


def kept_path(cache: Path, sha256: str, name: str) -> Path:
    """Where a tarball whose sha256 is not the recipe's pin is kept (never deleted: it may be
    the good copy, and the pin the mistake)."""
    return cache / "sources" / "by-sha256" / sha256 / name


def _keep_aside(path: Path, sha256: str, cache: Path, name: str | None = None) -> Path:
    dest = kept_path(cache, sha256, name or path.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    return dest


def unpack(tarball: Path, dest: Path, strip_components: int) -> list[str]:
    """Unpack with Python's tarfile ('data' filter: no absolute paths or links out), then
    check the tree itself: no link in it may lead outside ``dest``.

    Symbolic links that point outside the tree (QE 6.7 ships one to an absolute path
    in its GUI) are left out, never followed, and so are hard links to them; their names
    are returned (and printed). A hard link to a file that is not an earlier file of the
    archive (an absolute one, one leading out) is refused. The tree check catches what
    the filter of the Python at hand lets through (before 3.11.13 and 3.12.11, a hard link
    to a left-out symbolic link made tarfile extract that symbolic link after all).
    """
    dest.mkdir(parents=True, exist_ok=True)
    data_filter = getattr(tarfile, "data_filter", None) or _data_filter
    skipped: list[str] = []
    left_out: set[str] = set()

    def safe(member, path):
        if member.islnk() and member.linkname in left_out:
            # the hard link would be the left-out symbolic link itself
            left_out.add(member.name)
            skipped.append(f"{member.name} -> {member.linkname} (a hard link to it)")
            return None
        try:
            return data_filter(member, path)
        except (_LinkOut, *_link_errors()):
            if member.issym():
                left_out.add(member.name)
                skipped.append(f"{member.name} -> {member.linkname}")
                return None
            raise

    try:
        with tarfile.open(tarball) as tf:
            members, names = [], set()
            for m in tf.getmembers():
                original = m.name
                parts = Path(m.name).parts[strip_components:]
                if not parts:
                    continue
                m.name = str(Path(*parts))
                if m.islnk():
                    lparts = Path(m.linkname).parts
                    target = str(Path(*lparts[strip_components:])) if lparts else ""
                    if Path(m.linkname).is_absolute() or target not in names:
                        raise ApptuneError(
                            tarball,
                            original,
                            f"a hard link to {m.linkname}, which is not a file unpacked "
                            "before it inside the source tree: refusing to unpack",
                        )
                    m.linkname = target
                names.add(m.name)
                members.append(m)
            if data_filter is _data_filter:  # a Python before 3.11.4: filtered here
                members = [m for m in (safe(m, str(dest)) for m in members) if m is not None]
                tf.extractall(dest, members=members)
            else:
                tf.extractall(dest, members=members, filter=safe)
    except _Refused as e:
        raise ApptuneError(tarball, e.args[0], e.args[1]) from None
    except (tarfile.TarError, OSError) as e:
        raise ApptuneError(tarball, None, f"cannot unpack: {e}") from None
    skipped += _links_leading_out(tarball, dest)
    for s in skipped:
        print(f"apptune: left out symbolic link pointing outside the source tree: {s}", flush=True)
    return skipped


class _Refused(Exception):
    """A member the filter refuses: (its name, why)."""


class _LinkOut(_Refused):
    """A symbolic link leading out of the tree (left out, not refused)."""


def _link_errors() -> tuple:
    return tuple(
        getattr(tarfile, n)
        for n in ("AbsoluteLinkError", "LinkOutsideDestinationError")
        if hasattr(tarfile, n)
    )


def _data_filter(member, path: str):
    """tarfile's ``data`` filter for a Python that lacks it (Debian 12's 3.11.2): no
    absolute name or one leading out, no device or FIFO, no link leading out, no
    set-uid/gid bits, owner read/write kept, no ownership from the archive."""
    import copy

    name = member.name
    dest = os.path.realpath(path)
    if os.path.isabs(name) or not _within(dest, os.path.realpath(os.path.join(dest, name))):
        raise _Refused(name, "a path outside the source tree: refusing to unpack")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise _Refused(name, "a device or FIFO: refusing to unpack")
    if member.issym():
        target = os.path.join(dest, os.path.dirname(name), member.linkname)
        if os.path.isabs(member.linkname) or not _within(dest, os.path.realpath(target)):
            raise _LinkOut(name, member.linkname)
    m = copy.copy(member)
    m.uid = m.gid = 0
    m.uname = m.gname = ""
    if m.isfile() or m.isdir():
        m.mode = (m.mode & 0o755) | (0o600 if m.isfile() else 0o700)
    return m


def _links_leading_out(tarball: Path, dest: Path) -> list[str]:
    """Remove every symbolic link in the unpacked tree that resolves outside it (named in
    the list returned); refuse a file that has hard links outside the tree."""
    root = os.path.realpath(dest)
    removed: list[str] = []
    links: dict[tuple[int, int], list[str]] = {}
    for d, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, dest)
            if os.path.islink(p):
                if not _within(root, os.path.realpath(p)):
                    removed.append(f"{rel} -> {os.readlink(p)}")
                    os.unlink(p)
            elif not os.path.isdir(p) and st.st_nlink > 1:
                links.setdefault((st.st_dev, st.st_ino), []).append(rel)
    for names in links.values():
        p = dest / names[0]
        if len(names) < p.lstat().st_nlink:
            for n in names:
                (dest / n).unlink()
            raise ApptuneError(
                tarball,
                names[0],
                "unpacked as a hard link to a file outside the source tree: refusing to "
                "build from it",
            )
    return removed


def _within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def main(argv=None) -> int:
    """``python -m apptune.core.builds.sources APP``: fetch and verify an application's source."""
    import sys

    from ..data.recipes import load_recipe

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m apptune.core.builds.sources APP", file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(args[0])
        path = fetch(recipe)
    except ApptuneError as e:
        print(f"apptune: error: {e}", file=sys.stderr, flush=True)
        return 1
    pin = recipe.source.sha256 or f"{recipe.source.path} in this repository, tree {path.name}"
    print(f"apptune: source {path} verified (sha256 {pin})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
