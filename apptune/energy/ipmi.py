"""BMC power through DCMI: ``ipmitool dcmi power reading`` or FreeIPMI's
``ipmi-dcmi --get-system-power-statistics``.  Instantaneous power only (no
counter): energy is integrated from the samples.  BMCs update about once a
second, so the sampler's rate is capped at 1 Hz for this meter."""

from __future__ import annotations

import re
import shutil

from .meter import Meter, MeterError, Reading, register, run_command

COMMANDS = {
    "ipmitool": (
        ["ipmitool", "dcmi", "power", "reading"],
        re.compile(r"Instantaneous power reading:\s*([0-9.]+)\s*Watts", re.I),
    ),
    "freeipmi": (
        ["ipmi-dcmi", "--get-system-power-statistics"],
        re.compile(r"Current Power\s*:\s*([0-9.]+)\s*Watts", re.I),
    ),
}


def parse(tool: str, text: str) -> float:
    m = COMMANDS[tool][1].search(text)
    if not m:
        raise MeterError(f"{tool}: no power reading in its output")
    return float(m.group(1))


def run_tool(cmd: list[str]) -> str:
    return run_command(cmd, timeout=5)


@register
class IpmiMeter(Meter):
    name = "ipmi"
    grade = "measured"
    cumulative = False
    max_hz = 1.0

    def __init__(self, options=None, context=None, runner=run_tool):
        super().__init__(options, context)
        self.runner = runner
        self.tool = None

    def available(self) -> str | None:
        reasons = []
        for tool, (cmd, _) in COMMANDS.items():
            if self.options.get("tool") not in (None, tool):
                continue
            if self.runner is run_tool and shutil.which(cmd[0]) is None:
                reasons.append(f"{cmd[0]} not installed")
                continue
            try:
                parse(tool, self.runner(cmd))
            except MeterError as e:
                reasons.append(str(e))
                continue
            self.tool = tool
            return None
        return "; ".join(reasons) or "no DCMI tool configured"

    def read(self) -> Reading:
        return Reading(power_W=parse(self.tool, self.runner(COMMANDS[self.tool][0])))
