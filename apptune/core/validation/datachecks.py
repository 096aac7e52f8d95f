"""The problems of one application's data (:func:`app_problems`): its recipe, inputs and
references, checked as :mod:`apptune.core.validation.validate` checks every application. Each check
appends what it finds (:class:`~apptune.errors.ApptuneError`) to a list and goes on, so
that every problem is reported, not the first."""

from __future__ import annotations

import dataclasses
import re
from fnmatch import fnmatchcase
from pathlib import Path

import jinja2
import jinja2.meta

from ... import paths
from ...errors import ApptuneError, expand
from ...models import FlagLadders, FromMemory, GridParam, InputSpec, Libraries, Recipe, TuningSpace
from ...templating import data_environment
from ...yamlio import load_model
from ..builds import syspackages
from ..data import faults, inputs, recipes
from ..verification import formats, verify


@dataclasses.dataclass
class SiteFacts:
    """What the recipes are checked against."""

    #: environment name -> compiler family (None where ``extras.family`` is missing);
    #: None when the site config could not be read (environments are then not checked).
    environments: dict[str, str | None] | None
    ladders: FlagLadders | None
    libraries: Libraries | None
    config: str = paths.DEFAULT_CONFIG


def collect_problems(found: list, fn, *args, **kw):
    """``fn(...)``, or None with its problems appended to ``found``."""
    try:
        return fn(*args, **kw)
    except ApptuneError as e:
        found.extend(expand(e))
        return None


# --------------------------------------------------------------------------- one application
def app_problems(app: str, site: SiteFacts) -> list[ApptuneError]:
    """Every problem of one application's recipe, inputs and references: each keeps the
    application from being built or verified (its baselines: :func:`baseline_problems`)."""
    found: list[ApptuneError] = []
    r = collect_problems(found, recipes.load_recipe, app)
    if r is None:
        return found
    rfile = recipes.recipe_path(app)
    _check_requires(r, rfile, found)
    _check_installs(r, rfile, site, found)
    families = _check_variants(r, rfile, site, found)
    _check_recipe_refs(r, rfile, site, families, found)
    found += formats.recipe_problems(r, rfile)
    produced = formats.recipe_fields(r)
    _check_build_templates(r, rfile, found)
    tiers = list(r.tiers)
    specs: dict[Path, InputSpec] = {}
    run_words = [("run.args", w) for w in r.run.args] + [
        (f"run.prerun[{i}].command", w) for i, s in enumerate(r.run.prerun) for w in s.command
    ]
    run_words += [(f"run.env.{k}", v) for k, v in r.run.env.items()]
    if r.run.scratch is not None:
        run_words += [("run.scratch.bytes", r.run.scratch.bytes or "")] + [
            (f"run.scratch.files[{i}].file", f.file) for i, f in enumerate(r.run.scratch.files)
        ]
    for tier in tiers:
        loaded = collect_problems(found, inputs.load_input, app, tier)
        params = None
        if loaded is not None:
            d, spec = loaded
            specs[d / "input.yaml"] = spec
            params = set(spec.parameters) | {"ranks"}
            if r.run.scratch is not None:  # the run's scratch directory
                params.add("scratch")
            collect_problems(found, inputs.check_stands_for, app, tier, tiers)
            _check_stdin(r, rfile, d / "input.yaml", spec, tier, found)
            for tmpl in spec.files.values():
                _check_names(
                    found,
                    (d / tmpl).read_text(errors="replace"),
                    params,
                    d / tmpl,
                    "template",
                    f"parameters of {_rel(d / 'input.yaml')}",
                )
            for field, word in run_words:
                _check_names(
                    found,
                    word,
                    params,
                    rfile,
                    field,
                    f"parameters of {_rel(d / 'input.yaml')} for tier {tier}",
                    word,
                )
        first = r.run.outputs[0].file if r.run.outputs else ""
        checks = verify.check_names(r.run.own_checks, first, r.run.figures)
        _check_reference(app, tier, params, produced, found, checks)
        for o in r.run.outputs:
            if o.format == "newick_rf":
                tree = formats.newick_rf.reference_tree(o, tier)
                if not tree.is_file():
                    found.append(
                        ApptuneError(
                            rfile,
                            "run.output.reference",
                            f"reference tree {_rel(tree)} for tier '{tier}' is missing",
                        )
                    )
    _check_numbers(app, specs, found)
    found += _check_patches(paths.patches_dir(r.name) / p.file for p in r.patches)
    return unique_problems(found)


