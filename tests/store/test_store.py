"""The results store: verdict round trip, idempotent record, baselines, SOL, problems, migrations."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from kbench.store import (
    SCHEMA_VERSION,
    MessageRecord,
    RequestRecord,
    Store,
    StoreError,
    VerdictKey,
    from_dict,
    to_dict,
)
from kbench.store.journal import Journal
from kbench.store.schema import migrate
from kbench.types import (
    BuildResult,
    CheckReport,
    ClockFacts,
    Correctness,
    Finding,
    LoopFacts,
    Problem,
    Provenance,
    Severity,
    Status,
    TimingStats,
    UpstreamFacts,
    Verdict,
)

HW = {"gpu": "NVIDIA H200", "driver": "570.1", "cuda": "12.8", "torch": "2.13.0", "device": "cuda"}


def full_verdict() -> Verdict:
    loop = LoopFacts(batch=20, calls=4000, checked=57, warmup_s=0.06, warmup_calls=40, warmup_end="settled",
                     stop="done", split_ms=(("run", 10.2), ("charged", 9.9)), timed_kernel_share=0.91)  # fmt: skip
    clock = ClockFacts((1755.0, 1980.0), (41.0, 44.0), True, 12, ("sw_power_cap",))
    t = TimingStats(0.5, 0.51, 0.01, 0.02, 0.49, 200, 0.002, device="cuda", loop=loop, clock=clock)
    eager = replace(t, provenance=Provenance("store", '{"budget_s": 5.0}', "2026-01-02 03:04:05"))
    upstream = TimingStats(
        0.7, 0.7, 0.0, 0.0, 0.6, 100, 0.0, "cuda", "upstream", upstream=UpstreamFacts("H100", 0.9)
    )
    return Verdict(
        status=Status.CHEAT,
        problem_key="kbench:2/1",
        backend="cuda",
        preset="full",
        dtype="bf16",
        device="cuda",
        message="outputs alias the inputs",
        rule="output-aliasing",
        log_tail="line1\nline2",
        candidate_digest="abc",
        checks=CheckReport((Finding("no-torch-fallback", Severity.WARN, "uses torch.matmul", 12),)),
        build=BuildResult(True, "cuda", 41.5, False, "ok", ("fused_kernel",)),
        correctness=Correctness(True, (1, 2, 99), 1e-6, 1e-7, 1e-5, ""),
        timing=t,
        baselines=(("eager", eager), ("compile", upstream)),
        kernel_share=0.93,
        sol_ms=0.1,
        warnings=("clocks moved 7 %",),
        seconds=12.5,
    )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "runs" / "kbench.db")


def test_verdict_round_trips_with_every_nested_field(store: Store) -> None:
    run = store.start_run({"model": "x", "store": Path("a")}, HW)
    v = full_verdict()
    key = VerdictKey("kbench:2/1", 0, 0, "cuda", "openai/x")
    assert store.record(run, key, v, "class ModelNew: ...", "```python ...```") is True
    [stored] = store.records(run)
    assert stored.verdict == v
    assert stored.key == key
    assert (stored.candidate_source, stored.completion_text) == ("class ModelNew: ...", "```python ...```")
    assert store.verdicts(run) == [(key, v)]


def test_reading_is_tolerant_of_unknown_and_missing_keys() -> None:
    data = to_dict(full_verdict())
    data["added_in_a_later_version"] = 1
    data["timing"]["another_new_stat"] = 2.0
    del data["warnings"], data["kernel_share"]
    back = from_dict(Verdict, data)
    assert back.warnings == () and back.kernel_share is None
    assert back.timing == full_verdict().timing


def test_a_timings_facts_are_nested_objects_with_named_fields() -> None:
    data = json.loads(json.dumps(to_dict(full_verdict())))
    timing = data["timing"]
    assert timing["loop"]["calls"] == 4000 and timing["loop"]["warmup_end"] == "settled"
    assert timing["clock"]["sm_clock_mhz"] == [1755.0, 1980.0] and timing["provenance"] is None
    eager, upstream = (stats for _, stats in data["baselines"])
    assert eager["provenance"]["stored_at"] == "2026-01-02 03:04:05" and upstream["upstream"]["max_ms"] == 0.9


def _as_extra(stats: dict[str, object], pairs: list[list[object]]) -> dict[str, object]:
    """A timing record as it holds its facts in an `extra` list of [key, value] pairs, without groups."""
    groups = ("loop", "clock", "provenance", "upstream")
    return {k: v for k, v in stats.items() if k not in groups} | {"extra": pairs}


def test_a_timing_recorded_as_an_extra_list_loads_into_its_groups() -> None:
    """A record holding a timing's facts as `extra`, a list of [key, value] pairs, reads them into the
    typed groups; a key no group knows is dropped."""
    data = to_dict(full_verdict())
    data["timing"] = _as_extra(data["timing"], [
        ["batch", 20], ["calls", 4000], ["stop", "budget"], ["warmup", [0.25, 31, "full"]],
        ["split_ms", [["run", 10.2]]], ["timing_lock", "busy"], ["timed_kernel_share", [None, 12]],
        ["sm_clock_mhz", [1700, 1980]], ["clocks_moved", True], ["clock_limits", ["hw_slowdown"]],
        ["threads", 4], ["launch_ms", 0.1],
    ])  # fmt: skip
    (_, eager), (_, upstream) = data["baselines"]
    data["baselines"] = [
        [
            "eager",
            _as_extra(eager, [["source", "store"], ["timing_settings", "{}"], ["stored_at", "2025-12"]]),
        ],
        ["compile", _as_extra(upstream, [["hardware", "H100"], ["max_ms", 1], ["median_known", True]])],
    ]
    back = from_dict(Verdict, data)
    t = back.timing
    assert t is not None and t.loop is not None and t.clock is not None and t.median_ms == 0.5
    assert t.loop == LoopFacts(
        batch=20, calls=4000, stop="budget", warmup_s=0.25, warmup_calls=31, warmup_end="full",
        split_ms=(("run", 10.2),), timing_lock_busy=True, timed_kernel_share=None, timed_share_samples=12,
    )  # fmt: skip
    assert t.clock == ClockFacts(
        sm_clock_mhz=(1700.0, 1980.0), clocks_moved=True, clock_limits=("hw_slowdown",)
    )
    assert t.provenance is None and t.upstream is None
    eager_back, upstream_back = back.baseline("eager"), back.baseline("compile")
    assert eager_back is not None and eager_back.loop is None
    assert eager_back.provenance == Provenance("store", "{}", "2025-12")
    assert upstream_back is not None and upstream_back.upstream == UpstreamFacts("H100", 1.0, True)


def test_record_is_idempotent_per_key(store: Store) -> None:
    run = store.start_run({}, HW, "r1")
    key = VerdictKey("kbench:2/1", 1, 0, "cuda", "m")
    assert store.record(run, key, full_verdict(), "src")
    assert not store.record(run, key, full_verdict(), "other src")
    assert store.done_keys(run) == {key}
    assert store.records(run)[0].candidate_source == "src"
    assert store.run(run).verdicts == 1 and store.run(run).ok == 0


def test_start_run_resumes_an_existing_id(store: Store) -> None:
    run = store.start_run({"a": 1}, HW)
    assert store.start_run({"a": 2}, HW, run) == run
    info = store.run(run)
    assert info.config == {"a": 1} and info.hardware["gpu"] == "NVIDIA H200"
    assert info.fingerprint and info.kbench_version
    assert [r.run_id for r in store.runs()] == [run]


def test_runs_list_the_backends_and_models_of_their_verdicts(store: Store) -> None:
    run = store.start_run({"model": "", "backend": "cuda"}, HW, "ref")
    for backend in ("cpp", "triton"):
        store.record(run, VerdictKey("kbench:2/1", 0, 0, backend, f"reference/{backend}"), full_verdict(), "")
    info = store.run(run)
    assert info.backends == ("cpp", "triton") and info.models == ("reference/cpp", "reference/triton")
    assert store.run(store.start_run({}, HW, "empty")).backends == ()


def test_run_problems_keep_their_order_and_requests_round_trip(store: Store) -> None:
    run = store.start_run({}, HW, "r")
    store.put_run_problems(run, ["kbench:2/10", "kbench:2/2", "kbench:1/7"])
    store.put_run_problems(run, ["kbench:2/2", "kbench:2/3"])  # a resume adds nothing twice
    assert store.run_problems(run) == ["kbench:2/10", "kbench:2/2", "kbench:1/7", "kbench:2/3"]
    asked = [
        RequestRecord("kbench:2/10", 0, 0, False, "", 120, 80, 0.002, 1.5),
        RequestRecord("kbench:2/10", 1, 0, True, "", 120, 80, 0.0, 0.0),
        RequestRecord("kbench:2/2", 0, 0, False, "HTTP 429 rate limited (after 8 retries)", 0, 0, 0.0, 30.0),
    ]
    for r in asked:
        store.record_request(run, r)
    assert store.requests(run) == asked and store.requests("other") == []


def test_messages_are_kept_per_turn_once_and_go_with_a_dropped_run(store: Store) -> None:
    run = store.start_run({}, HW, "told")
    sent = [
        MessageRecord("kbench:2/1", 0, 1, "user", "Result of your previous answer: mismatch."),
        MessageRecord("kbench:2/1", 0, 0, "user", "Write ModelNew."),
        MessageRecord("kbench:2/1", 0, 0, "system", "You write kernels."),
    ]
    for m in sent:
        store.record_message(run, m)
    store.record_message(run, MessageRecord("kbench:2/1", 0, 1, "user", "asked again on resume"))
    got = store.messages(run)
    assert got == [sent[2], sent[1], sent[0]]  # by turn, the system prompt first
    assert [m.kind for m in got] == ["system prompt", "prompt", "feedback"]
    assert store.drop_run_if_empty(run) and store.messages(run) == []


def test_only_an_empty_run_is_dropped(store: Store) -> None:
    empty, used, asked = (store.start_run({}, HW, name) for name in ("empty", "used", "asked"))
    store.put_run_problems(empty, ["kbench:2/1"])
    store.record(used, VerdictKey("kbench:2/1"), full_verdict(), "")
    store.record_request(asked, RequestRecord("kbench:2/1", 0, 0, False, "timed out", 0, 0, 0.0, 1.0))
    assert store.drop_run_if_empty(empty) and {r.run_id for r in store.runs()} == {"used", "asked"}
    assert not store.drop_run_if_empty(used) and not store.drop_run_if_empty(asked)
    assert store.run_problems(empty) == []


def test_unknown_run_is_a_clear_error(store: Store) -> None:
    with pytest.raises(StoreError, match="no run 'nope'"):
        store.run("nope")
    with pytest.raises(StoreError, match="start_run"):
        store.record("nope", VerdictKey("k"), full_verdict(), "")


def test_baselines_are_keyed_by_hardware_and_torch(store: Store) -> None:
    t = TimingStats(2.0, 2.1, 0.1, 0.1, 1.9, 100, 0.004)
    store.put_baseline("kbench:2/1", "full", "fp32", "eager", "fp1", "2.13.0", t)
    assert store.get_baseline("kbench:2/1", "full", "fp32", "eager", "fp1", "2.13.0") == t
    assert store.get_baseline("kbench:2/1", "full", "fp32", "eager", "fp2", "2.13.0") is None
    assert store.get_baseline("kbench:2/1", "full", "fp32", "compile", "fp1", "2.13.0") is None
    newer = TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 50, 0.001)
    store.put_baseline("kbench:2/1", "full", "fp32", "eager", "fp1", "2.13.0", newer)
    assert store.get_baseline("kbench:2/1", "full", "fp32", "eager", "fp1", "2.13.0") == newer
    assert len(store.baselines("fp1")) == 1 and store.baselines("fp2") == []


def test_sol_and_problem_metadata(store: Store) -> None:
    store.put_sol("kbench:2/1", "full", "NVIDIA H200", 0.125)
    assert store.get_sol("kbench:2/1", "full", "NVIDIA H200") == 0.125
    assert store.get_sol("kbench:2/1", "small", "NVIDIA H200") is None
    p = Problem("kbench", 2, 1, "Gemm_ReLU", "code", tags=("gemm-epilogue", "activation"))
    store.put_problems([p])
    meta = store.problems()["kbench:2/1"]
    assert (meta.level, meta.name, meta.tags, meta.code_hash) == (2, "Gemm_ReLU", p.tags, p.code_hash)


def test_wal_mode(store: Store) -> None:
    assert store._rows("PRAGMA journal_mode")[0][0] == "wal"


def test_a_v1_database_is_migrated_and_keeps_its_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, target=1) == 1
    db.execute("INSERT INTO runs VALUES ('old', '2025-01-01', '{}', '{}', 'fp', '0.0.1', NULL)")
    row = (
        "old",
        "kbench:2/1",
        0,
        0,
        "cuda",
        "m",
        "cheat",
        "output-aliasing",
        json.dumps(to_dict(full_verdict())),
    )
    db.execute(
        "INSERT INTO verdicts (run_id, problem_key, sample, turn, backend, model, status, rule, verdict, "
        "candidate_source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'src', '2025-01-01')",
        row,
    )
    with pytest.raises(sqlite3.OperationalError):
        db.execute("SELECT * FROM sol")
    db.close()

    store = Store(path)
    assert store.schema_version == SCHEMA_VERSION == 7
    [rec] = store.records("old")
    assert rec.verdict == full_verdict() and rec.completion_text == ""
    store.put_sol("kbench:2/1", "full", "g", 1.0)  # v2 tables exist
    versions = [r[0] for r in store._rows("SELECT version FROM schema_version ORDER BY version")]
    assert versions == [1, 2, 3, 4, 5, 6, 7]
    assert store.run_problems("old") == [] and store.requests("old") == []  # v3 tables exist, empty
    assert store.messages("old") == []  # and v4's
    assert Journal(store).open_jobs("old") == []  # and v5's
    assert store.transcript("old") == []  # and v6's
    assert "priority" in {r[1] for r in store._rows("PRAGMA table_info(service_jobs)")}  # and v7's
    store.close()
    assert Store(path).schema_version == 7  # reopening does not migrate twice


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Store(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO schema_version VALUES (99, 'later')")
    db.close()
    with pytest.raises(StoreError, match="upgrade kbench"):
        Store(path)
