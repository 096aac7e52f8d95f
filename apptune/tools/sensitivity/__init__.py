"""``apptune sensitivity APP``: what the application's verification can see, measured.

Faults of our own are planted in a clean build of the tier
(``reference/APP/sensitivity/faults.yaml``):
mutations of its source (an index, a constant, a sign, a loop bound in a routine the run
goes through: small patches under ``patches/APP/faults/``) and of its input (a physical
parameter, a time step, a mesh size: parameters of the tier's input set to other values).
Each is built and run as a check's build and run are (:mod:`apptune.core.run.localrun`, as tune
and bisect do) and judged by the tier's reference: caught, and by which fields, or not seen,
and how much of its tolerance the closest field used. A sweep changes one physical parameter
by growing relative amounts, then bisects, to find the smallest change the reference sees.

What was seen goes to ``reference/APP/sensitivity/seen.yaml`` with each faulted run's values;
the test suite judges those values again against the current reference and tolerances, so
a fault that was caught and no longer is (a loosened tolerance, a field dropped) fails a
test without running anything (:func:`~apptune.tools.sensitivity.judge.rejudge`).

Three modules: :mod:`~apptune.tools.sensitivity.battery` (the builds and runs),
:mod:`~apptune.tools.sensitivity.judge` (a run as the verification saw it, and judged
again) and :mod:`~apptune.tools.sensitivity.table` (the terminal's lines, the docs' row).
"""

from __future__ import annotations

from .battery import Battery, default_work, write
from .judge import failed_names, rejudge, seen, still_failing
from .table import docs_row, docs_table, terminal, update_docs

__all__ = [
    "Battery",
    "default_work",
    "docs_row",
    "docs_table",
    "failed_names",
    "rejudge",
    "seen",
    "still_failing",
    "terminal",
    "update_docs",
    "write",
]
