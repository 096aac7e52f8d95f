"""``apptune bless RUN``: promote a verified run into ``reference/`` and ``reference/baselines/``.

* outputs: the verified fields of the reference variant (``gnu/baseline`` when it
  ran, else the first verified one) become the ``value`` of each field in
  ``reference/APP/<tier>.yaml``; tolerances, bounds, ``why`` and comments stay
  as they are (the file is edited in place, line by line);
* figures: every verified variant's figures are merged into
  ``reference/baselines/<system>/APP.yaml`` as ``apptune baseline update`` does
  (the median of the clean runs, their number and their noise, per machine).

``apptune bless --new RUN`` writes an application's first reference instead
(:func:`plan_new`): from a run against the field-less reference ``apptune new`` writes,
every parsed field with a default tolerance (:data:`FIRST_REL`).

A run with a failed or unverified test (a failed build, a wrong number, a crash)
is refused, naming each, unless ``--only-passing`` asks for the verified ones alone;
a test that failed only its performance stage has verified numbers and may be
blessed (that is how a new performance level is accepted). Expected failures are
left out. Runs graded ``disturbed`` never enter a baseline. A result whose build
differs from what the recipe resolves to now is blessed with a warning. Every change
is shown as a unified diff first; files are written only when confirmed, each
atomically (a reader sees the old or the new file, never half of one), after all of
them were prepared and validated.
"""

from __future__ import annotations

import datetime
import difflib
import re
from pathlib import Path

import yaml

from .. import paths, yamlio
from ..core.data import recipes
from ..core.judge import baselines
from ..core.verification import outputs
from ..core.verification.verify import compare_field, load_reference
from ..errors import ApptuneError
from ..history import records
from ..models import BuildFlags, FieldTolerance, Provenance, ReferenceFile, RunRecord
from ..yamlio import atomic_write_text


def refusals(cs: list[records.Case]) -> list[str]:
    """Each test case that failed (other than only its performance stage, with verified
    numbers) or passed without a verified result, named with its reason."""
    bad = []
    for c in cs:
        if c.result in ("skip", "xfail"):
            continue
        perf_only = c.result == "fail" and c.fail_phase == "performance" and c.verified
        if c.result != "pass" and not perf_only:
            why = (c.record.verification.summary if c.record else None) or c.fail_reason or c.result
            bad.append(
                f"{c.name}: {c.result}"
                + (f" in {c.fail_phase}" if c.fail_phase else "")
                + f": {' '.join(str(why).split())[:300]}"
            )
        elif not c.fixture and not c.verified:
            bad.append(f"{c.name}: no verified result")
    return bad


def plan_drift(r: RunRecord) -> list[str]:
    """What differs between a result's build and what its recipe resolves to now."""
    from ..core.data.site import load_site

    prov = r.provenance or Provenance()
    try:
        recipe = recipes.load_recipe(r.app)
        site = load_site(r.environment, languages=recipe.build.languages)
        plan = recipes.resolve(recipe, r.build_variant or r.variant, site.toolchain)
    except (ApptuneError, KeyError):
        return []
    out = []
    had = prov.source.sha256 if prov.source else None
    if had not in (None, recipe.source.sha256):
        out.append(f"source {had[:12]} → {recipe.source.sha256[:12]}")
    was = {p.file: p.sha256 for p in prov.patches}
    now = {p.file: p.sha256 for p in plan.patches}
    if was != now:
        out.append(
            f"patches {sorted(was)} → {sorted(now)}" if set(was) != set(now) else "patch contents"
        )
    flags = prov.flags or BuildFlags()
    for k in ("cflags", "fflags", "cppflags", "ldflags"):
        had = getattr(flags, k)
        planned = getattr(plan, k)
        if had is not None and had != planned:
            out.append(f"{k} {' '.join(had)!r} → {' '.join(planned)!r}")
    return out


