"""GROMACS's own outputs, read the way its regression-test driver reads them.

* ``gmx_check_energy``: the report of ``gmx check -e REF.edr -e2 RUN.edr -tol T -abstol A
  -lastener Potential``. gmx check prints one line per energy term and frame that differs
  by more than its tolerance (relative ``T`` *or* absolute ``A``, GROMACS's
  ``equal_real``); regressiontests' ``gmxtest.pl`` counts those lines (the lines holding
  ``step``) as the test's energy errors. The field is that count.
* ``gmx_check_forces``: the report of ``gmx check -f REF.trr -f2 RUN.trr -tol T -abstol
  A``. gmx check lists every atom whose force differs by more than the tolerance; the
  driver then fails an atom only when the direction differs: the scalar product of the two
  normalised forces below ``1 - 0.001`` (``$ftol_sprod``). The field is the largest
  ``1 - scalar product`` of the listed atoms (0 when none is listed), so the reference holds
  the driver's tolerance as ``max: 0.001``. Coordinates and velocities (``x[``, ``v[``) are
  not judged, as in the driver; any other difference (a frame more or less, a flag that
  differs) is an error naming the file and the field.
* ``gmx_mdlog``: mdrun's ``md.log``: what the run was (its step count, ``Statistics over N
  steps``; the simulated time, ``of length T ps``: a longer time step gives more ns/day for
  the same work; its atom count, ``There are: N Atoms``), ns/day, the wall time and the
  cycle table
  (``R E A L   C Y C L E   A N D   T I M E   A C C O U N T I N G``): the share of the
  PP force work (the ``Force`` row), of PME (every ``PME ...`` row of the main table) and of
  communication and waiting (the ``Comm.``, ``Wait + Comm.`` and ``Send X to PME`` rows,
  and the PME breakdown's ``PME redist. X/F`` and ``PME 3D-FFT Comm.``: inside PME's
  share too) in the run's wall time.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ....errors import ApptuneError
from ....models import OutputSpec, Recipe

NAMES = ("gmx_check_energy", "gmx_check_forces", "gmx_mdlog")

#: gmxtest.pl's ``$ftol_sprod``: two forces agree when the scalar product of their
#: directions is at least ``1 - 0.001``.
FORCE_SPROD_TOL = 0.001

#: The fields a ``gmx_mdlog`` output gives.
MDLOG_FIELDS = (
    "steps",
    "simulated_ps",
    "atoms",
    "ns_per_day",
    "hours_per_ns",
    "mdrun_wall_s",
    "mdrun_core_s",
    "mpi_ranks",
    "pme_ranks",
    "force_pct",
    "pme_pct",
    "comm_pct",
)

_ENERGY_LINE = re.compile(
    r"^(?P<name>.+?)\s+step\s+-?\d+:\s+(?P<a>\S+),\s+step\s+-?\d+:\s+(?P<b>\S+)\s*$"
)
_VEC = r"\(\s*(\S+)\s+(\S+)\s+(\S+)\s*\)"
_FORCE_LINE = re.compile(rf"^f\[\s*\d+\]\s*{_VEC}\s*-\s*{_VEC}\s*$")


def _read(path: Path) -> str:
    if not path.is_file():
        raise ApptuneError(path, None, "gmx check wrote no report (did the step run?)")
    return path.read_text(errors="replace")


def energy_errors(path: Path, field: str) -> dict:
    """``{field: number of energy terms outside the tolerance}`` (gmxtest.pl's count)."""
    text = _read(path)
    if "comparing energy file" not in text:
        raise ApptuneError(path, field, "not a report of gmx check -e (no 'comparing energy file')")
    count = 0
    for line in text.splitlines():
        if _ENERGY_LINE.match(line) or re.match(r"^step \(", line):
            count += 1
        elif line.startswith("End of file on"):
            raise ApptuneError(path, field, f"the energy files have different frames ({line})")
    return {field: count}


def force_direction_error(path: Path, field: str) -> dict:
    """``{field: the largest 1 - scalar product of the force directions of the atoms gmx
    check lists}`` (0.0 when it lists none)."""
    worst = 0.0
    for n, line in enumerate(_read(path).splitlines(), 1):
        s = line.strip()
        if not s or s.startswith(("x[", "v[")) or s == "Both files read correctly":
            continue
        m = _FORCE_LINE.match(s)
        if m is None:
            raise ApptuneError(path, field, f"gmx check reports a difference: {s} (line {n})")
        try:
            f1 = [float(x) for x in m.groups()[:3]]
            f2 = [float(x) for x in m.groups()[3:]]
        except ValueError:
            raise ApptuneError(path, field, f"not a number in line {n}: {s}") from None
        l1, l2 = math.sqrt(sum(x * x for x in f1)), math.sqrt(sum(x * x for x in f2))
        if l1 * l2 == 0.0:
            off = 0.0 if l1 == l2 else 1.0  # one force zero, the other not: no direction
        else:
            off = 1.0 - sum(a * b for a, b in zip(f1, f2, strict=True)) / (l1 * l2)
        worst = max(worst, off)
    return {field: worst}


_ROW = re.compile(
    r"^ (?P<name>\S.*?)\s+(?:\d+\s+\d+\s+\d+\s+)?(?P<wall>[\d.]+)\s+(?P<gcyc>[\d.]+)\s+"
    r"(?P<pct>[\d.]+)\s*$"
)


def cycle_table(text: str, path: Path) -> tuple[dict[str, float], dict[str, float]]:
    """md.log's cycle accounting: the main table and its breakdown of the PME mesh, each
    row name -> its share of the total wall time (%)."""
    start = text.rfind("R E A L   C Y C L E   A N D   T I M E   A C C O U N T I N G")
    if start < 0:
        raise ApptuneError(path, "cycle table", "md.log has no cycle accounting (run incomplete?)")
    main: dict[str, float] = {}
    pme: dict[str, float] = {}
    rows, rules = main, 0
    for line in text[start:].splitlines():
        if line.startswith("-----"):
            rules += 1
            continue
        if line.strip().startswith("Breakdown of PME mesh"):
            rows = pme
            continue
        if line.strip().startswith(("Core t", "Time:")):
            break
        m = _ROW.match(line)
        if m and m["name"] != "Total":
            name = m["name"].strip()
            rows[name] = rows.get(name, 0.0) + float(m["pct"])
    if not main:
        raise ApptuneError(path, "cycle table", "the cycle accounting table has no rows")
    return main, pme


def _is_comm(name: str) -> bool:
    """A row of communication or of waiting for it: ``Comm. coord.``, ``Wait + Comm. F``,
    ``Send X to PME``, PME's ``PME redist. X/F`` and ``PME 3D-FFT Comm.``."""
    return "Comm." in name or name.startswith(("Wait", "Send X")) or "redist" in name


#: (field, md.log's line, type): what the run was. Its conserved-energy drift is not among
#: them: over nbnxn_pme's 400 steps it did not grow with the time step (-2.6e-3 kJ/mol/ps per
#: atom at 2 fs, -4e-5 and +1.2e-3 at 4 fs), so it would verify nothing.
_RUN_FACTS = (
    ("steps", r"^\s*Statistics over (\d+) steps", int),
    ("simulated_ps", r"^Energy conservation over simulation part #\d+ of length (\S+) ps", float),
    ("atoms", r"^There are: (\d+) Atoms", int),
)


def mdlog(path: Path) -> dict:
    """ns/day, wall time, ranks and the cycle table's shares (:data:`MDLOG_FIELDS`)."""
    if not path.is_file():
        raise ApptuneError(path, None, "mdrun wrote no log (did the run crash?)")
    text = path.read_text(errors="replace")
    out: dict = {}
    m = re.search(r"^Performance:\s+(\S+)\s+(\S+)", text, re.M)
    if m is None:
        raise ApptuneError(path, "Performance", "md.log has no Performance line (run incomplete?)")
    out["ns_per_day"], out["hours_per_ns"] = float(m[1]), float(m[2])
    m = re.search(r"^\s+Time:\s+(\S+)\s+(\S+)", text, re.M)
    if m is None:
        raise ApptuneError(path, "Time", "md.log has no Time line (run incomplete?)")
    out["mdrun_core_s"], out["mdrun_wall_s"] = float(m[1]), float(m[2])
    m = re.search(
        r"^On (\d+) MPI ranks?(?: doing PP, and\s+on (\d+) MPI ranks? doing PME)?", text, re.M
    )
    out["mpi_ranks"] = int(m[1]) + int(m[2] or 0) if m else 1
    out["pme_ranks"] = int(m[2] or 0) if m else 0
    for name, pattern, kind in _RUN_FACTS:
        m = re.search(pattern, text, re.M)
        if m is None:
            raise ApptuneError(path, name, f"md.log has no line matching {pattern!r}")
        out[name] = kind(m[1])
    rows, pme = cycle_table(text, path)
    out["force_pct"] = rows.get("Force", 0.0)
    out["pme_pct"] = round(sum(v for k, v in rows.items() if k.startswith("PME")), 3)
    comm = [v for k, v in rows.items() if _is_comm(k)] + [v for k, v in pme.items() if _is_comm(k)]
    out["comm_pct"] = round(float(sum(comm)), 3)
    return out


def fields(spec: OutputSpec, recipe: Recipe) -> set[str]:
    return set(MDLOG_FIELDS) if spec.format == "gmx_mdlog" else {spec.field}


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
    if spec.format == "gmx_check_energy":
        return energy_errors(path, spec.field)
    if spec.format == "gmx_check_forces":
        return force_direction_error(path, spec.field)
    return mdlog(path)
