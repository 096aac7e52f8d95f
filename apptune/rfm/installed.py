"""The build fixture of an install (:class:`InstalledBuild`): a variant that is not compiled
here, the distribution's packages or a site's module (``installs.NAME`` of the recipe)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from ..constants import SKIP_FILE
from ..core.builds import installed, syspackages
from ..core.data import recipes
from ..errors import ApptuneError, last_error_line


class InstalledBuild(rfm.RunOnlyRegressionTest):
    """Find an install's programs in its environment and record its provenance
    (``python -m apptune.core.builds.installed``); nothing is compiled. A Debian package of the
    install that is not installed skips it, naming the package; its modules are loaded in this job
    and in the run's."""

    #: Application name (a recipe in build-recipes/).
    #: :type: str
    app = variable(str)
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    executable = sys.executable

    @property
    def recipe(self):
        return recipes.load_recipe(self.app)

    @property
    def install(self):
        return recipes.install_of(self.recipe, self.variant)

    @run_after("init")
    def load_modules(self):
        if self.install is not None:
            self.modules = list(self.install.modules)
        self.keep_files = ["provenance.json", installed.ENV_FILE]

    @run_before("run")
    def set_command(self):
        absent = syspackages.not_installed(self.install.debian) if self.install.debian else []
        if absent:
            reason = str(
                ApptuneError(
                    recipes.recipe_path(self.app),
                    f"installs.{self.variant}.debian",
                    f"Debian package {', '.join(absent)} not installed "
                    "(ci/bootstrap.sh installs it)",
                )
            )
            Path(self.stagedir, SKIP_FILE).write_text(reason + "\n")
            self.skip(reason)
        self.executable_opts = [
            "-m",
            "apptune.core.builds.installed",
            "--app",
            self.app,
            "--variant",
            self.variant,
            "--environment",
            self.current_environ.name,
            "--stage",
            ".",
        ]

    @sanity_function
    def found(self):
        err = last_error_line(os.path.join(self.stagedir, self.stderr.evaluate()))
        return sn.assert_true(
            os.path.exists(os.path.join(self.stagedir, "provenance.json")),
            msg=err or "the install left no provenance.json",
        )
