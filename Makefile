# apptune: the two commands of the README, for a fresh Debian 12 machine (as root).
#   make run   install what is missing, run the ci tier, write the report (runs/latest/)
#   make test  install what is missing, lint the workflows, run the test suite (unit + integration,
#              incl. the real-Slurm test on a private cluster started by ci/slurm-local.sh), all
#              but the tests of builds too long for it (make test-long)
VENV   ?= .venv
MODE   ?= ci
# extra options of apptune run, e.g. ARGS='-- -p oneapi' (ReFrame's options after --; -p is
# ReFrame's pattern, matched from the start of an environment's name: -p 'gnu$$' is gnu alone)
ARGS   ?=
PYTEST ?= $(VENV)/bin/python -m pytest
# make test's workers for the tests that time nothing (pytest-xdist's -n): one more than the
# CPUs, since some of them wait (for Slurm's time limits, for a job's end); on 2 cores, 3
# workers took 358 s, 2 took 411 s and 4 took 448 s (docs/measurements.md)
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: run test test-long lint bootstrap validate unit integration clean

bootstrap:
	APPTUNE_VENV=$(VENV) bash ci/bootstrap.sh

run: bootstrap
	$(VENV)/bin/apptune run --mode $(MODE) $(ARGS)

# two passes: the tests that time nothing on all CPUs at once (pytest-xdist), then those
# marked exclusive (they time runs, or run MPI under srun) one at a time on a node left to
# them; both passes always run
test: bootstrap lint
	@status=0; \
	$(PYTEST) -q -ra -n $(TEST_WORKERS) -m "not long_build and not exclusive" tests || status=1; \
	$(PYTEST) -q -ra -m "exclusive and not long_build" tests || status=1; \
	exit $$status

# the integration tests whose cold build is beyond make test's 10 minutes (GROMACS: about 23
# minutes on 2 cores); the nightly workflow runs them
test-long: bootstrap
	$(PYTEST) -q -ra -m long_build tests

# GitHub workflows (ci.yml, nightly.yml) with actionlint, the Python code with ruff (lint rules
# and formatting, configured in pyproject.toml); both from the test extra
PYCODE ?= apptune tests reframe-checks benchmarks
lint: bootstrap
	$(VENV)/bin/actionlint
	$(VENV)/bin/ruff check $(PYCODE)
	$(VENV)/bin/ruff format --check $(PYCODE)

# the fast tests (pyproject.toml [tool.pytest.ini_options] markers), well under a minute
unit: bootstrap
	$(PYTEST) -q -ra -m unit tests

integration: bootstrap
	$(PYTEST) -q -ra -m integration tests

validate: bootstrap
	$(VENV)/bin/apptune validate

clean:
	rm -rf runs .pytest_cache
