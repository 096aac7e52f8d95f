"""No two public classes of the package share a name: a name says what its class is (a
partition's RunQualityLimits is not a run's RunQuality), so a reader, a grep and an import
find the one meant."""

import ast
from collections import defaultdict
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "apptune"


def shared_class_names(pkg: Path = PKG) -> dict[str, list[str]]:
    """{class name: the modules defining it} for the public module-level classes that more
    than one module of ``pkg`` defines."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(pkg.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(pkg.parent)))
    return {name: mods for name, mods in where.items() if len(mods) > 1}


def test_a_class_name_defined_twice_is_found(tmp_path):
    """Two modules' public class Plan; private classes and a class inside a function are not
    the package's names."""
    two = "class Plan:\n    pass\n\n\nclass _Private:\n    pass\n"
    for name, text in {
        "a.py": two,
        "sub/b.py": two,
        "sub/c.py": "def f():\n    class Plan: ...\n",
    }.items():
        (tmp_path / "apptune" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "apptune" / name).write_text(text)
    assert shared_class_names(tmp_path / "apptune") == {
        "Plan": ["apptune/a.py", "apptune/sub/b.py"]
    }


def test_no_two_classes_of_the_package_share_a_name():
    assert shared_class_names() == {}
