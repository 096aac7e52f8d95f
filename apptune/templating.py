"""The jinja2 environments: of apptune's own templates (``apptune/templates/``: the run
report, the reports of tune and bisect, the files ``apptune new`` writes), and of the
templates in data files (recipes' words, build and input templates), which are data, not
code: those render in jinja2's immutable sandbox.

Every HTML template (``*.html.j2``) is escaped by default: its values come from program
output, recipes and the history, and a report is a page people open in a browser."""

from __future__ import annotations

import jinja2
import jinja2.sandbox

from .figures import fmt_figure
from .yamlio import flow_list


def _escaped(name: str | None) -> bool:
    return bool(name) and name.removesuffix(".j2").endswith((".html", ".htm", ".xml"))


def environment(**kw) -> jinja2.Environment:
    """The templates' environment; keyword arguments override its options."""
    opts = dict(
        loader=jinja2.PackageLoader("apptune", "templates"),
        autoescape=_escaped,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env = jinja2.Environment(**(opts | kw))
    env.filters["fmt"] = fmt_figure
    env.filters["flow"] = flow_list
    return env


def data_environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """For templates from data files: a name they do not define is an error, and they
    reach no Python internals (no ``__class__``, no ``.append`` on a plan's list)."""
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
