"""Evaluation protocols: the rules a run's numbers follow, chosen by name (`kbench run --protocol`).

A protocol fixes what decides correctness (the tolerance, its absolute term and the number of fixed input
seeds) and what decides fast_p (a metrics.FastRule). kbench's anti-cheat is the same under every protocol:
the static checks, the per-run secret seed, input checksums, output type checks, the checks of outputs
produced while timed, the kernel-use check. Only the rules of the numbers change.

- `kbench`: each problem's own tolerance (fp32 1e-4, fp16/bf16 1e-2 unless the file says otherwise) with
  an absolute term scaled by the output's magnitude, |out-ref| <= tol*(min(1, rms(ref)) + |ref|); the
  run's `seeds` fixed seeds; fast_p on median speedups with the 95 % interval and the noise floor.
- `kernelbench`: upstream KernelBench's published rules (its v0/v0.1 evaluation, the one its paper's
  numbers follow): torch.allclose(atol=rtol=1e-2) for every dtype, 5 correctness trials (the default of
  its scripts/eval_from_generations.py), fast_p = mean speedup > p over all problems. Upstream's main
  branch has since judged fp32 at 1e-4 (src/kernelbench/eval.py, get_tolerance_for_precision); the
  comparison page (docs/kernelbench-comparison.md) says what else differs.

A run is evaluated under one protocol (stored in its configuration); a report can show the fast_p rule
of any protocol over its verdicts, and says which protocol judged their correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kbench import metrics as m
from kbench.errors import ConfigError
from kbench.types import DEFAULT_TOLERANCE, AllcloseTolerance, Problem

if TYPE_CHECKING:
    from kbench.config import RunConfig

DEFAULT = "kbench"


@dataclass(frozen=True)
class Protocol:
    name: str
    source: str  # where the rules come from, for reports
    tolerance: tuple[tuple[str, float], ...] = ()  # per dtype; empty: each problem's own
    allclose: bool = False  # absolute term = tol (torch.allclose); False: tol * min(1, rms(ref))
    seeds: int | None = None  # fixed correctness seeds; None: the run's `seeds` setting
    rule: m.FastRule = m.KBENCH_RULE  # fast_p (its noise floor is the run's own for kbench's rule)

    def fast_rule(self, floor: float) -> m.FastRule:
        """This protocol's fast_p rule with the noise floor `floor` (used by interval rules only)."""
        return replace(self.rule, floor=floor) if self.rule.interval else self.rule

    def problem(self, problem: Problem) -> Problem:
        """`problem` with this protocol's tolerances (unchanged under a protocol that keeps its own)."""
        if not self.tolerance:
            return problem
        kind = AllcloseTolerance if self.allclose else float
        return replace(problem, tolerance=tuple((d, kind(t)) for d, t in self.tolerance))

    def problems(self, problems: Sequence[Problem]) -> list[Problem]:
        return [self.problem(p) for p in problems]

    def configure(self, cfg: RunConfig) -> RunConfig:
        """`cfg` with this protocol's number of seeds, unless the configuration sets `seeds` itself."""
        if self.seeds is None or "seeds" in cfg.model_fields_set:
            return cfg
        return cfg.model_copy(update={"seeds": self.seeds})

    def correctness(self, dtype: str, seeds: int) -> str:
        """How this protocol judged correctness, in one line (e.g. for a report's run table)."""
        tol = dict(self.tolerance).get(dtype)
        if self.allclose:
            rule = f"allclose(atol=rtol={tol:g})"
        elif tol is None:
            rule = (
                f"tol {DEFAULT_TOLERANCE.get(dtype, 0):g} (or the problem's own) x (min(1, rms(ref)) + |ref|)"
            )
        else:
            rule = f"tol {tol:g} x (min(1, rms(ref)) + |ref|)"
        return f"{self.name}: {dtype} {rule}, {seeds} seeds + 1 secret seed"


PROTOCOLS: dict[str, Protocol] = {
    "kbench": Protocol("kbench", "kbench's own rules"),
    "kernelbench": Protocol(
        "kernelbench",
        "upstream KernelBench's published rules (v0.1)",
        tolerance=(("bf16", 1e-2), ("fp16", 1e-2), ("fp32", 1e-2)),
        allclose=True,
        seeds=5,
        rule=m.UPSTREAM_RULE,
    ),
}


def get_protocol(name: str) -> Protocol:
    found = PROTOCOLS.get(name)
    if found is None:
        raise ConfigError(f"unknown protocol {name!r}; use one of: {', '.join(PROTOCOLS)}")
    return found


def parse_protocols(text: str) -> list[Protocol]:
    """`kbench,kernelbench` -> the protocols, in order (an unknown name is a ConfigError listing the known)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"no protocol named; use one or more of: {', '.join(PROTOCOLS)}")
    return [get_protocol(n) for n in dict.fromkeys(names)]
