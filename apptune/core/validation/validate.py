"""Every data file checked before anything is built, with every problem reported.

A problem is an :class:`~apptune.errors.ApptuneError`, one line ``FILE: FIELD: message``.
Nothing here stops at the first one: :func:`problems` returns them all, for

* ``apptune validate`` (prints each, exit 1 if there is any);
* ``apptune run``, which checks first and leaves out the applications with problems
  (their check directories ``reframe-checks/APP/``), so the others still run;
* the check files (``reframe-checks/APP/*.py``), which load their recipe with
  :func:`apptune.rfm.load_app`: plain ReFrame then skips the file of an application
  with problems, printing these lines, and loads the others.

What is checked, per application: the recipe (schema, ``requires.debian`` in a form
ci/bootstrap.sh reads without a YAML parser, patch and template files, variant
names against the axes and the flag ladders of each environment's compiler family,
environments against the site config, libraries, per-file ladders, figures against what
the outputs produce, names in templates), each tier's input (schema, template files and
the names they use, ``stands_for``), reference (schema, finite tolerances, ``min`` <=
``max``, ``depends_on`` against the input's parameters, fields against the outputs, the
stored tree of a ``newick_rf`` output), baselines and planted faults (``apptune
sensitivity``'s: their problems never keep a run from running); then the site config (flag ladders,
libraries, environments' ``extras``) and the tuning spaces.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ... import paths
from ...errors import ApptuneError
from ...models import FlagLadders, Libraries
from ...models.cluster import QUIET_WAIT_MAX, line_break_problems
from ...yamlio import load_model, load_yaml
from ..data import recipes
from ..data.site import load_reframe_config
from ..judge import baselines
from ..run import quality
from .datachecks import (
    SiteFacts,
    app_problems,
    collect_problems,
    fault_problems,
    unique_problems,
)

#: The site's data files besides flag-ladders.yaml (held to one line per value too).
SITE_DATA_FILES = ("libraries.yaml", "recommended.yaml")

#: What every environment's ``extras`` must say (:class:`apptune.core.data.recipes.Toolchain`).
TOOLCHAIN_EXTRAS = ("family", "mpi", "mpi_standard", "blas")


@dataclasses.dataclass
class Findings:
    #: The site config's problems: no application can be trusted to build with them.
    site: list[ApptuneError]
    #: Every application (recipe) -> its problems ([] when its data is valid).
    apps: dict[str, list[ApptuneError]]
    #: Files no check reads (the tuning spaces of ``apptune tune``).
    other: list[ApptuneError]
    #: Every application -> the problems of its baseline files: they withhold the
    #: performance verdict (the run says why), never the build or the verification.
    baselines: dict[str, list[ApptuneError]] = dataclasses.field(default_factory=dict)
    #: What the recipes were checked against (the site config's environments among them).
    site_facts: SiteFacts | None = None
    #: Every application -> the problems of its planted faults (``reference/APP/sensitivity/``):
    #: they keep ``apptune sensitivity`` from measuring the verification, never a run.
    faults: dict[str, list[ApptuneError]] = dataclasses.field(default_factory=dict)

    @property
    def bad_apps(self) -> list[str]:
        return [a for a, ps in self.apps.items() if ps]

    def all(self) -> list[ApptuneError]:
        """Every problem (``apptune validate``)."""
        return _unique([*self.of_runs(), *(p for ps in self.faults.values() for p in ps)])

    def of_runs(self) -> list[ApptuneError]:
        """The problems that concern a run (``apptune run`` names them, and its exit status
        says there were some): all but the planted faults'."""
        apps = [p for ps in self.apps.values() for p in ps]
        return _unique(
            [*self.site, *apps, *(p for ps in self.baselines.values() for p in ps), *self.other]
        )


def _unique(problems) -> list[ApptuneError]:
    out, seen = [], set()
    for p in problems:
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out


def problems(config: str | Path | None = None) -> list[ApptuneError]:
    """Every problem of the tree's data (``config``: the ReFrame site config file)."""
    return check(config).all()


def check(config: str | Path | None = None) -> Findings:
    """Every problem of the tree's data, by application."""
    site, site_problems = load_site_facts(config)
    names = recipes.list_recipes()
    apps = {app: app_problems(app, site) for app in names}
    return Findings(
        site_problems,
        apps,
        tuning_problems(apps),
        {a: baseline_problems(a) for a in names},
        site,
        {a: fault_problems(a) for a in names},
    )


