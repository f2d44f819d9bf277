"""A candidate's build flags reach ninja's command lines, and so a shell, unquoted: the referee refuses any
flag that is not one plain word, or that names a file for the compiler, before anything is built (a shell
command among a candidate's link flags once wrote into the shared precompiled headers)."""

from __future__ import annotations

import pytest

from kbench.referee.builds import _checked

BASE = {"name": "ext", "cpp_sources": "int f() { return 1; }", "functions": ["f"]}


@pytest.mark.parametrize(
    ("key", "flags"),
    [
        ("extra_ldflags", [";", "printf", "x", ">", "../pch/torch/extension.h.gch", ";", "true"]),
        ("extra_cflags", ["-O3 $(touch /tmp/x)"]),
        ("extra_cflags", ["-O3`id`"]),
        ("extra_cuda_cflags", ["-O3|tee"]),
        ("extra_include_paths", ["inc\nrm"]),
        ("extra_cflags", ["-o../pch/x.gch"]),
        ("extra_cflags", ["-MF/tmp/deps"]),
        ("extra_cflags", ["-include/tmp/evil.h"]),
        ("extra_ldflags", ["@/tmp/response"]),
        ("extra_cflags", ["-save-temps=obj"]),
        ("extra_cflags", [3]),
        ("extra_cflags", ["-fplugin=/tmp/evil.so"]),
        ("extra_cflags", ["-fprofile-generate=/tmp/p"]),
        ("extra_ldflags", ["-Wl,-Map=/tmp/map"]),
        ("extra_ldflags", ["-Wl,-Map=out.map"]),
        ("extra_cflags", ["-DX=/tmp/y"]),
        ("extra_cflags", ["-dumpdir", ".."]),
        ("extra_cflags", ["--save-temps"]),
    ],
)
def test_a_flag_that_is_not_one_plain_word_is_refused(key: str, flags: list[object]) -> None:
    with pytest.raises(ValueError, match=key):
        _checked({**BASE, key: flags})


def test_the_flags_the_shipped_kernels_use_pass() -> None:
    flags = {
        "extra_cflags": ["-O3", "-march=native", "-fno-trapping-math", "-fopenmp", "-DN=4", "-std=c++17"],
        "extra_ldflags": ["-fopenmp", "-Wl,-rpath,/opt/lib", "-lcublas"],
        "extra_cuda_cflags": ["-O3", "--use_fast_math", "-Xptxas=-v", "-gencode=arch=compute_90,code=sm_90"],
        "extra_include_paths": ["/opt/include"],
    }
    assert _checked({**BASE, **flags})["extra_cflags"][0] == "-O3"
