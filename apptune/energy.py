"""Energy hook: every run gets an energy record with an honest trust grade.

Meters are chosen per partition from the site config (``extras.energy_meters``,
in order of preference).  Where none is configured or none can read, the record
says so (trust ``none``) instead of inventing a number.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class EnergyRecord:
    trust: str                      # measured | measured-shared | modelled | none
    source: str | None = None
    energy_J: float | None = None
    avg_power_W: float | None = None
    peak_power_W: float | None = None
    sample_hz: float | None = None
    coverage: float | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class Meter:
    name = "abstract"

    def available(self) -> str | None:
        """None when usable, else the reason it is not."""
        raise NotImplementedError

    def start(self, stagedir: str) -> None:
        raise NotImplementedError

    def stop(self) -> EnergyRecord:
        raise NotImplementedError


METERS: dict[str, type[Meter]] = {}


def register(cls: type[Meter]) -> type[Meter]:
    METERS[cls.name] = cls
    return cls


def choose(names: list[str], partition: str) -> tuple[Meter | None, EnergyRecord | None]:
    """First usable meter of the site's list, or a 'none' record that says why."""
    if not names:
        return None, EnergyRecord(trust="none", reason=f"no energy meter configured for {partition} "
                                  "(site-config: partition extras 'energy_meters' is empty)")
    reasons = []
    for n in names:
        cls = METERS.get(n)
        if cls is None:
            reasons.append(f"{n}: not implemented in this apptune version")
            continue
        m = cls()
        why = m.available()
        if why is None:
            return m, None
        reasons.append(f"{n}: {why}")
    return None, EnergyRecord(trust="none", reason=f"no usable energy meter on {partition}: " + "; ".join(reasons))
