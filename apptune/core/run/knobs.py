"""Machine knobs of a run: the CPU frequency, SMT (threads per core) and turbo.

A knob is an axis of a run, set without a rebuild. Three test variables of every
application check (``apptune.rfm.AppRun``) ask for one; ``-P cpu_freq=1800000,2400000``
makes one a ReFrame parameter, so one session runs the application at each setting:

* ``cpu_freq``: as Slurm's ``--cpu-freq`` takes it: kHz (``1800000``), ``low``, ``medium``,
  ``high``, ``highm1`` (the one below the highest) or a governor (``performance``, ...).
  Under srun it is srun's ``--cpu-freq``; otherwise the runner writes the kernel's cpufreq
  files (``scaling_min_freq``/``scaling_max_freq``, ``scaling_governor``) of the CPUs the
  job may use, where this user may write them, and puts them back after the run;
* ``smt``: ``on`` (ranks may share a core's hardware threads) or ``off`` (one thread per
  core): srun's ``--hint=multithread``/``--hint=nomultithread``, Open MPI's
  ``--use-hwthread-cpus`` for on;
* ``turbo``: ``on`` or ``off``: the runner writes ``intel_pstate/no_turbo`` or
  ``cpufreq/boost`` and puts it back after the run.

What the node can set is read from sysfs (:func:`node_state`, the root given so a test can
record a machine's tree); a knob it cannot set is refused with one line naming the file or
the capability that is missing (:func:`unavailable`, :func:`sysfs_writes`). What was in
effect is measured during the run (the frequency of the CPUs the ranks ran on, the turbo
switch, the hardware threads the ranks shared) and judged against what was asked
(:func:`problems`): a scheduler may accept a knob and ignore it.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path

from ...models import KnobsNode, KnobsObserved, NodeSmt, RunBinding, RunKnobs, as_data
from ...placement import without_labels
from .procfs import format_cpulist, parse_cpulist

KNOBS = ("cpu_freq", "smt", "turbo")
#: Each knob's name in a run variant (:meth:`Asked.label`).
LABELS = {"cpu_freq": "freq", "smt": "smt", "turbo": "turbo"}
CPU_DIR = "devices/system/cpu"
NO_TURBO = f"{CPU_DIR}/intel_pstate/no_turbo"
BOOST = f"{CPU_DIR}/cpufreq/boost"
#: Slurm's names of a frequency (``--cpu-freq``), and the governors it passes on.
FREQ_NAMES = ("low", "medium", "high", "highm1")
GOVERNORS = ("conservative", "ondemand", "performance", "powersave", "schedutil", "userspace")
#: A frequency is in effect when the median measured on the ranks' CPUs is this close
#: (relative) to the one asked for.
FREQ_TOLERANCE = 0.05
SWITCHES = ("on", "off")
#: Launchers that start the ranks with srun (as in apptune.placement).
SRUN = ("srun", "srunalloc")


class KnobError(ValueError):
    """A knob asked for in a way no launcher or kernel takes; the message names it."""


@dataclass(frozen=True)
class Asked:
    """The knobs a run asked for; None: the node's own setting."""

    cpu_freq: str | None = None
    smt: str | None = None
    turbo: str | None = None

    @classmethod
    def of(cls, cpu_freq=None, smt=None, turbo=None) -> Asked:
        """The knobs as the check's variables give them, checked."""
        cpu_freq = None if cpu_freq in (None, "") else str(cpu_freq).strip()
        if cpu_freq is not None:
            low = cpu_freq.lower()
            if not (cpu_freq.isdigit() or low in FREQ_NAMES or low in GOVERNORS):
                raise KnobError(
                    f"cpu_freq={cpu_freq!r}: give kHz (1800000), one of "
                    f"{', '.join(FREQ_NAMES)} or a governor ({', '.join(GOVERNORS)})"
                )
            cpu_freq = cpu_freq if cpu_freq.isdigit() else low
        out = {}
        for name, v in (("smt", smt), ("turbo", turbo)):
            v = None if v in (None, "") else str(v).strip().lower()
            if v is not None and v not in SWITCHES:
                raise KnobError(f"{name}={v!r}: give on or off")
            out[name] = v
        return cls(cpu_freq, **out)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in KNOBS if getattr(self, k) is not None}

    def label(self) -> list[str]:
        """The knob part of a run's variant name: ``freq=1800000``, ``smt=off``, ``turbo=off``."""
        return [f"{LABELS[k]}={v}" for k, v in self.to_dict().items()]


