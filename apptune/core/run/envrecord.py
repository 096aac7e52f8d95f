"""What a run record keeps of the environment variables a run had: every name, the value
only of a variable that can change a result, and never the value of a secret.

The variables a run was launched with are recorded so that a verdict can name a change
of them as its cause (``env OMPI_MCA_btl: (none) → tcp,self``). A run record goes into
the run directory, the history (``history.sqlite``) and, through a baseline, into a file
committed to the repository, so what it keeps of a site's variable is:

* its **name**, always;
* its **value**, when the name matches :data:`ALLOW` (OpenMP, MPI and transport
  settings, thread counts, library and executable paths: what can move a figure) or a
  pattern of the partition's ``record_env`` (a cluster file's partition field, or
  ``extras.record_env`` in ``site-config/settings.py``), and does not look like a secret;
* otherwise a **keyed hash** of the value, ``hidden:KEY_ID:HASH`` (HMAC-SHA256, 16 hex
  digits), so that a change is still named (``env GITHUB_TOKEN: changed (its value is not
  recorded)``) while the value cannot be read back nor guessed without the key.

A name looks like a secret when it contains one of :data:`SECRET_WORDS` (``TOKEN``,
``SECRET``, ``PASSW``, ``KEY``, ``CREDENTIAL``, ``AUTH``, ...): its value is never
recorded, allow-listed or not. The key is made on first use in the history directory
(``record-key``, mode 0600: one per history store, never in the repository); two hashes
made with different keys (another history) are not compared. Values the recipe itself
sets (``run.env``) are repository data and are kept, unless the name looks like a secret.
The process's own environment is never recorded: only what the site and the recipe set.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from ... import paths

#: Variables whose value can change a result (fnmatch patterns, case-sensitive): their
#: values are recorded. A site adds its own with the partition's ``record_env``.
ALLOW = (
    # threads and OpenMP runtimes
    "OMP_*",
    "GOMP_*",
    "KMP_*",
    "*_NUM_THREADS",
    # MPI libraries, their launchers and transports
    "OMPI_*",
    "PMIX_MCA_*",
    "PRTE_MCA_*",
    "MPICH_*",
    "MPIR_CVAR_*",
    "HYDRA_*",
    "I_MPI_*",
    "MV2_*",
    "UCX_*",
    "FI_*",
    "PSM2_*",
    "HCOLL_*",
    "NCCL_*",
    "SLURM_MPI_TYPE",
    "SLURM_CPU_BIND*",
    # which programs and libraries are found, and how they are loaded
    "PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LD_BIND_NOW",
    "LIBRARY_PATH",
    "CPATH",
    "LOADEDMODULES",
    "GLIBC_TUNABLES",
    "MALLOC_*",
    # numerical libraries and applications' own settings
    "MKL_*",
    "OPENBLAS_*",
    "BLIS_*",
    "GOTO_*",
    "FLEXIBLAS*",
    "HDF5_*",
    "GMX_*",
    "GMXLIB",
    "FOAM_*",
    "WM_*",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)

#: Words that make a name look like a secret's (case-insensitive): its value is never
#: recorded, even when a pattern of :data:`ALLOW` or ``record_env`` matches it.
SECRET_WORDS = (
    "TOKEN",
    "SECRET",
    "PASSW",
    "PASSPHRASE",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
    "COOKIE",
    "SESSION",
    "SIGNATURE",
    "CERT",
)

#: The start of a recorded value that stands for a hidden one.
HIDDEN = "hidden:"
#: The key's file in the history directory.
KEY_FILE = "record-key"

_keys: dict[Path, bytes | None] = {}


def looks_secret(name: str) -> bool:
    """Whether ``name`` looks like the name of a secret (:data:`SECRET_WORDS`)."""
    up = name.upper()
    return any(w in up for w in SECRET_WORDS)


def value_kept(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether the value of ``name`` is recorded as it is (module docstring)."""
    if looks_secret(name):
        return False
    return any(fnmatch.fnmatchcase(name, p) for p in (*ALLOW, *extra))


def is_hidden(value) -> bool:
    return isinstance(value, str) and value.startswith(HIDDEN)


def record(env: dict, extra: Iterable[str] = (), *, data: bool = False) -> dict[str, str]:
    """``env`` as a run record keeps it: each name with its value (:func:`value_kept`) or a
    keyed hash of it. ``data``: the values are the repository's (a recipe's ``run.env``):
    kept unless the name looks like a secret. A value already hidden stays as it is."""
    extra = tuple(extra)
    out = {}
    for k, v in env.items():
        v = str(v)
        keep = not looks_secret(k) if data else value_kept(k, extra)
        out[k] = v if keep or is_hidden(v) else hidden(v)
    return out


def hidden(value: str) -> str:
    """``hidden:KEY_ID:HASH``: an HMAC-SHA256 of ``value`` with the history's key; only
    ``hidden:`` when no key can be read or made (a change is then not seen)."""
    key = _key(paths.history_dir())
    if key is None:
        return HIDDEN
    kid = hashlib.sha256(key).hexdigest()[:8]
    mac = hmac.new(key, value.encode(errors="surrogateescape"), hashlib.sha256).hexdigest()
    return f"{HIDDEN}{kid}:{mac[:16]}"


def compare(a: str | None, b: str | None) -> str:
    """Whether two recorded values of one variable are the ``same``, ``changed`` or
    ``unknown`` (hashes of different keys or of no key, or a hash beside a plain value: a
    record made before values were hidden, or with another history's key)."""
    if a is None or b is None:
        return "same" if a == b else "changed"
    ha, hb = is_hidden(a), is_hidden(b)
    if ha != hb:
        return "unknown"
    if ha and not (_key_id(a) and _key_id(a) == _key_id(b)):
        return "unknown"
    return "same" if a == b else "changed"


def _key_id(value: str) -> str:
    return value[len(HIDDEN) :].partition(":")[0]


def shown(value: str | None) -> str:
    """A recorded value as a change line shows it."""
    if value is None:
        return "(none)"
    return "(set, its value not recorded)" if is_hidden(value) else value


def _key(directory: Path) -> bytes | None:
    """The history's key (``record-key``), made on first use with mode 0600; None when it
    can be neither read nor made (a read-only home): nothing fails for it."""
    if directory in _keys:
        return _keys[directory]
    f = directory / KEY_FILE
    key = None
    try:
        key = bytes.fromhex(f.read_text().strip()) or None
    except (OSError, ValueError):
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = directory / f".{KEY_FILE}.{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32) + "\n")
            try:
                os.link(tmp, f)  # whole or not at all; the first of two racing makers wins
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
            key = bytes.fromhex(f.read_text().strip()) or None
        except (OSError, ValueError):
            key = None
    _keys[directory] = key
    return key
