"""Application inputs per tier: templates plus parameters, some computed from the node."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import jinja2

from ... import paths
from ...errors import ApptuneError
from ...models import FromMemory, GridParam, InputSpec
from ...templating import data_environment
from ...yamlio import atomic_copy, atomic_write_text, inside, load_model


def load_input(app: str, tier: str) -> tuple[Path, InputSpec]:
    d = paths.inputs_dir(app, tier)
    f = d / "input.yaml"
    if not f.is_file():
        raise ApptuneError(f, None, f"no input for {app} tier '{tier}'")
    spec = load_model(f, InputSpec)
    for dest, tmpl in spec.files.items():
        if not (d / tmpl).is_file():
            raise ApptuneError(f, f"files.{dest}", f"template {tmpl} not found in {d}")
    return d, spec


def check_stands_for(app: str, tier: str, tiers: list[str]) -> InputSpec:
    """A reduced (ci) input names the input it stands for, so a reader knows what a green
    ci run proves: ``stands_for: <tier> (what that input is)``, the tier one of the recipe's.
    An application with one tier only (ci or nightly) has nothing to name: there
    ``stands_for`` is optional and free text."""
    d, spec = load_input(app, tier)
    f = d / "input.yaml"
    others = [t for t in tiers if t != tier]
    if not others:
        return spec
    if spec.stands_for is None:
        if tier == "ci":
            raise ApptuneError(
                f,
                "stands_for",
                f"a ci input must name the input it stands for: "
                f"one of {', '.join(others)}, then what it is, e.g. "
                f"'{others[0]} (what the {others[0]} input is)'",
            )
        return spec
    target = spec.stands_for.split()[0] if spec.stands_for.split() else ""
    if target not in others:
        raise ApptuneError(
            f,
            "stands_for",
            f"must start with another tier of {app} ({', '.join(others)}), not {target!r}",
        )
    return spec


def node_memory_bytes() -> int:
    """Physical memory of this node, from /proc/meminfo (MemTotal)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise ApptuneError("/proc/meminfo", "MemTotal", "not found")


def squarest_grid(ranks: int) -> tuple[int, int]:
    p = int(math.isqrt(ranks))
    while ranks % p:
        p -= 1
    return p, ranks // p


def resolve_parameters(
    spec: InputSpec, ranks: int, nodes: int = 1, mem_per_node: int | None = None
) -> dict:
    values = {}
    for name, v in spec.parameters.items():
        if isinstance(v, FromMemory):
            mem = (mem_per_node or node_memory_bytes()) * nodes
            n = int((v.fraction * mem / v.element_bytes) ** (1.0 / v.power))
            n -= n % v.multiple_of
            values[name] = max(n, v.minimum)
        elif isinstance(v, GridParam):
            p, q = squarest_grid(ranks)
            values[name] = p if v.grid == "P" else q
        else:
            values[name] = v
    values.setdefault("ranks", ranks)
    return values


def render_words(words: list[str], params: dict, app: str, field: str) -> list[str]:
    """Render each word of an argument list as a template (never split, never a shell).

    A word that renders empty is dropped, so optional arguments are written as
    conditionals: ``["{{ '-q' if partitions }}", "{{ partitions }}"]``.
    """
    env = data_environment()
    out = []
    for w in words:
        try:
            r = env.from_string(w).render(**params)
            if r != "" or w == "":
                out.append(r)
        except jinja2.TemplateError as e:
            raise ApptuneError(paths.recipes_dir() / f"{app}.yaml", field, f"{w!r}: {e}") from None
    return out


def render(
    app: str,
    tier: str,
    dest: Path,
    ranks: int,
    nodes: int = 1,
    mem_per_node: int | None = None,
    build_dir: Path | None = None,
    overrides: dict | None = None,
) -> dict:
    """Write the tier's input files into ``dest``; return the parameters used.

    ``overrides`` replaces parameters of the tier (``apptune tune``'s input knobs, e.g.
    HPL's N and NB); each must be a parameter the tier's input.yaml defines."""
    d, spec = load_input(app, tier)
    params = resolve_parameters(spec, ranks, nodes, mem_per_node)
    for name, value in (overrides or {}).items():
        if name not in params:
            raise ApptuneError(
                d / "input.yaml",
                f"parameters.{name}",
                f"no such parameter to override (the input has: {', '.join(sorted(params))})",
            )
        params[name] = value
    for out, product in spec.from_build.items():
        src = Path(build_dir or ".") / product
        if build_dir is None or not (src.is_file() or src.is_dir()) or not inside(build_dir, src):
            raise ApptuneError(
                d / "input.yaml",
                f"from_build.{out}",
                f"build product '{product}' not found in {build_dir} "
                f"(list it in the recipe's build.products, or a path of its build.tree.paths "
                f"as tree/PATH)",
            )
        _check_inside(dest, out, d / "input.yaml", f"from_build.{out}")
        if src.is_dir():  # a directory of the build's install tree, e.g. a test's inputs
            shutil.copytree(src, Path(dest) / out, symlinks=False, dirs_exist_ok=True)
        else:
            atomic_copy(src, Path(dest) / out)
    env = data_environment(jinja2.FileSystemLoader(d))
    for out, tmpl in spec.files.items():
        try:
            text = env.get_template(tmpl).render(**params)
        except jinja2.TemplateError as e:
            raise ApptuneError(d / tmpl, "template", str(e)) from None
        _check_inside(dest, out, d / "input.yaml", f"files.{out}")
        atomic_write_text(Path(dest) / out, text)
    return params


def _check_inside(dest: Path, out: str, file: Path, field: str) -> None:
    """An input file is written into the run's directory, never elsewhere (a link found at
    its name is replaced, not written through)."""
    if not inside(dest, Path(dest) / out):
        raise ApptuneError(
            file, field, f"{out} leads outside the run's directory (an absolute path or '..')"
        )
