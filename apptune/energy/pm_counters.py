"""HPE/Cray ``/sys/cray/pm_counters``: node energy (J), power (W), freshness.

``energy`` reads like ``2906072 J``; ``freshness`` increments each time the
counters are updated (about 10 Hz).  A freshness that does not move for
``stale_after`` seconds (default 2) means the counters are stale: the meter
fails and the sampler degrades.  Accelerator energies (``accel*_energy``)
are included in ``energy`` already and reported in the notes.
"""

from __future__ import annotations

import time
from pathlib import Path

from .meter import Meter, MeterError, Reading, register

DEFAULT_ROOT = "/sys/cray/pm_counters"


def _value(path: Path) -> float:
    words = path.read_text().split()
    if not words:
        raise ValueError(f"{path.name} is empty")
    return float(words[0])


@register
class PmCountersMeter(Meter):
    name = "pm_counters"
    grade = "measured"
    cumulative = True

    def __init__(self, options=None, context=None):
        super().__init__(options, context)
        self.root = self.path_option("APPTUNE_PM_COUNTERS_ROOT", DEFAULT_ROOT)
        self.stale_after = float(self.options.get("stale_after", 2.0))
        self._fresh = None
        self._fresh_since = None

    def available(self) -> str | None:
        if not (self.root / "energy").exists():
            return f"{self.root}/energy does not exist (not an HPE/Cray node)"
        try:
            _value(self.root / "energy")
        except (OSError, ValueError) as e:
            return f"{self.root}/energy unreadable: {e}"
        return None

    def read(self) -> Reading:
        try:
            energy = _value(self.root / "energy")
            power = _value(self.root / "power") if (self.root / "power").exists() else None
            fresh = _value(self.root / "freshness") if (self.root / "freshness").exists() else None
        except (OSError, ValueError) as e:
            raise MeterError(str(e)) from None
        now = time.monotonic()
        if fresh is not None:
            if fresh != self._fresh:
                self._fresh, self._fresh_since = fresh, now
            elif now - self._fresh_since > self.stale_after:
                raise MeterError(
                    f"freshness counter stuck at {int(fresh)} for "
                    f"{now - self._fresh_since:.1f} s (stale counters)"
                )
        return Reading(power_W=power, energy_J=energy)
