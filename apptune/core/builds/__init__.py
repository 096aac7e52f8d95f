"""The builds of a variant: its sources (fetched, checked, unpacked) and patches, the
build's steps (:mod:`~apptune.core.builds.steps`, run as ``python -m
apptune.core.builds.steps``), the compiler wrapper and its proof of flags, the build cache
and what a build costs, an installed application instead of a build, and the system
packages the recipes need.

Named builds, not build: a folder named ``build/`` is what the usual ignore patterns (a
Python project's ``.gitignore``) and tools take for build output.

This package's own module imports nothing: ci/bootstrap.sh runs ``python3 -m
apptune.core.builds.syspackages`` with the standard library alone, before the virtualenv."""
