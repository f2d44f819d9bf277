import pytest

from kbench.analysis.gpus import GPU_SPECS, get_gpu, match_device_name
from kbench.errors import ConfigError


def test_table_has_the_required_parts_with_sources() -> None:
    for name in (
        "H100 SXM",
        "H100 PCIe",
        "H200",
        "A100 80GB SXM",
        "A100 40GB",
        "L40S",
        "L4",
        "A10G",
        "RTX 4090",
        "V100",
    ):
        spec = GPU_SPECS[name]
        assert spec.source and spec.memory_bandwidth_gbs > 0
        # dense tensor rates are never below the CUDA-core fp32 rate
        assert spec.fp16_tflops >= spec.fp32_tflops and spec.tf32_tflops >= spec.fp32_tflops


@pytest.mark.parametrize(
    ("alias", "name"), [("h100", "H100 SXM"), ("H200", "H200"), ("a100", "A100 80GB SXM"), ("l40s", "L40S")]
)
def test_aliases_are_case_insensitive(alias: str, name: str) -> None:
    assert get_gpu(alias).name == name
    assert get_gpu(alias.upper()).name == name


def test_unknown_gpu_lists_valid_names() -> None:
    with pytest.raises(ConfigError, match="valid names: H100 SXM"):
        get_gpu("B300X")


def test_device_names_map_to_entries() -> None:
    assert match_device_name("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert match_device_name("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert match_device_name("NVIDIA L40S").name == "L40S"
    assert match_device_name("NVIDIA A100-SXM4-40GB").name == "A100 40GB"
    assert match_device_name("Tesla T4") is None


def test_fp32_uses_tf32_rate_only_when_enabled() -> None:
    h100 = get_gpu("h100")
    assert h100.tflops("float32") == h100.fp32_tflops
    assert h100.tflops("torch.float32", tf32=True) == h100.tf32_tflops
    assert h100.tflops("bf16") == h100.bf16_tflops
