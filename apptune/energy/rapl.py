"""RAPL through the powercap sysfs tree (``/sys/class/powercap/intel-rapl:*``).

Sums the package zones (``intel-rapl:N``) and their ``dram`` subzones;
``core``/``uncore`` subzones are already inside the package figure.  Each
counter wraps at ``max_energy_range_uj``; a decrease is taken as one wrap.
Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694): the
reason says so, and docs/energy.md shows the udev rule that opens it.
"""

from __future__ import annotations

from pathlib import Path

from .meter import Meter, MeterError, Reading, register

DEFAULT_ROOT = "/sys/class/powercap"


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


@register
class RaplMeter(Meter):
    name = "rapl"
    grade = "measured"
    cumulative = True

    def __init__(self, options=None, context=None):
        super().__init__(options, context)
        self.root = self.path_option("APPTUNE_POWERCAP_ROOT", DEFAULT_ROOT)
        self.zones: list[Path] = []
        self._last: dict[Path, int] = {}
        self._total_uj = 0

    def _find_zones(self) -> list[Path]:
        zones = []
        for z in sorted(self.root.glob("intel-rapl:*")):
            parts = z.name.split(":")
            name = (z / "name").read_text().strip() if (z / "name").exists() else ""
            if len(parts) == 2 and name.startswith("package"):
                zones.append(z)
            elif len(parts) == 3 and name == "dram":
                zones.append(z)
        return zones

    def available(self) -> str | None:
        if not self.root.is_dir():
            return f"{self.root} does not exist (no powercap driver)"
        self.zones = self._find_zones()
        if not self.zones:
            return f"no RAPL package zones under {self.root}"
        for z in self.zones:
            try:
                _read_int(z / "energy_uj")
            except PermissionError:
                return (
                    f"{z / 'energy_uj'} is not readable (permission denied; root-only since "
                    f"Linux 5.10, see docs/energy.md)"
                )
            except (OSError, ValueError) as e:
                return f"{z / 'energy_uj'} unreadable: {e}"
        return None

    def read(self) -> Reading:
        for z in self.zones:
            try:
                e = _read_int(z / "energy_uj")
                wrap = (
                    _read_int(z / "max_energy_range_uj")
                    if (z / "max_energy_range_uj").exists()
                    else None
                )
            except (OSError, ValueError) as err:
                raise MeterError(f"{z.name}: {err}") from None
            last = self._last.get(z)
            if last is not None:
                d = e - last
                if d < 0:
                    if wrap is None:
                        raise MeterError(
                            f"{z.name}: counter decreased and max_energy_range_uj is missing"
                        )
                    d += wrap + 1
                self._total_uj += d
            self._last[z] = e
        return Reading(energy_J=self._total_uj / 1e6)
