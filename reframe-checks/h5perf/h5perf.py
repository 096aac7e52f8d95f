"""h5perf (HDF5 1.10.8's parallel I/O benchmark): write and read bandwidth through POSIX,
MPI-IO and parallel HDF5, independent and collective, per build variant and input tier,
in a directory of the partition's scratch directory.

Everything specific lives in data: build-recipes/h5perf.yaml (build against the
environment's parallel HDF5, the verification passes, the figures), inputs/h5perf/<tier>/
and reference/h5perf/<tier>.yaml.

    reframe -C site-config/settings.py -c reframe-checks/h5perf --mode ci -r
    reframe -C site-config/settings.py -c reframe-checks/h5perf --mode ci -r -S scratch_dir=/dev/shm
"""

import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch, all_variants, load_app

# the recipe once all of the app's data is valid (else ReFrame skips this file, saying why)
RECIPE = load_app("h5perf")


class H5perfSource(SourceFetch):
    """Fetch hdf5_1.10.8+repack1.orig.tar.gz once per session and check its sha256."""

    app = "h5perf"


class H5perfBuild(AppBuild):
    """Build the parallel h5perf once per (environment, variant)."""

    app = "h5perf"
    source = fixture(H5perfSource, scope="session")

    #: Build variant: flag ladder, optionally ``+data=planted`` (one wrong byte written).
    #: :type: str
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class H5perfCheck(AppRun):
    """Verification passes (every byte read back), then the measured passes."""

    app = "h5perf"

    #: Input tier: ``ci`` (8 MiB per process) or ``nightly`` (256 MiB per process).
    #: :type: str
    tier = parameter(list(RECIPE.tiers), loggable=True)

    build = fixture(H5perfBuild, scope="environment")
