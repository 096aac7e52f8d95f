"""Which of the things that changed can be the cause of a figure's change: the node's
state among them, and simple rules of the direction and the size each kind of change can
move a figure.

What changed between two runs (:mod:`apptune.core.judge.changes`) is a list of candidates, not
a verdict on them. The node's own state is one more candidate: the share of its CPUs other
processes used (``outside``), the CPU time the hypervisor took (``steal``) and the load per
CPU when the run started (``load``), from each run's quality record
(:mod:`apptune.core.run.quality`); a run graded clean under a wide limit (a shared node's
``max_outside_cpu: 0.98``) can have run beside other work that another run did not see.
:func:`weigh` checks each candidate against the change it would have to explain:

* **the node's state** explains a change in its own direction only: a quieter node a faster
  run, a busier one a slower run; of any size when the busier side had at least
  :data:`CROWDED` of its CPUs taken by others (ranks that wait on each other are
  descheduled: latencies grow without bound), otherwise up to :data:`STATE_MAX`;
* **a flag set** (``flags``, ``cflags``, ``per-file flags``) moves a figure at most
  :data:`FLAGS_MAX` times, either way: the optimisation level does not make a run 24
  times faster, nor a BLAS-bound HPL move at all beyond that;
* **a variable or module that only finds libraries** (``LD_LIBRARY_PATH``,
  ``LD_PRELOAD``, a module) while every library the ranks loaded stayed the same explains
  nothing;
* **anything else** (a library, its path or contents, the compilers or MPI, a transport
  variable, the launcher, the placement, an input, a patch, the source) can move a
  figure any amount either way: a transport variable moves a latency a hundredfold.

A candidate that cannot explain the change is kept, said as "changed alongside, does not
explain it" with the reason. These are rules, not a model: they dismiss only what cannot
be the cause, never rank what can.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ...figures import worse_better
from ...models import FigureVerdict
from . import changes

#: The most a flag set moves a figure (either way), as a factor: the timing test's hot loop at
#: -O0 against -O3 runs 3.8x slower here, and a loop that vectorises eight doubles wide
#: gains that width again; 24x (a baseline from a busy node) is beyond any ladder.
FLAGS_MAX = 10.0
#: The share of the node's CPUs (other processes' plus steal) from which a node is crowded.
CROWDED = 0.2
#: The most a less crowded node's state moves a figure, as a factor.
STATE_MAX = 1.5
#: A change of the node's state worth naming: this much of its CPUs more or less ...
STATE_STEP = 0.05
#: ... and this factor between the two sides (the smaller taken as at least 1 %).
STATE_RATIO = 2.0
#: Runs in a row beyond the threshold that make a shift no change explains a regression
#: (``apptune check-regressions``; one such run alone is "unexplained").
CONFIRM = 3
#: What a candidate that cannot explain the change is called.
ALONGSIDE = "changed alongside, does not explain it"
#: The prefix of the node's state among the changes.
STATE = "node: "
FLAG_PREFIXES = ("flags ", "cflags ", "fflags ", "cppflags ", "ldflags ", "per-file flags ")


def condition(q) -> dict | None:
    """A run's node state from its quality record (a model or a dict): ``outside`` and
    ``steal`` (shares of the node's CPU time) and ``load`` (the 1-minute load per CPU when
    the run started); None when not measured."""
    if q is None:
        return None
    d = q if isinstance(q, dict) else q.model_dump()
    out = {}
    for key, name in (("outside", "outside_cpu_fraction"), ("steal", "steal_fraction")):
        if isinstance(d.get(name), (int, float)):
            out[key] = float(d[name])
    load, cpus = d.get("load1"), d.get("cpus")
    if load and isinstance(load[0], (int, float)) and cpus:
        out["load"] = round(load[0] / cpus, 2)
    return out or None


def typical(conds: list[dict | None]) -> dict | None:
    """The median state of several runs (a baseline's, a segment of a series)."""
    conds = [c for c in conds if c]
    keys = {k for c in conds for k in c}
    out = {k: statistics.median(c[k] for c in conds if k in c) for k in sorted(keys)}
    return out or None


def _busy(c: dict) -> float:
    return c.get("outside", 0.0) + c.get("steal", 0.0)


def state_change(before: dict | None, after: dict | None) -> str | None:
    """The node's state as one change line when it changed enough to name (None when not,
    or not measured on both sides): ``node: other processes used 80% → 2% of its CPUs, …``."""
    if not before or not after or "outside" not in before or "outside" not in after:
        return None
    parts = []
    for key, words in (("outside", "other processes used {} of its CPUs"), ("steal", "steal {}")):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            continue
        lo, hi = sorted((max(a, 0.01), max(b, 0.01)))
        if abs(a - b) >= STATE_STEP and hi / lo >= STATE_RATIO:
            parts.append(words.format(f"{a:.0%} → {b:.0%}"))
    if not parts:
        return None
    if before.get("load") is not None and after.get("load") is not None:
        parts.append(f"load per CPU {before['load']:.1f} → {after['load']:.1f}")
    return STATE + ", ".join(parts)


@dataclass
class Cause:
    #: The change, as :func:`apptune.core.judge.changes.describe` says it.
    line: str
    #: Whether it can explain the change of the figure(s).
    explains: bool
    #: Why not (empty when it can).
    why: str = ""

    def said(self) -> str:
        return self.line if self.explains else f"{self.line} ({ALONGSIDE}: {self.why})"


def factor(value: float, base: float, better: str) -> tuple[float, str]:
    """How many times better or worse ``value`` is than ``base`` (at least 1), and which."""
    worse, good = worse_better(value, base, better)
    return (1 + worse, "worse") if worse > 0 else (1 + max(good, 0.0), "better")


def can_explain(
    line: str, times: float, way: str, before: dict | None, after: dict | None
) -> str | None:
    """Why the change ``line`` cannot have made a figure ``times`` times ``way``
    (``better``/``worse``); None when it can (module docstring)."""
    if line.startswith(STATE):
        quieter = _busy(after) < _busy(before)
        if (way == "better") != quieter:
            return f"the node was {'quieter' if quieter else 'busier'}, and the figure got {way}"
        crowded = max(_busy(before), _busy(after))
        if crowded < CROWDED and times > STATE_MAX:
            return (
                f"a node at most {crowded:.0%} busy moves a figure {STATE_MAX:g}x at most, "
                f"not {times:.3g}x"
            )
        return None
    if line.startswith(FLAG_PREFIXES) and times > FLAGS_MAX:
        return f"a flag set moves a figure {FLAGS_MAX:g}x at most, not {times:.3g}x"
    if line.endswith(changes.SAME_LIBRARIES):
        return "no library the ranks loaded changed"
    return None


def weigh(
    lines: list[str],
    moves: list[tuple[float, str]],
    before: dict | None = None,
    after: dict | None = None,
) -> list[Cause]:
    """Each change in ``lines``, and the node's state (``before`` and ``after``: their
    :func:`condition`) when it changed enough to name, against the figure changes ``moves``
    (``(times, way)`` each, :func:`factor`): a change explains them when it can explain one."""
    state = state_change(before, after)
    out = []
    for line in [*([state] if state else []), *lines]:
        whys = [can_explain(line, t, w, before, after) for t, w in moves]
        ok = not moves or any(w is None for w in whys)
        out.append(Cause(line, ok, "" if ok else whys[0]))
    return out


def build_explains(causes: list[Cause]) -> bool:
    """Whether a change of the build or the launch (not the node's state) explains it."""
    return any(c.explains and not c.line.startswith(STATE) for c in causes)


def said(causes: list[Cause]) -> list[str]:
    """The changes as lines: those that can explain it first, then those that cannot."""
    return [c.said() for c in causes if c.explains] + [c.said() for c in causes if not c.explains]


def weigh_changes(
    entry, changed: list[str], judged: dict[str, FigureVerdict], figures: dict, now
) -> list[str]:
    """What changed since the baseline's runs, the node's state among it, each weighed
    against the figures beyond their threshold (:func:`weigh`): a
    figure no change of the build or the launch can explain becomes ``unexplained``."""
    moves = {}
    for name, j in judged.items():
        fig = figures.get(name)
        if j.verdict in ("regression", "improvement") and fig is not None:
            moves[name] = factor(j.value, j.baseline, fig.better)
    for name, move in moves.items():
        cs = weigh(changed, [move], entry.quality, now)
        if not build_explains(cs):
            base = entry.figures.get(name)
            unexplained(judged[name], base.sessions if base else None, cs)
    return said(weigh(changed, list(moves.values()), entry.quality, now))


def unexplained(j: FigureVerdict, sessions: int | None, weighed: list | None = None) -> None:
    """A verdict beyond the threshold that no recorded change of the build or the launch
    since the baseline's runs can explain becomes ``unexplained``: a VM can run a whole
    night at another level, which a few baseline sessions need not show; ``apptune
    check-regressions`` confirms it (CONFIRM). ``weighed``: what changed, weighed
    (:func:`weigh`)."""
    if j.verdict not in ("regression", "improvement"):
        return
    seen = f"its {sessions} session(s)" if sessions else "its runs"
    j.direction, j.verdict = j.verdict, "unexplained"
    state = [c.line for c in weighed or () if c.explains]
    other = [c.said() for c in weighed or () if not c.explains]
    if state:
        words = f"the node's state explains it, no change of the build ({'; '.join(state)})"
    elif other:
        words = "no change of the build or the launch explains it"
    else:
        words = (
            "nothing recorded changed since the baseline's runs (build, inputs, launch, "
            f"environment): the machine's state, or noise {seen} did not show"
        )
    if other:
        words += f"; {'; '.join(other)}"
    j.why = f"{j.why}; {words}; {confirmed(j.direction)}"


def confirmed(direction: str) -> str:
    """When ``apptune check-regressions`` calls a shift no change explains a ``direction``."""
    article = "an" if direction[:1] in "aeiou" else "a"
    return f"{article} {direction} once {CONFIRM} runs in a row hold it (apptune check-regressions)"
