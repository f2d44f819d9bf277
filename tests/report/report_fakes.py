"""Realistic fake runs for report tests and the example report: two models on 14 level-2 problems.

Every status a verdict can end in appears, timings carry noise, some speedups sit near the fast_p
thresholds, and one candidate claims to beat the speed of light. Deterministic (fixed seed).
"""

from __future__ import annotations

import random
from pathlib import Path

from kbench.store import RequestRecord, Store, VerdictKey
from kbench.types import (
    BuildResult,
    CheckReport,
    Correctness,
    Finding,
    Problem,
    Severity,
    Status,
    TimingStats,
    Verdict,
)

PROBLEMS = [
    ("Gemm_ReLU", ("gemm-epilogue", "activation")),
    ("Conv2d_BatchNorm_ReLU", ("conv-epilogue", "norm", "activation")),
    ("Matmul_Scale_Sigmoid", ("gemm-epilogue", "activation")),
    ("LayerNorm_GELU", ("norm", "activation")),
    ("Softmax_Dropout_Scale", ("reduction", "elementwise")),
    ("Gemm_BiasAdd_Tanh", ("gemm-epilogue", "activation")),
    ("Conv3d_MaxPool_Sum", ("conv-epilogue", "pool", "reduction")),
    ("RMSNorm_Residual", ("norm", "elementwise")),
    ("Attention_Softmax_Scale", ("attention", "reduction")),
    ("Matmul_Swish_Sum", ("gemm-epilogue", "activation", "reduction")),
    ("GroupNorm_Mish", ("norm", "activation")),
    ("AvgPool_Hardtanh_Mul", ("pool", "elementwise")),
    ("Gemm_LogSumExp", ("gemm-epilogue", "reduction")),
    ("Elementwise_Chain_4", ("elementwise",)),
]
MODELS = ("example/model-a", "example/model-b")
FAILURES = [
    (Status.MISMATCH, "", "max abs error 3.1e-02 > tol 1e-04 at [0, 17]"),
    (Status.BUILD_ERROR, "", "nvcc: error: identifier 'blockDim' is undefined"),
    (Status.CHEAT, "output-aliases-input", "output shares storage with input 0"),
    (Status.TIMEOUT, "", "candidate worker exceeded 300 s"),
    (Status.RUNTIME_ERROR, "", "CUDA error: an illegal memory access was encountered"),
    (Status.STATIC_REJECT, "static:try-fallback", "except branch falls back to torch.nn.functional"),
]


def problems() -> list[Problem]:
    return [
        Problem("kbench", 2, i + 1, name, f"# problem {name}\n", tags=tags, presets=("full", "small"))
        for i, (name, tags) in enumerate(PROBLEMS)
    ]


def _stats(ms: float, rse: float) -> TimingStats:
    return TimingStats(ms, ms * 1.01, ms * rse * 10, ms * 0.02, ms * 0.97, 200, rse, device="cuda")


def _ok(rng: random.Random, p: Problem, eager: float, skill: float) -> Verdict:
    speedup = rng.lognormvariate(skill, 0.45)
    cand = eager / speedup
    timing = _stats(cand, rng.choice([0.002, 0.004, 0.03]))
    base = (("eager", _stats(eager, 0.002)), ("compile", _stats(eager / rng.uniform(1.1, 1.8), 0.003)))
    sol = eager / rng.uniform(3, 12)
    warnings = ("SM clock moved 6 % during timing",) if rng.random() < 0.1 else ()
    return Verdict(
        Status.OK, p.key, "cuda", "full", "fp32", "cuda", candidate_digest=f"{rng.getrandbits(40):010x}",
        build=BuildResult(True, "cuda", rng.uniform(30, 70), False, "", ("fused_kernel",)),
        correctness=Correctness(True, (0, 1, 2, 90817), 2e-6, 3e-7, 1e-5),
        timing=timing, baselines=base, kernel_share=rng.uniform(0.85, 1.0), sol_ms=sol,
        warnings=warnings, seconds=rng.uniform(60, 120),
    )  # fmt: skip


def _failed(rng: random.Random, p: Problem) -> Verdict:
    status, rule, message = rng.choice(FAILURES)
    checks = (
        CheckReport((Finding(rule[7:], Severity.REJECT, message, 41),)) if rule.startswith("static") else None
    )
    correctness = Correctness(False, (0,), 0.031, 0.002, 0.4, message) if status is Status.MISMATCH else None
    return Verdict(
        status, p.key, "cuda", "full", "fp32", "cuda", message=message, rule=rule,
        log_tail=f"[worker] {message}\n", checks=checks or CheckReport(), correctness=correctness,
        seconds=rng.uniform(5, 300),
    )  # fmt: skip


def verdicts(model_index: int, seed: int = 7) -> list[tuple[VerdictKey, Verdict, str]]:
    rng = random.Random(seed * 31 + model_index)
    out = []
    for p in problems():
        eager = rng.uniform(0.05, 4.0)
        good = rng.random() < (0.7 if model_index == 0 else 0.55)
        v = _ok(rng, p, eager, 0.25 - 0.2 * model_index) if good else _failed(rng, p)
        source = f"import torch\n# candidate for {p.name} by {MODELS[model_index]}\nclass ModelNew(torch.nn.Module):\n    ...\n"
        out.append((VerdictKey(p.key, 0, 0, "cuda", MODELS[model_index]), v, source))
    return out


# model-a's requests: one per problem answered by the server, two more from the cache, two failures.
LATENCIES = [2.0 + i for i in range(len(PROBLEMS))]  # median 8.5 s, p90 14.0 s, max 15.0 s
FAILED = ["HTTP 429 rate limited (after 8 retries): slow down", "connection refused by http://127.0.0.1:9/v1"]
MISSING = "kbench:2/15"  # selected by model-a's run, without a verdict: its requests failed


def requests() -> list[RequestRecord]:
    keys = [p.key for p in problems()]
    out = [
        RequestRecord(k, 0, 0, False, "", 1000, 500, 0.0075, lat)
        for k, lat in zip(keys, LATENCIES, strict=True)
    ]
    out += [RequestRecord(k, 1, 0, True, "", 1000, 500, 0.0, 0.0) for k in keys[:2]]
    return out + [RequestRecord(MISSING, s, 0, False, e, 0, 0, 0.0, 30.0) for s, e in enumerate(FAILED)]


def fill_store(path: Path) -> tuple[Store, list[str]]:
    """Two runs (one per model) of 14 verdicts each, plus the problems' metadata; model-a's run also
    selected a 15th problem whose requests failed."""
    store = Store(path)
    store.put_problems(problems())
    hw = {"gpu": "NVIDIA H200", "driver": "570.86", "cuda": "12.8", "torch": "2.13.0", "device": "cuda"}
    runs = []
    for i, model in enumerate(MODELS):
        run = store.start_run({"model": model, "backend": "cuda"}, hw, f"example-{i + 1}")
        store.put_run_problems(run, [p.key for p in problems()] + ([MISSING] if i == 0 else []))
        for key, v, source in verdicts(i):
            store.record(run, key, v, source, f"Here is the kernel:\n```python\n{source}```")
        for r in requests() if i == 0 else []:
            store.record_request(run, r)
        runs.append(run)
    return store, runs
