"""Run records in SQLite: runs, verdicts (resumable, never duplicated), baselines, problem metadata, SOL."""

from kbench.store.codec import RecordError, from_dict, to_dict
from kbench.store.db import (
    ProblemMeta,
    RequestRecord,
    RunInfo,
    Store,
    StoredVerdict,
    VerdictKey,
    new_run_id,
)
from kbench.store.schema import SCHEMA_VERSION, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "ProblemMeta",
    "RecordError",
    "RequestRecord",
    "RunInfo",
    "Store",
    "StoreError",
    "StoredVerdict",
    "VerdictKey",
    "from_dict",
    "new_run_id",
    "to_dict",
]
