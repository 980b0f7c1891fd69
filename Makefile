# Two entry points, both self-contained on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_PROCESSES ?= 2
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean postgresql

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# torch is pinned first and kept: seisbench and the zoo need it, and 2.13.0 is the CPU build
# available offline.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[test]' torch==2.13.0
	touch $(STAMP)

# The browser tests drive Debian's Chromium through its chromedriver (Selenium; no browser
# download). Installed when missing with apt-get (CI runs as root on Debian); when that is not
# possible `make test` stops here with what to install.
CHROMEDRIVER := /usr/bin/chromedriver

$(CHROMEDRIVER):
	@command -v apt-get >/dev/null 2>&1 || { echo "make test: no apt-get here: install \
	chromium and its chromedriver (/usr/bin/chromium, /usr/bin/chromedriver) for the browser \
	tests, or run pytest -m 'not browser'" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver

# The service's tests run it on PostgreSQL too: a throwaway cluster of Debian's own binaries
# (tests/servers.py, start_postgres), from the `postgresql` package. Installed when missing with
# apt-get, as Chromium is; when that is not possible `make test` stops here with what to install.
POSTGRES := $(firstword $(wildcard /usr/lib/postgresql/*/bin/postgres))

postgresql:
ifeq ($(POSTGRES),)
	@command -v apt-get >/dev/null 2>&1 || { echo "make test: no apt-get here: install \
	PostgreSQL (/usr/lib/postgresql/<version>/bin/postgres, Debian's postgresql package) for the \
	service's tests on PostgreSQL, or run pytest -k 'not postgres'" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
endif

demo: $(STAMP)
	$(BIN)/seisctf demo --workdir seisctf-demo

# Two test processes (pytest-xdist), one a core: the suite waits on servers, subprocesses and
# clusters much of the time: 22 min on two otherwise idle cores. (Three were no faster and
# loaded the machine enough to fail tests that wait on a browser or a slowed link.)
# `--dist loadfile` keeps a module's tests in one process: its module-scoped servers and
# folders, the plugin package one module installs into the virtualenv, and the private test
# network one module holds (tests/namespaces.py) are never shared by two processes at once.
# `make test TEST_PROCESSES=1` runs them one at a time. The 25 slowest tests are listed last.
test: $(STAMP) $(CHROMEDRIVER) postgresql
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile --durations=25 -q tests

# ruff, the layered import contract of pyproject.toml (tests/test_architecture.py runs it too),
# then the types ([tool.mypy] in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy seisctf

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ctf_scoring.py

clean:
	rm -rf seisctf-demo .pytest_cache
