"""Problem -> Prompt. The words live in templates/*.md and the examples in examples/; this file only
assembles them, so a prompt change is a text diff, and `kbench prompt PROBLEM` prints the exact result.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from string import Template

from kbench.backends import get_backend
from kbench.config import RunConfig, gpu_default_backend
from kbench.errors import ConfigError
from kbench.problems.format import parse_problem
from kbench.problems.training import Training
from kbench.types import Problem, Prompt

# (file stem, title) of the examples in order; one-shot uses the first, few-shot all of them.
EXAMPLES = (
    ("add", "elementwise addition"),
    ("gelu", "GELU (tanh form), six elementwise operators fused into one kernel"),
    ("gemm_leaky_relu", "GEMM with a bias + LeakyReLU epilogue"),
)
# A training problem's examples start with a forward-and-backward one (one-shot shows it alone).
TRAINING_EXAMPLES = (
    ("train_tanh_scale", "a trained per-channel scale of tanh: forward and backward as custom kernels"),
)
SHOTS = {"zero": 0, "one": 1, "few": len(EXAMPLES)}
DTYPE_TEXT = {
    "fp32": "float32 (torch.float32).",
    "fp16": "float16: the inputs and parameters are cast to torch.float16; accumulate in float32 inside your kernels.",
    "bf16": "bfloat16: the inputs and parameters are cast to torch.bfloat16; accumulate in float32 inside your kernels.",
}


def backend_title(backend: str) -> str:
    """How a prompt names `backend` (its `prompt_title`, else its `title`)."""
    found = get_backend(backend)
    return found.prompt_title or found.title or found.name


@dataclass(frozen=True)
class PromptOptions:
    backend: str = field(default_factory=gpu_default_backend)
    dtype: str = "fp32"
    shots: str = "one"  # zero | one | few
    hardware: str | None = None  # GPU name for the hardware facts, e.g. "H100"
    chain_of_thought: bool = False
    preset: str = "full"  # the sizes the problem shows: those the candidate is evaluated at

    @classmethod
    def from_config(cls, cfg: RunConfig) -> PromptOptions:
        return cls(cfg.backend, cfg.dtype, cfg.shots, cfg.hardware_facts, cfg.chain_of_thought, cfg.preset)

    def items(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, str(v)) for k, v in vars(self).items())


@lru_cache(maxsize=64)
def read_resource(*parts: str, package: str = "kbench.prompts") -> str:
    node = resources.files(package)
    for part in parts:
        node = node / part
    try:
        return node.read_text().strip("\n")
    except FileNotFoundError:
        raise ConfigError(
            f"prompt resource {'/'.join(parts)} is missing from the package {package}"
        ) from None


def template(template_name: str, **values: str) -> str:
    return Template(read_resource("templates", template_name)).substitute(values)


def strip_kbench_metadata(code: str) -> str:
    """Drop module-level KBENCH_* assignments: kbench's own metadata, not part of the problem."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.startswith("KBENCH_") for t in node.targets
        ):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = [line for i, line in enumerate(code.splitlines(), 1) if i not in drop]
    text = "\n".join(lines)
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text.strip("\n")


def with_preset(problem: Problem, preset: str) -> str:
    """The problem's source with its size constants set to `preset`'s values, as the evaluator runs it.

    Only the assigned values change (comments and layout stay); `full` is the source as written.
    """
    from kbench.problems.loader import preset_overrides

    overrides = preset_overrides(problem, preset)
    if not overrides:
        return problem.code
    lines = problem.code.splitlines(keepends=True)
    spans = []
    for node in ast.parse(problem.code).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if name in overrides and value.end_lineno is not None and value.end_col_offset is not None:
            spans.append((value.lineno, value.col_offset, value.end_lineno, value.end_col_offset, name))
    for start, col, end, end_col, name in sorted(spans, reverse=True):  # bottom-up keeps offsets valid
        head = lines[start - 1].encode()[:col].decode()
        tail = lines[end - 1].encode()[end_col:].decode()
        lines[start - 1 : end] = [head + repr(overrides[name]) + tail]
    return "".join(lines)


