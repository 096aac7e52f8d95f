"""Per-variable checksums of a netCDF file in the classic formats (CDF-1, CDF-2 and
PnetCDF's CDF-5), read with the standard library and numpy alone.

A benchmark that writes files (PnetCDF's FLASH-IO) is verified by what it wrote: each
variable's element count, minimum, maximum, sum and the CRC-32 of its bytes as stored,
compared with a blessed reference (``reference/APP/<tier>.yaml``). A wrong value in a
variable changes its CRC (and usually its sum, minimum or maximum); the field that differs
names the file and the variable.

A file whose blocks of zones were filled by a known formula (the recipe's ``fill``:
:class:`ZoneFill`) is also checked value by value against it: ``fill_errors`` counts the
values of each (block, z, y, x) variable that are not what the formula gives for their
zone and block, so a value written to another zone (an index error inside a variable, a
slice shifted into the guard cells) fails even where every zone's value would pass a sum.

    python -m apptune.core.verification.netcdf FILE [NAME]      # prints NAME.VAR.count=... lines

The format is Unidata's "NetCDF Classic and 64-bit Offset File Formats" with PnetCDF's
CDF-5 extension (64-bit sizes and the unsigned and 64-bit integer types).
"""

from __future__ import annotations

import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_DIMENSION, _VARIABLE, _ATTRIBUTE = 0x0A, 0x0B, 0x0C
#: nc_type -> numpy dtype as stored (big-endian)
_TYPES = {
    1: ">i1",
    2: "S1",
    3: ">i2",
    4: ">i4",
    5: ">f4",
    6: ">f8",
    7: ">u1",
    8: ">u2",
    9: ">u4",
    10: ">i8",
    11: ">u8",
}


class NetCDFError(ValueError):
    """The file is not a classic netCDF file, or it ends inside its header or data."""


@dataclass
class Variable:
    name: str
    dtype: str
    shape: tuple[int, ...]
    #: The first dimension is the unlimited (record) dimension.
    record: bool
    vsize: int
    begin: int


class _Header:
    def __init__(self, data: bytes, version: int):
        self.data, self.pos = data, 4
        self.size = 8 if version == 5 else 4  # NON_NEG and nelems: 64-bit in CDF-5
        self.offset = 4 if version == 1 else 8

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise NetCDFError("the header ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uint(self, n: int | None = None) -> int:
        n = n or self.size
        return struct.unpack(">Q" if n == 8 else ">I", self.take(n))[0]

    def name(self) -> str:
        n = self.uint()
        text = self.take(n).decode("utf-8", errors="replace")
        self.take(-n % 4)
        return text

    def list_of(self, tag: int, item) -> list:
        t, n = self.uint(4), self.uint()
        if t == 0 and n == 0:
            return []
        if t != tag:
            raise NetCDFError(f"expected list tag {tag:#x} at byte {self.pos - 4 - self.size}")
        return [item() for _ in range(n)]

    def attribute(self) -> None:
        self.name()
        typ = self.uint(4)
        if typ not in _TYPES:
            raise NetCDFError(f"unknown attribute type {typ}")
        n = self.uint()
        width = np.dtype(_TYPES[typ]).itemsize * n
        self.take(width + (-width % 4))


def variables(path: str | Path) -> tuple[int, int, list[Variable]]:
    """The format version, the number of records and the variables of a netCDF file."""
    with open(path, "rb") as f:
        head = f.read(4)
        if len(head) < 4 or head[:3] != b"CDF" or head[3] not in (1, 2, 5):
            raise NetCDFError("not a netCDF classic, 64-bit offset or CDF-5 file")
        version = head[3]
        f.seek(0)
        data = f.read(1 << 20)
        while True:  # a header larger than the first MiB: read more
            try:
                return version, *_parse(data, version)
            except NetCDFError as e:
                more = f.read(len(data))
                if not more or "ends early" not in str(e):
                    raise
                data += more


def _parse(data: bytes, version: int) -> tuple[int, list[Variable]]:
    h = _Header(data, version)
    numrecs = h.uint()
    dims = h.list_of(_DIMENSION, lambda: (h.name(), h.uint()))
    h.list_of(_ATTRIBUTE, h.attribute)

    def variable() -> Variable:
        name = h.name()
        ids = [h.uint() for _ in range(h.uint())]
        h.list_of(_ATTRIBUTE, h.attribute)
        typ = h.uint(4)
        if typ not in _TYPES:
            raise NetCDFError(f"variable {name}: unknown type {typ}")
        vsize, begin = h.uint(), h.uint(h.offset)
        if any(i >= len(dims) for i in ids):
            raise NetCDFError(f"variable {name}: dimension id out of range")
        shape = tuple(dims[i][1] for i in ids)
        record = bool(ids) and dims[ids[0]][1] == 0
        return Variable(name, _TYPES[typ], shape, record, vsize, begin)

    return numrecs, h.list_of(_VARIABLE, variable)


def _values(f, var: Variable, numrecs: int, recsize: int, single_record: bool) -> np.ndarray:
    dt = np.dtype(var.dtype)
    if not var.record:
        count = int(np.prod(var.shape)) if var.shape else 1
        chunks = [(var.begin, count)]
    else:
        per = int(np.prod(var.shape[1:])) if len(var.shape) > 1 else 1
        chunks = [(var.begin + r * recsize, per) for r in range(numrecs)]
    parts = []
    for off, count in chunks:
        f.seek(off)
        raw = f.read(count * dt.itemsize)
        if len(raw) != count * dt.itemsize:
            raise NetCDFError(f"variable {var.name}: the file ends inside its data")
        parts.append(np.frombuffer(raw, dtype=dt))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dt)


