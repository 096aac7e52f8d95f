"""The interface every meter implements, the readings it deals in, and the registry the
sampler picks meters from (``METERS``, filled by :func:`register`). The record a meter
fills in, :class:`EnergyRecord`, is the run record's energy part (apptune/models/record.py).

A meter module imports only this module, never the package: the package loads the
meter modules to register them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..models.record import EnergyRecord


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


METERS: dict[str, type[Meter]] = {}


def register(cls: type[Meter]) -> type[Meter]:
    METERS[cls.name] = cls
    return cls
