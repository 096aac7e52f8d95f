"""GPU energy through NVML's total-energy counter (``nvidia-ml-py``), in mJ.

Adds the GPUs' energy on the node; used where the site lists it (usually after
a node meter that does not include accelerators)."""

from __future__ import annotations

from .meter import Meter, MeterError, Reading, register


@register
class NvmlMeter(Meter):
    name = "nvml"
    grade = "measured"
    cumulative = True

    def __init__(self, options=None, context=None, nvml=None):
        super().__init__(options, context)
        self.nvml = nvml
        self.handles = []

    def available(self) -> str | None:
        if self.nvml is None:
            try:
                import pynvml
            except ImportError:
                return "nvidia-ml-py is not installed"
            self.nvml = pynvml
        try:
            self.nvml.nvmlInit()
            n = self.nvml.nvmlDeviceGetCount()
        except Exception as e:
            return f"NVML unavailable: {e}"
        if n == 0:
            return "no GPU"
        self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        return None

    def read(self) -> Reading:
        try:
            mj = sum(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles)
        except Exception as e:
            raise MeterError(f"NVML: {e}") from None
        return Reading(energy_J=mj / 1000.0)
