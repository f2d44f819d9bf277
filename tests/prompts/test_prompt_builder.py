"""Prompt builder: what every prompt must state, options, metadata stripping, hardware facts."""

from __future__ import annotations

import pytest

from kbench.errors import ConfigError
from kbench.problems import get_problem
from kbench.prompts import PromptOptions, build_prompt, strip_kbench_metadata

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
