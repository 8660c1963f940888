# gpufed developer entry points. Everything a fresh clone needs is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STATE  ?= .gpufed

.PHONY: install up test lint typecheck contracts compile unit e2e bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

up: install
	$(BIN)/gpufed up --state-dir $(STATE)

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

contracts: install
	$(BIN)/lint-imports

unit: install
	$(BIN)/python -m pytest tests -q

e2e: install
	$(BIN)/python -m pytest e2e -q $(XDIST)

# The end-to-end tests mostly wait on real processes, so they run side by side. They are
# collected first (e2e/conftest.py) and handed out two at a time, so the workers share the
# long ones from the start and the short unit tests fill in around them; the tests sharing a
# module's or a package's fleet or hub go to one worker together (conftest.py), so it starts once.
# Of four workers, three run the end-to-end tests and the fourth the unit tests marked `waiting`
# (they wait on timers and leases more than they compute) meanwhile, then all share the rest.
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --maxschedchunk 2

# `make test` checks (lint, types, import contracts) and warms up side by side: mypy keeps one
# core busy for a while, and the warm-up uses the other. Warming up compiles the project once:
# the tests start hundreds of Python processes (hubs, agents, members, gpufed commands), and
# each would compile the sources again where bytecode is not written (PYTHONDONTWRITEBYTECODE),
# 0.4 to 0.7 CPU-seconds for a member or the hub. It also collects the tests once with bytecode
# written, so that each test worker loads pytest's rewritten test modules instead of rewriting
# them all itself (about 20 CPU-seconds a worker, 6 once they are written).
compile: install
	$(BIN)/python -m compileall -q -j 0 controlplane member_agent policies simulator gpufed bench e2e
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider \
		> $(VENV)/collect.log 2>&1 || { tail -30 $(VENV)/collect.log; false; }

test: install
	$(MAKE) --no-print-directory -j 4 lint typecheck contracts compile
	$(BIN)/python -m pytest -q -p no:cacheprovider $(XDIST) --durations=15

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
