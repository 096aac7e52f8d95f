"""A row of the report: a test case with its run record, as the matrices, the first screen
and the history show it, and as ``summary.json`` holds it (:meth:`Row.data`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..models import BaselineVerdicts, RunRecord

#: The keys of a row in ``summary.json``, in their order: the test case's, then the run
#: record's parts (as the record holds them).
KEYS = (
    "test",
    "app",
    "tier",
    "variant",
    "environment",
    "system",
    "result",
    "fail_phase",
    "fail_reason",
    "verified",
    "verification",
    "figures",
    "baseline",
    "energy",
    "provenance",
    "outputdir",
    "ranks",
    "input",
    "values",
    "curves",
    "job",
    "placement_layout",
    "launch",
    "quality",
    "machine_id",
    "machine",
    "run",
    "scratch",
    "knobs",
)
#: What the report adds to a row after collecting it, in ``summary.json`` when set.
ADDED = ("scratch_reads", "speedup", "baseline_verdicts", "input_own", "history_verdicts")


@dataclass(eq=False)
class Row:
    """A test case with a run record. ``figures``, ``verified``, ``verification`` and
    ``baseline`` are the record's, or the medians' and their verdicts when repeats are
    merged into one column (``repeats`` > 1, each figure's ``spread``)."""

    record: RunRecord
    test: str
    result: str
    fail_phase: str | None
    fail_reason: str | None
    #: The run's output directory (the stage directory of a run that did not pass).
    outputdir: str | None
    figures: dict
    verified: bool
    verification: str
    baseline: BaselineVerdicts | None
    repeats: int = 1
    spread: dict = field(default_factory=dict)
    # added by the matrices (apptune/report/matrices.py) and the history's verdicts
    scratch_reads: bool | None = None
    speedup: dict | None = None
    baseline_verdicts: dict | None = None
    input_own: dict | None = None
    history_verdicts: dict | None = None

    @classmethod
    def of(cls, tc: dict, r: RunRecord, res: str) -> Row:
        """The row of test case ``tc`` (ReFrame's report) that gave ``res`` and record ``r``."""
        return cls(
            record=r,
            test=tc["display_name"],
            result=res,
            fail_phase=tc.get("fail_phase"),
            fail_reason=tc.get("fail_reason"),
            outputdir=tc.get("outputdir") if res == "pass" else tc.get("stagedir"),
            figures=r.figures or {},
            verified=r.verification.ok,
            verification=r.verification.summary,
            baseline=r.baseline,
        )

    def merged(self, **changes) -> Row:
        """This row with ``changes`` (repeats merged into one column)."""
        return dataclasses.replace(self, **changes)

    # the run record's parts
    app = property(lambda self: self.record.app)
    tier = property(lambda self: self.record.tier)
    variant = property(lambda self: self.record.variant)
    environment = property(lambda self: self.record.environment)
    energy = property(lambda self: self.record.energy)
    provenance = property(lambda self: self.record.provenance)
    ranks = property(lambda self: self.record.ranks)
    input = property(lambda self: self.record.input)
    job = property(lambda self: self.record.job)
    placement_layout = property(lambda self: self.record.placement_layout)
    launch = property(lambda self: self.record.launch)
    quality = property(lambda self: self.record.quality)
    machine_id = property(lambda self: self.record.machine_id)
    machine = property(lambda self: self.record.machine)
    run = property(lambda self: self.record.run)
    scratch = property(lambda self: self.record.scratch)
    knobs = property(lambda self: self.record.knobs)

    @property
    def system(self) -> str:
        """``system:partition``, as ReFrame names where it ran."""
        return f"{self.record.system}:{self.record.partition}"

    @property
    def values(self) -> dict:
        return self.record.values or {}

    @property
    def curves(self) -> dict:
        return self.record.curves or {}

    def data(self) -> dict:
        """As ``summary.json`` holds it: :data:`KEYS`, ``repeats`` and ``spread`` of merged
        repeats, and what the report added (:data:`ADDED`); the record's parts stay parts
        (:func:`apptune.models.as_data` writes them as the record holds them)."""
        out = {k: getattr(self, k) for k in KEYS}
        if self.repeats > 1:
            out |= {"repeats": self.repeats, "spread": self.spread}
        return out | {k: getattr(self, k) for k in ADDED if getattr(self, k) is not None}
