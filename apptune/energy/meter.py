"""The interface every meter implements, the readings and record it deals in, and the
registry the sampler picks meters from (``METERS``, filled by :func:`register`).

A meter module imports only this module, never the package: the package loads the
meter modules to register them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Reading:
    """One meter reading: instantaneous power and/or a cumulative energy counter."""

    power_W: float | None = None
    energy_J: float | None = None


class MeterError(Exception):
    """A meter stopped working (file vanished, command failed, counter stale)."""


def run_command(cmd: list[str], timeout: float = 30) -> str:
    """Run a meter's tool (argument list, no shell); its failure is a MeterError."""
    import subprocess

    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MeterError(f"{cmd[0]}: {e}") from None
    if p.returncode != 0:
        raise MeterError(f"{cmd[0]} exited {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
    return p.stdout


class Meter:
    """Interface of every meter."""

    name = "abstract"
    #: Trust grade of this meter's figures when the node is used exclusively.
    grade = "measured"
    #: Whether read() returns a cumulative energy counter.
    cumulative = False
    #: Whether the meter can be sampled during the run (sacct only answers afterwards).
    samples = True
    #: Whether it reads the node it runs on (RAPL, pm_counters, IPMI, NVML, the model).
    #: Such meters read the job's node only where the job runs on the sampler's node
    #: (local scheduler); under Slurm they run as per-node agents (energy/agent.py).
    node_local = True

    def __init__(self, options: dict | None = None, context: dict | None = None):
        self.options = options or {}
        self.context = context or {}

    def path_option(self, env_var: str, default: str):
        """A filesystem root: the ``root`` option, else ``$env_var`` (tests), else the default."""
        import os

        return Path(self.options.get("root", os.environ.get(env_var, default)))

    def available(self) -> str | None:
        """None when usable, else the reason it is not."""
        raise NotImplementedError

    def read(self) -> Reading:
        raise NotImplementedError

    def after(self, record: EnergyRecord) -> None:
        """Post-run fill-in (e.g. Slurm accounting); default: nothing to add."""
        return None


@dataclass
class EnergyRecord:
    trust: str
    source: str | None = None
    energy_J: float | None = None
    energy_integrated_J: float | None = None
    disagreement: float | None = None
    avg_power_W: float | None = None
    peak_power_W: float | None = None
    duration_s: float | None = None
    sample_hz: float | None = None
    samples: int = 0
    coverage: float | None = None
    exclusive: bool | None = None
    sampler_cpu_s: float | None = None
    trace: str | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def figures(self, wall_time: float | None, rates: dict[str, float] | None = None) -> dict:
        """Perf figures: energy_J, avg/peak power, EDP and rate per watt."""
        if self.trust == "none" or self.energy_J is None:
            return {}
        out = {
            "energy_J": self.energy_J,
            "avg_power_W": self.avg_power_W,
            "peak_power_W": self.peak_power_W,
        }
        if wall_time:
            out["edp_Js"] = self.energy_J * wall_time
        if self.avg_power_W:
            for name, v in (rates or {}).items():
                if isinstance(v, (int, float)):
                    out[f"{name}_per_W"] = v / self.avg_power_W
        return {k: v for k, v in out.items() if v is not None and math.isfinite(v)}


METERS: dict[str, type[Meter]] = {}


def register(cls: type[Meter]) -> type[Meter]:
    METERS[cls.name] = cls
    return cls
