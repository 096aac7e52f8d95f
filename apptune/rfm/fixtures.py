"""The fixtures of an application check and what they share with it: the source fetched
(:class:`SourceFetch`), a build per environment and variant (:class:`AppBuild`), the
recipe loaded once its data is valid (:func:`load_app`, else :class:`DataProblems`), and
the ReFrame session's environments."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from .. import machine
from ..constants import (
    SKIP_FILE,
    XFAIL_FILE,
)
from ..core.builds import ccache, sources, syspackages
from ..core.data import recipes
from ..errors import ApptuneError, last_error_line


def missing_in_environment(environ, tools: list[str]) -> list[str]:
    """The tools not found with a ReFrame environment applied as its job would see it
    (:func:`apptune.core.data.site.job_environment`: its prepare commands, modules and
    ``env_vars``)."""
    from reframe.core.exceptions import ReframeFatalError
    from reframe.core.runtime import runtime

    from ..core.data.site import job_environment

    try:
        modules_system = runtime().modules_system
    except ReframeFatalError:  # not inside a ReFrame session: no modules to load
        modules_system = None
    env, _ = job_environment(modules_system, [], [environ])
    path = env.get("PATH", os.environ.get("PATH"))
    return [t for t in tools if shutil.which(t, path=path) is None]


def _session_environments(part: str = "environments") -> list[dict] | None:
    """The environments (or another ``part``: ``systems``) of this ReFrame session's
    configuration (not only those -p selected); None outside a ReFrame session (e.g. unit
    tests)."""
    from reframe.core.exceptions import ReframeFatalError
    from reframe.core.runtime import runtime

    try:
        return list(runtime().site_config[part])
    except ReframeFatalError:  # "no runtime context is configured"
        return None


def selected_environment_patterns() -> list[str] | None:
    """The patterns of ReFrame's ``-p`` in this ReFrame session, None when none narrows the
    environments (or outside a session).

    ReFrame keeps a partition's environments that a pattern matches at their start
    (``re.match``: ``-p gnu`` is gnu, gnu-mpich and gnu-mkl; ``-p 'gnu$'`` is gnu alone).
    With an execution mode (``--mode``) the command line's patterns come after the mode's
    default ``.*``, which keeps every environment; that default is left out here."""
    from reframe.core.exceptions import ReframeFatalError
    from reframe.core.runtime import runtime

    try:
        patterns = runtime().get_option("general/0/valid_env_names")
    except ReframeFatalError:  # "no runtime context is configured"
        return None
    patterns = [p for p in patterns or [] if p != ".*"]
    return patterns or None


def site_environments() -> set[str]:
    """Environment names defined in the session's ReFrame configuration (empty outside one)."""
    return {e["name"] for e in _session_environments() or []}


class DataProblems(rfm.RunOnlyRegressionTest):
    """The test an application's check file holds in place of its own when the
    application's data has problems: it fails, naming each problem (file and field), so that
    plain ReFrame never passes a suite with the application silently missing."""

    #: Application name (a recipe in build-recipes/).
    #: :type: str
    app = variable(str)
    #: The problems, one line each: ``FILE: FIELD: what is wrong``.
    #: :type: list[str]
    problems = variable(list, value=[])
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    executable = "true"
    #: Every execution mode selects it (the modes select tiers by tag, ``^ci$``,
    #: ``^nightly$``): a mode must never pass over an application it could not load.
    tags = {"data", "ci", "nightly"}

    @sanity_function
    def data_is_valid(self):
        msg = f"{self.app}: not built, not run: {len(self.problems)} data problem(s): " + (
            " | ".join(self.problems)
        )
        # sanity messages are format strings
        return sn.assert_true(False, msg=msg.replace("{", "{{").replace("}", "}}"))


