"""Verdict -> the text a model reads in its next turn: what failed, where, and how fast it ran.

Build logs and tracebacks go through prompts/logs.py: the first compiler errors in the candidate's own
code (file:line, the offending line, the line in its Python file), the candidate's own frames of a
traceback, no host paths, no kbench internals, each error once, at most logs.MAX_BYTES per section.
"""

from __future__ import annotations

from kbench.prompts.builder import backend_title, template
from kbench.prompts.logs import (
    candidate_traceback,
    compiler_errors,
    last_lines,
    strip_paths,
    whole_lines,
)
from kbench.types import Status, Verdict

# Statuses whose message is a traceback (the worker's `_failure`), shown as the candidate's frames.
TRACEBACK = (Status.LOAD_ERROR, Status.RUNTIME_ERROR, Status.OOM)
# Statuses where the worker's own output (its log tail) tells what happened.
LOG_TAIL = (Status.CRASHED, Status.TIMEOUT)


def _timing_lines(v: Verdict) -> list[str]:
    if v.timing is None:
        return []
    t = v.timing
    note = "" if t.meaningful else " (interpreter run: not a meaningful speed)"
    lines = [f"Your model: {t.median_ms:.4g} ms median over {t.n} runs on {t.device}{note}."]
    for mode, base in v.baselines:
        speedup = v.speedup(mode)
        ratio = f", speed-up {speedup:.2f}x" if speedup is not None else ""
        lines.append(f"PyTorch {mode}: {base.median_ms:.4g} ms{ratio}.")
    if v.kernel_share is not None:
        lines.append(
            f"{v.kernel_share:.0%} of device time was spent in kernels defined in your source; "
            "the rest ran in PyTorch or library kernels."
        )
    if v.sol_ms is not None:
        lines.append(f"Speed-of-light estimate for this problem: {v.sol_ms:.4g} ms.")
    return lines


def _first_line(v: Verdict) -> str:
    return strip_paths(whole_lines(v.message).strip().split("\n", 1)[0]) if v.message else ""


def _status_line(v: Verdict, detailed: bool) -> str:
    """Status and rule; the message's first line unless a section below holds it."""
    line = f"Result of your previous answer: {v.status.value}"
    if v.rule:
        line += f" (rule: {v.rule})"
    first = _first_line(v)[:300]
    if v.status is Status.BUILD_ERROR:
        first = "your code did not compile"
    return line + (f". {first}" if first and not detailed else ".")


def _in_report(v: Verdict) -> bool:
    """Whether the mismatch report shown below starts with the message's first line (a mismatch's message
    is its report, so the status line would say it twice)."""
    c, first = v.correctness, _first_line(v)
    return bool(c is not None and not c.passed and c.report and first and first in strip_paths(c.report))


def _error_sizes(v: Verdict) -> str:
    c = v.correctness
    if c is None or c.passed:
        return ""
    return f"max abs error {c.max_abs_err:.3g}, max rel error {c.max_rel_err:.3g}"


def reason(v: Verdict) -> str:
    """One line on why a verdict is not ok, for a live progress line: the first compiler error or the
    exception, without paths ('' for ok)."""
    if v.ok:
        return ""
    if v.status is Status.BUILD_ERROR:
        log = v.build.log if v.build is not None and v.build.log else v.message
        first = (compiler_errors(log) or compiler_errors(v.message)).split("\n", 1)[0]
        return first or "did not compile"
    text = whole_lines(v.message).strip()
    if v.status in TRACEBACK:
        text = candidate_traceback(text).splitlines()[-1] if text else ""
    line = strip_paths(text.split("\n", 1)[0])
    sizes = _error_sizes(v)
    if sizes:  # the report's first line ends where its positions start; the sizes say how far off
        line = line.removesuffix("; first positions:")
        line = f"{line} ({sizes})" if line else sizes
    return line


def _log_section(v: Verdict, source: str) -> str:
    """The one log section for this verdict ('' when there is none): compiler errors, the candidate's
    frames of a traceback, or the worker's output."""
    if v.status is Status.BUILD_ERROR:
        log = v.build.log if v.build is not None and v.build.log else v.message
        errors = compiler_errors(log, source) or compiler_errors(v.message, source)
        if errors:
            return f"Compiler errors in your code (the first ones):\n```\n{errors}\n```"
        text = candidate_traceback(v.message or log)
        return f"Build failure:\n```\n{text}\n```" if text else ""
    if v.status in TRACEBACK and v.message:
        return f"Error:\n```\n{candidate_traceback(v.message)}\n```"
    if v.status in LOG_TAIL and v.log_tail.strip():
        tail = last_lines(strip_paths(v.log_tail).strip())
        return f"Output of your code before it stopped:\n```\n{tail}\n```"
    return ""


def feedback(verdict: Verdict, source: str = "") -> str:
    """What the evaluator found, for the model: status and rule, errors, mismatches, timings.

    `source` is the candidate's Python file: compiler errors found in it also name its line numbers.
    """
    log = _log_section(verdict, source)
    detailed = (bool(log) and verdict.status not in LOG_TAIL) or _in_report(verdict)
    parts = [_status_line(verdict, detailed)]
    for f in verdict.checks.findings:
        parts.append(f"Static check {f.rule} ({f.severity.value}) at line {f.line}: {f.message}")
    if log:
        parts.append(log)
    c = verdict.correctness
    if c is not None and not c.passed:
        parts.append(
            f"Outputs differ from the reference: {_error_sizes(verdict)}, mean abs error {c.mean_abs_err:.3g}."
        )
        if c.report:
            parts.append(strip_paths(c.report.strip()))
    parts.extend(_timing_lines(verdict))
    parts.extend(f"Warning: {strip_paths(w)}" for w in verdict.warnings)
    return "\n\n".join(parts)


def refine_message(backend: str, verdict: Verdict | None, no_code_reason: str = "", source: str = "") -> str:
    """The next user turn: the feedback and what to do about it (`source`: the candidate's file)."""
    if verdict is None:
        text = f"No usable code was found in your previous answer: {no_code_reason}."
        instruction = "Answer again with the complete code."
    elif verdict.ok:
        text = feedback(verdict, source)
        instruction = (
            "The answer is correct. Make it faster: fuse more operators, cut memory traffic, tune the tiling."
        )
    else:
        text = feedback(verdict, source)
        instruction = "Fix the problem above."
    return template("refine.md", feedback=text, instruction=instruction, backend_name=backend_title(backend))
