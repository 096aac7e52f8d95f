"""The jinja2 environments: of apptune's own templates (``apptune/templates/``: reports of
tune and bisect, the files ``apptune new`` writes; the run report adds HTML escaping), and
of the templates in data files (recipes' words, build and input templates), which are data,
not code: those render in jinja2's immutable sandbox."""

from __future__ import annotations

import jinja2
import jinja2.sandbox

from .figures import fmt_figure


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("apptune", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt_figure
    return env


def data_environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """For templates from data files: a name they do not define is an error, and they
    reach no Python internals (no ``__class__``, no ``.append`` on a plan's list)."""
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