def load_app(app: str):
    """The recipe of ``app`` for its check file, once every check of its data passed
    (:func:`apptune.core.validation.datachecks.app_problems`: recipe, inputs, references, against
    this session's environments). Otherwise the check file gets a failing
    :class:`DataProblems` test naming each problem, and a recipe with no tiers, so that
    its own classes define no test case; the other applications' files load as usual.
    Problems of the baseline files only withhold the performance verdict (the run says
    why): they do not stop the application."""
    import types

    from ..core.validation import datachecks, validate
    from ..models import Recipe, RunSpec

    # outside a ReFrame session (None): the site config file's environments
    site, found = validate.load_site_facts(
        environments=_session_environments(), systems=_session_environments("systems")
    )
    found += datachecks.app_problems(app, site)
    if not found:
        return recipes.load_recipe(app)
    caller = sys._getframe(1).f_globals.get("__name__", __name__)

    def body(ns):
        ns["__module__"] = caller
        ns["app"] = app
        ns["problems"] = [str(p) for p in found]
        ns["tags"] = DataProblems.tags | _tier_names(app)

    from reframe.core.logging import getlogger

    for p in found:  # at load time too, so that `-l` and the run's head say it
        getlogger().warning(f"{app}: data problem: {p}")
    name = "".join(w.capitalize() for w in app.replace("-", "_").split("_")) + "DataProblems"
    cls = rfm.simple_test(types.new_class(name, (DataProblems,), {}, body))
    if caller in sys.modules:  # a test class of the check file, as if written there
        setattr(sys.modules[caller], name, cls)
    return Recipe.model_construct(tiers={}, run=RunSpec.model_construct(placements={}))


def _tier_names(app: str) -> set[str]:
    """The tier names an application's recipe file gives, as far as it can be read (the
    tags its tests would have had): a mode selecting one of them selects its
    :class:`DataProblems` too."""
    from ..yamlio import load_yaml

    try:
        tiers = load_yaml(recipes.recipe_path(app)).get("tiers")
    except (ApptuneError, AttributeError):
        return set()
    return {t for t in tiers if isinstance(t, str)} if isinstance(tiers, dict) else set()


class SourceFetch(rfm.RunOnlyRegressionTest):
    """Fetch the application's source tarball into the cache and verify its sha256."""

    #: Application name (a recipe in build-recipes/).
    #: :type: str
    app = variable(str)
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    executable = sys.executable

    @run_before("run")
    def set_command(self):
        self.executable_opts = ["-m", "apptune.core.builds.sources", self.app]

    @sanity_function
    def fetched(self):
        err = last_error_line(os.path.join(self.stagedir, self.stderr.evaluate()))
        return sn.assert_found(
            r"^apptune: source .* verified",
            self.stdout,
            msg=err or f"{self.app}: source was not fetched",
        )


def expected_build_failure(test) -> bool:
    """Whether the recipe's ``build.expected_failures`` (data, reviewed as a diff) lists this
    environment and variant: ReFrame then reports the build XFAIL when it fails (the build
    itself checks that the compiler said what the entry expects, ``apptune-xfail.json``)
    and XPASS, a failure, when it builds (the entry is stale)."""
    return (
        recipes.expected_build_failure(test.recipe, test.current_environ.name, test.variant)
        is not None
    )


def expected_wrong_result(test) -> bool:
    """Whether the run is the known-wrong result that ``reference/APP/TIER.yaml`` ``xfail``
    lists for this environment and variant: the run record's ``verification.xfail`` is set
    when exactly what the entry names failed (XFAIL), or when it passed (XPASS, the entry is
    stale). ReFrame asks at its sanity stage, after the run was judged; a run that failed
    otherwise is a plain failure saying what differs."""
    result = getattr(test, "apptune_result", None)
    known = result is not None and result.verification.xfail is not None
    KNOWN_WRONG.said = known_wrong_message(result.verification) if known else KNOWN_WRONG.text
    return known


def known_wrong_message(v) -> str:
    """What ReFrame says of a known-wrong result (``v``: the run record's verification):
    the reference file that lists it and the entry's reason; on numbers that verified
    (XPASS), that the entry is stale."""
    if v.ok:
        return (
            f"listed as a known-wrong result in {v.reference} xfail ({v.xfail}), but it "
            "verified: the entry is stale"
        )
    return f"known-wrong result listed in {v.reference} xfail: {v.xfail}"