def checksums(path: str | Path, fill: ZoneFill | None = None) -> dict[str, dict]:
    """Per variable: ``count``, ``crc32`` of its bytes as stored, and for numbers ``min``,
    ``max`` and ``sum`` (float64); NaN counts as a value that differs from every reference.
    With ``fill``, every floating-point variable of four dimensions (block, z, y, x) also
    has ``fill_errors``: how many of its values differ from the fill's formula."""
    numrecs, recsize, single, out = *_records(path), {}
    _, _, vars_ = variables(path)
    with open(path, "rb") as f:
        for v in vars_:
            a = _values(f, v, numrecs, recsize, single)
            entry: dict = {"count": int(a.size), "crc32": zlib.crc32(a.tobytes())}
            if a.dtype.kind in "iuf" and a.size:
                x = a.astype(np.float64)
                entry.update(min=float(x.min()), max=float(x.max()), sum=float(x.sum()))
                if fill is not None and a.dtype.kind == "f" and len(v.shape) == 4:
                    entry["fill_errors"] = fill_errors(x.reshape(v.shape), fill)
            out[v.name] = entry
    return out


#: The keys of each variable's checksums (:func:`checksums`).
SUM_KEYS = ("count", "crc32", "min", "max", "sum")


def sum_fields(files) -> list[str]:
    """The fields the checksums of a recipe's scratch files give (``run.scratch.files``), as
    shell patterns: ``NAME.*.KEY``, the variables being known only from the file."""
    out = []
    for f in files:
        keys = SUM_KEYS + (("fill_errors",) if f.fill else ())
        out += [f"{f.name}.*.{k}" for k in keys]
    return out


@dataclass
class ZoneFill:
    """A deterministic fill of blocks of zones (FLASH-IO's, patches/flashio/0004): zone
    (i, j, k) of block ``g`` (numbered from 1 in the file's order) holds an integer, the same
    in every zone of a variable (its index), plus ``mod(wi*i + wj*j + wk*k + wg*g, m) / m``;
    i, j, k count from 1 at the first of ``guards`` guard cells, so the first zone a file holds
    is ``guards + 1``. ``corners``: the file holds each corner of the zones, the mean of the
    eight zones around it (guard cells among them at a block's faces)."""

    weights: tuple[int, int, int, int]
    modulus: int
    guards: int
    corners: bool = False

    def fraction(self, i, j, k, g) -> np.ndarray:
        wi, wj, wk, wg = self.weights
        return np.mod(wi * i + wj * j + wk * k + wg * g, self.modulus) / self.modulus


def fill_errors(a: np.ndarray, fill: ZoneFill) -> int:
    """How many values of ``a`` (block, z, y, x) are not what ``fill`` gives for their zone:
    the integer every zone shares (the most common one) plus the formula's fraction."""
    nb, nz, ny, nx = a.shape
    g = np.arange(1, nb + 1).reshape(nb, 1, 1, 1)
    first = fill.guards + 1  # the first zone inside the guard cells
    k = np.arange(nz).reshape(1, nz, 1, 1) + first
    j = np.arange(ny).reshape(1, 1, ny, 1) + first
    i = np.arange(nx).reshape(1, 1, 1, nx) + first
    if fill.corners:  # corner i lies between zones i - 1 and i (along each axis)
        want = (
            sum(
                fill.fraction(i - di, j - dj, k - dk, g)
                for di in (0, 1)
                for dj in (0, 1)
                for dk in (0, 1)
            )
            / 8
        )
    else:
        want = fill.fraction(i, j, k, g)
    whole = np.floor(a)
    base = float(np.median(whole)) if a.size else 0.0
    return int(np.count_nonzero(a != base + want))


def _records(path) -> tuple[int, int, bool]:
    """The number of records, the size of one record and whether there is one record variable."""
    _, numrecs, vars_ = variables(path)
    rec = [v for v in vars_ if v.record]
    if len(rec) == 1:  # the classic format's special case: no padding between records
        v = rec[0]
        per = int(np.prod(v.shape[1:])) if len(v.shape) > 1 else 1
        return numrecs, per * np.dtype(v.dtype).itemsize, True
    return numrecs, sum(v.vsize for v in rec), False


def keyvalue_lines(name: str, sums: dict[str, dict]) -> list[str]:
    """``NAME.VAR.KEY=VALUE`` lines, as apptune's ``keyvalue`` output reads them."""
    out = []
    for var, entry in sums.items():
        for key, value in entry.items():
            out.append(
                f"{name}.{var}.{key}={value!r}"
                if isinstance(value, float)
                else f"{name}.{var}.{key}={value}"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 2):
        print("usage: python -m apptune.core.verification.netcdf FILE [NAME]", file=sys.stderr)
        return 2
    name = argv[1] if len(argv) == 2 else Path(argv[0]).stem
    try:
        print("\n".join(keyvalue_lines(name, checksums(argv[0]))))
    except (OSError, NetCDFError) as e:
        print(f"apptune: error: {argv[0]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
