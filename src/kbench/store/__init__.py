"""Run records in SQLite: runs, verdicts (resumable, never duplicated), LLM requests and the messages a run
sent, baselines, problem metadata, SOL."""

from kbench.store.codec import RecordError, from_dict, to_dict
from kbench.store.db import Store, new_run_id
from kbench.store.records import (
    MessageRecord,
    ProblemMeta,
    RequestRecord,
    RunInfo,
    StoredVerdict,
    TranscriptStep,
    VerdictKey,
)
from kbench.store.schema import SCHEMA_VERSION, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "MessageRecord",
    "ProblemMeta",
    "RecordError",
    "RequestRecord",
    "RunInfo",
    "Store",
    "StoreError",
    "StoredVerdict",
    "TranscriptStep",
    "VerdictKey",
    "from_dict",
    "new_run_id",
    "to_dict",
]