def reference_text(text: str, values: dict[str, float], recorded: str | None) -> str:
    """``text`` (a reference file) with each field's ``value`` replaced by ``values``,
    changing only the values that differ (and ``recorded``, if given); comments, order and
    style stay."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    def change(doc):
        if recorded:
            doc["recorded"] = DoubleQuotedScalarString(recorded)
        for name, spec in (doc.get("fields") or {}).items():
            new = values.get(name)
            if new is None or not isinstance(spec, dict) or "value" not in spec:
                continue
            try:
                if float(spec["value"]) == float(new):
                    continue
            except (TypeError, ValueError):
                pass  # the stored value is not a number: the new one replaces it
            spec["value"] = _number(new)

    return yamlio.edit_yaml_text(text, change)


def run_label(run_dir: Path, r: RunRecord) -> str:
    """A run as a committed file names it: its directory's name and the machine's id, never
    a path of the machine it ran on."""
    return f"run {run_dir.name}" + (f" on {r.machine_id}" if r.machine_id else "")


def _number(v) -> int | float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(v)
    return int(v) if isinstance(v, int) or float(v).is_integer() and abs(v) < 1e15 else float(v)


def _preferred(r: RunRecord) -> tuple:
    """Order of the results a reference is taken from: gnu/baseline first."""
    return (
        (r.environment, r.variant) != ("gnu", "baseline"),
        r.environment,
        r.variant,
        r.test or "",
    )


def _pick_reference(rs: list[RunRecord]) -> RunRecord:
    ok = [r for r in rs if r.verification.ok]
    ok.sort(key=_preferred)
    return ok[0]


def plan(
    run_dir: Path,
    system: str | None = None,
    only_passing: bool = False,
    notes: list[str] | None = None,
) -> list[tuple[Path, str, str]]:
    """(file, old text, new text) for every file the run would change; raises on refusal.
    ``notes`` collects what the person blessing must know (left-out results, drift)."""
    run_dir = run_dir.resolve()
    notes = notes if notes is not None else []
    cs = records.cases(run_dir)
    bad = refusals(cs)
    if bad and not only_passing:
        raise ApptuneError(
            run_dir,
            None,
            f"refused: {len(bad)} test(s) failed or were not verified — "
            + "; ".join(bad[:5])
            + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else "")
            + " (--only-passing blesses the verified ones alone)",
        )
    notes += [f"left out: {b}" for b in bad]
    ok = [c.record for c in cs if c.record and c.verified and c.result in ("pass", "fail")]
    if not ok:
        raise ApptuneError(
            run_dir,
            None,
            f"refused: no verified result in this run ({len(cs)} test case(s): "
            + ", ".join(f"{n} {r}" for r, n in _count(c.result for c in cs).items())
            + ")",
        )
    for r in ok:
        drift = plan_drift(r)
        if drift:
            notes.append(
                f"warning: {r.environment}/{r.variant}: the recipe now resolves to another "
                f"build than the run's ({'; '.join(drift)})"
            )
    changes = []
    today = datetime.date.today().isoformat()
    by_tier: dict[tuple, list[RunRecord]] = {}
    for r in ok:
        by_tier.setdefault((r.app, r.tier), []).append(r)
    for (app, tier), rs in sorted(by_tier.items()):
        ref = _pick_reference(rs)
        f = paths.reference_file(app, tier)
        if not f.exists():
            continue
        values = {
            fr.field: fr.value
            for fr in ref.verification.fields or []
            if isinstance(fr.value, (int, float)) and not isinstance(fr.value, bool)
        }
        old = f.read_text()
        recorded = (
            f"{today}, {ref.environment}/{ref.variant}, blessed from {run_label(run_dir, ref)}"
        )
        if reference_text(old, values, None) == old:
            continue
        new = reference_text(old, values, recorded)
        try:
            ReferenceFile.model_validate(yaml.safe_load(new))
        except Exception as e:  # the edit must leave a valid file; never write one that is not
            raise ApptuneError(
                f, None, f"blessing would leave an invalid reference ({e})"
            ) from None
        if new != old:
            changes.append((f, old, new))
    by_app: dict[tuple, list[RunRecord]] = {}
    for r in ok:
        by_app.setdefault((system or r.system, r.app), []).append(r)
    for (sysname, app), rs in sorted(by_app.items()):
        f, new, left_out = baselines.merge(sysname, app, rs)
        notes += [f"baseline {app}: {n}" for n in left_out]
        old = f.read_text() if f.exists() else ""
        if _without_dates(new) != _without_dates(old):
            changes.append((f, old, new))
    return changes


def _count(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def _without_dates(text: str) -> str:
    """A baseline file without its ``recorded`` lines.

    A re-bless of the same numbers is then no change."""
    return re.sub(r"(?m)^\s*recorded: .*$", "", text)


def diff(changes: list[tuple[Path, str, str]]) -> str:
    out = []
    for f, old, new in changes:
        name = paths.rel(f)
        out.append(
            "".join(
                difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"
                )
            )
        )
    return "".join(out)


def write(changes: list[tuple[Path, str, str]]) -> None:
    for f, _, new in changes:
        atomic_write_text(f, new)


# --------------------------------------------------------------------------- first reference
#: Default tolerance of a floating-point field in a first reference (``apptune bless --new``):
#: relative, about the 6 to 7 significant digits a program prints. An integer field (a
#: count, a size, a checksum) is exact (``abs: 0``).
FIRST_REL = 1e-6


def default_tolerance(value: int | float) -> dict:
    """A first reference's tolerance of one field (see :data:`FIRST_REL`)."""
    return (
        {"value": value, "abs": 0} if isinstance(value, int) else {"value": value, "rel": FIRST_REL}
    )


