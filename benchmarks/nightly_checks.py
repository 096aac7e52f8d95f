"""The checks of ``benchmarks/nightly_slurm.sh``'s load phase on what a night left: the
verdicts of ``check-regressions`` (its ``--json``) and the run records against the
recorded baseline. Prints what it found; exits 1 when the check fails.

    nightly_checks.py cause RUN_DIR        # the node's state named; the flags never alone
    nightly_checks.py loaded RUN_DIR TEXT  # each record's change since the baseline has TEXT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from apptune.core.judge import baselines, causes, changes
from apptune.history import records

FLAGS = ("flags ", "cflags ", "fflags ", "per-file flags ")


def cause(run_dir: Path) -> int:
    """The node's state is among the causes of the night's verdicts, and the flag change
    that came with it is never named without it: where the flags are named, the node's
    state is named beside them, and a change the flags cannot explain says so."""
    verdicts = json.loads((run_dir / "regressions.json").read_text())
    named = blamed = alongside = 0
    for v in verdicts:
        lines = list(v.get("provenance_diff") or [])
        lines += [x for c in v.get("change_points") or [] for x in c.get("cause") or []]
        lines += (v.get("baseline") or {}).get("cause") or []
        node = [x for x in lines if x.startswith(causes.STATE)]
        flags = [x for x in lines if x.startswith(FLAGS)]
        named += bool(node)
        alongside += sum(causes.ALONGSIDE in x for x in flags)
        if flags and not node:
            blamed += 1
            print(f"blamed: {v['app']} {v['environment']}/{v['variant']} {v['figure']}: {lines}")
    print(
        f"{len(verdicts)} series; the node's state named in {named}; the flags said to have "
        f"changed alongside {alongside} time(s), named without the node's state in {blamed}"
    )
    return 0 if named and not blamed else 1


def loaded(run_dir: Path, text: str) -> int:
    """Each verified record of the night says, against its baseline entry, ``text``."""
    found = missing = 0
    for c in records.cases(run_dir):
        r = c.record
        if r is None or not c.verified:
            continue
        _, b = baselines.load(r.system, r.app)
        entry = baselines.lookup(b, r.machine_id, r.environment, r.variant, r.tier)
        if entry is None:
            continue
        said = baselines.what_changed(entry, r) or []
        if any(text in x for x in said):
            found += 1
        else:
            missing += 1
            print(f"not said: {r.app} {r.environment}/{r.variant}: {changes.short(said, 9)}")
        print(f"{r.app} {r.environment}/{r.variant}: {[x for x in said if text in x]}")
    return 0 if found and not missing else 1


if __name__ == "__main__":
    what, run = sys.argv[1], Path(sys.argv[2])
    sys.exit(cause(run) if what == "cause" else loaded(run, sys.argv[3]))
