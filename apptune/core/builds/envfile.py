"""Read what an application's environment file sets (OpenFOAM's ``etc/bashrc``).

Many applications are set up by a shell file that users ``source``: it computes paths
from where it lies and exports them (``WM_PROJECT_DIR``, ``PATH``, ``LD_LIBRARY_PATH``).
apptune never passes a recipe's words through a shell: here one fixed bash command,
written in this module, sources the file with its path and arguments as positional
parameters (``"$0"``, ``"$@"``), so a path or an argument holding ``;`` or ``$(...)`` is
one word, never code. The file itself is the installed package's own (what its users
source). The variables it sets or changes, read back with ``env -0``, are the result.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ...errors import ApptuneError

#: The one shell command: source the file (its output discarded, no terminal input) and
#: print the environment, NUL-separated. ``$0`` is the file, ``"$@"`` its arguments.
SOURCE_AND_PRINT = '. "$0" "$@" >/dev/null 2>&1 </dev/null; env -0'


def read(
    file: str | os.PathLike,
    args: list[str] | None = None,
    base: dict[str, str] | None = None,
    where: tuple[os.PathLike | str | None, str] = (None, "env_file"),
    timeout: float = 120,
) -> dict[str, str]:
    """The variables ``file`` sets or changes when sourced with ``args`` in the environment
    ``base`` (default: this process's); an error naming ``where`` (file, field) when the
    file is missing or bash cannot read it."""
    base = dict(os.environ if base is None else base)
    path = Path(file)
    if not path.is_file():
        raise ApptuneError(where[0], where[1], f"environment file {path} not found")
    try:
        p = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", SOURCE_AND_PRINT, str(path), *(args or [])],
            env=base,
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ApptuneError(where[0], where[1], f"cannot source {path}: {e}") from None
    after = parse_env0(p.stdout)
    if not after:
        why = f"sourcing {path} printed no environment (bash status {p.returncode})"
        raise ApptuneError(where[0], where[1], why)
    # bash's own bookkeeping is not the file's doing
    ignore = {"_", "SHLVL", "PWD", "OLDPWD"}
    return {k: v for k, v in after.items() if k not in ignore and base.get(k) != v}


def parse_env0(data: bytes) -> dict[str, str]:
    """``env -0`` output as a dict (an entry without ``=`` is left out)."""
    out = {}
    for entry in data.split(b"\0"):
        k, sep, v = entry.decode(errors="replace").partition("=")
        if sep and k:
            out[k] = v
    return out
