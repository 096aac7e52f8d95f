"""The machine a run ran on: a fingerprint that decides whether a baseline applies.

A ReFrame system name such as ``local`` matches any host, and two machines of the
same size can differ several-fold in speed (an AMD EPYC and an Intel Xeon VM of 2
cores each). A performance baseline is therefore bound to the fingerprint of the
machine it was recorded on, and compared only with runs on a machine with the same
fingerprint.

The **key** fields must match for a baseline to apply: CPU vendor, model name and
family/model numbers, the instruction-set extensions that change generated code
(``ISA_FLAGS``), sockets, cores and threads per core, logical CPUs, memory (GiB)
and the hypervisor (or ``bare metal``). The kernel is recorded but not matched: a
kernel update is shown next to a change, it does not silently disable every
baseline.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

#: Instruction-set extensions that change what a compiler emits or a library selects.
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "asimd",
    "sve",
    "sve2",
)
#: Fields that must be equal for a baseline to apply (``machine_id`` hashes them).
KEY_FIELDS = (
    "cpu_vendor",
    "cpu_model",
    "cpu_id",
    "isa",
    "sockets",
    "cores_per_socket",
    "threads_per_core",
    "cpus",
    "memory_gib",
    "hypervisor",
)
#: Recorded, shown, not matched.
INFO_FIELDS = ("kernel",)


def _cpuinfo(proc: Path) -> list[dict[str, str]]:
    blocks, cur = [], {}
    for line in (proc / "cpuinfo").read_text(errors="replace").splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
            cur = {}
            continue
        k, _, v = line.partition(":")
        cur[k.strip()] = v.strip()
    if cur:
        blocks.append(cur)
    return blocks


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError:
        return None


#: Paravirtual clock sources that name their hypervisor (offered even where DMI is absent).
_CLOCKSOURCES = {"kvm-clock": "KVM", "xen": "Xen", "hyperv_clocksource_tsc_page": "Hyper-V"}


def _hypervisor(flags: set[str], sysfs: Path) -> str:
    if "hypervisor" not in flags:
        return "bare metal"
    for f in ("class/dmi/id/sys_vendor", "hypervisor/type"):
        v = _read(sysfs / f)
        if v:
            return v
    clocks = (
        _read(sysfs / "devices/system/clocksource/clocksource0/available_clocksource") or ""
    ).split()
    return next((_CLOCKSOURCES[c] for c in clocks if c in _CLOCKSOURCES), "virtual machine")


def cpu_flags(proc: str | os.PathLike = "/proc") -> set[str]:
    """The CPU flags of this node's first processor (/proc/cpuinfo ``flags``)."""
    blocks = _cpuinfo(Path(proc))
    first = blocks[0] if blocks else {}
    return set((first.get("flags") or first.get("Features") or "").split())


def fingerprint(proc: str | os.PathLike = "/proc", sysfs: str | os.PathLike = "/sys") -> dict:
    """This machine's fingerprint (key fields plus ``kernel``) from /proc and /sys."""
    proc, sysfs = Path(proc), Path(sysfs)
    blocks = _cpuinfo(proc)
    first = blocks[0] if blocks else {}
    flags = set((first.get("flags") or first.get("Features") or "").split())
    sockets = {b.get("physical id", "0") for b in blocks}
    cores = {(b.get("physical id", "0"), b.get("core id", b.get("processor", "0"))) for b in blocks}
    cpus = len(blocks) or os.cpu_count() or 1
    mem_kib = 0
    for line in (proc / "meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
            break
    fam = first.get("cpu family") or first.get("CPU architecture") or "?"
    model = first.get("model") or first.get("CPU part") or "?"
    step = first.get("stepping") or first.get("CPU revision") or "?"
    return {
        "cpu_vendor": first.get("vendor_id") or first.get("CPU implementer") or platform.machine(),
        "cpu_model": " ".join(
            (
                first.get("model name")
                or first.get("Processor")
                or platform.processor()
                or platform.machine()
            ).split()
        ),
        "cpu_id": f"{fam}/{model}/{step}",
        "isa": sorted(f for f in ISA_FLAGS if f in flags),
        "sockets": len(sockets),
        "cores_per_socket": max(1, len(cores) // max(1, len(sockets))),
        "threads_per_core": max(1, cpus // max(1, len(cores))),
        "cpus": cpus,
        "memory_gib": round(mem_kib / 2**20),
        "hypervisor": _hypervisor(flags, sysfs),
        "kernel": platform.release(),
    }


def machine_id(fp: dict) -> str:
    """A short name for the key fields, e.g. ``m-3f2a9c1b0d``."""
    key = {k: fp.get(k) for k in KEY_FIELDS}
    return "m-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


def describe(fp: dict) -> str:
    """One line a person reads.

    E.g. ``Intel Xeon Processor (6/85/4, avx512f), 1x2 cores, 24 GiB, KVM``."""
    isa = fp.get("isa") or []
    top = next((f for f in ("avx512f", "avx2", "avx", "sve", "asimd") if f in isa), None)
    cpu = f"{fp.get('cpu_model', '?')} ({fp.get('cpu_id', '?')}{', ' + top if top else ''})"
    smt = f" x{fp['threads_per_core']} threads" if fp.get("threads_per_core", 1) > 1 else ""
    return (
        f"{cpu}, {fp.get('sockets', '?')}x{fp.get('cores_per_socket', '?')} cores{smt}, "
        f"{fp.get('memory_gib', '?')} GiB, {fp.get('hypervisor', '?')}"
    )


if __name__ == "__main__":
    fp = fingerprint()
    print(json.dumps(dict(fp, id=machine_id(fp)), indent=1))