# --------------------------------------------------------------------------- site
def load_site_facts(
    config: str | Path | None = None,
    environments: list[dict] | None = None,
    systems: list[dict] | None = None,
) -> tuple[SiteFacts, list[ApptuneError]]:
    """The flag ladders, libraries and environments' compiler families, and their problems.

    The environments and systems are ``environments`` and ``systems`` (ReFrame's
    configuration, inside a ReFrame session) or those of the site config file ``config``
    (default: site-config/settings.py).
    """
    found: list[ApptuneError] = []
    ladders_file = paths.site_dir() / "flag-ladders.yaml"
    ladders = collect_problems(found, load_model, ladders_file, FlagLadders)
    libraries = collect_problems(found, load_model, paths.site_dir() / "libraries.yaml", Libraries)
    cfg = Path(config) if config is not None else paths.site_dir() / "settings.py"
    if not cfg.is_absolute():
        cfg = paths.root() / cfg
    if environments is None:
        environments, systems = _config_parts(cfg, found)
    found += site_value_problems(cfg, environments or [], systems or [])
    for f in (ladders_file, *(paths.site_dir() / n for n in SITE_DATA_FILES)):
        # the site's flags reach Makefiles and command lines: one line each, as every value
        found += collect_problems([], lambda f: line_break_problems(f, load_yaml(f)), f) or []
    families: dict[str, str | None] | None = None
    if environments is not None:
        families = {}
        for e in environments:
            name, extras = e.get("name"), e.get("extras") or {}
            if name == "builtin" and not extras:
                continue  # ReFrame's own environment, never named by a recipe
            missing = [k for k in TOOLCHAIN_EXTRAS if k not in extras]
            if missing and "target_systems" not in e:
                found.append(
                    ApptuneError(
                        cfg,
                        f"environments.{name}.extras",
                        f"missing {', '.join(missing)} (the toolchain facts "
                        f"apptune builds with: {', '.join(TOOLCHAIN_EXTRAS)})",
                    )
                )
            fam = extras.get("family")
            if families.get(name) is None:
                families[name] = fam
            if (
                fam
                and ladders is not None
                and fam not in ladders.families
                and not any(p.field == f"families.{fam}" for p in found)
            ):
                found.append(
                    ApptuneError(
                        ladders_file,
                        f"families.{fam}",
                        f"no flag ladders for compiler family '{fam}' of environment "
                        f"'{name}' (families: {', '.join(sorted(ladders.families))})",
                    )
                )
    return SiteFacts(families, ladders, libraries, str(cfg)), found


def _config_parts(cfg: Path, found: list) -> tuple[list[dict] | None, list[dict]]:
    """The environments and systems of the site config file ``cfg``."""
    try:
        site = load_reframe_config(cfg)
    except ApptuneError as e:
        found.append(e)
        return None, []
    return list(site["environments"]), list(site["systems"])


def site_value_problems(cfg: Path, environments: list[dict], systems: list[dict]):
    """What the site config's environments and systems hold that no job script may: a
    value ending a line (:func:`apptune.core.data.site.line_break_problems`), and run-quality
    limits or a quiet wait out of range in a partition's ``extras`` (a cluster file's are
    checked as it loads)."""
    found: list[ApptuneError] = []
    for e in environments:
        e = {**e, "env_vars": _pairs(e.get("env_vars"))}
        found += line_break_problems(cfg, e, ("environments", e.get("name")))
    for sy in systems:
        for p in sy.get("partitions") or []:
            where = ("systems", sy.get("name"), "partitions", p.get("name"))
            p = {**p, "env_vars": _pairs(p.get("env_vars"))}
            found += line_break_problems(cfg, p, where)
            found += _extras_problems(cfg, p.get("extras") or {}, ".".join(map(str, where)))
        rest = {k: v for k, v in sy.items() if k != "partitions"}
        found += line_break_problems(cfg, rest, ("systems", sy.get("name")))
    return found


def _pairs(env_vars) -> dict | list:
    """ReFrame's ``env_vars`` (a list of [name, value]) as a mapping, so a problem names
    the variable."""
    try:
        return {str(k): v for k, v in env_vars or []}
    except (TypeError, ValueError):
        return env_vars


def _extras_problems(cfg: Path, extras: dict, where: str) -> list[ApptuneError]:
    found = []
    try:
        quality.Limits.from_dict(extras.get("run_quality"))
    except (TypeError, ValueError) as e:
        found.append(ApptuneError(cfg, f"{where}.extras.run_quality", str(e)))
    wait = extras.get("quiet_wait_s", 0)
    if not (isinstance(wait, (int, float)) and 0 <= wait <= QUIET_WAIT_MAX):
        found.append(
            ApptuneError(
                cfg,
                f"{where}.extras.quiet_wait_s",
                f"must be seconds from 0 to {QUIET_WAIT_MAX} (got {wait!r})",
            )
        )
    return found


def baseline_problems(app: str) -> list[ApptuneError]:
    """The problems of ``app``'s baseline files (``reference/baselines/*/APP.yaml``)."""
    found: list[ApptuneError] = []
    for bdir in sorted((paths.root() / "reference" / "baselines").glob("*")):
        if bdir.is_dir():
            collect_problems(found, baselines.load, bdir.name, app)
    return unique_problems(found)


# --------------------------------------------------------------------------- others
def tuning_problems(apps: dict[str, list] | None = None) -> list[ApptuneError]:
    """Problems of the tuning spaces (tuning/APP.yaml); those of an application whose own
    data has problems (``apps``) are left to that application's report."""
    found: list[ApptuneError] = []
    spaces = sorted((paths.root() / "tuning").glob("*.yaml"))
    if not spaces:
        return found
    from ..data.spaces import load_space

    known = recipes.list_recipes()
    for f in spaces:
        if f.stem not in known:
            found.append(
                ApptuneError(
                    f,
                    None,
                    f"no recipe {paths.rel(recipes.recipe_path(f.stem))} for this tuning space",
                )
            )
        elif not (apps or {}).get(f.stem):
            collect_problems(found, load_space, f.stem, f)
    return found