def fault_problems(app: str) -> list[ApptuneError]:
    """Every problem of one application's planted faults (``reference/APP/sensitivity/``):
    they keep ``apptune sensitivity`` from running, not the application's checks. While its
    recipe does not load (its problems are said with it), the faults file's own."""
    try:
        r = recipes.load_recipe(app)
    except ApptuneError:
        found: list[ApptuneError] = []
        if faults.faults_path(app).is_file():
            collect_problems(found, faults.load, app)
        return found
    found = faults.problems(app, r)
    found += _check_patches(faults.patch_files(app))
    return unique_problems(found)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, FromMemory, GridParam)) and not isinstance(v, bool)


def _check_numbers(app: str, specs: dict[Path, InputSpec], found: list) -> None:
    """A parameter that is a number in one tier's input (or computed: ``fraction``,
    ``grid``), or that the tuning space sets to numbers, is a number in every tier's: the
    same template reads it (HPL's N as a word would crash HPCC at run time)."""
    numeric: dict[str, str] = {}
    for f, spec in specs.items():
        for name, v in spec.parameters.items():
            if _is_number(v):
                numeric.setdefault(name, _rel(f))
    space = paths.root() / "tuning" / f"{app}.yaml"
    if space.is_file():
        try:
            knobs = load_model(space, TuningSpace).input_knobs()
        except ApptuneError:
            knobs = {}  # reported with the tuning spaces
        values: dict[str, list] = {}
        for knob, k in knobs.items():
            for v in k.values:
                for name, x in v.items() if isinstance(v, dict) else [(knob, v)]:
                    values.setdefault(name, []).append(x)
        for name, vs in values.items():
            if all(_is_number(x) for x in vs):
                numeric.setdefault(name, _rel(space))
    for f, spec in specs.items():
        for name, v in spec.parameters.items():
            if name in numeric and not _is_number(v):
                found.append(
                    ApptuneError(
                        f,
                        f"parameters.{name}",
                        f"must be a number, as in {numeric[name]} (got {v!r})",
                    )
                )


def _check_patches(files) -> list[ApptuneError]:
    """Every patch file is a unified diff (whether it applies is known only against the
    unpacked source: the build's dry run says so, naming the hunk)."""
    found = []
    for pf in files:
        try:
            text = pf.read_text(errors="replace")
        except OSError:
            continue  # a missing patch file is the recipe's problem, reported with it
        bad = unified_diff_problem(text)
        if bad is not None:
            line, why = bad
            found.append(ApptuneError(pf, f"line {line}" if line else None, why))
    return found


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def unified_diff_problem(text: str) -> tuple[int | None, str] | None:
    """(line number or None, what is wrong) when ``text`` is not a unified diff GNU patch
    reads: a ``---``/``+++`` header per file, each followed by hunks whose lines match
    the counts of their ``@@`` header. Text around the diffs (a mail header, a commit
    message, a signature) is allowed, as patch allows it."""
    lines = text.splitlines()
    files, i = 0, 0
    while i < len(lines):
        if not (lines[i].startswith("--- ") and i + 1 < len(lines)):
            i += 1
            continue
        if not lines[i + 1].startswith("+++ "):
            i += 1
            continue
        files += 1
        i += 2
        if i >= len(lines) or not lines[i].startswith("@@"):
            return i + 1, "a file header ('---', '+++') without a hunk ('@@ -l,s +l,s @@')"
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if m is None:
                return i + 1, f"malformed hunk header {lines[i][:60]!r}"
            old = int(m.group(2) if m.group(2) is not None else 1)
            new = int(m.group(4) if m.group(4) is not None else 1)
            start, i = i, i + 1
            while old > 0 or new > 0:
                if i >= len(lines):
                    return start + 1, (
                        f"the hunk ends early: {old} line(s) of the old and {new} of the new "
                        "text are missing"
                    )
                c = lines[i][:1]
                if c in (" ", ""):  # context (an empty line: a blank context line)
                    old, new = old - 1, new - 1
                elif c == "-":
                    old -= 1
                elif c == "+":
                    new -= 1
                elif c != "\\":  # '\ No newline at end of file'
                    return i + 1, f"{lines[i][:60]!r} is not a line of a hunk (' ', '-' or '+')"
                if old < 0 or new < 0:
                    return start + 1, "the hunk has more lines than its '@@' header counts"
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
    if files == 0:
        return None, "not a unified diff: no file header ('--- a/FILE', '+++ b/FILE') found"
    return None


