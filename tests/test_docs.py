"""The user docs (README.md, docs/*.md) name only what exists: every ``apptune`` command,
subcommand and option in their code, every ``APPTUNE_*`` variable (and every variable the
code reads is documented), every repository path, and every relative link and its anchor."""

import argparse
import re
from pathlib import Path
from unittest import mock

import pytest

from apptune import cli

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def code_snippets(text: str) -> list[str]:
    """The code of a Markdown page: each line of a fenced block, each inline code span."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            out.append(line)
        else:
            out += re.findall(r"`([^`]+)`", line)
    return out


# ----------------------------------------------------------------------------- commands
#: ``apptune`` as a command (also ``.venv/bin/apptune``), not ``apptune/`` or ``apptune.x``.
INVOKE = re.compile(r"(?<![\w.-])(?:[\w.~$/-]*/)?apptune(?=[ \t])")
#: Words that end a command line: ReFrame's own options after ``--``, the shell's operators.
STOP = {"--", ";", "|", "||", "&&", "#", ">", ">>", "2>&1", "&"}


def cli_parser() -> argparse.ArgumentParser:
    """The parser ``apptune`` runs with, as :func:`apptune.cli.main` builds it: caught at
    its ``parse_args``, so no command runs."""

    class Built(Exception):
        pass

    def catch(self, *args, **kwargs):
        raise Built(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", catch):
        try:
            cli.main([])
        except Built as e:
            return e.args[0]
    raise AssertionError("apptune.cli.main parsed no arguments")


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices
    return {}


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


def unknown_in_command(words: list[str], top: argparse.ArgumentParser) -> list[str]:
    """What in one ``apptune ...`` command line the CLI does not have: a (sub)command, or
    an option of the command it follows. Words in capitals are placeholders (``APP``);
    ``list|prune|verify`` names several subcommands."""
    bad, p, want_command = [], top, True
    for word in words:
        last = "`" in word or word.endswith(";")
        w = word.split("`")[0].rstrip(";").strip("[](),")
        if not w or w in STOP:
            break
        if w.startswith("-") and len(w) > 1 and not w[1].isdigit():
            if w.split("=")[0] not in _options(p):
                bad.append(w)
        elif want_command:
            if w.isupper():  # apptune -v COMMAND
                break
            subs = _subcommands(p)
            names = w.split("|")
            bad += [n for n in names if n not in subs]
            if any(n not in subs for n in names):
                break
            p = subs[names[0]]
            want_command = bool(_subcommands(p))
        if last:
            break
    return bad


def test_every_apptune_command_and_option_in_the_docs_exists():
    top = cli_parser()
    found, bad = 0, []
    for doc in DOCS:
        for s in code_snippets(doc.read_text()):
            for m in INVOKE.finditer(s):
                found += 1
                bad += [
                    f"{doc.relative_to(REPO)}: {s.strip()}: {w}"
                    for w in unknown_in_command(s[m.end() :].split(), top)
                ]
    assert found > 50, f"only {found} apptune command lines found in the docs"
    assert bad == []


def test_the_command_check_finds_what_the_cli_lacks():
    top = cli_parser()
    assert unknown_in_command("run --mode ci --run-dir runs/x -- -n HPCC".split(), top) == []
    assert unknown_in_command("-v COMMAND".split(), top) == []
    assert unknown_in_command("cache list|prune|verify".split(), top) == []
    assert unknown_in_command("run --bogus 3".split(), top) == ["--bogus"]
    assert unknown_in_command("cache list|purge".split(), top) == ["purge"]
    assert unknown_in_command("frob --x".split(), top) == ["frob"]
    assert unknown_in_command("tune hpcc --budget 3 --nope; x --y".split(), top) == ["--nope"]
    assert unknown_in_command("baseline update --mode x".split(), top) == ["--mode"]


# ---------------------------------------------------------------------- environment variables
VAR = r"APPTUNE_[A-Z0-9_]*[A-Z0-9]"
#: How code reads a variable: Python's os.environ / getenv, the meters' path_option, a shell's $X.
READ = re.compile(
    rf"""(?:environ\.get\(\s*|environ\[\s*|getenv\(\s*|path_option\(\s*)["']({VAR})["']"""
    rf"|\$\{{?({VAR})"
)
CODE = [
    *(REPO / "apptune").rglob("*.py"),
    *(REPO / "ci").iterdir(),
    *(REPO / "site-config").glob("*.py"),
    *(REPO / "reframe-checks").rglob("*.py"),
    REPO / "Makefile",
]
#: Variables apptune sets for its own processes, or tests set; a user never does.
INTERNAL = {
    "APPTUNE_CCWRAP_CONFIG": "the build's compiler wrappers read their settings from it",
    "APPTUNE_RUN_TAG": "marks a job's processes for the run-quality measurement",
    "APPTUNE_POWERCAP_ROOT": "tests' fake sysfs (a site sets energy_meter_options.rapl.root)",
    "APPTUNE_PM_COUNTERS_ROOT": "tests' fake sysfs (energy_meter_options.pm_counters.root)",
}


def _code_text() -> str:
    return "\n".join(f.read_text(errors="replace") for f in CODE if f.is_file())


def test_every_environment_variable_in_the_docs_is_read_and_every_one_read_is_documented():
    code = _code_text()
    read = {a or b for a, b in READ.findall(code)}
    documented = {v for doc in DOCS for v in re.findall(VAR, doc.read_text())}
    assert set(INTERNAL) <= set(re.findall(VAR, code)), "INTERNAL names a variable no code uses"
    assert sorted(documented - read) == [], "named in the docs, read by no code"
    assert sorted(read - documented - set(INTERNAL)) == [], "read by the code, in no doc"


# ----------------------------------------------------------------------------------- paths
#: The repository's top-level directories a doc names paths under.
TOP = (
    ".ci",
    ".github",
    "apptune",
    "benchmarks",
    "build-recipes",
    "ci",
    "docs",
    "inputs",
    "patches",
    "reference",
    "reframe-checks",
    "site-config",
    "src",
    "tests",
    "tuning",
)
#: Example names of the walk-throughs: files a reader creates.
EXAMPLES = {"mylib", "mbw", "mycluster"}


def _expand(token: str) -> list[str]:
    """``inputs/hpcc/{ci,nightly}/x`` as its paths."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not m:
        return [token]
    return [
        p
        for alt in m.group(1).split(",")
        for p in _expand(token[: m.start()] + alt + token[m.end() :])
    ]


def repository_paths(snippet: str) -> list[str]:
    """Paths into this repository in a code snippet; placeholders (``APP``, ``<tier>``,
    globs), the walk-throughs' example names and shell comments (what a command writes)
    left out. ``src/`` is this repository's only where the directory exists
    (``src/noopt.c`` is a path in HPCC's source)."""
    out = []
    for word in re.split(r"(?:^|\s)#", snippet)[0].split():
        word = word.strip("()[],;:'\"").split("::")[0].split("#")[0]
        parts = word.split("/")
        if len(parts) < 2 or parts[0] not in TOP:
            continue
        if re.search(r"[<>*…$]|\.\.\.", word):
            continue
        if any(p.split(".")[0].isupper() or p.split(".")[0] in EXAMPLES for p in parts):
            continue
        if parts[0] == "src" and not (REPO / "src" / parts[1]).is_dir():
            continue
        out += _expand(word)
    return out


def test_every_repository_path_in_the_docs_exists():
    missing = [
        f"{doc.relative_to(REPO)}: {p}"
        for doc in DOCS
        for s in code_snippets(doc.read_text())
        for p in repository_paths(s)
        if not (REPO / p).exists()
    ]
    assert missing == []


def test_the_path_check_skips_placeholders_and_expands_alternatives():
    assert repository_paths("reference/APP/<tier>.yaml patches/APP/X.patch src/noopt.c") == []
    assert repository_paths("build-recipes/mylib.yaml tuning/APP.yaml") == []
    assert repository_paths("apptune baseline update  # -> reference/baselines/x/y.yaml") == []
    assert repository_paths("see inputs/hpcc/{ci,nightly}/input.yaml,") == [
        "inputs/hpcc/ci/input.yaml",
        "inputs/hpcc/nightly/input.yaml",
    ]
    assert repository_paths("tests/test_x.py::test_y src/mpi-micro/main.c") == [
        "tests/test_x.py",
        "src/mpi-micro/main.c",
    ]


# ----------------------------------------------------------------------------------- links
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces
    as hyphens, ``-1``, ``-2`` ... for repeats."""
    seen, out = {}, set()
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    bad, anchors = [], 0
    for doc in DOCS:
        text = doc.read_text()
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            anchors += bool(anchor)
            f = (doc.parent / path).resolve() if path else doc
            if not f.exists():
                bad.append(f"{doc.relative_to(REPO)}: {target}: no such file")
            elif anchor and anchor not in github_anchors(f.read_text()):
                bad.append(f"{doc.relative_to(REPO)}: {target}: no such heading")
    assert anchors > 20, f"only {anchors} links to a heading found in the docs"
    assert bad == []


def test_anchors_are_githubs():
    text = "# A `cmd` (x): y\n## Same\n## Same\n```\n# not a heading\n```\n## Émile's 8-bit"
    assert github_anchors(text) == {"a-cmd-x-y", "same", "same-1", "émiles-8-bit"}
