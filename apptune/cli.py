"""``apptune``: run the suite through ReFrame, list what it holds, report, validate data.

Every command is a thin layer: ``apptune run`` builds the same ``reframe``
command line a user would type (and prints it), so plain ReFrame keeps working. The
commands are in :mod:`apptune.commands`, one module each; this is the entry point that
parses the arguments, runs the command and turns an expected failure into one line.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import traceback

from .commands import parser
from .errors import ApptuneError


def main(argv=None) -> int:
    """Run the ``apptune`` command line ``argv`` (default ``sys.argv[1:]``): its exit status."""
    try:
        a = parser(__doc__.splitlines()[0]).parse_args(argv)
    except ApptuneError as e:  # a wrong command line: one line naming the option
        print(f"apptune: error: {e}", file=sys.stderr)
        return 2
    a.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return a.func(a)
    except KeyboardInterrupt:
        if a.traceback:
            traceback.print_exc()
        print("apptune: interrupted", file=sys.stderr)
        return 130
    except EXPECTED as e:
        # one line, as for bad data; the traceback only with -v (it is apptune's, not the data's)
        if a.traceback:
            traceback.print_exc()
        print(f"apptune: error: {one_line(e)}", file=sys.stderr)
        return 2


def _expected() -> tuple[type[BaseException], ...]:
    import jinja2
    import pydantic
    import yaml

    return (
        ApptuneError,
        OSError,
        subprocess.SubprocessError,
        yaml.YAMLError,
        pydantic.ValidationError,
        jinja2.TemplateError,
    )


#: Failures reported in one line (anything else is a bug in apptune: its traceback shows).
EXPECTED = _expected()


def one_line(e: BaseException) -> str:
    """An expected failure as one line naming the file where it is known."""
    import pydantic

    from .errors import format_validation_error

    if isinstance(e, ApptuneError):
        return str(e)
    if isinstance(e, pydantic.ValidationError):
        return str(format_validation_error(None, e))
    if isinstance(e, OSError) and e.strerror:
        names = [str(f) for f in (e.filename, e.filename2) if f]
        return ": ".join([*names, e.strerror])
    if isinstance(e, subprocess.CalledProcessError):
        cmd = e.cmd if isinstance(e.cmd, str) else shlex.join(map(str, e.cmd))
        return f"{cmd}: exited with status {e.returncode}"
    return " ".join(f"{type(e).__name__}: {e}".split())


if __name__ == "__main__":
    sys.exit(main())