def _check_requires(r: Recipe, rfile: Path, found: list) -> None:
    """``requires.debian`` as ci/bootstrap.sh reads it, without a YAML parser."""
    read = syspackages.debian_packages(rfile.read_text(errors="replace"))
    if read != list(r.requires.debian):
        found.append(
            ApptuneError(
                rfile,
                "requires.debian",
                "write the list on one line (debian: [a, b]) or one '- name' a line under "
                "'debian:' inside a top-level 'requires:' block: ci/bootstrap.sh reads it "
                f"without a YAML parser and read {read if read is not None else 'nothing'}",
            )
        )


def _check_installs(r: Recipe, rfile: Path, site: SiteFacts, found: list) -> None:
    """``installs.NAME.debian`` as ci/bootstrap.sh reads it; an install's name is no flag
    ladder (a tier's variant would name both)."""
    read = syspackages.install_packages(rfile.read_text(errors="replace"))
    want = {n: list(i.debian) for n, i in r.installs.items() if i.debian}
    if read != want:
        found.append(
            ApptuneError(
                rfile,
                "installs",
                "write each install's debian list on one line (debian: [a, b]): "
                "ci/bootstrap.sh reads it without a YAML parser and read "
                f"{read if read is not None else 'nothing'}",
            )
        )
    ladders = {n for fam in site.ladders.families.values() for n in fam} if site.ladders else set()
    for name in sorted(set(r.installs) & ladders):
        found.append(
            ApptuneError(rfile, f"installs.{name}", "is a flag ladder's name: name it otherwise")
        )


def _check_stdin(r: Recipe, rfile: Path, input_file: Path, spec, tier: str, found: list) -> None:
    """A step's standard input is a file the tier's input makes (``files``, ``from_build``)."""
    made = [*spec.files, *spec.from_build]
    given = [("run.stdin", r.run.stdin)] + [
        (f"run.prerun[{i}].stdin", s.stdin) for i, s in enumerate(r.run.prerun)
    ]
    for field, name in given:
        if name is not None and name not in made:
            found.append(
                ApptuneError(
                    rfile,
                    field,
                    f"'{name}' is not a file the input of tier {tier} makes "
                    f"({_rel(input_file)} files and from_build: {', '.join(made) or 'none'})",
                )
            )


