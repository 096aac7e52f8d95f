"""How long a build will take, said before it starts when the build cache has no copy of it.

A build of a large code takes an hour or more on a small machine; a run that finds no cached
build says so first, with the time it expects, in one line::

    no cached build of openfoam gnu/tuned: building takes ~1 h 31 min (last recorded ...)

The time comes from the machine's own record (the build cache's
:data:`apptune.core.builds.buildcache.TIMES`, kept after entries are evicted): the last build of the
same application, variant and environment; else the declared compile count of the recipe
(``build.estimate.compiles``) at the seconds per compile line of the application's last
recorded build of any variant; else at the recipe's declared rate
(``build.estimate.seconds_per_compile``). A recipe that declares nothing and has no record
says that it cannot tell. A build that took objects from a compiler cache
(:mod:`apptune.core.builds.ccache`) is not a record of what a build takes.
"""

from __future__ import annotations

import re
import time

from ...figures import fmt_seconds
from ...yamlio import atomic_write_json
from ..data import recipes
from . import buildcache

#: Written into the build's stage before it starts: the notice as data, for ``apptune run``'s
#: progress (:mod:`apptune.core.run.progress`) to say on its own output.
NOTICE_FILE = "build-notice.json"


def _day(t: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t)) if t else "an unknown day"


def estimate(recipe, plan: dict, times: list[dict] | None = None) -> tuple[float | None, str]:
    """(seconds, how it was estimated) of building ``plan``; (None, why not) when nothing
    recorded or declared tells."""
    times = buildcache.recorded_times() if times is None else times
    app = recipe.name
    same = [
        t
        for t in times
        if t.get("app") == app
        and t.get("variant") == plan.get("variant")
        and t.get("environment") == plan.get("environment")
        and t.get("seconds")
        and buildcache.cold(t)  # objects from a compiler cache: not what a build takes
    ]
    if same:
        t = same[-1]
        return float(t["seconds"]), f"last recorded on {_day(t.get('when'))}"
    est = recipe.build.estimate
    if est is None:
        return None, "no earlier build recorded and no build.estimate declared"
    rated = [
        t
        for t in times
        if t.get("app") == app and t.get("seconds") and t.get("compiles") and buildcache.cold(t)
    ]
    if rated:
        t = rated[-1]
        rate = float(t["seconds"]) / int(t["compiles"])
        where = f"{t.get('environment')}/{t.get('variant')}'s recorded {rate:.2f} s each"
    else:
        rate = est.seconds_per_compile
        where = f"the recipe's {rate:g} s each"
    how = f"estimated from the declared {est.compiles} compiles at {where}"
    return est.compiles * rate, how


def notice(recipe, plan: dict, times: list[dict] | None = None) -> str:
    """The one line said before a build the cache does not have."""
    seconds, how = estimate(recipe, plan, times)
    what = f"{recipe.name} {plan.get('environment')}/{plan.get('variant')}"
    takes = (
        f"building takes {fmt_seconds(seconds, approx=True)} ({how})"
        if seconds is not None
        else how
    )
    return f"no cached build of {what}: {takes}"


def run_builds(recipes_, tiers, usable, envs=(), variants=()) -> list[tuple]:
    """The builds a run makes: (recipe, environment, variant) of every variant that a tier
    ``tiers(recipe)`` names in an environment the run can build it in (``usable(recipe,
    environment)``) and that is compiled (a distribution's or a site's install is not),
    narrowed to ``envs`` and ``variants`` where given (``apptune run --env/--variant``)."""
    out: dict[tuple, tuple] = {}
    for r in recipes_:
        for tname in tiers(r):
            for env, specs in r.tiers[tname].variants.items():
                if (envs and env not in envs) or not usable(r, env):
                    continue
                for spec in specs:
                    v = recipes.Variant.parse(spec, r).name
                    if recipes.install_of(r, v) is None and (not variants or v in variants):
                        out[(r.name, env, v)] = (r, env, v)
    return list(out.values())


