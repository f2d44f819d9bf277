"""Prompt builder: what every prompt must state, options, metadata stripping, hardware facts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbench.errors import ConfigError
from kbench.problems import get_problem, load, source_problems
from kbench.prompts import PromptOptions, build_prompt, strip_kbench_metadata
from kbench.prompts.builder import with_preset

PROBLEM = get_problem("2/1")


@pytest.mark.parametrize("backend", ["cuda", "triton", "cpp"])
def test_prompt_states_backend_fusion_contract_and_problem(backend: str) -> None:
    p = build_prompt(PROBLEM, PromptOptions(backend=backend))
    name = {"cuda": "CUDA", "triton": "Triton", "cpp": "C++ (CPU)"}[backend]
    assert f"Target backend: {name}" in p.text and "float32" in p.text
    assert "matmul + ReLU" in p.text and "online softmax" in p.text
    assert "class ModelNew(nn.Module)" in p.text and "No PyTorch fallbacks" in p.text
    assert "torch.relu(self.linear(x))" in p.text and "KBENCH_" not in p.text
    assert p.problem_key == PROBLEM.key and p.system and ("backend", backend) in p.options


@pytest.mark.parametrize(("shots", "examples"), [("zero", 0), ("one", 1), ("few", 3)])
def test_shots_choose_examples(shots: str, examples: int) -> None:
    text = build_prompt(PROBLEM, PromptOptions(backend="triton", shots=shots)).text
    assert text.count("A solution with the Triton backend") == examples
    assert ("GELU (tanh form)" in text) == (examples == 3)
    assert ("LeakyReLU epilogue" in text) == (examples == 3)


def test_chain_of_thought_and_dtype() -> None:
    cot = build_prompt(PROBLEM, PromptOptions(chain_of_thought=True, dtype="bf16")).text
    plain = build_prompt(PROBLEM, PromptOptions()).text
    assert "think step by step" in cot and "code block only" not in cot
    assert "code block only" in plain and "bfloat16" in cot


def test_hardware_facts_from_the_gpu_table() -> None:
    from kbench.analysis.gpus import get_gpu

    spec = get_gpu("H100")
    text = build_prompt(PROBLEM, PromptOptions(hardware="H100")).text
    assert f"{spec.memory_bandwidth_gbs:,.0f} GB/s" in text and f"{spec.sm_count} SMs" in text
    assert "Hardware:" not in build_prompt(PROBLEM, PromptOptions()).text


def test_unknown_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'rocm'"):
        build_prompt(PROBLEM, PromptOptions(backend="rocm"))
    with pytest.raises(ConfigError, match="shots"):
        build_prompt(PROBLEM, PromptOptions(shots="two"))


def test_digest_changes_with_options() -> None:
    a = build_prompt(PROBLEM, PromptOptions()).digest
    assert a == build_prompt(PROBLEM, PromptOptions()).digest
    assert a != build_prompt(PROBLEM, PromptOptions(shots="few")).digest


def test_strip_metadata_keeps_everything_else() -> None:
    code = 'x = 1\nKBENCH_PRESETS = {\n    "small": {"x": 2},\n}\nKBENCH_TAGS = ["a"]\ny = 2\n'
    assert strip_kbench_metadata(code) == "x = 1\ny = 2"


def test_prompt_shows_the_evaluated_presets_sizes() -> None:
    problem = get_problem("2/24")  # batch_size 16384, dim 8192; small: 37, 96
    small = build_prompt(problem, PromptOptions(backend="cpp", preset="small")).text
    full = build_prompt(problem, PromptOptions(backend="cpp")).text
    assert "batch_size = 37\ndim = 96\n" in small and "16384" not in small and "8192\n" not in small
    assert "batch_size = 16384\ndim = 8192\n" in full
    assert "KBENCH_PRESETS" not in small


def test_with_preset_runs_as_the_loader_runs_the_preset() -> None:
    """For every embedded problem, the source the prompt shows has the sizes the evaluator uses."""
    for problem in source_problems("kbench"):
        if "small" not in problem.presets:
            continue
        shown = replace(problem, code=with_preset(problem, "small"))
        assert load(shown, "full").sizes == load(problem, "small").sizes, problem.key
