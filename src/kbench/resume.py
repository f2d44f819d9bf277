"""`--resume RUN`: the run continues under its stored configuration, whatever the command line leaves out.

A resumed run that took today's defaults instead would ask other questions into the old run (another
backend, every problem of the suite, a different temperature) and mix two experiments under one id. So
the stored configuration comes back whole; a setting given again must equal the stored one, else the
command fails listing every difference. Settings that change how the run is carried out but not what it
measures (OPERATIONAL: concurrency, executor, where caches and the server live) may be given anew.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kbench.config import RunConfig
from kbench.errors import ConfigError

OPERATIONAL = frozenset(
    {
        "api_key_env",
        "base_url",
        "builders",
        "cache_dir",
        "concurrency",
        "cpu_lane",
        "cpu_lanes",
        "executor",
        "fast_builds",
        "gpu_slots",
        "llm_retries",
        "op_headers",
        "precompiled_headers",
        "ray_address",
        "response_cache",
        "run_id",
        "scratch_dir",
        "store",
        "worker_start",
    }
)


def stored_config(run_id: str, stored: dict[str, Any]) -> RunConfig:
    """The RunConfig a run was stored with (settings this kbench no longer knows are dropped)."""
    known = {k: v for k, v in stored.items() if k in RunConfig.model_fields}
    try:
        return RunConfig(**known)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(
            f"run {run_id}: its stored setting '{where}' is not valid: {first['msg']}"
        ) from None


def differences(old: RunConfig, given: RunConfig) -> list[str]:
    """`name value (stored value)` for each setting `given` sets explicitly that measures differently."""
    out = []
    for name in sorted(given.model_fields_set - OPERATIONAL):
        new, was = getattr(given, name), getattr(old, name)
        if new != was:
            out.append(f"{name} {new!r} (stored {was!r})")
    return out


def restore(run_id: str, stored: dict[str, Any], given: RunConfig) -> RunConfig:
    """The stored configuration, with the operational settings `given` sets; ConfigError on a conflict."""
    old = stored_config(run_id, stored)
    diff = differences(old, given)
    if diff:
        raise ConfigError(
            f"--resume {run_id}: settings differ from the run's stored configuration: {'; '.join(diff)}. "
            "Leave them out to continue the run as it was, or start a new run"
        )
    return old.model_copy(update={k: getattr(given, k) for k in given.model_fields_set & OPERATIONAL})