def without(variant: str, names=KNOBS) -> str:
    """A run variant without the labels of the knobs ``names`` (``tuned@rpn=half,freq=low``
    -> ``tuned@rpn=half``): the runs of one variant at several settings of them."""
    return without_labels(variant, tuple(f"{LABELS[n]}=" for n in names))


def without_freq(variant: str) -> str:
    """A run variant without its frequency: the runs of one variant at several frequencies."""
    return without(variant, ("cpu_freq",))


# ----------------------------------------------------------------------------- readers
def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpus(sysfs: Path) -> list[int]:
    return sorted(
        int(d.name[3:]) for d in (sysfs / CPU_DIR).glob("cpu[0-9]*") if d.name[3:].isdigit()
    )


def read_cpufreq(sysfs: Path, cpu: int) -> dict | None:
    """One CPU's cpufreq state (kHz), or None where it has no cpufreq directory."""
    d = sysfs / CPU_DIR / f"cpu{cpu}" / "cpufreq"
    if not d.is_dir():
        return None
    avail = _read(d / "scaling_available_frequencies")
    return {
        "driver": _read(d / "scaling_driver"),
        "governor": _read(d / "scaling_governor"),
        "min_khz": _int(_read(d / "scaling_min_freq")),
        "max_khz": _int(_read(d / "scaling_max_freq")),
        "cur_khz": _int(_read(d / "scaling_cur_freq")),
        "hw_min_khz": _int(_read(d / "cpuinfo_min_freq")),
        "hw_max_khz": _int(_read(d / "cpuinfo_max_freq")),
        "available_khz": sorted(int(x) for x in avail.split() if x.isdigit()) if avail else [],
        "writable": os.access(d / "scaling_max_freq", os.W_OK)
        and os.access(d / "scaling_min_freq", os.W_OK),
    }


def read_boost(sysfs: Path) -> dict | None:
    """The turbo switch: ``intel_pstate/no_turbo`` (1: off) or ``cpufreq/boost`` (1: on),
    with its path and whether this user may write it; None where the node has neither."""
    for rel, on_value in ((NO_TURBO, "0"), (BOOST, "1")):
        text = _read(sysfs / rel)
        if text is not None:
            return {
                "path": "/sys/" + rel,
                "on": text == on_value,
                "writable": os.access(sysfs / rel, os.W_OK),
            }
    return None


def read_smt(sysfs: Path) -> dict:
    """Hardware threads: each CPU's siblings (``topology/thread_siblings_list``), the most
    threads of one core, and the kernel's ``smt/control`` where it says."""
    siblings = {}
    for cpu in _cpus(sysfs):
        text = _read(sysfs / CPU_DIR / f"cpu{cpu}" / "topology/thread_siblings_list")
        if text:
            try:
                siblings[cpu] = sorted(parse_cpulist(text))
            except ValueError:
                continue
    return {
        "threads_per_core": max((len(s) for s in siblings.values()), default=1),
        "control": _read(sysfs / CPU_DIR / "smt/control"),
        "siblings": {str(c): format_cpulist(s) for c, s in siblings.items()},
    }


def node_state(sysfs: str | os.PathLike = "/sys") -> dict:
    """What the node offers: cpufreq of its first CPU (with the count of CPUs that have
    one), the turbo switch and SMT."""
    sysfs = Path(sysfs)
    cpus = _cpus(sysfs)
    freq = [f for c in cpus if (f := read_cpufreq(sysfs, c)) is not None]
    first = dict(freq[0], cpus_with_cpufreq=len(freq)) if freq else None
    return {"cpufreq": first, "boost": read_boost(sysfs), "smt": read_smt(sysfs)}


# ----------------------------------------------------------------------------- refusal
def _no_cpufreq() -> str:
    return f"the node has no cpufreq interface (/sys/{CPU_DIR}/cpu0/cpufreq is missing)"


