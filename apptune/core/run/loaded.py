"""The shared libraries a run's ranks loaded: which BLAS, LAPACK, FFT, MPI and compiler
runtime a run used, as the dynamic loader found them, not as the build or the site meant
them (an ``LD_LIBRARY_PATH`` can put another library behind a soname).

While a run runs, the runner reads the mapped files of each rank of the measured program
it sees on its node (``/proc/PID/maps``, :func:`apptune.core.run.procfs.mapped_libraries`;
:class:`apptune.core.run.quality.Monitor`); after the timed region it keeps those of the
:data:`ROLES` below with the sha256 of their contents (:func:`record`): the run record's
``launch.loaded``. A change of a library's path or contents is then named as a change
of the run (:func:`facts`, ``loaded libblas.so.3: …/openblas-pthread/libblas.so.3 (sha256
…) → …/blis-openmp/libblas.so.3 (…)``). Reading the maps costs a read of a small file per
rank and sample; the hashes are made after the timed region; nothing here can fail a run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

#: The libraries recorded, by the start of their file name: the numerical libraries, MPI
#: and its transports, the compiler runtimes, the C library and the I/O libraries.
ROLES = {
    "blas": r"lib(open)?blas|libblis|libmkl_|libflexiblas|libcblas|libatlas|libsci_|libessl"
    r"|libarmpl|libgoto",
    "lapack": r"liblapack|libscalapack|libelpa",
    "fft": r"libfftw|libfft",
    "mpi": r"libmpi|libmpich|libopen-pal|libopen-rte|libpmix|libucp|libuct|libucs|libfabric"
    r"|libpsm|libhcoll|libmca_common|libhwloc",
    "compiler runtime": r"libgfortran|libgomp|libquadmath|libstdc\+\+|libgcc_s|libomp|libiomp"
    r"|libflang|libFortran|libimf|libsvml|libintlc|libirng|libifcore|libpgmath|libatomic",
    "system": r"libc\.so|libm\.so|libmvec",
    "io": r"libhdf5|libnetcdf|libpnetcdf|libadios",
}
_ROLE_RE = {k: re.compile(v) for k, v in ROLES.items()}
#: Digits of the sha256 a change line shows.
SHOWN = 12

_hashes: dict[tuple, str | None] = {}


def role(path: str) -> str | None:
    """The role of a library (a key of :data:`ROLES`), None for one not recorded."""
    name = Path(path).name
    return next((k for k, r in _ROLE_RE.items() if r.match(name)), None)


def record(paths: Iterable[str]) -> list[dict]:
    """``[{path, role, sha256}]`` of the libraries of :data:`ROLES` among ``paths``, in
    order of path; ``sha256`` None for a file that cannot be read (gone, replaced)."""
    out = []
    for p in sorted(set(paths)):
        r = role(p)
        if r is not None:
            out.append({"path": p, "role": r, "sha256": sha256(p)})
    return out


def sha256(path: str) -> str | None:
    """The sha256 of a file's contents, once per file and change of it (its inode, size and
    time of change)."""
    try:
        st = Path(path).stat()
        key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _hashes:
            with open(path, "rb") as f:
                _hashes[key] = hashlib.file_digest(f, "sha256").hexdigest()
        return _hashes[key]
    except OSError:
        return None


def facts(loaded: list) -> dict[str, str]:
    """``{loaded NAME: PATH (sha256 …)}`` for each library a run loaded (NAME: the file's
    name, so a library found in another directory is one fact that changed)."""
    out: dict[str, str] = {}
    for lib in loaded:
        d = lib if isinstance(lib, dict) else lib.model_dump()
        sha = (d.get("sha256") or "")[:SHOWN] or "unreadable"
        key = f"loaded {Path(d['path']).name}"
        value = f"{d['path']} (sha256 {sha})"
        out[key] = value if key not in out else f"{out[key]}, {value}"
    return out
