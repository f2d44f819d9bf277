"""The static-rule registry: each rule is a function registered by name with a severity and a rationale.

A rule reads a CheckContext and yields Hits; run_checks (checks/__init__.py) turns hits into Findings.
The rationale is the rule function's docstring: it says which way of gaming a benchmark the rule stops.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kbench.checks.context import CheckContext
from kbench.errors import ConfigError
from kbench.types import Severity


@dataclass(frozen=True)
class Hit:
    """One place a rule fired. `severity` overrides the rule's default (e.g. a weaker C++ variant)."""

    line: int
    message: str
    severity: Severity | None = None


RuleFn = Callable[[CheckContext], Iterable[Hit]]


@dataclass(frozen=True)
class Rule:
    name: str
    severity: Severity
    fn: RuleFn
    backends: tuple[str, ...] = ()  # empty: every backend

    @property
    def rationale(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")

    def applies(self, backend: str) -> bool:
        return not self.backends or backend in self.backends

    def run(self, ctx: CheckContext) -> Iterator[Hit]:
        yield from self.fn(ctx)


RULES: dict[str, Rule] = {}


def register_rule(
    name: str, severity: Severity = Severity.REJECT, backends: tuple[str, ...] = ()
) -> Callable[[RuleFn], RuleFn]:
    """Register a static rule; its docstring is the rationale shown in docs and `--explain` output."""

    def deco(fn: RuleFn) -> RuleFn:
        if name in RULES:
            raise ValueError(f"static rule {name!r} registered twice")
        if not (fn.__doc__ or "").strip():
            raise ValueError(f"static rule {name!r} needs a rationale docstring")
        RULES[name] = Rule(name=name, severity=severity, fn=fn, backends=backends)
        return fn

    return deco


def get_rule(name: str) -> Rule:
    try:
        return RULES[name]
    except KeyError:
        raise ConfigError(f"unknown static rule {name!r}; known rules: {', '.join(sorted(RULES))}") from None