def unavailable(asked: Asked, node: dict, launcher: str, mpi: str | None = None) -> dict:
    """{knob: one line} for each knob asked for that this node, under ``launcher``, cannot
    set: before a run where the node is known (the local scheduler's node is this one),
    and by the runner on the job's node."""
    out = {}
    f = asked.cpu_freq
    if f is not None and launcher not in SRUN:
        cf = node.get("cpufreq")
        if cf is None:
            out["cpu_freq"] = f"cpu_freq={f}: not set: {_no_cpufreq()}"
        elif not cf.get("writable"):
            out["cpu_freq"] = (
                f"cpu_freq={f}: not set: /sys/{CPU_DIR}/cpu0/cpufreq/scaling_max_freq is not "
                "writable by this user (srun's --cpu-freq sets it on a Slurm partition)"
            )
        elif target_khz(f, cf) is None and f not in GOVERNORS:
            out["cpu_freq"] = f"cpu_freq={f}: not set: the node lists no frequencies to choose from"
    if asked.turbo is not None:
        b = node.get("boost")
        if b is None:
            out["turbo"] = (
                f"turbo={asked.turbo}: not set: the node has no turbo switch "
                f"(neither /sys/{NO_TURBO} nor /sys/{BOOST})"
            )
        elif not b["writable"]:
            out["turbo"] = f"turbo={asked.turbo}: not set: {b['path']} is not writable by this user"
    if asked.smt is not None:
        smt = node.get("smt") or {}
        if smt.get("threads_per_core", 1) < 2:
            out["smt"] = (
                f"smt={asked.smt}: not set: the node has 1 thread per core "
                f"(/sys/{CPU_DIR}/cpu*/topology/thread_siblings_list; smt/control: "
                f"{smt.get('control') or 'missing'})"
            )
        elif launcher not in SRUN and not (launcher == "mpirun" and mpi == "openmpi"):
            out["smt"] = (
                f"smt={asked.smt}: not set: no option for launcher {launcher!r} with MPI "
                f"{mpi!r} (known: srun, Open MPI's mpirun)"
            )
    return out


def launcher_options(asked: Asked, launcher: str, mpi: str | None = None) -> list[str]:
    """The launcher's options for the knobs it sets: srun's ``--cpu-freq`` and ``--hint``,
    Open MPI's ``--use-hwthread-cpus`` (SMT on)."""
    out = []
    if launcher in SRUN:
        if asked.cpu_freq is not None:
            out.append(f"--cpu-freq={asked.cpu_freq}")
        if asked.smt is not None:
            out.append("--hint=multithread" if asked.smt == "on" else "--hint=nomultithread")
    elif launcher == "mpirun" and mpi == "openmpi" and asked.smt == "on":
        out.append("--use-hwthread-cpus")
    return out


def set_by(asked: Asked, launcher: str) -> dict:
    """{knob: who sets it}: the launcher's option or the runner's sysfs write."""
    out = {}
    for k, v in asked.to_dict().items():
        if k == "turbo":
            out[k] = "runner: sysfs"
        elif launcher in SRUN:
            out[k] = f"srun --cpu-freq={v}" if k == "cpu_freq" else "srun --hint"
        else:
            out[k] = "runner: sysfs" if k == "cpu_freq" else f"{launcher} placement"
    return out


