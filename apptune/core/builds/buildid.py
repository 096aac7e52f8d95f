"""What a build was made with, for its provenance and cache key: the compilers' and MPI
wrappers' own version lines, the command each wrapper runs and the flags it adds, and the
libraries' package versions."""

from __future__ import annotations

import shlex
import subprocess

from ..data.recipes import load_libraries
from .compilelines import owned_options, removable


def _run(cmd: list[str], env: dict | None) -> subprocess.CompletedProcess | Exception:
    """``cmd``'s outcome (in ``env``; None: this process's environment), or why it has none
    (it cannot run, or took over 30 s)."""
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return e


def first_line(cmd: list[str], env: dict | None = None) -> str:
    """The first line ``cmd`` prints (in ``env``; None: this process's environment)."""
    p = _run(cmd, env)
    if isinstance(p, Exception):
        return f"unavailable ({p})"
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


#: How compiler wrappers show the command they would run, in the order asked: MPICH's and
#: Intel MPI's ``-show`` (Open MPI's wrappers take it too), Open MPI's ``--showme``.
SHOW_OPTIONS = ("-show", "--showme")
#: A wrapper's modes and the option that selects each (apptune/core/builds/ccwrap.py ``mode_of``):
#: a wrapper adds other words to a compile, a preprocessor run and a link.
WRAPPER_MODES = {"compile": ["-c"], "preprocess": ["-E"], "link": []}
#: The build's own arguments as the wrapper is asked to show them: two words no wrapper
#: adds, to find where the build's arguments go in the command it shows.
MARK = ["apptune-args-1", "apptune-args-2"]


def split_shown(words: list[str], mode_flags: list[str]) -> tuple[str, list, list] | None:
    """(compiler, words before the build's arguments, words after them) of the command a
    wrapper showed for the arguments ``mode_flags + MARK``; None when they are not in it
    once, in order (a compiler's error message, a wrapper that reorders them)."""
    given = [*mode_flags, *MARK]
    at = [i for i in range(1, len(words)) if words[i : i + len(given)] == given]
    if len(at) != 1:
        return None
    return words[0], words[1 : at[0]], words[at[0] + len(given) :]


def _shown(exe: str, args: list[str], env: dict | None) -> list[str]:
    """The words ``exe args`` prints on its standard output when it succeeds, as a shell
    would split them (Intel MPI's ``-show`` quotes its paths: ``-I"/opt/…/include"``), else
    [] (a compiler that takes the probe for a compile fails: its files do not exist)."""
    p = _run([exe, *args], env)
    if not isinstance(p, subprocess.CompletedProcess) or p.returncode != 0:
        return []
    try:
        return shlex.split(p.stdout)
    except ValueError:  # an unbalanced quote: not a command line
        return []


def wrapper_command(exe: str, env: dict | None = None) -> dict | None:
    """What the compiler wrapper ``exe`` runs, as it shows it in ``env``: ``{"show":
    option, "runs": compiler, MODE: {"before": words, "after": words}}`` for each of
    :data:`WRAPPER_MODES`; None when it shows no such command (a compiler itself, or a
    wrapper that cannot say)."""
    for opt in SHOW_OPTIONS:
        out: dict = {"show": opt}
        for mode, flags in WRAPPER_MODES.items():
            got = split_shown(_shown(exe, [opt, *flags, *MARK], env), flags)
            if got is None or out.setdefault("runs", got[0]) != got[0]:
                break
            out[mode] = {"before": got[1], "after": got[2]}
        else:
            return out
    return None


def wrapper_flags(exe: str, family: str, env: dict | None = None) -> dict:
    """The command behind ``exe`` and, per mode, the words it adds less those the
    variant's flags decide (:func:`apptune.core.builds.compilelines.owned_options`: removed, and
    listed), with one sentence saying so; ``runs`` None when ``exe`` shows no command."""
    shown = wrapper_command(exe, env)
    if shown is None:
        return {
            "runs": None,
            "said": f"{exe} shows no command (neither -show nor --showme): it is run as "
            "given, and the flags it adds, if any, are not known",
        }
    owned = owned_options(family)
    out = {"show": shown["show"], "runs": shown["runs"]}
    for mode in WRAPPER_MODES:
        words = shown[mode]
        out[mode] = {
            "before": removable(words["before"], owned)[0],
            "after": removable(words["after"], owned)[0],
            "removed": removable(words["before"] + words["after"], owned)[1],
        }
    out["said"] = wrapper_said(exe, out)
    return out


#: How :func:`wrapper_said` names the modes.
MODE_NAMES = {"compile": "compiles", "link": "links", "preprocess": "-E"}


def wrapper_said(exe: str, w: dict) -> str:
    """``mpifort runs gfortran; added by mpifort to compiles: …; to links: …; removed: -O2
    …``: what :func:`wrapper_flags` found, in one sentence."""
    added = [
        f"{name}: {' '.join(w[mode]['before'] + w[mode]['after'])}"
        for mode, name in MODE_NAMES.items()
        if w[mode]["before"] + w[mode]["after"]
    ]
    said = f"{exe} runs {w['runs']}; " + (
        f"added by {exe} to {'; to '.join(added)}" if added else f"{exe} adds nothing"
    )
    removed = {f: None for mode in WRAPPER_MODES for f in w[mode]["removed"]}
    if removed:
        where = ", ".join(name for mode, name in MODE_NAMES.items() if w[mode]["removed"])
        said += (
            f"; removed: {' '.join(removed)} ({exe} adds it to {where}; the variant's "
            "flags decide it)"
        )
    return said


def compiler_identity(plan: dict, languages, env: dict | None = None) -> dict:
    """The compilers of ``plan`` as they answer in ``env`` (None: this process's
    environment, the build's): their version lines and, for MPI wrappers, the MPI, the
    compiler behind them and the flags they add (:func:`wrapper_flags`)."""
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
        ident[lang]["wrapper"] = wrapper_flags(exe, plan["family"], env)
    return ident
