# Two commands matter: `make serve` and `make test`. Both create .venv when missing and
# install what they need, torch==2.13.0 (the CPU build) first so pip never pulls CUDA.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 4010

.PHONY: serve test install lint bench train clean

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

lint: $(STAMP)
	$(BIN)/ruff check mockserver tests bench cassettes
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/serving.py

train: $(STAMP)
	$(BIN)/python -m mockserver.reference.train

clean:
	rm -rf $(VENV) .venv-docs .pytest_cache .mypy_cache .ruff_cache
