"""A faulted run as the verification judged it (:func:`seen`), and the same stored values
judged again against the current reference and tolerances (:func:`rejudge`): what the test
suite does to hold every caught fault caught without running anything."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

from ... import paths
from ...core.data import recipes
from ...core.run import localrun
from ...core.run.localrun import RunResult
from ...core.verification import outputs, verify
from ...models import OwnCheck, Recipe, RunVerification, Seen

#: Lines kept of what a check that forbids a pattern found (one is enough to fail it).
FORBIDDEN_LINES = 3
#: Characters kept of a line.
LINE_CHARS = 300


def failed_names(v: RunVerification) -> list[str]:
    """What failed, as a reference's ``xfail`` names it
    (:func:`apptune.core.verification.verify.failed_names`): the fields, then the own checks by the
    file they read; a run that gave nothing to compare failed as a whole (``exit status``)."""
    if v.fields is None and not v.own_checks:
        return [] if v.ok else ["exit status"]
    out = [f.field for f in v.fields or [] if not f.ok]
    out += [c.file or c.pattern or "check" for c in v.own_checks if not c.ok]
    return list(dict.fromkeys(out))


def closest(v: RunVerification) -> tuple[float | None, str | None]:
    """The largest share of its tolerance a compared field used, and that field."""
    best = max(
        (f for f in v.fields or [] if f.used is not None), key=lambda f: f.used, default=None
    )
    return (best.used, best.field) if best else (None, None)


def matched_lines(checks: list[OwnCheck], texts: dict[str, str], default_file: str) -> dict:
    """Per file the own checks read: the lines their patterns matched, in order, as many as
    judge the check again (a required pattern's ``min_count``, a few of a forbidden one's)."""
    out: dict[str, list[str]] = {}
    for c in checks:
        f = c.file or default_file
        lines = out.setdefault(f, [])
        text = texts.get(f, "")
        keep = FORBIDDEN_LINES if c.forbid else c.min_count
        for n, m in enumerate(re.finditer(c.pattern, text, flags=re.M)):
            if n >= keep:
                break
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start : end if end >= 0 else len(text)][:LINE_CHARS]
            if line not in lines:
                lines.append(line)
    return {f: "\n".join(ls) for f, ls in out.items() if ls}


def seen(
    recipe: Recipe, r: RunResult, digest: str, machine: str | None, today: str | None = None
) -> Seen:
    """What the verification saw of the faulted run ``r`` (paths inside the tree said
    relative to it: the record is the same wherever the tree is)."""
    v = r.verification
    run = recipe.run
    default = run.outputs[0].file
    texts = outputs.own_check_texts(run, Path(r.run_dir), localrun.STDOUT)
    crash = next((c.message for c in v.own_checks if c.pattern == "exit status"), None)
    if v.fields is None and not v.ok:
        crash = v.summary
    used, field = closest(v)
    return Seen(
        digest=digest,
        caught=not v.ok,
        by=failed_names(v),
        summary=_here(v.summary),
        used=used,
        closest=field,
        values={f.field: _scalar(f.value) for f in v.fields or []},
        lines=matched_lines(list(run.own_checks), texts, default),
        crash=_here(crash),
        date=today or datetime.date.today().isoformat(),
        machine=machine or r.machine_id,
    )


def _here(text: str | None) -> str | None:
    return text.replace(f"{paths.root()}/", "") if text else text


def _scalar(x):
    return x if x is None or isinstance(x, (int, float, str)) else str(x)


def rejudge(app: str, tier: str, s: Seen) -> verify.Verification:
    """The stored faulted output ``s`` judged by the current reference's fields and
    tolerances and the recipe's own checks. A field the reference gained since is not
    judged (the run did not record it); a run that crashed stays failed by its exit status."""
    recipe = recipes.load_recipe(app)
    _, ref = verify.load_reference(app, tier)
    values = {k: v for k, v in s.values.items() if v is not None}
    gained = set(ref.fields) - set(s.values)
    v = verify.verify(
        app,
        tier,
        values,
        recipe.run.own_checks,
        dict(s.lines),
        default_file=recipe.run.outputs[0].file,
    )
    v.fields = [f for f in v.fields if f.field not in gained]
    if s.crash:
        v.own_checks.append(verify.failed_check("exit status", s.crash))
    v.ok = all(f.ok for f in v.fields) and all(c["ok"] for c in v.own_checks)
    return v


def still_failing(app: str, tier: str, s: Seen) -> list[str]:
    """Of what failed when ``s`` was recorded (``s.by``), what still fails judged again."""
    now = set(verify.failed_names(rejudge(app, tier, s)))
    return [n for n in s.by if n in now]
