"""How a run's program was made and launched, as its run record keeps it
(``provenance.json`` of a build, the record's ``launch``): the build's source, patches,
flags, compilers and libraries, and the launcher, the site's variables and the shared
libraries the ranks loaded."""

from __future__ import annotations

from typing import Any

from .part import Part


class LoadedLibrary(Part):
    """A shared library the program's ranks mapped (:mod:`apptune.core.run.loaded`)."""

    #: The file as the kernel names it (symbolic links resolved).
    path: str
    #: ``blas``, ``lapack``, ``fft``, ``mpi``, ``compiler runtime``, ``system``, ``io``.
    role: str | None = None
    #: The sha256 of its contents (None: unreadable when the run ended).
    sha256: str | None = None


class RunLaunch(Part):
    """How the program was launched (:func:`apptune.core.run.outcome.launch_facts`) and what it
    loaded."""

    #: The timed step's arguments before the program (``mpirun -np 4``), or None.
    launcher: list[str] | None = None
    #: The site's and the recipe's variables: names always, values only where they can
    #: change a result and are no secret (apptune/core/run/envrecord.py).
    env_vars: dict[str, Any] = {}
    modules: list[str] = []
    #: The shared libraries the ranks seen on the job's first node mapped (BLAS, LAPACK,
    #: FFT, MPI, compiler runtimes, the C library), with the sha256 of each; empty when no
    #: rank was seen (a run shorter than the first sample) or before they were recorded.
    loaded: list[LoadedLibrary] = []


class BuildCompiler(Part):
    """One compiler of a build as it answered (apptune/core/builds/buildid.py
    ``compiler_identity``)."""

    #: The command the build ran (``mpicc``, ``gfortran``).
    command: str | None = None
    #: The first line of its ``--version``.
    version: str | None = None
    #: The MPI behind an MPI wrapper (``mpicc: Open MPI 4.1.4 ...``); None: not a wrapper.
    mpi: str | None = None
    #: The compiler a wrapper runs and, per mode, the flags it adds and those removed from
    #: them, with ``said``: one sentence (buildid ``wrapper_flags``).
    wrapper: dict | None = None


class BuildFile(Part):
    """A file a build was made from (its source tarball, a patch) and its sha256."""

    file: str | None = None
    sha256: str | None = None


class BuildSource(BuildFile):
    """The source tarball of a build and the components unpacked into it (GROMACS's
    regression tests)."""

    components: list[BuildFile] = []


class BuildFlags(Part):
    """The flag sets a build compiled with (None: the provenance does not say), and the
    per-file overrides (apptune/core/builds/ccwrap.py)."""

    cflags: list | None = None
    fflags: list | None = None
    cppflags: list | None = None
    ldflags: list | None = None
    #: ``{files, cflags, ..., reason}`` each.
    per_file: list = []


class BuildCompileLines(Part):
    """The check of a build's compile lines (apptune/core/builds/compilelines.py)."""

    compiles: int | None = None


class BuildCacheUse(Part):
    """Whether the build came from the build cache (apptune/core/builds/buildcache.py), its key."""

    hit: bool = False
    key: str | None = None
    used: bool | None = None


class Provenance(Part):
    """How a run's programs were made (``provenance.json``): a compiled build's source,
    patches, flags, axes, compilers, libraries and compile lines (apptune/core/builds/steps.py),
    or an install's packages and modules (apptune/core/builds/installed.py); the history adds the
    run's ``launch``."""

    app: str | None = None
    version: str | int | float | None = None
    variant: str | None = None
    environment: str | None = None
    family: str | None = None
    source: BuildSource | None = None
    patches: list[BuildFile] = []
    flags: BuildFlags | None = None
    axes: dict = {}
    #: Each language's compiler (``cc``, ``ftn``, ``cxx``).
    compilers: dict[str, BuildCompiler] = {}
    libraries: dict = {}
    #: An install's distribution packages and their versions.
    packages: dict = {}
    modules: list = []
    install: dict | None = None
    compile_lines: BuildCompileLines | None = None
    products: list = []
    tree: Any = None
    build_seconds: int | float | None = None
    host: str | None = None
    plan_sha256: str | None = None
    cache: BuildCacheUse | None = None
    launch: RunLaunch | None = None
    #: The run's input parameters (the history adds them with its ``launch``).
    input: dict = {}
