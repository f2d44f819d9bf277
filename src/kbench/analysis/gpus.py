"""Peak rates of common NVIDIA GPUs, for speed-of-light (SOL) estimates.

Every tensor-core rate is the dense one: datasheets print the 2:4-sparse rate first (twice as high), and
no reference in the suite is sparse. fp16/bf16 rates assume fp32 accumulation, which is what PyTorch's
matmuls use; on GeForce parts (RTX 4090) that is half the fp16-accumulate rate the datasheet headlines.
A part with no tensor path for a format (V100 has no TF32 or BF16 tensor cores) gets the rate PyTorch
actually reaches there: the fp32 non-tensor rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbench.errors import ConfigError


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_bandwidth_gbs: float  # GB/s, 1 GB = 1e9 bytes
    fp32_tflops: float  # non-tensor CUDA-core rate
    tf32_tflops: float  # dense tensor-core rate
    fp16_tflops: float  # dense tensor-core rate, fp32 accumulate
    bf16_tflops: float  # dense tensor-core rate, fp32 accumulate
    sm_count: int
    smem_per_sm_kb: int  # maximum shared memory one SM can give its blocks
    l2_mb: float
    memory_gb: float
    source: str  # the public datasheet or whitepaper the numbers come from

    def tflops(self, dtype: str, tf32: bool = False) -> float:
        """Peak rate for a dtype name ("float32", "fp16", "bfloat16", ...); fp32 uses TF32 only if enabled."""
        key = _DTYPE_KEYS.get(dtype.removeprefix("torch."))
        if key is None:
            raise ConfigError(f"no peak rate for dtype '{dtype}'; known: {', '.join(sorted(_DTYPE_KEYS))}")
        if key == "fp32" and tf32:
            key = "tf32"
        return float(getattr(self, f"{key}_tflops"))


_DTYPE_KEYS = {
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
}

_HOPPER_DS = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100); Hopper whitepaper"
_A100_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100); Ampere GA100 whitepaper"
)

GPU_SPECS: dict[str, GPUSpec] = {
    spec.name: spec
    for spec in (
        GPUSpec("H100 SXM", 3350, 67.0, 494.7, 989.4, 989.4, 132, 228, 50, 80, _HOPPER_DS),
        GPUSpec("H100 PCIe", 2000, 51.0, 378.0, 756.0, 756.0, 114, 228, 50, 80, _HOPPER_DS),
        GPUSpec(
            "H200",
            4800,
            67.0,
            494.7,
            989.4,
            989.4,
            132,
            228,
            50,
            141,
            "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), SXM form factor",
        ),
        GPUSpec("A100 80GB SXM", 2039, 19.5, 156.0, 312.0, 312.0, 108, 164, 40, 80, _A100_DS),
        GPUSpec("A100 40GB", 1555, 19.5, 156.0, 312.0, 312.0, 108, 164, 40, 40, _A100_DS),
        GPUSpec(
            "L40S",
            864,
            91.6,
            183.0,
            362.05,
            362.05,
            142,
            100,
            96,
            48,
            "NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s); Ada Lovelace whitepaper",
        ),
        GPUSpec(
            "L4",
            300,
            30.3,
            60.0,
            121.0,
            121.0,
            58,
            100,
            48,
            24,
            "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4); Ada Lovelace whitepaper",
        ),
        GPUSpec(
            "A10G",
            600,
            35.0,
            35.0,
            70.0,
            70.0,
            80,
            100,
            6,
            24,
            "AWS EC2 G5 instance specs (aws.amazon.com/ec2/instance-types/g5); NVIDIA publishes no A10G "
            "datasheet, rates as reported for the AWS part",
        ),
        GPUSpec(
            "RTX 4090",
            1008,
            82.6,
            82.6,
            165.2,
            165.2,
            128,
            100,
            72,
            24,
            "NVIDIA Ada Lovelace GPU architecture whitepaper (RTX 4090 column, fp32-accumulate rates)",
        ),
        GPUSpec(
            "V100",
            900,
            15.7,
            15.7,
            125.0,
            15.7,
            80,
            96,
            6,
            32,
            "NVIDIA Tesla V100 datasheet (nvidia.com/en-us/data-center/v100), SXM2 32GB; no TF32/BF16 tensor "
            "cores, so those rates are the fp32 rate",
        ),
    )
}

# Lower-cased short names users type, and substrings of torch.cuda.get_device_name() values.
_ALIASES: dict[str, str] = {
    "h100": "H100 SXM",
    "h100-sxm": "H100 SXM",
    "h100 sxm": "H100 SXM",
    "h100 80gb hbm3": "H100 SXM",
    "h100-pcie": "H100 PCIe",
    "h100 pcie": "H100 PCIe",
    "h200": "H200",
    "a100": "A100 80GB SXM",
    "a100-80gb": "A100 80GB SXM",
    "a100-sxm4-80gb": "A100 80GB SXM",
    "a100-40gb": "A100 40GB",
    "a100-sxm4-40gb": "A100 40GB",
    "a100-pcie-40gb": "A100 40GB",
    "l40s": "L40S",
    "l4": "L4",
    "a10g": "A10G",
    "4090": "RTX 4090",
    "rtx4090": "RTX 4090",
    "rtx 4090": "RTX 4090",
    "geforce rtx 4090": "RTX 4090",
    "v100": "V100",
}


def get_gpu(name: str) -> GPUSpec:
    """Look a GPU up by its table name or a short alias, case-insensitively ("h100" -> H100 SXM)."""
    key = " ".join(name.strip().lower().split())
    for spec_name, spec in GPU_SPECS.items():
        if spec_name.lower() == key:
            return spec
    alias = _ALIASES.get(key) or _ALIASES.get(key.replace(" ", "-"))
    if alias is None:
        valid = ", ".join(GPU_SPECS)
        raise ConfigError(f"unknown GPU '{name}'; valid names: {valid} (or aliases like 'h100', 'a100')")
    return GPU_SPECS[alias]


def match_device_name(device_name: str) -> GPUSpec | None:
    """Map a CUDA device name such as 'NVIDIA H100 80GB HBM3' to a table entry; None when unknown."""
    name = device_name.lower().replace("nvidia", "").strip()
    # Order matters: more specific parts first ("H100 PCIe" before "H100", "L40S" before "L4").
    rules = (
        ("h200", "H200"),
        ("h100 pcie", "H100 PCIe"),
        ("h100", "H100 SXM"),
        ("a100", "A100 40GB" if "40gb" in name else "A100 80GB SXM"),
        ("l40s", "L40S"),
        ("l4", "L4"),
        ("a10g", "A10G"),
        ("4090", "RTX 4090"),
        ("v100", "V100"),
    )
    for needle, spec_name in rules:
        if needle in name:
            return GPU_SPECS[spec_name]
    return None


def detect_gpu() -> GPUSpec | None:
    """The table entry for CUDA device 0, or None without CUDA or for a GPU the table does not list."""
    import torch

    if not torch.cuda.is_available():
        return None
    return match_device_name(torch.cuda.get_device_name(0))
