"""``apptune bisect``: which source files must keep the good variant's flags.

When an aggressive variant fails verification, bisect finds the smallest set of
object files that must come from the good build for the results to pass again,
and writes it as a ``per_file`` rule of the recipe.

How (details: docs/tuning.md; measured cases: docs/measurements.md#bisect-and-tune):

1. Build the good and the bad variant once each, with the same source, patches and
   library axes, keeping their trees (object files, archives) and the compile lines
   apptune's compiler wrapper recorded (``compile-lines.jsonl``: cwd, argv, source).
2. The units of the search are the objects the two builds compiled separately
   (``-c``) and that differ byte for byte; identical objects cannot matter.
3. A candidate takes the bad tree, copies the good object over the bad one for a
   subset of units, replaces those members in every static archive that held the
   bad object (``ar r``), re-runs the build's recorded link commands in their
   directories, and is run and verified like a check (:mod:`apptune.core.run.localrun`).
   Nothing is recompiled, so Fortran module order plays no role; mixing objects
   assumes module interfaces do not depend on the flags, which is checked: every
   ``.mod`` file must be identical in both builds (else a warning).
4. The search is FLiT's bisection (Bentley et al., HPDC 2019), with pass/fail
   verification instead of a numeric difference: with the failing set C known,
   test its first half; if that half alone (everything else good) fails, keep it,
   else keep the other half — one cycle per halving, ``ceil(log2 n)`` cycles per
   culprit. The found set is then verified (found files good, every other file bad
   must pass); if it does not, the search continues for the next culprit among the
   rest. With several culprits each is checked to be necessary (1-minimality).
5. Then, per culprit object, the same search over its global functions (FLiT's
   symbol bisection): a candidate object is the good and the bad object linked into
   one (``ld -r``) after ``objcopy --weaken-symbol`` has made every function weak in
   the copy it must not come from (and every global variable weak in the good
   copy), so the strong definition wins at the link. Functions with internal
   linkage (``static``, compiler clones) stay with the copy that calls them, and
   code inlined into another function moves with that function: the result names
   the global functions whose definitions must come from the good build.
6. Then good, bad and the mixed build are run ``--repeats`` times interleaved, and
   the primary figure and wall time are reported as medians and ratios.

A build+run cycle is counted for each end (build and run) and each candidate
(relink and run); timing repeats are counted apart.

Four modules: :mod:`~apptune.tools.bisect.objects` (what is mixed),
:mod:`~apptune.tools.bisect.search` (the search over units),
:mod:`~apptune.tools.bisect.rules` (the recipe's ``per_file`` rule) and
:mod:`~apptune.tools.bisect.phases` (the bisection, phase by phase).
"""

from __future__ import annotations

from .objects import (
    Mixer,
    Unit,
    defined_globals,
    module_differences,
    object_of,
    pretty_symbol,
    read_archive,
    symbol_mix,
    units_of,
)
from .phases import Bisection, BisectResult, Cycle, bisect, report_md, timing_table
from .rules import add_per_file, covering_rule, good_flags, per_file_entries
from .search import BudgetExhausted, bisect_search, ddmin

__all__ = [
    "BisectResult",
    "Bisection",
    "BudgetExhausted",
    "Cycle",
    "Mixer",
    "Unit",
    "add_per_file",
    "bisect",
    "bisect_search",
    "covering_rule",
    "ddmin",
    "defined_globals",
    "good_flags",
    "module_differences",
    "object_of",
    "per_file_entries",
    "pretty_symbol",
    "read_archive",
    "report_md",
    "symbol_mix",
    "timing_table",
    "units_of",
]
