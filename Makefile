# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the test suite).
# `make run` installs what the main job needs: torch and kbench's own dependencies (a CUDA build of torch
# brings Triton with it). `make test` adds every extra the tests exercise and the dev tools.
# Torch is installed first at an exact version so pip never resolves `torch>=2.5` to a multi-GB CUDA build
# on machines without a GPU; on a machine whose python already has torch, set TORCH_SPEC= to keep it.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TEST_EXTRAS ?= dev,triton,llm,hf,ray,serve,rl,trl,mcp,verifiers,helion,tilelang,cute
# pytest-xdist workers: one per core (`-n auto`); JOBS=0 runs the suite in one process.
JOBS ?= auto
BIN := $(VENV)/bin

.PHONY: install install-test run test lint clean

$(BIN)/kbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@if [ -n "$(TORCH_SPEC)" ]; then $(BIN)/pip install -q "$(TORCH_SPEC)"; fi
	$(BIN)/pip install -q -e .
	@touch $@

$(VENV)/.test-extras: $(BIN)/kbench pyproject.toml
	$(BIN)/pip install -q -e ".[$(TEST_EXTRAS)]"
	@touch $@

install: $(BIN)/kbench

install-test: $(VENV)/.test-extras

run: install
	$(BIN)/kbench run --solutions shipped

test: install-test
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadgroup --durations=25

lint: install-test
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy src benchmarks
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) kbench-runs
