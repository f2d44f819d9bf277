"""kernel_names reads the kernels a candidate defines, per backend, without importing it."""

from __future__ import annotations

from kbench.checks.kernels import kernel_names

CUDA = '''
from torch.utils.cpp_extension import load_inline
cuda_src = r"""
// __global__ void commented_out(float* x) {}
__global__ void __launch_bounds__(256) gelu_kernel(const float* __restrict__ x, float* y, int n) {}
template <typename T>
__global__ void bias_relu(T* y, const T* b, int n) {}
extern "C" __global__ void plain(float* x) {}
torch::Tensor fused(torch::Tensor x) { return x; }
"""
ext = load_inline(name="k", cpp_sources="torch::Tensor fused(torch::Tensor x);", cuda_sources=cuda_src,
                  functions=FUNCS)
FUNCS = ["fused"]
'''

TRITON = """
import triton
import triton.language as tl
from triton import jit

@triton.autotune(configs=[], key=["n"])
@triton.jit
def tuned(x_ptr, n):
    pass

@jit
def plain(x_ptr):
    pass

def launcher(x):
    plain[(1,)](x)
"""

CPP = '''
import torch.utils.cpp_extension as ce
SRC = """
#include <torch/extension.h>
torch::Tensor a(torch::Tensor x) { return x; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("b", &a); }
"""
ext = ce.load_inline(name="c", cpp_sources=SRC, functions=["a"])
'''


def test_cuda_global_functions():
    assert kernel_names(CUDA, "cuda") == ("gelu_kernel", "bias_relu", "plain")


def test_cuda_source_exports_for_cpp_view():
    assert kernel_names(CUDA, "cpp") == ("fused",)


def test_triton_decorated_functions_only():
    assert kernel_names(TRITON, "triton") == ("tuned", "plain")


def test_cpp_load_inline_functions_and_pybind_defs():
    assert kernel_names(CPP, "cpp") == ("a", "b")


def test_none_or_syntax_error_gives_empty():
    assert kernel_names("import torch\n", "cuda") == ()
    assert kernel_names("def (:\n", "triton") == ()
