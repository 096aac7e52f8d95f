"""The scratch directory of an I/O benchmark's run, on the job's node (the runner's side).

A recipe whose program writes data files (``run.scratch``) runs with a directory of its
own under the partition's scratch directory (``extras.scratch_dir``; ``scratch_dir:`` of a
partition in a cluster file; ``-S scratch_dir=DIR``): on a cluster the parallel file
system, here the local disk or a tmpfs. The runner (:mod:`apptune.core.run.runner`)

* checks it before the timed region: it exists, is a directory, is writable, and has room
  for what the run writes (the recipe's ``scratch.bytes``); each problem is one line naming
  the directory;
* records what is measured: the file system's type and mount point (``/proc/mounts``), its
  size and free space, and whether the run writes more than the node's memory (else the
  page cache may answer the reads);
* after the program, reads the files the recipe names (per-variable checksums of netCDF
  files, :mod:`apptune.core.verification.netcdf`) into a ``key=value`` file of the run directory,
  verified against the reference like any other output;
* removes the run's directory, whether the run passed, failed or was stopped, and when a
  step failed on a full file system, says so.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ...models import RunScratch

#: A file system with less free space than this after a failed step was full.
FULL_BYTES = 1 << 20


class ScratchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Path relative to the run's scratch directory.
    file: str
    #: Prefix of its fields (``chk``: ``chk.dens.crc32``).
    name: str
    format: str = "netcdf"
    #: The formula the program filled its zones by
    #: (:class:`apptune.core.verification.netcdf.ZoneFill`).
    fill: dict | None = None


class ScratchSpec(BaseModel):
    """The scratch part of the runner's spec (:class:`apptune.core.run.runner.Spec`)."""

    model_config = ConfigDict(extra="forbid")
    #: The site's scratch directory: it must exist.
    root: str
    #: Where the run writes: a new directory under ``root``, removed after the run.
    path: str
    #: What the run writes at most (None: not known, no free-space check).
    bytes: int | None = None
    #: Files read after the program, before the directory is removed.
    files: list[ScratchFile] = []
    #: The ``key=value`` file (in the run directory) their checksums go to.
    sums_file: str = "scratch-data.txt"


def mount_of(path: str) -> dict:
    """The mount point, file system type and device of ``path`` (the longest mount point of
    ``/proc/mounts`` that contains it)."""
    real = os.path.realpath(path)
    best = {"mount": "/", "fstype": None, "device": None}
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    depth = -1
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= depth:
            depth = len(mnt)
            best = {"mount": mnt, "fstype": parts[2], "device": parts[0]}
    return best


def memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def prepare(spec: ScratchSpec) -> tuple[dict, str | None]:
    """Check the scratch directory and make the run's directory in it; return what is
    measured (the record's ``scratch``) and a one-line problem, or None."""
    root = spec.root
    info: dict = {"root": root, "path": spec.path, "bytes": spec.bytes, **mount_of(root)}
    if not os.path.exists(root):
        return info, f"scratch directory {root} does not exist"
    if not os.path.isdir(root):
        return info, f"scratch directory {root} is not a directory"
    st = os.statvfs(root)
    info["size_bytes"] = st.f_blocks * st.f_frsize
    info["free_bytes"] = st.f_bavail * st.f_frsize
    mem = memory_bytes()
    info["memory_bytes"] = mem
    if spec.bytes is not None and mem:
        info["exceeds_memory"] = spec.bytes > mem
    where = f"scratch directory {root} ({info['fstype'] or 'unknown file system'})"
    if spec.bytes is not None and info["free_bytes"] < spec.bytes:
        return info, (
            f"{where} has {_mib(info['free_bytes'])} free; the run writes {_mib(spec.bytes)}"
        )
    try:
        os.mkdir(spec.path)
        probe = Path(spec.path, ".apptune-write-test")
        probe.write_bytes(b"x")
        probe.unlink()
    except OSError as e:
        return info, f"{where} is not writable: {e.strerror}"
    info["created"] = True
    return info, None


def full(spec: ScratchSpec, info: dict) -> str | None:
    """After a failed step: the sentence saying the scratch file system was full, or None."""
    try:
        st = os.statvfs(spec.root)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    info["free_bytes_after"] = free
    if free >= FULL_BYTES:
        return None
    return (
        f"scratch directory {spec.root} ({info.get('fstype') or 'unknown file system'}) "
        f"is full (No space left on device: {_mib(free)} free of {_mib(st.f_blocks * st.f_frsize)})"
    )


def summarize(spec: ScratchSpec, cwd: Path) -> str | None:
    """Write the checksums of the recipe's files into ``cwd/sums_file``; a problem (a file
    missing, not netCDF) is returned as one line naming the file."""
    from ..verification import netcdf

    lines = []
    for f in spec.files:
        path = Path(spec.path, f.file)
        try:
            fill = netcdf.ZoneFill(**f.fill) if f.fill else None
            lines += netcdf.keyvalue_lines(f.name, netcdf.checksums(path, fill))
        except FileNotFoundError:
            return f"the run wrote no {path}"
        except (OSError, netcdf.NetCDFError) as e:
            return f"{path}: {getattr(e, 'strerror', None) or e}"
    Path(cwd, spec.sums_file).write_text("".join(ln + "\n" for ln in lines))
    return None


def cleanup(spec: ScratchSpec, info: dict) -> None:
    """Remove the run's directory (and everything the run left in it)."""
    if not info.get("created"):
        return
    try:
        shutil.rmtree(spec.path)
        info["removed"] = True
    except OSError as e:
        info["removed"] = False
        info["remove_error"] = f"{e.filename}: {e.strerror}"


def describe(info: RunScratch | None, reads: bool = True) -> str:
    """One line for a report: the file system measured, what the run wrote and whether the
    page cache can have held it: its writes (not yet on the disk when timed) and, for a
    program that ``reads`` back what it wrote, its reads."""
    if info is None:
        return "–"
    fs = f"{info.fstype or 'unknown file system'} at {info.mount or '?'}"
    out = f"{fs} ({info.root})"
    wrote, mem = info.bytes, info.memory_bytes
    if wrote is not None and mem:
        more = info.exceeds_memory
        out += (
            f"; wrote {_mib(wrote)}, "
            + ("more than" if more else "less than")
            + f" the node's {mem / (1 << 30):.1f} GiB of memory"
            + (
                ""
                if more
                else ": the page cache can hold it (writes may not have reached the disk"
                + (", reads may come from memory)" if reads else ")")
            )
        )
    return out