def mode_tiers(options: list[str]):
    """``tiers(recipe)`` of an execution mode's ReFrame ``options``: the tiers whose test
    cases its ``--tag`` patterns select and its ``--exclude-tag`` patterns keep (a test case's
    tags: its tier, its application and the tier's ``tags``, :class:`apptune.rfm.AppRun`)."""
    want, drop = [], []
    it = iter(options)
    for o in it:
        for opt, short, into in (("--tag", "-t", want), ("--exclude-tag", "-T", drop)):
            if o.startswith(opt + "="):
                into.append(o.split("=", 1)[1])
            elif o in (opt, short):
                into.append(next(it, ""))

    def tiers(r) -> list[str]:
        out = []
        for tname, t in r.tiers.items():
            tags = {tname, r.name, *t.tags}
            if all(any(re.search(p, g) for g in tags) for p in want) and not any(
                re.search(p, g) for p in drop for g in tags
            ):
                out.append(tname)
        return out

    return tiers


def empty_cache_line(builds: list[tuple], times: list[dict] | None = None) -> str | None:
    """The one line a run says before it starts when the build cache holds no build: that
    every build of this run (``builds``, :func:`run_builds`) compiles from source and what
    that costs, from this machine's recorded builds and the recipes' ``build.estimate``
    (:func:`estimate`), or that it is unknown for those with neither; None when the cache
    holds a build (each build then says its own cost, :func:`announce`)."""
    if not builds or buildcache.entries():
        return None
    times = buildcache.recorded_times() if times is None else times
    known, unknown = 0.0, []
    for r, env, v in builds:
        seconds, _ = estimate(r, {"environment": env, "variant": v}, times)
        if seconds is None:
            unknown.append(r.name)
        else:
            known += seconds
    apps = len({r.name for r, _, _ in builds})
    head = (
        f"the build cache ({buildcache.root()}) is empty: this run builds its {len(builds)} "
        f"variant(s) of {apps} application(s) from source"
    )
    why = "no build recorded on this machine, no build.estimate in the recipe"
    names = ", ".join(dict.fromkeys(unknown))
    if not unknown:
        return f"{head}, {fmt_seconds(known, approx=True)} in all ({_WHENCE})"
    if len(unknown) == len(builds):
        return f"{head}; how long is unknown ({why}: {names})"
    return (
        f"{head}: {fmt_seconds(known, approx=True)} for {len(builds) - len(unknown)} of them "
        f"({_WHENCE}), unknown for the other {len(unknown)} ({why}: {names})"
    )


_WHENCE = "this machine's recorded builds and the recipes' build.estimate"


def announce(recipe, plan: dict, stage) -> str:
    """Say :func:`notice` on the build's output and leave it in the stage
    (:data:`NOTICE_FILE`) for the run's progress; return it."""
    times = buildcache.recorded_times()
    seconds, _ = estimate(recipe, plan, times)
    line = notice(recipe, plan, times)
    say(stage, line, COST, seconds=seconds, app=recipe.name)
    return line


#: What a build's notice is about: what building it costs (:func:`announce`), or the same
#: build in progress in another run, waited for (:data:`WAIT`).
COST, WAIT = "cost", "wait"


def say(stage, line: str, kind: str, **data) -> None:
    """Say ``line`` on the build's output and leave it in the stage (:data:`NOTICE_FILE`,
    replacing the one before) for the run's progress to say on its own output."""
    print(f"apptune: {line}", flush=True)
    atomic_write_json(
        stage / NOTICE_FILE, {"notice": line, "kind": kind, "started": time.time(), **data}
    )


class Waiting:
    """The same build in progress in another run (:func:`apptune.core.builds.buildcache.locked`'s
    ``waiting``): said in the build's stage when the wait starts and when it ends, for the
    run's progress to say."""

    def __init__(self, stage, what: str):
        self.stage, self.what = stage, what
        self.holder = None

    def __call__(self, holder) -> None:
        self.holder = holder
        say(
            self.stage,
            f"the build of {self.what} is in progress in {holder.describe()}: waiting for "
            "it, to use what it stores",
            WAIT,
        )

    def ended(self, stored: bool) -> None:
        """After the wait (if there was one): ``stored``, the build is in the cache now."""
        if self.holder is None:
            return
        done = "used here" if stored else "it stored nothing (it died or failed): building here"
        say(self.stage, f"the build of {self.what} in {self.holder.describe()} ended: {done}", WAIT)
