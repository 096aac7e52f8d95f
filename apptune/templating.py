"""The jinja2 environment of apptune's own templates (``apptune/templates/``): reports of
tune and bisect, the files ``apptune new`` writes. The run report adds HTML escaping."""

from __future__ import annotations

import jinja2

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
