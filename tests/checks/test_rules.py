"""Each static rule fires on its trick (positive) and stays quiet on the honest look-alike (negative)."""

from __future__ import annotations

import textwrap

import pytest

from kbench.checks import RULES, run_checks, verdict_rule
from kbench.types import Severity

HEAD = "import torch\nimport torch.nn as nn\n"
KERNEL = 'ext = load_inline(name="k", cpp_sources=SRC, functions=["fused"])\n'

# (rule, backend, dtype, source that must fire, honest look-alike that must not)
CASES = [
    (
        "try-fallback",
        "cpp",
        "fp32",
        "try:\n    y = ext.fused(x)\nexcept Exception:\n    y = torch.relu(x)\n",
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
        "try:\n    y = ext.fused(x)\nexcept RuntimeError as e:\n    raise RuntimeError('kernel failed') from e\n",
    ),
    (
        "try-fallback",
        "cpp",
        "fp32",
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n    def forward(self, x):\n        try:\n"
        "            return ext.fused(x)\n        except Exception:\n            return self.lin(x)\n",
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n    def forward(self, x):\n        return ext.fused(x, self.lin.weight)\n",
    ),
    (
        "torch-attr-assign",
        "cpp",
        "fp32",
        "import torch.nn.functional as F\nF.gelu = lambda x: x\n",
        "import torch.nn.functional as F\ngelu = F.gelu\nself_gelu = gelu\n",
    ),
    (
        "torch-attr-assign",
        "cpp",
        "fp32",
        "import time\nfrom torch.cuda import Event as Ev\nEv.elapsed_time = lambda a, b: 0.0\n",
        "import time\nt0 = time.perf_counter()\n",
    ),
    (
        "torch-attr-assign",
        "cpp",
        "fp32",
        "import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n",
        "class A:\n    pass\nsetattr(A, 'x', 1)\n",
    ),
    (
        "global-switch",
        "cpp",
        "fp32",
        "torch.backends.cuda.matmul.allow_tf32 = True\n",
        "with torch.no_grad():\n    pass\n",
    ),
    (
        "global-switch",
        "cpp",
        "fp32",
        "torch.set_float32_matmul_precision('medium')\n",
        "p = torch.get_float32_matmul_precision()\n",
    ),
    (
        "global-switch",
        "cpp",
        "fp32",
        "torch.set_grad_enabled(False)\n",
        "with torch.set_grad_enabled(False):\n    pass\n",
    ),
    (
        "threads-processes",
        "cpp",
        "fp32",
        "import threading\n",
        "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n",
    ),
    ("threads-processes", "cpp", "fp32", "import os\nos.fork()\n", "import os\nn = os.cpu_count()\n"),
    (
        "threads-processes",
        "cpp",
        "fp32",
        'SRC = """#include <thread>\nvoid f() { std::thread t([]{}); t.detach(); }"""\n',
        'SRC = """#include <omp.h>\nvoid f(float* x) {\n#pragma omp parallel for\n'
        'for (int i = 0; i < 4; ++i) x[i] = 0; auto y = t.detach(); }"""\n',
    ),
    (
        "streams",
        "cuda",
        "fp32",
        "s = torch.cuda.Stream()\n",
        "s = torch.cuda.current_stream()\nk(x, stream=torch.cuda.current_stream())\n",
    ),
    (
        "streams",
        "cuda",
        "fp32",
        'SRC = """__global__ void k(float* x) {}\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); }"""\n',
        'SRC = """__global__ void k(float* x) {}\nvoid f() { auto s = at::cuda::getCurrentCUDAStream(); }"""\n',
    ),
    (
        "tensor-subclass",
        "cpp",
        "fp32",
        "class Lazy(torch.Tensor):\n    pass\n",
        "class ModelNew(nn.Module):\n    pass\n",
    ),
    (
        "tensor-subclass",
        "cpp",
        "fp32",
        "class W:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        pass\n",
        "class W:\n    def __repr__(self):\n        return 'w'\n",
    ),
    (
        "introspection",
        "cpp",
        "fp32",
        "import gc\nobjs = gc.get_objects()\n",
        "import math\nx = math.sqrt(2.0)\n",
    ),
    (
        "introspection",
        "cpp",
        "fp32",
        "import sys\nsys.settrace(None)\n",
        "import sys\nv = sys.version_info\n",
    ),
    (
        "harness-import",
        "cpp",
        "fp32",
        "import kbench.worker.runner as r\nr.Server = object\n",
        "import math\nimport torch.nn.functional as F\n",
    ),
    (
        "harness-import",
        "cpp",
        "fp32",
        "import __main__\n",
        "from collections import OrderedDict\n",
    ),
    (
        "harness-import",
        "cpp",
        "fp32",
        "name = 'kb' + 'ench'\nm = __import__(name)\n",
        "x = torch.zeros(3)\n",
    ),
    (
        "harness-import",
        "cpp",
        "fp32",
        "import importlib\nm = importlib.import_module('kbench.referee')\n",
        "import functools\nf = functools.partial(torch.add, alpha=2)\n",
    ),
    (
        "harness-import",
        "cpp",
        "fp32",
        "import traceback\nst = traceback.extract_stack()\n",
        "import math\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "import sys\nf = sys._getframe(1).f_locals\n",
        "import sys\nv = sys.version_info\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "try:\n    raise ValueError\nexcept ValueError as e:\n    f = e.__traceback__.tb_frame\n",
        "try:\n    y = 1\nexcept ValueError as e:\n    raise RuntimeError(str(e)) from e\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "import sys\ntb = sys.exc_info()[2]\n",
        "import sys\nbig = sys.maxsize\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "def g():\n    yield 1\nit = g()\nfr = getattr(it, 'gi_' + 'frame')\n",
        "class A:\n    w = 1\nfor name in ('w',):\n    v = getattr(A, name)\nd = getattr(torch, 'float16')\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "ATTR = 'f_back'\ndef h(fr):\n    return getattr(fr, ATTR)\n",
        "DT = 'float32'\ndt = getattr(torch, DT)\n",
    ),
    (
        "frame-access",
        "cpp",
        "fp32",
        "def h(o):\n    return object.__getattribute__(o, 'x')\n",
        "def h(o):\n    return o.x\n",
    ),
    (
        "native-lookup",
        "cpp",
        "fp32",
        'SRC = """#include <dlfcn.h>\nvoid* f = dlsym(RTLD_DEFAULT, \\"PyEval_SaveThread\\");"""\n',
        'SRC = """#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }"""\n',
    ),
    (
        "native-lookup",
        "cpp",
        "fp32",
        'SRC = """#include <pybind11/pybind11.h>\nauto m = pybind11::module_::import(\\"kbench\\");"""\n',
        'SRC = """#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\\"f\\", &f); }"""\n',
    ),
    (
        "native-lookup",
        "cpp",
        "fp32",
        'SRC = """#include <Python.h>\nvoid f() { PyFrameObject* fr = PyEval_GetFrame(); }"""\n',
        'SRC = """#include <torch/extension.h>\nvoid f(float* x) { x[0] = 1.0f; }"""\n',
    ),
    (
        "native-lookup",
        "cpp",
        "fp32",
        "maps = open('/proc/self/maps').read()\n",
        "cpus = open('/proc/cpuinfo').read()\n",
    ),
    (
        "no-kernel",
        "cuda",
        "fp32",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n",
        'SRC = """__global__ void relu_k(float* x, int n) {}"""\n',
    ),
    (
        "no-kernel",
        "triton",
        "fp32",
        "import triton\ndef k(x):\n    pass\n",
        "import triton\n@triton.jit\ndef k(x):\n    pass\n",
    ),
    ("no-kernel", "cpp", "fp32", "x = 1\n", "from torch.utils.cpp_extension import load_inline\n" + KERNEL),
    (
        "reference-call",
        "cpp",
        "fp32",
        "class ModelNew(Model):\n    pass\n",
        "class Model(nn.Module):\n    pass\nclass ModelNew(nn.Module):\n    pass\n",
    ),
    (
        "reference-call",
        "cpp",
        "fp32",
        "class ModelNew(nn.Module):\n    def __init__(self, *a):\n        super().__init__()\n        self.ref = Model(*a)\n",
        "class ModelNew(nn.Module):\n    def __init__(self, *a):\n        super().__init__()\n",
    ),
    ("precision-downgrade", "cpp", "fp32", "y = x.half()\n", "y = x.float()\n"),
    (
        "precision-downgrade",
        "cuda",
        "fp32",
        'SRC = """#include <cuda_fp16.h>\n__global__ void k(__half* x) {}"""\n',
        'SRC = """#include <cuda_fp16.h>\n__global__ void k(float* x) {}"""\n',
    ),
    (
        "precision-downgrade",
        "cpp",
        "fp32",
        "with torch.autocast('cuda'):\n    pass\n",
        "with torch.no_grad():\n    pass\n",
    ),
    (  # 3xTF32 keeps fp32-level accuracy: split precision is not a downgrade
        "precision-downgrade",
        "triton",
        "fp32",
        "acc = tl.dot(a, b, input_precision='tf32')\n",
        "acc = tl.dot(a, b, input_precision='tf32x3')\n",
    ),
]


