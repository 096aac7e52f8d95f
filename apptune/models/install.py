"""An install of a recipe (``installs.NAME``): a build not compiled here, the distribution's
packages or a site's module; the environment file (``etc/bashrc``) a build or an install
reads; and what a compiled build installs beside its programs (``build.tree``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from .base import Strict, env_names


class EnvFile(Strict):
    """A shell file that sets up an application's environment (OpenFOAM's ``etc/bashrc``).
    apptune's own fixed command sources it in bash, with the file's path and ``args`` as
    positional arguments (never as shell text), and keeps the variables it sets or changes."""

    #: Path of the file: absolute for an installed package, relative to the source root
    #: for a build.
    file: str = Field(min_length=1)
    #: Its arguments, each one word (OpenFOAM's ``WM_COMPILER=Gcc`` overrides).
    args: list[str] = []


class Install(Strict):
    """A build that is not compiled here (``installs.NAME``, a variant of its own): the
    distribution's packages or a site's module. Its programs are found on the PATH of its
    environment, its package versions and modules go into the run's provenance."""

    #: Debian packages that hold it: a missing one skips the variant, naming it; their
    #: versions are the build's provenance.
    debian: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9+.-]+$")]] = []
    #: Modules to load (a site's ``module load``), in the build and the run's job.
    modules: list[str] = []
    #: The environment file to read (OpenFOAM's ``/usr/share/openfoam/etc/bashrc``) ...
    env_file: EnvFile | None = None
    #: ... and variables set explicitly, after it (name -> value, no expansion).
    env: dict[str, str] = {}
    #: The installed names the run uses (``run.executable``, pre-run steps), found on the
    #: PATH of this environment.
    programs: list[Annotated[str, Field(pattern=r"^[^/]+$")]] = Field(min_length=1)
    #: What it is, for the report (e.g. "Debian's build, the distribution's flags").
    description: str = ""
    #: Parts of the recipe's source the run reads beside the installed programs (GROMACS's
    #: regression tests: their systems and stored reference outputs), relative to the source
    #: root as ``build.tree.paths`` writes them (a component's under its ``dest``). Only the
    #: tarballs that hold them are fetched, checked against their pinned sha256 and
    #: unpacked; the paths are kept under the build's ``tree/``, where an input's
    #: ``from_build: tree/PATH`` finds them as it finds a compiled build's.
    source_paths: list[Annotated[str, Field(pattern=r"^[^/.][^\\]*$")]] = []

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        return env_names(v)

    @field_validator("source_paths")
    @classmethod
    def _relative(cls, v):
        for p in v:
            if ".." in p.split("/"):
                raise ValueError(f"{p!r} leads outside the source tree ('..')")
        return v

    @model_validator(mode="after")
    def _something(self):
        if not (self.debian or self.modules or self.env_file or self.env):
            raise ValueError("say where it comes from: debian, modules, env_file or env")
        return self


class InstallTree(Strict):
    """What a compiled build keeps besides its programs: the parts of the built tree its run
    needs beside them (shared libraries, configuration files, data), kept with their paths
    under the build's ``tree/`` directory, stored in and restored from the build cache with
    it. The run gets the environment this declares, read again wherever the tree lands."""

    #: Paths relative to the source root, directories or files (jinja2 templates, like
    #: products): OpenFOAM's ``etc`` and ``platforms/<arch>/lib``, a CMake install prefix.
    paths: list[str] = Field(min_length=1)
    #: An environment file inside the tree (relative to it), read by apptune's one fixed
    #: bash command after every build and every restore: its variables reach the run ...
    env_file: EnvFile | None = None
    #: ... and variables set after it (name -> value; ``{{ tree }}`` is the tree's absolute
    #: path, e.g. ``LD_LIBRARY_PATH: "{{ tree }}/prefix/lib"``).
    env: dict[str, str] = {}

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        return env_names(v)


class BuildEstimate(Strict):
    """How long a first build takes, said before it starts when no earlier build of the
    application was recorded on the machine (afterwards the recorded time is used)."""

    #: Compile lines the build runs (counted from its declared sources).
    compiles: int = Field(ge=1)
    #: Wall seconds per compile line with the recipe's ``jobs`` (measured, said where).
    seconds_per_compile: float = Field(gt=0)
