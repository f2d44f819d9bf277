from pathlib import Path

import pytest
import torch
from torch import nn

from kbench.analysis.gpus import get_gpu
from kbench.analysis.roofline import count_flops, problem_flops, sol_from_counts, speed_of_light
from kbench.problems import get_problem, load


class _Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_matmul_flops_match_2mnk(device: str) -> None:
    m, k, n = 33, 17, 29
    counts = count_flops(nn.Linear(k, n, bias=False).to(device), [torch.randn(m, k, device=device)])
    assert counts.matmul_flops == 2 * m * n * k
    assert counts.bytes == 4 * (m * k + k * n + m * n)


def test_conv_flops_match_formula() -> None:
    n, cin, cout, h, w, kh = 2, 3, 8, 10, 12, 3
    conv = nn.Conv2d(cin, cout, kh, bias=False)  # no padding: out 8 x 10
    counts = count_flops(conv, [torch.randn(n, cin, h, w)])
    assert counts.matmul_flops == 2 * n * cout * (h - kh + 1) * (w - kh + 1) * cin * kh * kh


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_attention_flops_match_4bhl2d(device: str) -> None:
    b, h, length, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, length, d, device=device) for _ in range(3))
    counts = count_flops(_Attention(), [q, k, v])
    assert counts.matmul_flops == 4 * b * h * length * length * d


def test_suite_matmul_problem_counts_its_sizes() -> None:
    problem = get_problem("1/1")
    sizes = load(problem, "small").sizes
    n = sizes.get("N") or sizes.get("n")
    assert n, f"expected a size N in {sizes}"
    assert problem_flops(problem, "small").matmul_flops == 2 * n**3


def test_sol_bound_and_dtype_rates() -> None:
    counts = count_flops(nn.Linear(4096, 4096, device="meta"), [torch.randn(4096, 4096, device="meta")])
    h100 = get_gpu("h100")
    fp32 = sol_from_counts(counts, h100, "fp32")
    tf32 = sol_from_counts(counts, h100, "fp32", tf32=True)
    assert fp32.bound == "compute" and tf32.sol_ms < fp32.sol_ms
    assert fp32.sol_ms == pytest.approx(max(fp32.compute_ms, fp32.memory_ms))
    relu = count_flops(nn.ReLU(), [torch.randn(1 << 20, device="meta")])
    assert sol_from_counts(relu, h100).bound == "memory"


def test_speed_of_light_full_preset_costs_no_memory() -> None:
    sol = speed_of_light(get_problem("2/1"), "full", "bf16", get_gpu("H200"))
    assert sol.flops > 1e9 and sol.gpu == "H200" and sol.sol_ms > 0


def test_floor_lets_a_causal_softmax_skip_the_masked_inputs() -> None:
    """2/27 (scale, causal mask, softmax): an honest kernel that reads only the lower triangle ran at
    0.203 ms on an H200 against a 0.224 ms SOL (inputs + outputs); the cheat rule's floor counts the
    outputs, which every kernel must write."""
    h200 = get_gpu("H200")
    sol = speed_of_light(get_problem("2/27"), "full", "fp32", h200, tf32=True)
    counts = problem_flops(get_problem("2/27"), "full", "fp32")
    assert counts.output_bytes == 8 * 16 * 1024 * 1024 * 4 and counts.bytes >= 2 * counts.output_bytes
    assert sol.floor_ms == pytest.approx(counts.output_bytes / (h200.memory_bandwidth_gbs * 1e9) * 1e3)
    read_half_ms = (counts.output_bytes * 1.5) / (h200.memory_bandwidth_gbs * 1e9) * 1e3
    assert sol.floor_ms < read_half_ms < sol.sol_ms  # the honest skip passes the floor, not the SOL


def test_floor_of_a_compute_bound_problem_is_half_its_compute() -> None:
    counts = count_flops(nn.Linear(8192, 8192, device="meta"), [torch.randn(8192, 8192, device="meta")])
    sol = sol_from_counts(counts, get_gpu("H200"), "fp32", tf32=True)
    assert sol.bound == "compute" and sol.floor_ms == pytest.approx(sol.compute_ms / 2)
    assert sol.floor_ms < sol.sol_ms