def _fired(source: str, backend: str, dtype: str) -> set[str]:
    return {f.rule for f in run_checks(HEAD + textwrap.dedent(source), backend, dtype).findings}


@pytest.mark.parametrize(("rule", "backend", "dtype", "bad", "good"), CASES, ids=[c[0] for c in CASES])
def test_rule_fires_on_trick_and_not_on_honest_code(rule: str, backend: str, dtype: str, bad: str, good: str):
    assert rule in _fired(bad, backend, dtype)
    assert rule not in _fired(good, backend, dtype)


def test_every_rule_has_cases_and_a_rationale():
    assert {c[0] for c in CASES} == set(RULES)
    for rule in RULES.values():
        assert len(rule.rationale) > 60, rule.name


def test_fp16_problem_may_use_half():
    assert "precision-downgrade" not in _fired("y = x.half()\n", "cpp", "fp16")


def test_syntax_error_is_one_reject_finding():
    report = run_checks("def broken(:\n", "cuda")
    assert [(f.rule, f.severity) for f in report.findings] == [("syntax", Severity.REJECT)]
    assert report.rejected


def test_warnings_do_not_reject_and_verdict_rule_is_prefixed():
    report = run_checks(
        HEAD + 'SRC = """__global__ void k(float* x) {}"""\ns = torch.cuda.Stream()\n', "cuda"
    )
    assert [f.rule for f in report.findings] == ["streams"]
    assert not report.rejected
    assert verdict_rule(report.findings[0]) == "static:streams"


