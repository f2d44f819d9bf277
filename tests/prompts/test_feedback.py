"""Refinement feedback: trimmed build logs, mismatch reports, status and rule, timings, kernel share."""

from __future__ import annotations

from kbench.prompts import feedback, refine_message, trim_log
from kbench.types import BuildResult, Correctness, Status, TimingStats, Verdict


def _v(status: Status, **kw: object) -> Verdict:
    return Verdict(status, "kbench:2/1", "cuda", "full", "fp32", "cuda:0", **kw)  # type: ignore[arg-type]


def _stats(ms: float) -> TimingStats:
    return TimingStats(ms, ms, 0.0, 0.0, ms, 100, 0.01, device="cuda:0")


def test_build_log_trimmed_to_errors() -> None:
    noise = [f"[{i}/3] c++ -O3 -I/usr/include/very/long/path ..." for i in range(1, 4)]
    log = "\n".join(
        [*noise, *[f"warning line {i}" for i in range(200)], "main.cu(12): error: identifier \"x\" is undefined",
         "    y = x + 1;", "        ^", "more noise", "ninja: build stopped: subcommand failed."]
    )  # fmt: skip
    v = _v(Status.BUILD_ERROR, message="nvcc failed", build=BuildResult(False, "cuda", log=log))
    text = feedback(v)
    assert 'identifier "x" is undefined' in text and "    y = x + 1;" in text
    assert "warning line 5" not in text and "[1/3]" not in text and "ninja: build stopped" not in text
    assert text.startswith("Result of your previous answer: build_error. nvcc failed")


def test_trim_log_without_errors_keeps_the_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(100))
    assert trim_log(log, max_lines=5).splitlines() == [f"line {i}" for i in range(95, 100)]


def test_trim_log_caps_many_errors() -> None:
    out = trim_log("\n".join(f"error {i}" for i in range(100)), max_lines=10)
    assert len(out.splitlines()) == 11 and "90 more lines" in out


def test_mismatch_and_rule() -> None:
    c = Correctness(
        False, (1, 2), max_abs_err=0.5, max_rel_err=2.0, report="first mismatch at [0, 3]: 1.5 vs 1.0"
    )
    text = feedback(_v(Status.MISMATCH, correctness=c))
    assert "max abs error 0.5" in text and "first mismatch at [0, 3]" in text
    cheat = feedback(_v(Status.CHEAT, rule="no-torch-fallback", message="no own kernel ran"))
    assert "cheat (rule: no-torch-fallback). no own kernel ran" in cheat


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
    assert "Fix the problem" in refine_message("triton", _v(Status.RUNTIME_ERROR, log_tail="Traceback: boom"))
    none = refine_message("cpp", None, "no code block and no `class ModelNew` in the completion")
    assert "No usable code" in none and "C++ (CPU) kernels" in none
