"""The files an I/O benchmark writes into its scratch directory (a recipe's ``run.scratch``):
what one run writes at most, the files read after it and how their values were filled."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Strict


class ZoneFillSpec(Strict):
    """The program fills its blocks of zones by a formula (apptune/core/verification/netcdf.py
    ZoneFill): zone (i, j, k) of block g holds an integer shared by the variable's zones plus
    ``mod(wi*i + wj*j + wk*k + wg*g, modulus) / modulus``, i, j, k counted from 1 at the
    first guard cell; every value of the file is checked against it (``VAR.fill_errors``)."""

    #: wi, wj, wk, wg.
    weights: tuple[int, int, int, int]
    modulus: int = Field(ge=1)
    #: Guard cells on each side of a block, not in the file (its zones start after them).
    guards: int = Field(ge=0)
    #: The file holds the zones' corners, each the mean of the eight zones around it.
    corners: bool = False


class ScratchFileSpec(Strict):
    #: A file the program writes into its scratch directory (a template with the input
    #: parameters), read before the directory is removed.
    file: str
    #: The prefix of its fields: ``chk`` gives ``chk.VAR.count``, ``.crc32``, ``.min``,
    #: ``.max`` and ``.sum`` for every variable.
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    #: ``netcdf``: a classic, 64-bit offset or CDF-5 netCDF file
    #: (apptune/core/verification/netcdf.py).
    format: Literal["netcdf"] = "netcdf"
    #: The formula the program filled its zones by: ``VAR.fill_errors`` for each variable of
    #: four dimensions (block, z, y, x).
    fill: ZoneFillSpec | None = None


class RunScratchSpec(Strict):
    """The program writes data files: it runs with a directory of its own under the
    partition's scratch directory (``{{ scratch }}`` in ``args`` and ``prerun``), checked
    before the run and removed after it (apptune/core/run/scratch.py)."""

    #: What one run writes at most, in bytes (a template with the input parameters and
    #: ``ranks``): refused beforehand when the file system has less free; the record says
    #: whether it exceeds the node's memory (the page cache).
    bytes: str | None = None
    #: Files whose per-variable checksums go to ``sums_file`` (a ``keyvalue`` output).
    files: list[ScratchFileSpec] = []
    sums_file: str = Field(default="scratch-data.txt", pattern=r"^[^/]+$")
    reads: bool = True  # the timed region reads what it wrote (h5perf); false: FLASH-IO
