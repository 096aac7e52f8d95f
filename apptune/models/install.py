"""An install of a recipe (``installs.NAME``): a build not compiled here, the distribution's
packages or a site's module; and the environment file (``etc/bashrc``) a build or an install
reads."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from .base import Strict, _env_names


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

    @field_validator("env")
    @classmethod
    def _env(cls, v):
        return _env_names(v)

    @model_validator(mode="after")
    def _something(self):
        if not (self.debian or self.modules or self.env_file or self.env):
            raise ValueError("say where it comes from: debian, modules, env_file or env")
        return self