# ----------------------------------------------------------------------------- setting
def target_khz(asked: str, cf: dict) -> int | None:
    """The frequency (kHz) ``asked`` means on a CPU of cpufreq state ``cf``; None for a
    governor or where the node does not say."""
    if asked.isdigit():
        return int(asked)
    avail = cf.get("available_khz") or [
        x for x in (cf.get("hw_min_khz"), cf.get("hw_max_khz")) if x
    ]
    if not avail:
        return None
    if asked == "low":
        return avail[0]
    if asked == "high":
        return avail[-1]
    if asked == "highm1":
        return avail[-2] if len(avail) > 1 else avail[-1]
    if asked == "medium":
        return avail[(len(avail) - 1) // 2]
    return None


def sysfs_writes(asked: Asked, launcher: str, cpus, sysfs: Path) -> list[tuple[str, str]]:
    """What the runner writes for the knobs the launcher does not set, in order: the turbo
    switch, and each CPU's frequency range (minimum to the lowest first, so that every
    write is within the range the kernel allows) or its governor."""
    out = []
    if asked.turbo is not None:
        b = read_boost(sysfs)
        if b is not None:
            on = asked.turbo == "on"
            val = ("0" if on else "1") if b["path"].endswith("no_turbo") else ("1" if on else "0")
            out.append((str(sysfs / b["path"].removeprefix("/sys/")), val))
    f = asked.cpu_freq
    if f is not None and launcher not in SRUN:
        for cpu in sorted(cpus):
            cf = read_cpufreq(sysfs, cpu)
            if cf is None:
                continue
            d = sysfs / CPU_DIR / f"cpu{cpu}" / "cpufreq"
            if f in GOVERNORS:
                out.append((str(d / "scaling_governor"), f))
                continue
            t = target_khz(f, cf)
            lowest = cf.get("hw_min_khz") or t
            out += [
                (str(d / "scaling_min_freq"), str(lowest)),
                (str(d / "scaling_max_freq"), str(t)),
                (str(d / "scaling_min_freq"), str(t)),
            ]
    return out


def apply(writes: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str | None]:
    """Write each (path, value); return what puts them back (each path's last write gets
    its old value) and the first error, after which nothing more is written."""
    old: dict[str, str] = {}
    done: list[tuple[str, str]] = []
    for path, value in writes:
        try:
            if path not in old:
                old[path] = Path(path).read_text().strip()
            Path(path).write_text(value + "\n")
        except OSError as e:
            return _restore_list(done, old), f"cannot write {value} to {path}: {e.strerror}"
        done.append((path, value))
    return _restore_list(done, old), None


def _restore_list(done, old) -> list[tuple[str, str]]:
    last = {p: i for i, (p, _) in enumerate(done)}
    return [(p, old[p] if last[p] == i else v) for i, (p, v) in enumerate(done)]


def restore(undo: list[tuple[str, str]]) -> list[str]:
    """Put the written files back (:func:`apply`); the errors, one line each."""
    errors = []
    for path, value in undo:
        try:
            Path(path).write_text(value + "\n")
        except OSError as e:
            errors.append(f"cannot put {value} back into {path}: {e.strerror}")
    return errors


# ----------------------------------------------------------------------------- judging
def frequency_summary(samples: dict[int, list[float]], cpus) -> dict | None:
    """The frequency measured (MHz) on ``cpus`` during the run: median, min, max. The first
    sample of each CPU is taken before the program starts (a launcher that sets the
    frequency has not yet): it counts only when there is no other."""
    xs = [x for c in sorted(cpus) for x in (samples.get(c, [])[1:] or samples.get(c, []))]
    if not xs:
        return None
    return {
        "cpus": format_cpulist(cpus),
        "median_mhz": round(statistics.median(xs), 1),
        "min_mhz": round(min(xs), 1),
        "max_mhz": round(max(xs), 1),
        "samples": len(xs),
    }


def shared_cores(binding: RunBinding | None, siblings: dict[str, str]) -> int | None:
    """How many cores had more than one of their hardware threads among the CPUs the ranks
    could run on (``binding``: the runner's record); None when no rank was seen."""
    ranks = binding.ranks if binding else []
    if not ranks:
        return None
    used = set().union(*(parse_cpulist(r.cpus) for r in ranks))
    cores: dict[str, int] = {}
    for c in used:
        key = siblings.get(str(c), str(c))
        cores[key] = cores.get(key, 0) + 1
    return sum(1 for n in cores.values() if n > 1)


def problems(asked: Asked, rec: RunKnobs | None, binding: RunBinding | None) -> list[str]:
    """One line per knob asked for that was not in effect: ``rec`` is the runner's knob
    record (the node, what was refused, what was observed); ``binding`` the ranks' CPUs."""
    rec = rec or RunKnobs()
    if rec.refused:
        return list(rec.refused.values())
    node, seen = rec.node or KnobsNode(), rec.observed or KnobsObserved()
    out = []
    f = asked.cpu_freq
    if f is not None:
        cf, got = node.cpufreq, seen.frequency
        how = seen.cpu_freq_set_by or "it"
        mhz = f"{got.median_mhz:g} MHz" if got else "an unmeasured frequency"
        # the node's cpufreq state as its reader gives it (target_khz also serves the runner)
        t = target_khz(f, as_data(cf)) if cf else None
        if cf is None:
            out.append(
                f"cpu_freq={f}: not in effect: {_no_cpufreq()}; {how} was accepted and the "
                f"CPUs ran at {mhz}"
            )
        elif f in GOVERNORS and seen.governor != f:
            out.append(f"cpu_freq={f}: not in effect: the governor was {seen.governor}")
        elif t and (got is None or abs(got.median_mhz * 1000 - t) > FREQ_TOLERANCE * t):
            out.append(
                f"cpu_freq={f}: not in effect: asked {t / 1000:g} MHz, measured {mhz} "
                f"(median on CPUs {got.cpus if got else '?'}, tolerance "
                f"{FREQ_TOLERANCE:.0%})"
            )
    if asked.turbo is not None:
        b = seen.boost
        if b is None:
            out.append(f"turbo={asked.turbo}: not in effect: the node has no turbo switch")
        elif b.on != (asked.turbo == "on"):
            out.append(
                f"turbo={asked.turbo}: not in effect: {b.path} said turbo "
                f"{'on' if b.on else 'off'} during the run"
            )
    if asked.smt is not None:
        smt = node.smt or NodeSmt()
        n = shared_cores(binding, smt.siblings)
        if smt.threads_per_core < 2:
            out.append(f"smt={asked.smt}: not in effect: the node has 1 thread per core")
        elif n is not None and (n > 0) != (asked.smt == "on"):
            out.append(
                f"smt={asked.smt}: not in effect: the ranks could run on both threads of "
                f"{n} core(s)"
                if n
                else f"smt={asked.smt}: not in effect: no core's "
                "hardware threads were shared by the ranks"
            )
    return out


# ----------------------------------------------------------------------------- the runner
def before_run(want: dict, node_cpus, sysfs: str | os.PathLike = "/sys") -> tuple[dict, list]:
    """On the job's node, before the timed region: what the node offers, the knobs it
    cannot set (``refused``: then nothing runs) and the sysfs writes of the others, done.
    ``want``: the runner spec's ``knobs`` (``asked``, ``launcher``, ``mpi``). Returns the
    knob record and what puts the written files back (:func:`after_run`)."""
    sysfs = Path(sysfs)
    asked = Asked.of(**want.get("asked", {}))
    launcher, mpi = want.get("launcher", ""), want.get("mpi")
    node = node_state(sysfs)
    rec = {"asked": asked.to_dict(), "node": node, "set_by": set_by(asked, launcher)}
    refused = unavailable(asked, node, launcher, mpi)
    if refused:
        rec["refused"] = refused
        return rec, []
    writes = sysfs_writes(asked, launcher, node_cpus, sysfs)
    undo, err = apply(writes)
    if err:
        rec["refused"] = {"write": f"{', '.join(asked.label())}: not set: {err}"}
        rec["restore_errors"] = restore(undo)
        return rec, []
    if writes:
        rec["written"] = [list(w) for w in writes]
    return rec, undo


def probe(sysfs: str | os.PathLike = "/sys") -> dict:
    """The knobs' state now: the turbo switch and each CPU's governor."""
    sysfs = Path(sysfs)
    gov = {}
    for cpu in _cpus(sysfs):
        g = _read(sysfs / CPU_DIR / f"cpu{cpu}" / "cpufreq/scaling_governor")
        if g:
            gov[cpu] = g
    return {"boost": read_boost(sysfs), "governors": gov}


def after_run(rec: dict, undo: list, freq_cpu: dict, probed: dict | None, binding, node_cpus):
    """After the timed region: what was in effect on the CPUs the ranks could run on (all
    the job's CPUs on the node when no rank was seen), then the written files put back."""
    ranks = (binding or {}).get("ranks") or []
    cpus = set().union(*(parse_cpulist(r["cpus"]) for r in ranks)) if ranks else set(node_cpus)
    probed = probed or {}
    govs = [g for c, g in (probed.get("governors") or {}).items() if int(c) in cpus]
    rec["observed"] = {
        "frequency": frequency_summary(freq_cpu, cpus),
        "boost": probed.get("boost"),
        "governor": statistics.mode(govs) if govs else None,
        "cpu_freq_set_by": rec.get("set_by", {}).get("cpu_freq"),
    }
    errors = restore(undo)
    if errors:
        rec["restore_errors"] = errors
    return rec