def _yaml_number(v: int | float) -> str:
    """A number YAML reads back as the same int or float (``1e-14`` is a string to YAML 1.1)."""
    if isinstance(v, int):
        return str(v)
    mant, e, exp = repr(float(v)).partition("e")
    return (mant if "." in mant else mant + ".0") + (
        re.sub(r"^([+-]?)0*(?=\d)", r"e\1", exp) if e else ""
    )


def first_reference_problem(c: records.Case) -> str | None:
    """Why a test case cannot give a first reference (None: it can): outputs not parsed,
    fields that are not finite numbers, figures whose field is missing, own checks or
    reference fields that failed, each named."""
    head = f"{c.name}: {c.result}" + (f" in {c.fail_phase}" if c.fail_phase else "")
    rec = c.record
    if rec is None or rec.values is None:
        why = (rec.verification.summary if rec else None) or c.fail_reason
        why = why or "no apptune result record"
        return f"{head}: its outputs were not parsed: {' '.join(str(why).split())[:300]}"
    v, values = rec.verification, rec.values
    bad = [f.message for f in v.fields or [] if not f.ok]
    bad += [
        f"{k} = {x} (not a finite number)" for k, x in values.items() if outputs.is_bad_number(x)
    ]
    recipe = recipes.load_recipe(rec.app)
    bad += [
        f"{f.field} missing from the output (figure {n})"
        for n, f in recipe.run.figures.items()
        if f.field not in values and not f.optional
    ]
    own = [o.message for o in v.own_checks if not o.ok]
    if not bad and not own:
        return None
    return head + "".join(
        [
            f": fields failed: {'; '.join(bad)}" if bad else "",
            f": own checks failed: {'; '.join(own)}" if own else "",
        ]
    )