def test_one_finding_per_assignment_target():
    report = run_checks(
        HEAD + "import time\ntorch.backends.cudnn.enabled, time.time = False, None\n", "cpp", rules=None
    )
    assert sorted(
        f.message.split()[1] for f in report.findings if f.rule in ("global-switch", "torch-attr-assign")
    ) == [
        "time.time",
        "torch.backends.cudnn.enabled",
    ]


def test_selected_rules_only():
    report = run_checks(HEAD + "import gc\n", "cuda", rules=["introspection"])
    assert [f.rule for f in report.findings] == ["introspection"]


_TRITON = HEAD + "import triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"
_CUDA = (
    HEAD
    + 'SRC = """__global__ void k(float* x) {}"""\nm = load_inline(name="m", cpp_sources="", cuda_sources=SRC, functions=["run"])\n'
)
_CPP = (
    HEAD + 'm = load_inline(name="m", cpp_sources="torch::Tensor run(torch::Tensor x);", functions=["run"])\n'
)


@pytest.mark.parametrize(
    ("source", "declared", "hint"),
    [
        (_TRITON, "cpp", "this looks like a Triton candidate: pass --backend triton"),
        (_TRITON, "cuda", "this looks like a Triton candidate: pass --backend triton"),
        (_CUDA, "triton", "this looks like a CUDA candidate: pass --backend cuda"),
        (_CUDA, "cpp", None),  # a CUDA candidate exports its launcher: for cpp it has a kernel
        (_CPP, "cuda", "this looks like a C++ candidate: pass --backend cpp"),
        (_CPP, "triton", "this looks like a C++ candidate: pass --backend cpp"),
        (HEAD + "y = 1\n", "cpp", ""),  # no kernel of any backend: the plain message, no hint
    ],
)
def test_a_candidate_of_another_backend_is_told_which_to_pass(source: str, declared: str, hint: str | None):
    report = run_checks(source, declared, rules=["no-kernel"])
    if hint is None:
        assert not report.findings
        return
    [finding] = report.findings
    assert finding.message.startswith(f"backend {declared}: no ")
    if hint:
        assert finding.message.endswith(f"; {hint}")
    else:
        assert "looks like" not in finding.message
