"""The package's modules form no import cycle: no two modules import each other, even
through others or from inside a function; and every import points down its layers: the
entry point, the commands, the tools beside the reports and the ReFrame glue, the history,
the core, the energy meters, the schemas and the shared base modules, each layer importing
only the layers below it, and every module of the package in one of them; and the core's
wings in the same way, the data at the bottom, the validation on top."""

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "apptune"


def _module_name(path: Path, pkg: Path) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """{module: the package's modules it imports}, from every import statement in it."""
    files = {_module_name(p, pkg): p for p in sorted(pkg.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    up = up[: len(up) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from . import x` imports the module x when there is one
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for t in targets:
                # the module itself, or the nearest enclosing module of the package
                while t and t not in files:
                    t = t.rpartition(".")[0]
                # apptune/__init__.py (the version) is left out: every module is below it
                if t and t != mod and t != "apptune":
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_cycle_finder_finds_one_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "apptune"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.c import g\n")
    (pkg / "sub/__init__.py").write_text("")
    (pkg / "sub/c.py").write_text("import apptune.a\n")
    assert find_cycle(import_graph(pkg)) == ["apptune.a", "apptune.b", "apptune.sub.c", "apptune.a"]
    (pkg / "sub/c.py").write_text("import os\n")
    assert find_cycle(import_graph(pkg)) is None


def test_no_module_of_the_package_imports_itself_through_others():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


#: The package's layers, top down; a module imports only from its own layer and the ones
#: below. The tools, the reports and the ReFrame glue are one layer: none imports another.
LAYERS = (
    ("entry point", ("apptune.__main__", "apptune.cli")),
    # one module per command, and the session of the suite they share (commands/workflow.py)
    ("commands", ("apptune.commands",)),
    ("tools, reports and the ReFrame glue", ("apptune.tools", "apptune.report", "apptune.rfm")),
    # a run directory read into records, the history store, change points, verdicts
    ("history", ("apptune.history",)),
    # what builds, runs and verifies: recipes, sources, the build, inputs, the run, outputs
    # checked against references and baselines, every data file validated
    ("core", ("apptune.core",)),
    ("energy", ("apptune.energy",)),
    ("schemas", ("apptune.models",)),
    # what every layer uses: errors, file names, paths, YAML, templates, figures, file locks,
    # and the machine and placement facts the schemas check against
    (
        "base",
        (
            "apptune.constants",
            "apptune.errors",
            "apptune.figures",
            "apptune.locks",
            "apptune.machine",
            "apptune.paths",
            "apptune.placement",
            "apptune.templating",
            "apptune.yamlio",
        ),
    ),
)


#: The core's wings, top down, as :data:`LAYERS` are the package's: a wing imports only
#: from itself and the wings below; the builds and the verification are side by side.
CORE_WINGS = (
    # every data file checked before anything starts
    ("validation", ("apptune.core.validation",)),
    # performance against the baselines, and what changed between two runs
    ("judge", ("apptune.core.judge",)),
    # one timed run: its plan, the runner on the node, the run record; tune's and bisect's
    # trials; the watch over Slurm jobs and ReFrame
    ("run", ("apptune.core.run",)),
    # the builds of a variant and their cache; the outputs read and verified
    ("builds and verification", ("apptune.core.builds", "apptune.core.verification")),
    # recipes, inputs, the site, the tuning spaces, the planted faults
    ("data", ("apptune.core.data",)),
)


def layer_of(module: str, layers=LAYERS) -> int:
    """The index of ``module``'s layer in ``layers`` (``len(layers)``: in none)."""
    for i, (_, prefixes) in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return len(layers)


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of a module from a layer above its own, as ``a -> b``."""
    return [
        f"{m} -> {d}"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if layer_of(d, layers) < layer_of(m, layers)
    ]


def sideways_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import between two packages of one layer (a tool importing the report, say),
    as ``a -> b``; the modules of one layer that are no package (the base) may."""
    packages = {p for _, ps in layers for p in ps if any(m.startswith(p + ".") for m in graph)}

    def package(m: str) -> str | None:
        return next((p for p in packages if m == p or m.startswith(p + ".")), None)

    return [
        f"{m} -> {d}"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if layer_of(d, layers) == layer_of(m, layers)
        and package(m)
        and package(d)
        and package(m) != package(d)
    ]


def core_graph() -> dict[str, set[str]]:
    """The import graph among the core's modules."""

    def core(m: str) -> bool:
        return m.startswith("apptune.core.")

    return {m: {d for d in deps if core(d)} for m, deps in import_graph().items() if core(m)}


def test_an_import_from_a_layer_above_is_found(tmp_path):
    pkg = tmp_path / "apptune"
    (pkg / "tools").mkdir(parents=True)
    for f in ("__init__.py", "tools/__init__.py", "tools/t.py", "cli.py"):
        (pkg / f).write_text("")
    (pkg / "core.py").write_text("def f():\n    from .tools import t\n")
    assert upward_imports(import_graph(pkg)) == [
        "apptune.core -> apptune.tools",
        "apptune.core -> apptune.tools.t",
    ]
    (pkg / "core.py").write_text("")
    (pkg / "tools/t.py").write_text("from .. import core\n")
    assert upward_imports(import_graph(pkg)) == []


def test_every_import_points_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_an_import_between_two_packages_of_one_layer_is_found(tmp_path):
    pkg = tmp_path / "apptune"
    for d in ("tools", "report"):
        (pkg / d).mkdir(parents=True)
    for f in ("__init__.py", "tools/__init__.py", "report/__init__.py", "report/r.py"):
        (pkg / f).write_text("")
    (pkg / "tools/t.py").write_text("from ..report import r\n")
    assert sideways_imports(import_graph(pkg)) == [
        "apptune.tools.t -> apptune.report",
        "apptune.tools.t -> apptune.report.r",
    ]
    (pkg / "tools/t.py").write_text("from .. import errors\n")
    (pkg / "errors.py").write_text("from . import paths\n")
    (pkg / "paths.py").write_text("")
    assert sideways_imports(import_graph(pkg)) == []


def test_every_module_is_in_a_layer():
    """A new module is placed in a layer (a folder of one, or the base by name)."""
    assert [
        m for m in sorted(import_graph()) if m != "apptune" and layer_of(m) == len(LAYERS)
    ] == []


def test_no_two_packages_of_one_layer_import_each_other():
    assert sideways_imports(import_graph()) == []


def test_every_import_of_the_core_points_down_its_wings():
    assert upward_imports(core_graph(), CORE_WINGS) == []


def test_the_builds_and_the_verification_do_not_import_each_other():
    assert sideways_imports(core_graph(), CORE_WINGS) == []


def test_every_module_of_the_core_is_in_a_wing():
    """A new module of the core is placed in a wing (a folder of apptune/core/)."""
    assert [m for m in sorted(core_graph()) if layer_of(m, CORE_WINGS) == len(CORE_WINGS)] == []


def test_no_module_is_named_as_its_wing():
    """``apptune.core.run.run`` would say nothing its wing does not: a module of a wing is
    named for what it does there."""
    assert [
        m
        for m in sorted(core_graph())
        if len(m.split(".")) > 3 and m.split(".")[3] == m.split(".")[2]
    ] == []


def test_a_check_file_imports_from_reframe_and_the_glue_only():
    """A check file (reframe-checks/APP/*.py, and the one ``apptune new`` writes) imports from
    ReFrame and ``apptune.rfm`` only: the package's insides can move without breaking a check
    nobody edits by hand."""
    repo = PKG.parent
    files = sorted((repo / "reframe-checks").glob("*/*.py"))
    assert len(files) > 2
    # the template, with its jinja2 names made Python ones
    template = (repo / "apptune/templates/new-check.py.j2").read_text()
    texts = {f: f.read_text() for f in files}
    texts[repo / "apptune/templates/new-check.py.j2"] = re.sub(r"\{\{[^}]*\}\}", "X", template)
    for f, text in texts.items():
        for node in ast.walk(ast.parse(text, str(f))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            bad = [n for n in names if n.split(".")[0] == "apptune" and n != "apptune.rfm"]
            assert not bad, f"{f.relative_to(repo)}: imports {bad[0]} (import it from apptune.rfm)"