def example_section(backend: str, shots: str, training: bool = False) -> str:
    parts = []
    examples = TRAINING_EXAMPLES + EXAMPLES if training else EXAMPLES
    count = len(examples) if shots == "few" else SHOTS[shots]
    for number, (stem, title) in enumerate(examples[:count], 1):
        parts.append(
            template(
                "example.md",
                number=str(number),
                title=title,
                backend_name=backend_title(backend),
                reference=strip_kbench_metadata(read_resource("examples", "reference", f"{stem}.py")),
                solution=read_resource(
                    "examples", backend, f"{stem}.py", package=get_backend(backend).prompt_package
                ),
            )
        )
    return "".join(f"\n{p}\n" for p in parts)


def training_section(training: Training | None) -> str:
    """What a training problem's step is (its KBENCH_TRAINING, which the problem shown leaves out)."""
    if training is None:
        return ""
    count = training.upstream
    inputs = (
        "the inputs `get_inputs()` returns"
        if count == 0
        else f"the inputs `get_inputs()` returns except the last {count}"
    )
    upstream = (
        "from its scalar output (the loss)"
        if count == 0
        else f"the last {count} input(s) as the upstream gradient(s) of its output(s), one each, shaped like it"
    )
    positions = ", ".join(str(i) for i in training.grad_inputs)
    grads = f"the forward's inputs {positions} (by position)" if positions else "no input"
    return "\n" + template("training.md", inputs=inputs, upstream=upstream, grad_inputs=grads) + "\n"


def hardware_section(gpu: str | None) -> str:
    if not gpu:
        return ""
    from kbench.analysis.gpus import get_gpu  # the one GPU specs table, shared with `kbench inspect`

    s = get_gpu(gpu)
    facts = template(
        "hardware.md",
        name=s.name,
        bandwidth=f"{s.memory_bandwidth_gbs:,.0f}",
        fp32=f"{s.fp32_tflops:g}",
        tf32=f"{s.tf32_tflops:g}",
        fp16=f"{s.fp16_tflops:g}",
        bf16=f"{s.bf16_tflops:g}",
        sm_count=str(s.sm_count),
        smem=str(s.smem_per_sm_kb),
        l2=f"{s.l2_mb:g}",
        memory=f"{s.memory_gb:g}",
    )
    return f"\n{facts}\n"


def _check(options: PromptOptions) -> None:
    get_backend(options.backend)  # ConfigError naming the registered backends
    for value, known, what in (
        (options.shots, SHOTS, "shots"),
        (options.dtype, DTYPE_TEXT, "dtype"),
    ):
        if value not in known:
            raise ConfigError(f"unknown {what} {value!r}; use one of: {', '.join(known)}")


def build_prompt(problem: Problem, options: PromptOptions | None = None) -> Prompt:
    """The full first-turn prompt for one problem."""
    options = options or PromptOptions()
    _check(options)
    name = backend_title(options.backend)
    training = parse_problem(problem.code, problem.path or problem.key).training
    text = template(
        "task.md",
        backend=read_resource(
            "templates",
            "backends",
            f"{options.backend}.md",
            package=get_backend(options.backend).prompt_package,
        ),
        fusion=read_resource("templates", "fusion.md"),
        examples=example_section(options.backend, options.shots, training is not None),
        hardware=hardware_section(options.hardware) + training_section(training),
        backend_name=name,
        dtype_text=DTYPE_TEXT[options.dtype],
        problem=strip_kbench_metadata(with_preset(problem, options.preset)),
        contract=template("contract.md", backend_name=name),
        reasoning=read_resource("templates", "cot.md" if options.chain_of_thought else "direct.md"),
    )
    return Prompt(
        problem_key=problem.key,
        backend=options.backend,
        text=text.strip() + "\n",
        system=read_resource("templates", "system.md"),
        options=options.items(),
    )
