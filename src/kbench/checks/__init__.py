"""Static checks: AST rules over a candidate's Python (and the C/C++/CUDA text in its string literals).

`run_checks(source, backend, dtype)` runs every registered rule and returns a CheckReport. Findings carry
the bare rule name (`try-fallback`); a verdict names it `static:<name>` (see `verdict_rule`). A candidate
that does not parse gets the single reject finding `syntax`; the evaluator reports that as `load_error`
(the file cannot be imported), not as `static_reject`, since it is a broken candidate rather than a trick.

Static checks are a first filter: the runtime protocol (worker/candidate.py) catches the same tricks by their
effect. A rule may only fire on code that has no honest reason to exist in a kernel candidate.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbench.checks import rules_harness as _rules_harness  # noqa: F401  (registers rules)
from kbench.checks import rules_kernel as _rules_kernel  # noqa: F401  (registers rules)
from kbench.checks import rules_state as _rules_state  # noqa: F401  (registers rules)
from kbench.checks.context import CheckContext
from kbench.checks.kernels import kernel_names
from kbench.checks.registry import RULES, Rule, get_rule, register_rule
from kbench.types import CheckReport, Finding, Severity

__all__ = [
    "RULES",
    "SYNTAX_RULE",
    "Rule",
    "get_rule",
    "kernel_names",
    "register_rule",
    "run_checks",
    "verdict_rule",
]

SYNTAX_RULE = "syntax"
STATIC_PREFIX = "static:"


def run_checks(
    source: str, backend: str, dtype: str = "fp32", rules: Iterable[str] | None = None
) -> CheckReport:
    """Run the static rules (all by default, or the named ones) on `source`; never imports it."""
    try:
        ctx = CheckContext.parse(source, backend, dtype)
    except SyntaxError as exc:
        msg = f"candidate does not parse: {exc.msg}"
        return CheckReport((Finding(SYNTAX_RULE, Severity.REJECT, msg, exc.lineno or 0),))
    selected = [get_rule(n) for n in rules] if rules is not None else list(RULES.values())
    findings: list[Finding] = []
    for rule in selected:
        if not rule.applies(backend):
            continue
        seen: set[tuple[int, str]] = set()
        for hit in rule.run(ctx):
            if (hit.line, hit.message) in seen:
                continue
            seen.add((hit.line, hit.message))
            findings.append(Finding(rule.name, hit.severity or rule.severity, hit.message, hit.line))
    findings.sort(key=lambda f: (f.severity is not Severity.REJECT, f.line))
    return CheckReport(tuple(findings))


def verdict_rule(finding: Finding) -> str:
    """The Verdict.rule string for a static finding, e.g. `static:try-fallback`."""
    return STATIC_PREFIX + finding.rule
