"""What the host learns about its GPUs without importing torch (hardware.visible_gpus, NVML)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kbench import hardware
from kbench.hardware import GpuFacts

H200 = GpuFacts("NVIDIA H200", (9, 0))
L40S = GpuFacts("NVIDIA L40S", (8, 9))


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> list[GpuFacts]:
    gpus = [H200, H200, H200, H200]
    monkeypatch.setattr(hardware, "_torch_has_cuda", lambda: True)
    monkeypatch.setattr(hardware, "_nvml_all", lambda: list(gpus))
    return gpus


def test_cuda_visible_devices_picks_and_orders_the_gpus_torch_would_see(machine: list[GpuFacts]) -> None:
    assert hardware.visible_gpus({}) == [H200] * 4
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,0"}) == [H200] * 2
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    # CUDA stops at the first entry it cannot use: an index past the end, a repeat, a typo
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "1,7,2"}) == [H200]
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "1,1"}) == [H200]
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,x,2"}) == [H200]


def test_what_nvml_cannot_order_or_name_is_left_to_torch(machine: list[GpuFacts]) -> None:
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-5a1c"}) is None  # UUIDs
    assert hardware.visible_gpus({"CUDA_VISIBLE_DEVICES": "MIG-1/2/3"}) is None
    machine[2] = GpuFacts("NVIDIA H200", (9, 0), mig=True)  # CUDA lists its instances, not the GPU
    assert hardware.visible_gpus({}) is None
    machine[2] = H200
    machine[3] = L40S  # CUDA lists the fastest first, NVML by PCI bus: its order is not torch's
    assert hardware.visible_gpus({}) is None
    assert hardware.visible_gpus({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "3,0"}) == [
        L40S,
        H200,
    ]


def test_a_cpu_build_of_torch_sees_no_gpu_whatever_the_driver_says(
    machine: list[GpuFacts], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hardware, "_torch_has_cuda", lambda: False)
    assert hardware.visible_gpus({}) == []
    assert hardware.gpu_count() == 0


def test_device_facts_come_from_nvml_where_it_answers(
    machine: list[GpuFacts], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    machine[1] = L40S
    assert hardware.device_name("cuda:1") == "NVIDIA L40S"
    assert hardware.device_capability("cuda") == (9, 0)
    assert hardware.gpu_count() == 4


def test_the_host_reads_torch_version_and_gpu_facts_without_importing_torch() -> None:
    def python(code: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()

    (expected,) = python("import torch; print(torch.__version__)")
    code = (
        "import sys\nfrom kbench import hardware, defaults\n"
        "version = hardware.torch_version(); defaults.gpu_present('auto')\n"
        "print('torch' in sys.modules, version)"
    )
    assert python(code) == ["False", expected]
