"""The scratch directory of I/O benchmarks (apptune/core/run/scratch.py, the runner's side) and the
netCDF checksums their files are verified by (apptune/core/verification/netcdf.py).

Each bad input is one line naming the directory or the file: a scratch directory that does
not exist, is not a directory, is not writable, has less room than the run writes, or fills
up during the run; a file that is not netCDF or is cut short. The run's directory is removed
after the run, whether it passed or failed."""

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from apptune.core.data.site import Cluster, cluster_system
from apptune.core.run import runner, scratch
from apptune.core.run.prepare import Where, scratch_spec
from apptune.core.verification import netcdf
from apptune.errors import ApptuneError
from apptune.models import RunScratch

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------- netCDF files
def _name(s: str, size: int) -> bytes:
    b = s.encode()
    return _n(len(b), size) + b + b"\0" * (-len(b) % 4)


def _n(v: int, size: int) -> bytes:
    return struct.pack(">Q" if size == 8 else ">I", v)


def write_cdf(path, version: int, variables: dict, numrecs: int = 0, recdim: str | None = None):
    """A classic netCDF file (version 1, 2 or 5): ``variables`` {name: (dims, array)},
    dims as [(name, length)]; a dimension of length 0 is the record dimension."""
    size = 8 if version == 5 else 4
    off = 4 if version == 1 else 8
    dims = {}
    for dlist, _ in variables.values():
        for d, n in dlist:
            dims.setdefault(d, n)
    names = list(dims)
    types = {np.dtype(">f8"): 6, np.dtype(">f4"): 5, np.dtype(">i4"): 4}

    def header(begins):
        h = b"CDF" + bytes([version]) + _n(numrecs, size)
        h += struct.pack(">I", 0x0A) + _n(len(dims), size) if dims else b"\0" * (4 + size)
        h += b"".join(_name(d, size) + _n(n, size) for d, n in dims.items())
        h += b"\0" * (4 + size)  # no global attributes
        h += struct.pack(">I", 0x0B) + _n(len(variables), size)
        for (vname, (dl, a)), begin in zip(variables.items(), begins, strict=True):
            h += _name(vname, size) + _n(len(dl), size)
            h += b"".join(_n(names.index(d), size) for d, _ in dl)
            h += b"\0" * (4 + size)  # no attributes
            per = a.nbytes // max(numrecs, 1) if dl and dl[0][1] == 0 else a.nbytes
            h += struct.pack(">I", types[a.dtype]) + _n(per + (-per % 4), size)
            h += _n(begin, off)
        return h

    hlen = len(header([0] * len(variables)))
    begins, pos = [], hlen
    fixed = [(k, v) for k, v in variables.items() if not (v[0] and v[0][0][1] == 0)]
    rec = [(k, v) for k, v in variables.items() if v[0] and v[0][0][1] == 0]
    where = {}
    for k, (_, a) in fixed:
        where[k] = pos
        pos += a.nbytes + (-a.nbytes % 4)
    rec_start = pos
    for k, (_, a) in rec:
        where[k] = pos
        pos += a.nbytes // max(numrecs, 1)
    begins = [where[k] for k in variables]
    body = bytearray(header(begins))
    for _, (_, a) in fixed:
        body += a.tobytes() + b"\0" * (-a.nbytes % 4)
    recsize = pos - rec_start
    for r in range(numrecs):
        for _, (_, a) in rec:
            per = a.nbytes // numrecs
            body += a.tobytes()[r * per : (r + 1) * per]
    assert len(body) == rec_start + numrecs * recsize
    path.write_bytes(bytes(body))


def _flash_like(path, version=5):
    dens = np.full((4, 3, 2), 1.0, dtype=">f8")
    velx = np.full((4, 3, 2), 2.0, dtype=">f8")
    lref = np.arange(4, dtype=">i4")
    dims_u = [("blocks", 4), ("z", 3), ("x", 2)]
    write_cdf(
        path,
        version,
        {"dens": (dims_u, dens), "velx": (dims_u, velx), "lrefine": ([("blocks", 4)], lref)},
    )


@pytest.mark.parametrize("version", [1, 2, 5])
def test_netcdf_checksums_of_each_variable(tmp_path, version):
    f = tmp_path / "chk.nc"
    _flash_like(f, version)
    sums = netcdf.checksums(f)
    assert sums["dens"]["count"] == 24 and sums["dens"]["sum"] == 24.0
    assert sums["velx"]["min"] == sums["velx"]["max"] == 2.0
    assert sums["lrefine"]["sum"] == 6.0 and sums["lrefine"]["max"] == 3.0
    lines = netcdf.keyvalue_lines("chk", sums)
    assert "chk.dens.sum=24.0" in lines and "chk.lrefine.count=4" in lines