def _check_variants(r: Recipe, rfile: Path, site: SiteFacts, found: list) -> set[str]:
    """Variant names, environments and flag ladders of every tier; the compiler
    families the recipe is built with."""
    all_ladders = set().union(*map(set, site.ladders.families.values())) if site.ladders else None
    used: set[str] = set()
    for tname, tier in r.tiers.items():
        for env, specs in tier.variants.items():
            where = f"tiers.{tname}.variants.{env}"
            fam = None
            if site.environments is not None:
                if env not in site.environments:
                    found.append(
                        ApptuneError(
                            rfile,
                            where,
                            f"unknown environment '{env}' (site config "
                            f"{_rel(site.config)} has: {', '.join(sorted(site.environments))})",
                        )
                    )
                else:
                    fam = site.environments[env]
            if fam:
                used.add(fam)
            for spec in specs:
                try:
                    v = recipes.Variant.parse(spec, r, where)
                except ApptuneError as e:
                    found.append(e)
                    continue
                if site.ladders is None or v.ladder in r.installs:
                    continue
                ladders = site.ladders.families.get(fam) if fam else None
                if ladders is not None and v.ladder not in ladders:
                    found.append(
                        ApptuneError(
                            rfile,
                            where,
                            f"'{spec}': unknown flag ladder '{v.ladder}' "
                            f"for compiler family {fam} (allowed: {', '.join(sorted(ladders))})",
                        )
                    )
                elif ladders is None and v.ladder not in all_ladders:
                    found.append(
                        ApptuneError(
                            rfile,
                            where,
                            f"'{spec}': unknown flag ladder '{v.ladder}' "
                            f"(allowed: {', '.join(sorted(all_ladders))})",
                        )
                    )
    return used


def _check_recipe_refs(
    r: Recipe, rfile: Path, site: SiteFacts, families: set[str], found: list
) -> None:
    """Names the recipe takes from the site config: per-file ladders, libraries, environments."""
    if site.ladders is not None:
        fams = sorted(families & set(site.ladders.families)) or sorted(site.ladders.families)
        for i, o in enumerate(r.per_file):
            missing = [
                f for f in fams if o.flags is not None and o.flags not in site.ladders.families[f]
            ]
            if missing:
                allowed = sorted(set.intersection(*(set(site.ladders.families[f]) for f in fams)))
                found.append(
                    ApptuneError(
                        rfile,
                        f"per_file[{i}].flags",
                        f"unknown flag ladder '{o.flags}' for compiler family "
                        f"{', '.join(missing)} (allowed: {', '.join(allowed)})",
                    )
                )
    if site.libraries is not None:
        for axis, options in r.axes.items():
            for name, opt in options.items():
                if opt.library and opt.library not in site.libraries.libraries:
                    found.append(
                        ApptuneError(
                            rfile,
                            f"axes.{axis}.{name}.library",
                            f"'{opt.library}' is not in site-config/libraries.yaml "
                            f"(libraries: {', '.join(sorted(site.libraries.libraries))})",
                        )
                    )
    if site.environments is not None:
        for i, x in enumerate(r.build.expected_failures):
            for env in x.environments:
                if env not in site.environments:
                    found.append(
                        ApptuneError(
                            rfile,
                            f"build.expected_failures[{i}].environments",
                            f"unknown environment '{env}' (site config has: "
                            f"{', '.join(sorted(site.environments))})",
                        )
                    )


def _check_build_templates(r: Recipe, rfile: Path, found: list) -> None:
    """Build words, product paths and build-recipes/templates/ files use only the names
    a build plan gives them (see docs/adding-an-application.md, "Templates see")."""
    known = set(recipes.BuildPlan.model_fields) | {"cc", "cxx", "ftn"}
    what = "names of the build plan"
    b = r.build
    words = [("build.args", w) for w in b.args] + [("build.targets", w) for w in b.targets]
    for i, st in enumerate(b.steps):
        words += [
            (f"build.steps[{i}]", w) for w in (st.make if st.make is not None else st.command)
        ]
    for i, p in enumerate(b.products):
        words.append((f"build.products[{i}]", p if isinstance(p, str) else p.src))
    from ..builds.steps import jinja_env  # the build's environment (its filters: makeflags)

    env = jinja_env()
    for field, w in words:
        _check_names(found, w, known, rfile, field, what, w, env)
    for t in b.templates:
        f = paths.recipes_dir() / "templates" / t.src
        if f.is_file():
            _check_names(found, f.read_text(errors="replace"), known, f, "template", what, env=env)