def test_counts_are_kept_on_disk_for_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from kbench.analysis import roofline

    problem = get_problem("kbench:2/1")
    gpu = get_gpu("H200")
    first = speed_of_light(problem, "small", "fp32", gpu, tf32=True, cache_dir=tmp_path)
    (kept,) = tmp_path.glob("*.json")

    def no_trace(*_: object) -> None:
        raise AssertionError("counted again")

    monkeypatch.setattr(roofline, "_cached_counts", no_trace)  # as in a new process: only the disk has it
    assert speed_of_light(problem, "small", "fp32", gpu, tf32=True, cache_dir=tmp_path) == first
    assert roofline.disk_counts(problem, "small", "fp32", tmp_path) == problem_flops(problem, "small", "fp32")

    monkeypatch.undo()
    kept.write_text("{not json")  # unreadable: counted again and kept again
    assert speed_of_light(problem, "small", "fp32", gpu, tf32=True, cache_dir=tmp_path) == first
    assert (
        json.loads(kept.read_text())["matmul_flops"] == problem_flops(problem, "small", "fp32").matmul_flops
    )
    other = speed_of_light(problem, "full", "fp32", gpu, tf32=True, cache_dir=tmp_path)  # its own entry
    assert other.floor_ms > first.floor_ms and len(list(tmp_path.glob("*.json"))) == 2


COUNT_ALL = """
import json, sys
from dataclasses import asdict
if sys.argv[1] == "dynamo":
    import torch._dynamo  # noqa: F401  the counts as they were made with dynamo imported
from kbench.analysis.roofline import problem_flops
from kbench.problems.sources import load_source
from concurrent.futures import ThreadPoolExecutor
from kbench.analysis import roofline
problems = list(load_source("kbench"))
with ThreadPoolExecutor(4) as pool:  # counts overlap, as evaluations of one process do
    found = list(pool.map(lambda p: asdict(problem_flops(p, "small", "fp32")), problems))
counts = {p.key: c for p, c in zip(problems, found)}
left = roofline._counts_running, len(roofline._seeded), len(roofline._seed_disable_cache()) if sys.argv[1] == "plain" else 0
print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "counts": counts, "left": left}))
"""


def test_a_first_count_imports_no_dynamo_and_counts_as_before() -> None:
    """A host's first count used to import torch._dynamo (seconds holding the GIL beside the evaluation's
    reads and comparisons): every problem of the suite is now counted without it, to the same numbers."""
    import json
    import subprocess
    import sys

    runs = {}
    for mode in ("plain", "dynamo"):
        run = subprocess.run([sys.executable, "-c", COUNT_ALL, mode], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        runs[mode] = json.loads(run.stdout)
    assert runs["plain"]["dynamo"] is False and runs["dynamo"]["dynamo"] is True
    # afterwards no count runs, nothing is left seeded, and every wrapper would be seeded afresh
    running, seeded, seedable = runs["plain"]["left"]
    assert (running, seeded) == (0, 0) and seedable > 100
    assert len(runs["plain"]["counts"]) >= 230
    assert runs["plain"]["counts"] == runs["dynamo"]["counts"]


def test_a_training_problem_counts_its_step_and_its_forward_alone() -> None:
    """A linear layer's step: 2MNK FLOPs forward, twice that backward (dx and dW); the forward's bytes are
    its own inputs and output, the step's add the upstream gradient and every gradient."""
    problem = get_problem("5/5")
    loaded = load(problem, "small")
    m, k, n = loaded.sizes["num_tokens"], loaded.sizes["in_features"], loaded.sizes["out_features"]
    forward = problem_flops(problem, "small", forward_only=True)
    step = problem_flops(problem, "small")
    assert forward.matmul_flops == 2 * m * n * k
    assert step.matmul_flops == 3 * forward.matmul_flops
    assert step.bytes > forward.bytes and step.output_bytes > forward.output_bytes
