"""What a build was made with, for its provenance and cache key: the compilers' and MPI
wrappers' own version lines and the libraries' package versions."""

from __future__ import annotations

import subprocess

from .recipes import load_libraries


def first_line(cmd: list[str], env: dict | None = None) -> str:
    """The first line ``cmd`` prints (in ``env``; None: this process's environment)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0] if out else "unknown"


def library_versions(plan: dict) -> dict:
    libs = load_libraries().libraries
    out = {}
    for axis, key in plan["libraries"].items():
        lib = libs[key]
        ver = "unknown"
        if lib.debian_package:
            ver = first_line(["dpkg-query", "-W", "-f=${Version}", lib.debian_package])
            ver = f"{lib.debian_package} {ver}"
        elif lib.pypi_package:
            from importlib import metadata

            try:
                ver = f"{lib.pypi_package} {metadata.version(lib.pypi_package)} (PyPI)"
            except metadata.PackageNotFoundError:
                ver = f"{lib.pypi_package} not installed"
        out[axis] = {"library": key, "version": ver}
    return out


def mpi_identity(exe: str, env: dict | None = None) -> str:
    """The MPI library behind a wrapper: Open MPI answers --showme:version, MPICH -v."""
    for probe in (["--showme:version"], ["-v"]):
        line = first_line([exe, *probe], env)
        if "MPI" in line and "error" not in line:
            return line
    return "unknown MPI"


def compiler_identity(plan: dict, languages, env: dict | None = None) -> dict:
    """The compilers of ``plan`` as they answer in ``env`` (None: this process's
    environment, the build's): their version lines and, for MPI wrappers, the MPI."""
    ident = {}
    for lang in (
        ["cc"]
        + (["ftn"] if "fortran" in languages else [])
        + (["cxx"] if "cxx" in languages else [])
    ):
        exe = plan[lang]
        ident[lang] = {"command": exe, "version": first_line([exe, "--version"], env)}
        if exe.startswith("mpi"):
            ident[lang]["mpi"] = mpi_identity(exe, env)
    return ident
