# Two entry points, both self-contained on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# torch is pinned first: seisbench needs it, and 2.13.0 is the CPU build available offline.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

# The browser tests drive Debian's Chromium through its chromedriver (Selenium; no browser
# download). Installed when missing and apt-get is there (CI runs as root on Debian).
CHROMEDRIVER := /usr/bin/chromedriver

$(CHROMEDRIVER):
	@if command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver || echo "could not install chromium: browser tests skip"; \
	else echo "no apt-get: install chromium and its chromedriver for the browser tests"; fi

demo: $(STAMP)
	$(BIN)/seisctf demo --workdir seisctf-demo

test: $(STAMP) $(CHROMEDRIVER)
	$(BIN)/python -m pytest -q tests

# ruff, then the layered import contract of pyproject.toml (tests/test_architecture.py runs it too).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ctf_scoring.py

clean:
	rm -rf seisctf-demo .pytest_cache
