"""Compare extracted fields with a stored reference, field by field, with tolerances.

Each comparison says how much of its tolerance it used (0 = exact, 1 = at the
limit, >1 = failed), so a variant that drifts towards a limit is visible
before it fails.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ... import paths
from ...errors import ApptuneError, printable
from ...models import KnownWrong, OwnCheck, ReferenceFile
from ...yamlio import load_model
from .outputs import is_bad_number


@dataclass
class FieldResult:
    field: str
    value: float | str | None
    expected: str
    used: float | None
    ok: bool
    message: str


@dataclass
class Verification:
    reference: str
    ok: bool
    fields: list[FieldResult]
    own_checks: list[dict]
    #: The reference's reason when this variant is known to be wrong and failed as its entry
    #: says, or passed (a stale entry): :func:`judge_known_wrong`.
    xfail: str | None = None
    #: The variant is known to be wrong but failed otherwise than its entry says: what differs.
    unexpected: str | None = None
    #: The reference's ``xfail`` entry of the variant, with its key (not written out).
    known: tuple[str, KnownWrong] | None = field(default=None, repr=False)
    #: Fields not compared because an input they depend on was changed (``depends_on``).
    skipped: list[str] = field(default_factory=list)
    #: Why nothing could be compared: the reference has no fields yet (the skeleton of
    #: ``apptune new``); such a run fails, and ``apptune bless --new`` takes its values.
    no_reference: str | None = None

    @property
    def failures(self) -> list[str]:
        return (
            ([self.unexpected] if self.unexpected else [])
            + ([self.no_reference] if self.no_reference else [])
            + [f.message for f in self.fields if not f.ok]
            + [
                # the recipe's own checks read a file; those of the run itself say their failure
                f"own check failed: {c['message']}" if c.get("file") is not None else c["message"]
                for c in self.own_checks
                if not c["ok"]
            ]
        )

    def summary(self) -> str:
        if self.ok:
            worst = max(
                (f for f in self.fields if f.used is not None), key=lambda f: f.used, default=None
            )
            w = f"; most tolerance used: {worst.field} {worst.used:.0%}" if worst else ""
            s = f"; {len(self.skipped)} not compared (inputs changed)" if self.skipped else ""
            return f"verified {len(self.fields)} fields against {self.reference}{w}{s}"
        # a forbidden line that was found says where (a file, a value, an offset)
        found = {
            f"own check failed: {c['message']}": f"own check failed: {c['message']} (first: "
            f"{c['first']})"
            for c in self.own_checks
            if not c["ok"] and c.get("first")
        }
        # values and lines of the program's output: ReFrame prints this, the report stores it
        return printable("; ".join(found.get(m, m) for m in self.failures))

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("known")
        d["summary"] = self.summary()
        return d


def load_reference(app: str, tier: str) -> tuple[Path, ReferenceFile]:
    f = paths.reference_file(app, tier)
    ref = load_model(f, ReferenceFile)
    if ref.app != app or ref.tier != tier:
        raise ApptuneError(f, "app/tier", f"file says {ref.app}/{ref.tier}, expected {app}/{tier}")
    return f, ref


def _fmt(x, digits: int = 6) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))  # an exact count reads 1000000, not 1e+06
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _digits(value, refs) -> int:
    """Significant digits (at least 6) with which ``value`` and each number in ``refs`` it
    differs from are printed as different numbers: a message never reads ``x = 1.5, expected
    1.5`` for a value that is off."""
    n = 6
    for ref in refs:
        while (
            ref is not None
            and value != ref
            and n < 17
            and float(_fmt(value, n)) == float(_fmt(ref, n))
        ):
            n += 1
    return n


def _percent(used: float) -> str:
    """The fraction of the tolerance used; a value just past the limit never reads 100%."""
    s = f"{used:.0%}"
    return "more than 100%" if used > 1 and s == "100%" else s


def _difference(value, ref) -> str:
    d = value - ref
    return f"{d:+d}" if isinstance(d, int) else f"{d:+.3g}"


def compare_field(name: str, tol, value) -> FieldResult:
    if value is None:
        return FieldResult(name, None, "present", None, False, f"{name}: missing from the output")
    if isinstance(value, str):
        return FieldResult(
            name, value, "a number", None, False, f"{name}: '{value}' is not a number"
        )
    if is_bad_number(value):
        return FieldResult(
            name, value, "finite", None, False, f"{name}: value is {value} (not finite)"
        )
    used, parts, ok = 0.0, [], True
    n = _digits(value, (tol.value, tol.max, tol.min))
    if tol.value is not None:
        diff = abs(value - tol.value)
        allowed = max(tol.abs or 0.0, (tol.rel or 0.0) * abs(tol.value))
        parts.append(f"{_fmt(tol.value, n)} ± {_fmt(allowed)}")
        if allowed == 0:
            u = 0.0 if diff == 0 else math.inf
        else:
            u = diff / allowed
        used = max(used, u)
        ok &= diff <= allowed
    if tol.max is not None:
        parts.append(f"≤ {_fmt(tol.max, n)}")
        u = (value / tol.max) if tol.max > 0 else (0.0 if value <= tol.max else math.inf)
        used = max(used, max(u, 0.0))
        ok &= value <= tol.max
    if tol.min is not None:
        parts.append(f"≥ {_fmt(tol.min, n)}")
        if tol.min > 0:
            u = tol.min / value if value > 0 else math.inf
        else:
            u = 0.0 if value >= tol.min else math.inf
        used = max(used, u)
        ok &= value >= tol.min
    expected = " and ".join(parts)
    msg = f"{name} = {_fmt(value, n)}, expected {expected}"
    notes = (
        [f"difference {_difference(value, tol.value)}"]
        if tol.value is not None and value != tol.value
        else []
    )
    if not ok and math.isfinite(used):
        notes.append(f"used {_percent(used)} of tolerance")
    if notes:
        msg += f" ({', '.join(notes)})"
    return FieldResult(
        name, value, expected, round(used, 4) if math.isfinite(used) else None, ok, msg
    )


def run_own_checks(checks: list[OwnCheck], text: str | dict, default_file: str = "") -> list[dict]:
    """``text`` is the output text, or {file: text} for checks naming their ``file``."""
    out = []
    for c in checks:
        t = text if isinstance(text, str) else text.get(c.file or default_file, "")
        found = list(re.finditer(c.pattern, t, flags=re.M))
        n = len(found)
        ok = (n == 0) if c.forbid else (n >= c.min_count)
        where = c.file or default_file or "the output"
        entry = {
            "pattern": c.pattern,
            "file": c.file or default_file,
            "matches": n,
            "ok": ok,
            # the recipe's message says what passing means: a failure says it was not so
            "message": f"{c.message}: ok ({n} matches)" if ok else _not_so(c, n, where),
        }
        if c.forbid and found:  # what was found says where (a file, a value, an offset)
            start = t.rfind("\n", 0, found[0].start()) + 1
            end = t.find("\n", found[0].end())
            entry["first"] = t[start : end if end >= 0 else len(t)].strip()[:300]
        out.append(entry)
    return out


def _not_so(c: OwnCheck, n: int, where: str) -> str:
    """A failed own check as a failure: what passing would have meant, and what was seen."""
    if c.forbid:
        seen = f"{n} line(s) of {where} match '{c.pattern}'"
    elif c.min_count > 1:
        seen = f"{n} of the {c.min_count} lines of {where} needed match '{c.pattern}'"
    else:
        seen = f"no line of {where} matches '{c.pattern}'"
    return f"expected “{c.message}”; {seen}"


#: The checks of the run itself that :func:`apptune.core.run.outcome.evaluate` adds to the recipe's
#: own (with ``figure NAME`` of :func:`check_figures`): a reference's ``xfail`` ``fails``
#: names them so.
RUN_CHECKS = ("exit status", "binding", "knobs")


def failed_check(name: str, message: str) -> dict:
    """A failed check of the run itself (``RUN_CHECKS``, ``figure NAME``), as an own check."""
    return {"pattern": name, "matches": 0, "ok": False, "message": message}


def check_names(own_checks: list[OwnCheck], default_file: str, figures) -> set[str]:
    """What an ``xfail`` entry's ``fails`` may name besides fields: the recipe's own checks by
    the file they read, the checks of the run itself and its figures (``figure NAME``)."""
    return (
        {c.file or default_file for c in own_checks}
        | set(RUN_CHECKS)
        | {f"figure {name}" for name in figures}
    )


def known_wrong(
    ref: ReferenceFile, environment: str | None, variant: str | None
) -> tuple[str, KnownWrong] | None:
    """The reference's ``xfail`` entry of a variant (keyed ``environment/variant`` or
    ``variant``), with its key."""
    if variant is None:
        return None
    for key in (f"{environment}/{variant}", variant):
        if key in ref.xfail:
            return key, ref.xfail[key]
    return None


def failed_names(v: Verification) -> list[str]:
    """What failed, as a ``fails`` list names it: the fields, then the own checks by the file
    they read (checks of the run itself by what they check: ``exit status``, ``binding``)."""
    return [f.field for f in v.fields if not f.ok] + [
        c.get("file") or c["pattern"] for c in v.own_checks if not c["ok"]
    ]


def judge_known_wrong(v: Verification):
    """A known-wrong variant is an expected failure only when exactly what its entry names
    failed; one that passed keeps the reason too (ReFrame's XPASS names the stale entry). A
    failure of anything else, or of nothing the entry names, is said in ``v.unexpected``
    and fails the run as any failure does. Call it once every check of the run is in."""
    if v.known is None:
        return
    key, kw = v.known
    if v.ok:
        v.xfail = kw.reason
        return
    failed = [] if v.no_reference else failed_names(v)
    missing = [p for p in kw.fails if not any(fnmatchcase(n, p) for n in failed)]
    extra = [n for n in dict.fromkeys(failed) if not any(fnmatchcase(n, p) for p in kw.fails)]
    if not missing and not extra:
        v.xfail = kw.reason
        return
    said = [f"did not fail: {', '.join(missing)}"] if missing else []
    said += [f"failed besides: {', '.join(extra)}"] if extra else []
    v.unexpected = (
        f"not the known-wrong result of {v.reference} xfail {key} "
        f"(fails: {', '.join(kw.fails)}): " + "; ".join(said)
    )


def verify(
    app: str,
    tier: str,
    values: dict,
    own_checks: list[OwnCheck] = (),
    output_text: str | dict = "",
    environment: str | None = None,
    variant: str | None = None,
    default_file: str = "",
    changed_inputs: set[str] = frozenset(),
) -> Verification:
    """``changed_inputs``: input parameters the run changed from the tier's; fields whose
    ``depends_on`` names one of them are listed as skipped instead of compared."""
    f, ref = load_reference(app, tier)
    skipped = [
        name for name, tol in ref.fields.items() if set(tol.depends_on) & set(changed_inputs)
    ]
    fields = [
        compare_field(name, tol, values.get(name))
        for name, tol in ref.fields.items()
        if name not in skipped
    ]
    own = run_own_checks(list(own_checks), output_text, default_file)
    rel = str(f.relative_to(paths.root()))
    none = (
        None
        if ref.fields
        else (
            f"{rel} has no fields yet: `apptune bless --new RUN_DIR` writes "
            f"the first reference from this run's values"
        )
    )
    ok = none is None and all(x.ok for x in fields) and all(c["ok"] for c in own)
    return Verification(
        reference=rel,
        ok=ok,
        fields=fields,
        own_checks=own,
        skipped=skipped,
        no_reference=none,
        known=known_wrong(ref, environment, variant),
    )


def check_figures(v: Verification, figures: dict) -> Verification:
    """A figure that is not a finite number (``nan``, ``inf``) fails the run, whether or not a
    reference checks it: it would poison every comparison that follows."""
    for name, val in figures.items():
        if isinstance(val, float) and not math.isfinite(val):
            v.ok = False
            v.own_checks.append(
                failed_check(f"figure {name}", f"figure {name} is {val} (not a finite number)")
            )
    return v
