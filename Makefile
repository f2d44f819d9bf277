# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the test suite).
# Torch is installed first at an exact version so pip never resolves `torch>=2.5` to a multi-GB CUDA build
# on machines without a GPU; on a machine whose python already has torch, set TORCH_SPEC= to keep it.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,triton,llm,hf,ray,serve,rl
BIN := $(VENV)/bin

.PHONY: install run test lint clean

$(BIN)/kbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@if [ -n "$(TORCH_SPEC)" ]; then $(BIN)/pip install -q "$(TORCH_SPEC)"; fi
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	@touch $@

install: $(BIN)/kbench

run: install
	$(BIN)/kbench run --solutions reference

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy src
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) kbench-runs
