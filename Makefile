# apptune: the two commands of the README, for a fresh Debian 12 machine (as root).
#   make run   install what is missing, run the ci tier, write the report (runs/latest/)
#   make test  install what is missing, run the test suite (unit + integration)
VENV   ?= .venv
MODE   ?= ci
PYTEST ?= $(VENV)/bin/python -m pytest

.PHONY: run test bootstrap validate unit integration clean

bootstrap:
	bash ci/bootstrap.sh

run: bootstrap
	$(VENV)/bin/apptune run --mode $(MODE)

test: bootstrap
	$(PYTEST) -q -ra tests

unit: bootstrap
	$(PYTEST) -q -ra -m "not integration" tests

integration: bootstrap
	$(PYTEST) -q -ra -m integration tests

validate: bootstrap
	$(VENV)/bin/apptune validate

clean:
	rm -rf runs .pytest_cache
