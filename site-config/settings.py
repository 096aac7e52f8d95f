"""ReFrame site configuration for apptune on one machine (the ``local`` system).

Use it with plain ReFrame::

    reframe -C site-config/settings.py -c reframe-checks/ --mode ci -r

or through ``apptune run``.  Environments carry apptune's toolchain facts in
``extras`` (compiler family for the flag ladders, MPI and its standard, the
default BLAS, and the executables the environment needs per language of a recipe);
apptune skips an environment whose ``requires`` for the recipe's languages are missing on
the environment's own PATH (its modules and ``env_vars`` applied) and says which.
See https://reframe-hpc.readthedocs.io/en/stable/config_reference.html
"""
import os
import sys

from apptune.errors import ApptuneError
from apptune.core.data.site import load_clusters

# The virtualenv ReFrame runs from holds PyPI's MKL and Intel MPI.
_prefix = sys.prefix
_here = os.path.dirname(os.path.abspath(__file__))
# MPICH's wrappers and launcher under their generic names (site-config/mpich/bin), the
# way `module load mpich` provides them on a cluster.
_mpich_bin = os.path.join(_here, 'mpich', 'bin')
_ompi_root = [['OMPI_ALLOW_RUN_AS_ROOT', '1'], ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1']]

site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'This machine: one node, local scheduler, mpirun launcher',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    'name': 'default',
                    'descr': 'All cores of this node',
                    'scheduler': 'local',
                    'launcher': 'mpirun',
                    'environs': ['gnu', 'gnu-mpich', 'llvm', 'gnu-mkl', 'oneapi'],
                    'max_jobs': 1,
                    # Open MPI refuses to run as root unless told; CI and this VM run as root.
                    'env_vars': _ompi_root,
                    'extras': {
                        # Energy meters in order of preference (apptune/energy/, docs/energy.md).
                        # This VM has no RAPL, no IPMI and no GPU: rapl is tried (and the
                        # record says why it is unusable), then the model is used.
                        'energy_meters': ['rapl', 'model'],
                        'energy_sample_hz': 10,
                        # The model's per-node power. NOMINAL, NOT MEASURED: a 2-vCPU share
                        # of a two-socket server (~10 W idle, ~30 W loaded per vCPU pair
                        # incl. memory); every figure from it is graded "modelled".
                        'power_model': {'idle_W': 20.0, 'load_W': 60.0},
                        # One job at a time on this machine (max_jobs 1): the node is ours.
                        'exclusive_node': True,
                        # Builds use this machine's Debian packages: an application whose
                        # recipe's requires.debian names one that is not installed is
                        # skipped, naming it (ci/bootstrap.sh installs them).
                        'debian_packages': True,
                        # Where I/O benchmarks write (a directory of their own in it, removed
                        # after each run): the local disk. `-S scratch_dir=/dev/shm` measures
                        # a tmpfs instead; a cluster names its parallel file system.
                        'scratch_dir': '/var/tmp',
                    },
                },
            ],
        },
    ],
    'environments': [
        {
            'name': 'gnu',
            'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpifort',
            'env_vars': [['OMPI_CC', 'gcc'], ['OMPI_CXX', 'g++'], ['OMPI_FC', 'gfortran']],
            'extras': {'family': 'gnu', 'mpi': 'openmpi', 'mpi_standard': '3.1', 'blas': 'openblas',
                       'requires': {'c': ['gcc', 'mpicc'], 'cxx': ['g++', 'mpicxx'],
                                    'fortran': ['gfortran', 'mpifort']}},
        },
        {
            # GCC with MPICH 4.0 instead of Open MPI (the MPI axis of NetPIPE and the
            # micro-benchmarks); the launcher 'mpirun' resolves to MPICH's through PATH.
            'name': 'gnu-mpich',
            'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpifort',
            'env_vars': [['PATH', f'{_mpich_bin}:$PATH'], ['MPICH_CC', 'gcc'], ['MPICH_CXX', 'g++'],
                         ['MPICH_FC', 'gfortran']],
            'extras': {'family': 'gnu', 'mpi': 'mpich', 'mpi_standard': '4.0', 'blas': 'openblas',
                       'requires': {'all': ['mpirun.mpich'], 'c': ['gcc', 'mpicc.mpich'],
                                    'cxx': ['g++', 'mpicxx.mpich'], 'fortran': ['gfortran', 'mpifort.mpich']}},
        },
        {
            'name': 'llvm',
            'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpifort',
            'env_vars': [['OMPI_CC', 'clang'], ['OMPI_CXX', 'clang++'], ['OMPI_FC', 'flang-new-16']],
            'extras': {'family': 'llvm', 'mpi': 'openmpi', 'mpi_standard': '3.1', 'blas': 'openblas',
                       'requires': {'c': ['clang', 'mpicc'], 'cxx': ['clang++', 'mpicxx'],
                                    'fortran': ['flang-new-16', 'mpifort']}},
        },
        {
            'name': 'gnu-mkl',
            'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpifort',
            'env_vars': [['OMPI_CC', 'gcc'], ['OMPI_CXX', 'g++'], ['OMPI_FC', 'gfortran']],
            'extras': {'family': 'gnu', 'mpi': 'openmpi', 'mpi_standard': '3.1', 'blas': 'mkl',
                       'requires': {'c': ['gcc', 'mpicc'], 'cxx': ['g++', 'mpicxx'],
                                    'fortran': ['gfortran', 'mpifort']}},
        },
        {
            'name': 'oneapi',
            'cc': 'mpiicx', 'cxx': 'mpiicpx', 'ftn': 'mpiifx',
            'env_vars': [['I_MPI_CC', 'icx'], ['I_MPI_CXX', 'icpx'], ['I_MPI_F90', 'ifx'],
                         ['PATH', f'{_prefix}/bin:$PATH'],
                         ['LD_LIBRARY_PATH', f'{_prefix}/lib:$LD_LIBRARY_PATH']],
            'extras': {'family': 'oneapi', 'mpi': 'intelmpi', 'mpi_standard': '3.1', 'blas': 'mkl',
                       'requires': {'c': ['icx', 'mpiicx'], 'cxx': ['icpx', 'mpiicpx'],
                                    'fortran': ['ifx', 'mpiifx']}},
        },
    ],
    # A finished job is noticed within half a second: ReFrame's poll rate otherwise decays
    # to one poll in 10 s, adding up to seconds to every short run of a tier.
    'general': [{'poll_rate_min': 2}],
    'modes': [
        {
            # Reduced inputs, one job at a time (timings compare within the run); a tier
            # tagged long_build (a build longer than `make run`'s budget allows) is left out
            # and run with --mode dev or by name
            'name': 'ci',
            'options': ['--tag=^ci$', '--exclude-tag=^long_build$', '--exec-policy=serial',
                        '--keep-stage-files'],
        },
        {
            # Full inputs for nightly regression
            'name': 'nightly',
            'options': ['--tag=^nightly$', '--exec-policy=serial'],
        },
        {
            # A developer running checks by hand: ci inputs, no performance verdict
            'name': 'dev',
            'options': ['--tag=^ci$', '--exec-policy=serial', '--skip-performance-check'],
        },
    ],
    'logging': [
        {
            'handlers': [
                {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
                {'type': 'file', 'name': 'reframe.log', 'level': 'debug2',
                 'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                 'append': False},
            ],
            'handlers_perflog': [
                {'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                 'level': 'info',
                 'format': ('%(check_job_completion_time)s,%(version)s,%(check_display_name)s,'
                            '%(check_environ)s,%(check_perfvalues)s'),
                 'format_perfvars': '%(check_perf_value)s,%(check_perf_unit)s,',
                 'append': True},
            ],
        },
    ],
}

# Slurm clusters: one short YAML file each in site-config/clusters/ (docs/slurm.md). They
# go before 'local', whose hostnames match any host; a cluster without hostnames is
# selected only with --system NAME (e.g. localslurm, the cluster ci/slurm-local.sh starts).
try:
    _clusters = load_clusters(os.path.join(_here, 'clusters'), site_configuration['environments'])
except ApptuneError as e:  # one line naming file and field, not a traceback
    raise SystemExit(f'apptune: error: {e}') from None
site_configuration['systems'][:0] = _clusters['systems']
site_configuration['environments'] += _clusters['environments']
site_configuration['modes'] += _clusters['modes']
