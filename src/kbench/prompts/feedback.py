"""Verdict -> the text a model reads in its next turn: what failed, where, and how fast it ran.

Build logs of a torch extension run to thousands of lines (ninja commands, include chains, warnings);
the model needs the error lines and a little context, so feedback keeps at most MAX_LOG_LINES of them.
"""

from __future__ import annotations

import re

from kbench.prompts.builder import BACKEND_NAMES, template
from kbench.types import Status, Verdict

MAX_LOG_LINES = 40
CONTEXT_AFTER = 2  # compiler errors put the offending source line and a caret under the message
_ERROR_RE = re.compile(r"\berror\b|Error:|Traceback|Exception|undefined reference|fatal", re.IGNORECASE)
_NOISE_RE = re.compile(r"^\[\d+/\d+\] |^ninja: build stopped|^FAILED: |^\s*$")


def trim_log(log: str, max_lines: int = MAX_LOG_LINES) -> str:
    """Error lines with CONTEXT_AFTER lines each, without ninja noise; else the log's last lines."""
    lines = [line for line in log.splitlines() if not _NOISE_RE.search(line)]
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR_RE.search(line):
            keep.extend(range(i, min(len(lines), i + CONTEXT_AFTER + 1)))
    picked = sorted(set(keep)) if keep else list(range(max(0, len(lines) - max_lines), len(lines)))
    out = [lines[i] for i in picked[:max_lines]]
    if len(picked) > max_lines:
        out.append(f"... ({len(picked) - max_lines} more lines)")
    return "\n".join(out)


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


def _status_line(v: Verdict) -> str:
    line = f"Result of your previous answer: {v.status.value}"
    if v.rule:
        line += f" (rule: {v.rule})"
    return line + (f". {v.message}" if v.message else ".")


def feedback(verdict: Verdict) -> str:
    """What the evaluator found, for the model: status and rule, errors, mismatches, timings."""
    parts = [_status_line(verdict)]
    for f in verdict.checks.findings:
        parts.append(f"Static check {f.rule} ({f.severity.value}) at line {f.line}: {f.message}")
    log = verdict.build.log if verdict.build is not None and not verdict.build.ok else ""
    if verdict.status is not Status.BUILD_ERROR and not log:
        log = verdict.log_tail if verdict.status is not Status.OK else ""
    if log.strip():
        what = "Build log" if verdict.status is Status.BUILD_ERROR else "Log"
        parts.append(f"{what} (trimmed to the relevant lines):\n```\n{trim_log(log)}\n```")
    c = verdict.correctness
    if c is not None and not c.passed:
        parts.append(
            f"Outputs differ from the reference: max abs error {c.max_abs_err:.3g}, "
            f"max rel error {c.max_rel_err:.3g}, mean abs error {c.mean_abs_err:.3g}."
        )
        if c.report:
            parts.append(c.report.strip())
    parts.extend(_timing_lines(verdict))
    parts.extend(f"Warning: {w}" for w in verdict.warnings)
    return "\n\n".join(parts)


def refine_message(backend: str, verdict: Verdict | None, no_code_reason: str = "") -> str:
    """The next user turn: the feedback and what to do about it."""
    if verdict is None:
        text = f"No usable code was found in your previous answer: {no_code_reason}."
        instruction = "Answer again with the complete code."
    elif verdict.ok:
        text = feedback(verdict)
        instruction = (
            "The answer is correct. Make it faster: fuse more operators, cut memory traffic, tune the tiling."
        )
    else:
        text = feedback(verdict)
        instruction = "Fix the problem above."
    return template("refine.md", feedback=text, instruction=instruction, backend_name=BACKEND_NAMES[backend])