def _check_names(
    found: list,
    text: str,
    known: set[str],
    file,
    field: str,
    what: str,
    word: str | None = None,
    env: jinja2.Environment | None = None,
) -> None:
    """A jinja2 template uses only ``known`` names (besides jinja2's own)."""
    if "{" not in text:  # no jinja2 delimiter ({{, {%, {#): plain words, nothing to parse
        return
    env = env or data_environment()
    head = f"{word!r}: " if word is not None else ""
    try:
        ast = env.parse(text)
        used = jinja2.meta.find_undeclared_variables(ast) - set(env.globals) - _defaulted(ast)
    except jinja2.TemplateSyntaxError as e:
        found.append(
            ApptuneError(
                file,
                field if word is not None else f"line {e.lineno}",
                f"{head}template syntax error: {e.message}",
            )
        )
        return
    bad = sorted(used - known)
    if bad:
        names = ", ".join(f"'{n}'" for n in bad)
        found.append(
            ApptuneError(
                file, field, f"{head}undefined name {names} ({what}: {', '.join(sorted(known))})"
            )
        )


def _defaulted(ast) -> set[str]:
    """Names a template only ever uses with a fallback (``{{ pause | default(0) }}``): a tier
    that does not define them is fine."""
    from jinja2 import nodes

    uses: dict[str, int] = {}
    for n in ast.find_all(nodes.Name):
        if n.ctx == "load":
            uses[n.name] = uses.get(n.name, 0) + 1
    guarded: dict[str, int] = {}
    for f in ast.find_all(nodes.Filter):
        if f.name in ("default", "d") and isinstance(f.node, nodes.Name):
            guarded[f.node.name] = guarded.get(f.node.name, 0) + 1
    return {n for n, k in guarded.items() if uses.get(n) == k}


def _check_reference(
    app: str,
    tier: str,
    params: set[str] | None,
    produced: set[str] | None,
    found: list,
    checks: set[str] = frozenset(),
) -> None:
    ref_file = paths.reference_file(app, tier)
    if not ref_file.exists():
        found.append(
            ApptuneError(
                ref_file,
                None,
                f"no stored reference for {app} tier '{tier}': every tier's numbers are verified",
            )
        )
        return
    loaded = collect_problems(found, verify.load_reference, app, tier)
    if loaded is None:
        return
    _, ref = loaded
    for name, tol in ref.fields.items():
        if params is not None:
            for dep in tol.depends_on:
                if dep not in params:
                    found.append(
                        ApptuneError(
                            ref_file,
                            f"fields.{name}.depends_on",
                            f"'{dep}' is not a parameter of "
                            f"{_rel(paths.inputs_dir(app, tier) / 'input.yaml')} "
                            f"(parameters: {', '.join(sorted(params))})",
                        )
                    )
        if produced is not None and not formats.produces(produced, name):
            found.append(
                ApptuneError(
                    ref_file,
                    f"fields.{name}",
                    f"no output of {_rel(recipes.recipe_path(app))} produces this field "
                    f"({formats.gives(produced, name)})",
                )
            )
    names = set(ref.fields) | set(checks)
    for key, kw in ref.xfail.items():
        for i, pattern in enumerate(kw.fails):
            if not any(fnmatchcase(n, pattern) for n in names):
                found.append(
                    ApptuneError(
                        ref_file,
                        f"xfail.{key}.fails[{i}]",
                        f"'{pattern}' names no field of this reference nor a check of the run "
                        f"(own checks by file, {', '.join(map(repr, verify.RUN_CHECKS))}, "
                        f"'figure NAME')",
                    )
                )


def unique_problems(found: list[ApptuneError]) -> list[ApptuneError]:
    seen, out = set(), []
    for p in found:
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out


_rel = paths.rel
