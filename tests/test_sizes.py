"""The package stays in rooms a reader can hold: no module of ``apptune/`` is longer than
:data:`MAX_MODULE_LINES` lines and no function (or method) longer than
:data:`MAX_FUNCTION_LINES`; a longer one is split by what it does (a module per step, a
function per phase) before it grows further."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "apptune"
#: Lines of a module at the most (docstrings and comments count: they are read too).
MAX_MODULE_LINES = 600
#: Lines of a function or method at the most, from its ``def`` to its last line.
MAX_FUNCTION_LINES = 120


def long_modules(pkg: Path = PKG, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """{module path: lines} of the package's modules over ``limit`` lines."""
    out = {}
    for p in sorted(pkg.rglob("*.py")):
        n = len(p.read_text().splitlines())
        if n > limit:
            out[str(p.relative_to(pkg.parent))] = n
    return out


def long_functions(pkg: Path = PKG, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """{``path:name``: lines} of the package's functions and methods over ``limit`` lines."""
    out = {}
    for p in sorted(pkg.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out[f"{p.relative_to(pkg.parent)}:{node.name}"] = n
    return out


def test_the_finders_measure_modules_and_functions(tmp_path):
    pkg = tmp_path / "apptune"
    pkg.mkdir()
    (pkg / "small.py").write_text("def f():\n    return 1\n")
    body = "".join(f"    x{i} = {i}\n" for i in range(5))
    (pkg / "big.py").write_text(
        "import os\n\n\ndef g():\n"
        + body
        + "\n\nclass C:\n    def m(self):\n"
        + body.replace("    ", "        ")
    )
    assert long_modules(pkg, limit=10) == {"apptune/big.py": 18}
    assert long_functions(pkg, limit=5) == {"apptune/big.py:g": 6, "apptune/big.py:m": 6}
    assert long_functions(pkg, limit=6) == {}


def test_no_module_is_longer_than_the_limit():
    assert long_modules() == {}, f"split these modules (over {MAX_MODULE_LINES} lines)"


def test_no_function_is_longer_than_the_limit():
    assert long_functions() == {}, f"cut these functions (over {MAX_FUNCTION_LINES} lines)"