class _KnownWrong:
    """The message of ``@rfm.xfail`` on an application check: ReFrame takes one message for
    every test of the class, and turns it into text (``str``) right after it asked the
    predicate (:func:`expected_wrong_result`), which leaves here the words of the test it
    judged, so the line names that test's own reference file (``reference/hpcc/ci.yaml``)."""

    text = "known-wrong result listed in the tier's reference file's xfail (apptune report)"

    def __init__(self):
        self.said = self.text

    def __str__(self) -> str:
        return self.said


#: The message of the expected failure of a known-wrong result (:class:`_KnownWrong`).
KNOWN_WRONG = _KnownWrong()


@rfm.xfail(
    "expected build failure listed in the recipe's build.expected_failures "
    "(the reason and the compiler's message: apptune-xfail.json, apptune report)",
    expected_build_failure,
)
class AppBuild(rfm.CompileOnlyRegressionTest):
    """Build one variant of an application with the current environment."""

    #: Application name (a recipe in build-recipes/).
    #: :type: str
    app = variable(str)
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    build_system = "CustomBuild"
    #: The recipe's build runs on the login/build node.
    build_locally = True

    #: Reuse an identical earlier build from apptune's content-addressed build
    #: cache (``-S use_build_cache=0`` forces a rebuild of a build test selected by itself;
    #: ``APPTUNE_USE_BUILD_CACHE=0`` in the environment, of every build of a run).
    #: :type: bool
    use_build_cache = variable(bool, value=True, loggable=True)

    @property
    def recipe(self):
        return recipes.load_recipe(self.app)

    @run_before("compile")
    def plan_build(self):
        tc = recipes.Toolchain.from_environ(self.current_environ)
        # the environment's variables and modules are loaded by a shell as its job loads
        # them: only for a build that runs (a dry run executes nothing of the site's files)
        missing = (
            []
            if self.is_dry_run()
            else missing_in_environment(
                self.current_environ, tc.tools_for(self.recipe.build.languages)
            )
        )
        reason = None
        if missing:
            reason = (
                f"environment {tc.environment!r}: compiler/tool "
                f"{', '.join(missing)} not found on its PATH"
            )
        recipe = self.recipe
        # the recipe's Debian packages, where this partition's builds use the machine's
        reason = reason or syspackages.missing(
            recipe, recipes.recipe_path(self.app), self.current_partition.extras
        )
        if not reason and self.current_partition.scheduler.registered_name == "local":
            # the build runs where its runs run: a SIMD level this CPU lacks is not built
            reason = recipes.cpu_missing(recipe, self.variant, machine.cpu_flags())
        if reason:
            Path(self.stagedir, SKIP_FILE).write_text(reason + "\n")
            self.skip(reason)
        plan = recipes.resolve(recipe, self.variant, tc)
        Path(self.stagedir, "plan.json").write_text(plan.to_json())
        tarball = sources.tarball_path(recipe)
        cmd = [
            sys.executable,
            "-m",
            "apptune.core.builds.steps",
            "--plan",
            "plan.json",
            "--source",
            str(tarball),
            "--stage",
            ".",
        ]
        if not self.use_build_cache:
            cmd.append("--no-cache")
        if cache_dir := ccache.requested():  # a long build resumes where it was stopped
            env, warning = ccache.environment(Path(self.stagedir), cache_dir)
            if warning:
                from reframe.core.logging import getlogger

                getlogger().warning(f"{self.app}: {warning}")
            self.env_vars.update(env)
        self.build_system.commands = [shlex.join(cmd)]
        self.build_system.max_concurrency = recipe.build.jobs

    @run_after("init")
    def keep_build_records(self):
        self.keep_files = [
            "plan.json",
            "provenance.json",
            "compile-lines.jsonl",
            XFAIL_FILE,
            ccache.STATS_LOG,
        ]

    @sanity_function
    def built(self):
        xf = Path(self.stagedir, XFAIL_FILE)
        if xf.is_file():
            rec = json.loads(xf.read_text())
            return sn.assert_true(
                False, msg=f"{rec['reason']} (compiler said: {rec['compiler_said']})"
            )
        err = last_error_line(os.path.join(self.stagedir, "rfm_build.err"))
        return sn.assert_true(
            os.path.exists(os.path.join(self.stagedir, "provenance.json")),
            msg=err or "build produced no provenance.json",
        )
