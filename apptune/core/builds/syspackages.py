"""The system packages the applications need: each recipe's ``requires.debian``.

``ci/bootstrap.sh`` installs them with the harness's own packages (``ci/apt-packages.txt``)
before the virtualenv, and so PyYAML and pydantic, exist. It reads the recipes with this
module, which uses Python's standard library alone::

    python3 -m apptune.core.builds.syspackages build-recipes      # one package a line, sorted

The reader knows the two ways a recipe writes the list, and ``apptune validate`` refuses
any other (:func:`apptune.core.validation.datachecks.app_problems`), so it and the YAML parser
agree::

    requires:
      debian: [libfftw3-dev, libfftw3-mpi-dev]      # a flow list on one line

    requires:
      debian:                                       # or a block list, one name a line
        - libfftw3-dev

An install of the recipe (``installs.NAME.debian``, the distribution's build of the
application, a variant of its own) writes its packages as a flow list on one line::

    installs:
      debian:
        debian: [openfoam, libopenfoam]

A build on a partition whose ``extras`` say ``debian_packages: True`` (this machine's) is
skipped when one of its recipe's packages is not installed, naming it (:func:`missing`).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ...errors import ApptuneError

_ITEM = r"""["']?([a-z0-9][a-z0-9+.-]+)["']?"""


def _code(line: str) -> str:
    """A YAML line without its comment (a package name never holds ``#``)."""
    return re.sub(r"(^|\s)#.*$", "", line).rstrip()


def debian_packages(text: str) -> list[str] | None:
    """The ``requires.debian`` list of a recipe's YAML text ([] when it has none); None when
    it is written in a form this reader does not know."""
    lines = [_code(ln) for ln in text.splitlines()]
    for i, line in enumerate(lines):
        m = re.match(r"^requires:\s*(.*)$", line)
        if not m:
            continue
        if m.group(1):  # requires: {debian: [a, b]}
            if re.fullmatch(r"\{\s*\}", m.group(1)):
                return []
            m = re.fullmatch(r"\{\s*debian:\s*\[(.*)\]\s*\}", m.group(1))
            return _flow(m.group(1)) if m else None
        for j, inner in enumerate(lines[i + 1 :], i + 1):
            if inner and not inner[0].isspace():
                return []  # the next top-level key: requires has no debian list
            m = re.match(r"^(\s+)debian:\s*(.*)$", inner)
            if not m:
                continue
            if m.group(2):
                m = re.match(r"^\[(.*)\]$", m.group(2))
                return _flow(m.group(1)) if m else None
            return _block(lines[j + 1 :], len(m.group(1)))
        return []
    return []


def _flow(inside: str) -> list[str] | None:
    items = [w.strip() for w in inside.split(",") if w.strip()]
    names = [re.fullmatch(_ITEM, w) for w in items]
    return [n.group(1) for n in names] if all(names) else None


def _block(lines: list[str], indent: int) -> list[str] | None:
    out = []
    for line in lines:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth <= indent and not line.lstrip().startswith("-"):
            break  # the next key
        m = re.fullmatch(r"\s*-\s+" + _ITEM, line)
        if not m:
            return None
        out.append(m.group(1))
    return out


def install_packages(text: str) -> dict[str, list[str]] | None:
    """Each install's ``debian`` list (``installs.NAME.debian``, a flow list on one line) of a
    recipe's YAML text; None when one is written in a form this reader does not know."""
    lines = [_code(ln) for ln in text.splitlines()]
    out: dict[str, list[str]] = {}
    inside, name, indent = False, None, None
    for line in lines:
        if line and not line[0].isspace():
            inside = re.match(r"^installs:\s*$", line) is not None
            continue
        if not inside or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        if depth == indent:
            name = line.strip().rstrip(":")
            continue
        m = re.match(r"^\s+debian:\s*(.*)$", line)
        if m and depth > indent:
            flow = re.fullmatch(r"\[(.*)\]", m.group(1))
            names = _flow(flow.group(1)) if flow else None
            if names is None:
                return None
            out[name] = names
    return out


def recipes_packages(recipes_dir: str | Path) -> list[str]:
    """Every Debian package the recipes in ``recipes_dir`` name, sorted, each once."""
    out: set[str] = set()
    for f in sorted(Path(recipes_dir).glob("*.yaml")):
        names = debian_packages(f.read_text())
        if names is None:
            raise ValueError(
                f"{f}: requires.debian: not a list this reader knows "
                "(apptune validate says how to write it)"
            )
        out.update(names)
        installs = install_packages(f.read_text())
        if installs is None:
            raise ValueError(
                f"{f}: installs.*.debian: not a list this reader knows "
                "(apptune validate says how to write it)"
            )
        for names in installs.values():
            out.update(names)
    return sorted(out)


def not_installed(packages: list[str]) -> list[str]:
    """The packages dpkg does not list as installed (all of them without dpkg)."""
    out = []
    for p in packages:
        try:
            q = subprocess.run(
                ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True
            )
        except OSError:
            return list(packages)
        if "install ok installed" not in q.stdout:
            out.append(p)
    return out


def missing(recipe, recipe_file, extras: dict) -> str | None:
    """Why a build of ``recipe`` cannot run on a partition with ``extras``: its Debian
    packages that are not installed, where the partition's builds use the machine's Debian
    packages (``extras.debian_packages``); None when nothing is missing."""
    if not extras.get("debian_packages") or not recipe.requires.debian:
        return None
    absent = not_installed(recipe.requires.debian)
    if not absent:
        return None
    return str(
        ApptuneError(
            recipe_file,
            "requires.debian",
            f"Debian package {', '.join(absent)} not installed (ci/bootstrap.sh installs it)",
        )
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m apptune.core.builds.syspackages RECIPES_DIR", file=sys.stderr)
        return 2
    try:
        names = recipes_packages(argv[0])
    except (OSError, ValueError) as e:
        print(f"apptune: error: {e}", file=sys.stderr)
        return 1
    for name in names:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
