"""Refinement feedback: the candidate's own compiler errors and traceback frames (no host paths, no kbench
internals, no repeats, a size limit, whole words), mismatch reports, status and rule, timings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbench.prompts import feedback, refine_message
from kbench.prompts.feedback import reason
from kbench.prompts.logs import MAX_BYTES, candidate_traceback, clip, compiler_errors, strip_paths
from kbench.types import BuildResult, Correctness, Status, TimingStats, Verdict

FIXTURES = Path(__file__).parents[1] / "fixtures"
BUILD_LOG = (FIXTURES / "feedback" / "cpp_build_log.txt").read_text()
BUILD_MESSAGE = (FIXTURES / "feedback" / "cpp_build_message.txt").read_text()
GOOD_LINE = "float v = p[i] + b[i % n];"
BAD_LINE = "float v = p[i] + bb[i % n] + undefined_thing;"
SOURCE = (FIXTURES / "pipeline" / "gemm_epilogue_cpp.py").read_text().replace(GOOD_LINE, BAD_LINE)
HOST_PATH = re.compile(r"(?<![\w.])(?:/|~/)[\w.+-]+/")  # any absolute path left in the text


def _v(status: Status, **kw: object) -> Verdict:
    return Verdict(status, "kbench:2/1", "cuda", "full", "fp32", "cuda:0", **kw)  # type: ignore[arg-type]


def _stats(ms: float) -> TimingStats:
    return TimingStats(ms, ms, 0.0, 0.0, ms, 100, 0.01, device="cuda:0")


def _build_error() -> Verdict:
    return _v(Status.BUILD_ERROR, message=BUILD_MESSAGE, build=BuildResult(False, "cpp", log=BUILD_LOG))


def _code_block(text: str) -> str:
    return text.split("```\n", 1)[1].split("\n```", 1)[0]


def test_build_error_shows_the_candidates_first_errors_and_nothing_else() -> None:
    text = feedback(_build_error(), SOURCE)
    line = SOURCE.splitlines().index("    " + BAD_LINE) + 1  # its line in the candidate's Python file
    assert text.startswith("Result of your previous answer: build_error.")
    assert f"main.cpp:12:22 (line {line} of your code): error: ‘bb’ was not declared in this scope" in text
    assert f"main.cpp:12:34 (line {line} of your code): error: ‘undefined_thing’ was not declared" in text
    assert "   12 |     " + BAD_LINE in text  # the offending line and the caret under it
    # no host paths, no kbench internals, no build commands, no traceback
    assert HOST_PATH.search(text) is None, text
    for leak in ("kbench", "site-packages", "Traceback", "-isystem", "ninja", "FAILED", "buildcache"):
        assert leak not in text, leak
    # each error once, though the log holds the compiler output twice (streamed and in the exception)
    assert text.count("‘undefined_thing’ was not declared") == 1
    assert len(_code_block(text).encode()) <= MAX_BYTES and len(text.encode()) <= MAX_BYTES + 200


def test_build_error_from_the_message_alone_never_starts_mid_word() -> None:
    """No build log (the worker died while building): the truncated message is the only source."""
    text = feedback(_v(Status.BUILD_ERROR, message=BUILD_MESSAGE), SOURCE)
    block = _code_block(text)
    assert block.startswith("main.cpp:12:22") and "td=c++20" not in text
    assert HOST_PATH.search(text) is None and "kbench" not in text


def test_many_errors_are_clipped_at_whole_errors() -> None:
    log = "\n".join(
        f"/home/user/build/main.cpp:{i}:5: error: use of undeclared identifier 'name_{i}'\n"
        f"   {i} |     name_{i} += 1;\n      |     ^"
        for i in range(1, 200)
    )
    out = compiler_errors(log)
    assert len(out.encode()) <= MAX_BYTES
    assert out.startswith("main.cpp:1:5: error: use of undeclared identifier 'name_1'")
    shown = re.findall(r"^main\.cpp:(\d+):5: error: use of undeclared identifier 'name_(\d+)'$", out, re.M)
    assert shown and all(a == b for a, b in shown)  # every shown error is whole, none cut mid-line
    assert out.splitlines()[-1] == f"... and {199 - len(shown)} more errors"


def test_nvcc_errors_and_header_errors() -> None:
    nvcc = (
        '/tmp/kb/build/cuda.cu(41): error: identifier "tid" is undefined\n'
        "      out[tid] = x;\n"
        "          ^\n"
        "/usr/local/lib/site-packages/torch/include/ATen/core/TensorBody.h(300): error: no instance of overloaded function\n"
    )
    out = compiler_errors(nvcc)
    assert out.splitlines()[:3] == [
        'cuda.cu:41: error: identifier "tid" is undefined',
        "      out[tid] = x;",
        "          ^",
    ]
    assert "TensorBody.h" not in out  # a header's error is left out while the candidate's own file has one
    header_only = "/usr/local/include/torch/x.h:7:3: error: static assertion failed\n"
    assert compiler_errors(header_only) == "x.h:7:3: error: static assertion failed"
    assert compiler_errors("all good\nno errors here") == ""


def test_runtime_error_keeps_only_the_candidates_frames() -> None:
    message = (
        "AttributeError: 'Tensor' object has no attribute 'nonexistent_method'\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/src/kbench/sandbox/worker.py", line 159, in forward\n'
        "    out = self.model(*inputs)\n"
        "          ^^^^^^^^^^^^^^^^^^^\n"
        '  File "/home/user/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
        "    return self._call_impl(*args, **kwargs)\n"
        '  File "/home/user/.cache/kbench/kbench-job-7863-44de67rn/candidate/candidate.py", line 8, in forward\n'
        "    return helper(x)\n"
        "           ^^^^^^^^^\n"
        "AttributeError: 'Tensor' object has no attribute 'nonexistent_method'\n"
    )
    text = feedback(_v(Status.RUNTIME_ERROR, message=message))
    assert '  File "candidate.py", line 8, in forward\n    return helper(x)' in text
    assert "worker.py" not in text and "self.model(*inputs)" not in text and "module.py" not in text
    assert text.count("has no attribute 'nonexistent_method'") == 1 and HOST_PATH.search(text) is None


def test_text_without_frames_loses_paths_and_internal_code() -> None:
    text = (
        "x" * 2500
        + '\nTraceback (most recent call last):\n  File "/a/kbench/x.py", line 1, in f\n    internal()\nValueError: bad /home/user/data/file.bin'
    )
    out = candidate_traceback(text)
    assert out == "ValueError: bad file.bin"  # the cut first line, the frame and its code line are gone


def test_clip_and_strip_paths() -> None:
    assert strip_paths("see /home/user/.cache/x/main.cpp:3 and ~/y/z.h") == "see main.cpp:3 and z.h"
    text = "\n".join(f"word{i} " * 20 for i in range(100))
    out = clip(text, 500)
    assert len(out.encode()) <= 500 and out.endswith("more lines)")
    assert all(line in text.splitlines() for line in out.splitlines()[:-1])


@pytest.mark.parametrize("status", [Status.CRASHED, Status.TIMEOUT])
def test_crash_shows_the_candidates_output(status: Status) -> None:
    tail = "x" * 3000 + "\nstarting kernel\nwriting /home/user/out.bin\n"
    text = feedback(_v(status, message="worker died (signal 11)", log_tail=tail))
    assert "starting kernel\nwriting out.bin" in text and "xxxx" not in text
    assert "worker died (signal 11)" in text.splitlines()[0]  # the reason stays in the status line


def test_mismatch_and_rule() -> None:
    c = Correctness(
        False, (1, 2), max_abs_err=0.5, max_rel_err=2.0, report="first mismatch at [0, 3]: 1.5 vs 1.0"
    )
    text = feedback(_v(Status.MISMATCH, correctness=c))
    assert "max abs error 0.5" in text and "first mismatch at [0, 3]" in text
    cheat = feedback(_v(Status.CHEAT, rule="no-torch-fallback", message="no own kernel ran"))
    assert "cheat (rule: no-torch-fallback). no own kernel ran" in cheat


# A mismatch as the evaluator reports it: the message is the report, whose first line is its header.
MISMATCH_REPORT = (
    "seed 1: 3 of 64 elements differ beyond tol=0.0001: |out-ref| <= tol*(min(1, rms(ref))+|ref|); "
    "first positions:\n  at (0, 3): got 1.5, expected 1\n  at (0, 7): got 0.25, expected 0.5"
)


def _mismatch() -> Verdict:
    c = Correctness(
        False, (1, 2), max_abs_err=0.5, mean_abs_err=0.0156, max_rel_err=0.5, report=MISMATCH_REPORT
    )
    return _v(Status.MISMATCH, message=MISMATCH_REPORT, correctness=c)


def test_a_mismatch_header_is_said_once_with_the_error_sizes() -> None:
    text = feedback(_mismatch())
    assert text.count("3 of 64 elements differ") == 1 and "at (0, 7): got 0.25, expected 0.5" in text
    assert text.startswith("Result of your previous answer: mismatch.\n\n")
    assert (
        "Outputs differ from the reference: max abs error 0.5, max rel error 0.5, mean abs error 0.0156."
        in text
    )


def test_a_mismatch_verdict_line_ends_with_its_error_size() -> None:
    assert reason(_mismatch()) == (
        "seed 1: 3 of 64 elements differ beyond tol=0.0001: |out-ref| <= tol*(min(1, rms(ref))+|ref|) "
        "(max abs error 0.5, max rel error 0.5)"
    )
    shape = _v(Status.MISMATCH, rule="output-shape", message="seed 0: shape (2, 3), expected (3, 2)")
    assert reason(shape) == "seed 0: shape (2, 3), expected (3, 2)"  # no correctness: nothing to size


def test_timings_speedups_and_kernel_share() -> None:
    v = _v(
        Status.OK,
        timing=_stats(2.0),
        baselines=(("eager", _stats(4.0)), ("compile", _stats(3.0))),
        kernel_share=0.8,
    )
    text = feedback(v)
    assert "2 ms median" in text and "PyTorch eager: 4 ms, speed-up 2.00x" in text
    assert "speed-up 1.50x" in text and "80% of device time" in text


def test_refine_message_variants() -> None:
    assert "Make it faster" in refine_message("cuda", _v(Status.OK, timing=_stats(1.0)))
    assert "Fix the problem" in refine_message("triton", _v(Status.RUNTIME_ERROR, message="ValueError: boom"))
    none = refine_message("cpp", None, "no code block and no `class ModelNew` in the completion")
    assert "No usable code" in none and "C++ (CPU) kernels" in none
    fixed = refine_message("cpp", _build_error(), "", SOURCE)
    assert "(line" in fixed and "of your code)" in fixed


def test_reason_is_one_clean_line() -> None:
    assert (
        reason(_build_error())
        == "main.cpp:12:22: error: ‘bb’ was not declared in this scope; did you mean ‘b’?"
    )
    assert reason(_v(Status.BUILD_ERROR, message="x" * 2500 + "\nOSError: no compiler")) == "did not compile"
    raised = 'ValueError: bad\nTraceback (most recent call last):\n  File "/x/kbench/w.py", line 1\nValueError: bad'
    assert reason(_v(Status.RUNTIME_ERROR, message=raised)) == "ValueError: bad"
    assert reason(_v(Status.OK)) == ""
