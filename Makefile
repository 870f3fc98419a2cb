# Two commands matter: `make serve` and `make test`. Both create .venv when missing and
# install what they need, torch==2.13.0 (the CPU build) first so pip never pulls CUDA.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 4010

.PHONY: serve test install lint bench train clean reliability

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,train,dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/mockserver serve --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The reliability suite at the issue's sizes (200 streaming clients for 60 s, 1,000 disconnects,
# bigger fuzz budgets, more SIGKILL rounds): about 7 minutes. `make test` runs its short version.
reliability: $(STAMP)
	MOCKSERVER_RELIABILITY=full $(BIN)/python -m pytest -q tests/reliability

lint: $(STAMP)
	$(BIN)/ruff check mockserver tests bench cassettes training
	$(BIN)/mypy

# Every benchmark, 4-5 minutes; writes BENCHMARKS.md. `make bench BENCH_ARGS=--quick`: a ~1.5-minute smoke run.
bench: $(STAMP)
	$(BIN)/python bench/serving.py $(BENCH_ARGS)

train: $(STAMP)
	$(BIN)/python -m training.train

clean:
	rm -rf $(VENV) .venv-docs .pytest_cache .mypy_cache .ruff_cache
