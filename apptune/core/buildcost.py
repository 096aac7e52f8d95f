"""How long a build will take, said before it starts when the build cache has no copy of it.

A build of a large code takes an hour or more on a small machine; a run that finds no cached
build says so first, with the time it expects, in one line::

    no cached build of openfoam gnu/tuned: building takes ~1 h 31 min (last recorded ...)

The time comes from the machine's own record (the build cache's
:data:`apptune.core.buildcache.TIMES`, kept after entries are evicted): the last build of the
same application, variant and environment; else the declared compile count of the recipe
(``build.estimate.compiles``) at the seconds per compile line of the application's last
recorded build of any variant; else at the recipe's declared rate
(``build.estimate.seconds_per_compile``). A recipe that declares nothing and has no record
says that it cannot tell. A build that took objects from a compiler cache
(:mod:`apptune.core.ccache`) is not a record of what a build takes.
"""

from __future__ import annotations

import time

from ..yamlio import atomic_write_json
from . import buildcache

#: Written into the build's stage before it starts: the notice as data, for ``apptune run``'s
#: progress (:mod:`apptune.core.progress`) to say on its own output.
NOTICE_FILE = "build-notice.json"


def duration(seconds: float) -> str:
    """``~1 h 31 min``, ``~12 min``, ``~40 s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"~{s // 3600} h {(s % 3600) // 60:02d} min"
    if s >= 60:
        return f"~{round(s / 60)} min"
    return f"~{s} s"


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
    takes = f"building takes {duration(seconds)} ({how})" if seconds is not None else how
    return f"no cached build of {what}: {takes}"


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
    """The same build in progress in another run (:func:`apptune.core.buildcache.locked`'s
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