def test_netcdf_record_variables_are_read_record_by_record(tmp_path):
    f = tmp_path / "rec.nc"
    t = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=">f8")
    n = np.array([[7, 8], [9, 10], [11, 12]], dtype=">i4")
    write_cdf(f, 2, {"t": ([("time", 0), ("x", 2)], t), "n": ([("time", 0), ("x", 2)], n)}, 3)
    sums = netcdf.checksums(f)
    assert sums["t"]["sum"] == 21.0 and sums["t"]["count"] == 6
    assert sums["n"]["min"] == 7 and sums["n"]["max"] == 12


def test_one_wrong_value_changes_that_variable_only(tmp_path):
    f = tmp_path / "chk.nc"
    _flash_like(f)
    good = netcdf.checksums(f)
    data = bytearray(f.read_bytes())
    at = data.rfind(struct.pack(">d", 2.0))  # the last element of velx
    data[at : at + 8] = struct.pack(">d", 2.5)
    f.write_bytes(bytes(data))
    bad = netcdf.checksums(f)
    assert bad["dens"] == good["dens"] and bad["lrefine"] == good["lrefine"]
    assert bad["velx"]["crc32"] != good["velx"]["crc32"] and bad["velx"]["max"] == 2.5


def test_not_netcdf_and_cut_short_are_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"HDF\x89 not a netCDF file")
    assert netcdf.main([str(junk)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"apptune: error: {junk}: not a netCDF classic, 64-bit offset or CDF-5 file"
    short = tmp_path / "short.nc"
    _flash_like(short)
    short.write_bytes(short.read_bytes()[:-8])
    with pytest.raises(netcdf.NetCDFError, match="variable lrefine: the file ends inside its data"):
        netcdf.checksums(short)


# ------------------------------------------------------------------- the runner's side
def _spec(tmp_path, root, argv, nbytes=None, files=()):
    return runner.Spec(
        steps=[runner.Step(label="run", argv=argv)],
        scratch=scratch.ScratchSpec(
            root=str(root),
            path=str(root / "apptune-test"),
            bytes=nbytes,
            files=[scratch.ScratchFile(file=f, name=n) for f, n in files],
        ),
    )


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_missing_scratch_directory_fails_the_run_before_it_starts(tmp_path):
    root = tmp_path / "nowhere"
    marker = tmp_path / "ran"
    status, rec = runner.run(_spec(tmp_path, root, _py(f"open({str(marker)!r}, 'w')")), tmp_path)
    assert status == 1 and rec["failed_step"] == "scratch"
    assert rec["message"] == f"scratch directory {root} does not exist"
    assert not marker.exists() and rec["steps"] == []


def test_a_scratch_directory_that_is_a_file(tmp_path):
    root = tmp_path / "afile"
    root.write_text("")
    status, rec = runner.run(_spec(tmp_path, root, _py("pass")), tmp_path)
    assert status == 1 and rec["message"] == f"scratch directory {root} is not a directory"


@pytest.fixture
def tmpfs(tmp_path):
    """A mounted 1 MiB tmpfs, ``ro`` on request (the tests run as root in CI)."""
    mounted = []

    def mount(name, options="size=1m"):
        d = tmp_path / name
        d.mkdir()
        if os.geteuid() != 0:
            if os.environ.get("CI"):
                pytest.fail("the scratch tests need root to mount a tmpfs")
            pytest.skip("mounting a tmpfs needs root")
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_a_read_only_scratch_directory_is_not_writable(tmp_path, tmpfs):
    root = tmpfs("ro", "size=1m,ro")
    status, rec = runner.run(_spec(tmp_path, root, _py("pass")), tmp_path)
    assert status == 1
    assert (
        rec["message"] == f"scratch directory {root} (tmpfs) is not writable: Read-only file system"
    )


def test_too_little_room_is_refused_before_the_run(tmp_path, tmpfs):
    root = tmpfs("small")
    status, rec = runner.run(_spec(tmp_path, root, _py("pass"), nbytes=8 << 20), tmp_path)
    assert status == 1 and rec["steps"] == []
    assert rec["message"] == (
        f"scratch directory {root} (tmpfs) has 1.0 MiB free; the run writes 8.0 MiB"
    )


def test_a_run_that_fills_the_file_system_says_it_was_full(tmp_path, tmpfs):
    root = tmpfs("full")
    fill = (
        "import sys\nf = open(sys.argv[1] + '/data', 'wb')\n"
        "while True:\n    f.write(b'x' * 65536); f.flush()"
    )
    argv = [*_py(fill), str(root / "apptune-test")]
    status, rec = runner.run(_spec(tmp_path, root, argv), tmp_path)
    assert status == 1
    assert rec["message"].startswith(
        f"scratch directory {root} (tmpfs) is full (No space left on device"
    )
    assert rec["scratch"]["removed"] and not (root / "apptune-test").exists()
    assert rec["scratch"]["fstype"] == "tmpfs" and rec["scratch"]["mount"] == str(root)


def test_a_run_reads_its_files_then_removes_them(tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    src = tmp_path / "made.nc"
    _flash_like(src)
    copy = f"import shutil; shutil.copy({str(src)!r}, {str(root / 'apptune-test' / 'chk.nc')!r})"
    spec = _spec(tmp_path, root, _py(copy), nbytes=4096, files=[("chk.nc", "chk")])
    status, rec = runner.run(spec, tmp_path)
    assert status == 0, rec["message"]
    text = (tmp_path / "scratch-data.txt").read_text().splitlines()
    assert "chk.dens.sum=24.0" in text and "chk.velx.max=2.0" in text
    assert rec["scratch"]["removed"] and list(root.iterdir()) == []
    assert rec["scratch"]["exceeds_memory"] is False


def test_a_file_the_run_did_not_write_fails_naming_it(tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    spec = _spec(tmp_path, root, _py("pass"), files=[("chk.nc", "chk")])
    status, rec = runner.run(spec, tmp_path)
    assert status == 1 and rec["failed_step"] == "scratch"
    assert rec["message"] == f"the run wrote no {root / 'apptune-test' / 'chk.nc'}"
    assert list(root.iterdir()) == []


def test_a_failed_run_leaves_no_files(tmp_path):
    root = tmp_path / "scratch"
    root.mkdir()
    write = f"open({str(root / 'apptune-test' / 'part.nc')!r}, 'w').write('x'); raise SystemExit(3)"
    status, rec = runner.run(_spec(tmp_path, root, _py(write)), tmp_path)
    assert status == 3 and rec["scratch"]["removed"]
    assert list(root.iterdir()) == []


# ------------------------------------------------------------------- the site's side
def _where(extras):
    return Where("gnu", "local", "default", "local", 2, extras)


def test_a_partition_without_a_scratch_directory_is_one_line():
    from apptune.core.data.recipes import load_recipe

    r = load_recipe("h5perf")
    with pytest.raises(ApptuneError) as e:
        scratch_spec(r, _where({}), {"bytes_per_rank": 1, "ranks": 2}, "t1", None)
    assert str(e.value).startswith("partition local:default: h5perf writes files and the")
    assert "\n" not in str(e.value)
    spec = scratch_spec(
        r, _where({"scratch_dir": "/var/tmp"}), {"bytes_per_rank": 3, "ranks": 2}, "1-a", None
    )
    assert spec.root == "/var/tmp" and spec.path == "/var/tmp/apptune-1-a" and spec.bytes == 6
    over = scratch_spec(
        r, _where({"scratch_dir": "/var/tmp"}), {"bytes_per_rank": 1, "ranks": 2}, "t", "/dev/shm"
    )
    assert over.root == "/dev/shm"


def test_a_cluster_partition_names_its_scratch_directory(tmp_path):
    c = Cluster.model_validate(
        {"partitions": {"batch": {"scratch_dir": "/lustre/scratch/$USER"}, "debug": {}}}
    )
    sys_ = cluster_system("c", c, {"gnu": {}}, tmp_path / "c.yaml")
    parts = {p["name"]: p["extras"] for p in sys_["partitions"]}
    assert parts["batch"]["scratch_dir"] == "/lustre/scratch/$USER"
    assert "scratch_dir" not in parts["debug"]


def test_the_report_names_the_file_system_and_the_page_cache():
    info = {"fstype": "tmpfs", "mount": "/dev/shm", "root": "/dev/shm", "bytes": 16 << 20}
    small = scratch.describe(RunScratch(**info, memory_bytes=24 << 30, exceeds_memory=False))
    assert small == (
        "tmpfs at /dev/shm (/dev/shm); wrote 16.0 MiB, less than the node's 24.0 GiB of "
        "memory: the page cache can hold it (writes may not have reached the disk, reads "
        "may come from memory)"
    )
    # FLASH-IO only writes: nothing is said of reads it never made
    writes = scratch.describe(
        RunScratch(**info, memory_bytes=24 << 30, exceeds_memory=False), reads=False
    )
    assert writes.endswith("the page cache can hold it (writes may not have reached the disk)")
    big = scratch.describe(RunScratch(**info, memory_bytes=8 << 20, exceeds_memory=True))
    assert big.endswith("more than the node's 0.0 GiB of memory")
    assert scratch.describe(None) == "–"
