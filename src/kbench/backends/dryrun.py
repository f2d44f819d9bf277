"""A candidate run once where its kernels cannot run: the compile checks of DSLs that compile without a GPU
(backends/cutecheck.py, backends/tilelang.py) import the candidate's file and, given its problem's file,
build ModelNew and call it once on CPU inputs of the problem's shapes, so that every kernel the forward
compiles is compiled with those shapes and dtypes. The checks run in a child process of their own; the
candidate's code runs there unconfined, so they are for sources their user would run anyway."""

from __future__ import annotations

import importlib.util
import re
import sys
from typing import Any


def feature_arch(arch: str) -> str:
    """The arch a DSL compiles for on such a GPU: Hopper and later get the `a` suffix (sm_90 -> sm_90a:
    wgmma, TMA and register reallocation need it), as the DSLs' own detection on the GPU gives them."""
    m = re.fullmatch(r"sm_(\d+)", arch)
    return f"{arch}a" if m and int(m.group(1)) >= 90 else arch


def load_module(name: str, path: str) -> Any:
    """Import the file at `path` as module `name` (registered in sys.modules, as an import does: some DSLs
    find a kernel's helpers through its module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def forward_once(candidate: Any, problem_file: str, preset: str = "") -> None:
    """ModelNew built from the problem's init inputs and called once on its inputs, at `preset` (an entry of
    the problem's KBENCH_PRESETS; "" for its own sizes), under no_grad, seeded as kbench seeds them."""
    import torch

    problem = load_module("kbench_dryrun_problem", problem_file)
    for key, value in getattr(problem, "KBENCH_PRESETS", {}).get(preset, {}).items():
        setattr(problem, key, value)  # get_inputs reads the module's globals
    torch.manual_seed(42)
    model = candidate.ModelNew(*problem.get_init_inputs())
    torch.manual_seed(0)
    with torch.no_grad():
        model(*problem.get_inputs())