def plan_new(
    run_dir: Path, only_passing: bool = False, notes: list[str] | None = None
) -> list[tuple[Path, str, str]]:
    """(file, old text, new text) of the first reference of each (application, tier) of a
    run: every parsed field of the preferred result (gnu/baseline, else the first) with its
    default tolerance, except the fields figures read (measurements) and values that are
    not numbers (each named in ``notes``). Refused when a test case failed otherwise than
    for want of a reference (naming it and its failed fields), unless ``only_passing``, and
    when the reference already holds fields."""
    run_dir = run_dir.resolve()
    notes = notes if notes is not None else []
    cs = records.cases(run_dir)
    bad, usable = [], []
    for c in cs:
        if c.result in ("skip", "xfail"):
            continue
        if c.fixture:
            if c.result != "pass":
                why = c.fail_reason or c.result
                bad.append(
                    f"{c.name}: {c.result}"
                    + (f" in {c.fail_phase}" if c.fail_phase else "")
                    + f": {' '.join(str(why).split())[:300]}"
                )
            continue
        why = first_reference_problem(c)
        if why:
            bad.append(why)
        else:
            usable.append(c)
    if bad and not only_passing:
        raise ApptuneError(
            run_dir,
            None,
            f"refused: {len(bad)} test(s) cannot give a first reference — "
            + "; ".join(bad[:5])
            + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else "")
            + " (--only-passing blesses from the others)",
        )
    notes += [f"left out: {b}" for b in bad]
    if not usable:
        raise ApptuneError(
            run_dir,
            None,
            f"refused: no test case of this run parsed its outputs with "
            f"its own checks passing ({len(cs)} test case(s): "
            + ", ".join(f"{n} {r}" for r, n in _count(c.result for c in cs).items())
            + ")",
        )
    today = datetime.date.today().isoformat()
    by_tier: dict[tuple, list[records.Case]] = {}
    for c in usable:
        by_tier.setdefault((c.record.app, c.record.tier), []).append(c)
    changes = []
    for (app, tier), group in sorted(by_tier.items()):
        f = paths.reference_file(app, tier)
        old = f.read_text() if f.exists() else ""
        if f.exists():
            _, ref = load_reference(app, tier)
            if ref.fields:
                raise ApptuneError(
                    f,
                    "fields",
                    f"already holds {len(ref.fields)} field(s): --new writes only "
                    "a first reference; `apptune bless RUN_DIR` updates their values",
                )
        group.sort(key=lambda c: _preferred(c.record))
        r = group[0].record
        measured = {fig.field: name for name, fig in recipes.load_recipe(app).run.figures.items()}
        fields = {}
        for k, x in (r.values or {}).items():
            if k in measured:
                notes.append(
                    f"{app}/{tier}: {k} left out: a measurement (figure {measured[k]}), "
                    "judged against baselines, not verified"
                )
            elif isinstance(x, bool) or not isinstance(x, (int, float)):
                notes.append(f"{app}/{tier}: {k} left out: {x!r} is not a number")
            else:
                fields[k] = default_tolerance(x)
        if not fields:
            raise ApptuneError(
                f,
                "fields",
                f"nothing to verify: every field {r.variant} parsed is a "
                "figure's measurement or not a number; extract a number the program "
                "computes (a residual, a count, a checksum)",
            )
        for c in group[1:]:
            for k, tol in fields.items():
                res = compare_field(k, FieldTolerance(**tol), (c.record.values or {}).get(k))
                if not res.ok:
                    notes.append(f"warning: {c.name}: {res.message}: this reference would fail it")
        from ..templating import environment
        from ..yamlio import yaml_word

        new = (
            environment()
            .get_template("first-reference.yaml.j2")
            .render(
                app=app,
                tier=tier,
                rel=_yaml_number(FIRST_REL),
                source=f"run {run_dir.name} ({r.environment}/{r.variant})",
                recorded=f"{today}, {r.environment}/{r.variant}, "
                f"first reference from {run_label(run_dir, r)}",
                fields={
                    yaml_word(k): "{"
                    + ", ".join(f"{n}: {_yaml_number(x)}" for n, x in t.items())
                    + "}"
                    for k, t in fields.items()
                },
            )
        )
        try:
            ReferenceFile.model_validate(yaml.safe_load(new))
        except Exception as e:  # never write a file that does not load
            raise ApptuneError(f, None, f"the first reference would be invalid ({e})") from None
        changes.append((f, old, new))
    return changes
