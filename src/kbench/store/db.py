"""The results database: runs, verdicts, LLM requests and messages, problem metadata, baselines, SOL.

SQLite in WAL mode: readers (a report) never block the writer (a run), and every verdict is written in
its own transaction, so a run killed with SIGKILL keeps every verdict it finished. The verdict key is
unique per run, so resuming a run (skipping `done_keys`) can never duplicate a verdict.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbench.store.codec import dumps, from_dict, verdict_from_json
from kbench.store.records import (
    MessageRecord,
    ProblemMeta,
    RequestRecord,
    RunInfo,
    StoredVerdict,
    TranscriptStep,
    VerdictKey,
)
from kbench.store.schema import StoreError, migrate
from kbench.types import Problem, TimingStats, Verdict
from kbench.version import VERSION

# A second writer (e.g. `kbench baseline` during a run) waits this long for the lock before failing.
BUSY_TIMEOUT_MS = 30_000


def _names(joined: str | None) -> tuple[str, ...]:
    return tuple(sorted(joined.split(","))) if joined else ()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_run_id() -> str:
    """Sortable by time, unique without coordination: 20250131-142501-3fa2."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def git_commit() -> str | None:
    """The commit of the kbench checkout when kbench runs from one (None for an installed wheel)."""
    where = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class Store:
    """One SQLite file. Safe to share between threads; several processes may open the same file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per write.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a killed process (only a power loss can drop the last commits).
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")
        self.schema_version = migrate(self._db)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # runs --------------------------------------------------------------------------------------------

    def start_run(self, config: dict[str, Any], hardware: dict[str, Any], run_id: str | None = None) -> str:
        """Create a run, or return `run_id` unchanged when it exists already (resume)."""
        from kbench.hardware import fingerprint

        run_id = run_id or new_run_id()
        row = (
            run_id,
            _now(),
            json.dumps(config, sort_keys=True, default=str),
            json.dumps(hardware, sort_keys=True, default=str),
            fingerprint(hardware),
            VERSION,
            git_commit(),
        )
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        return run_id

    def run(self, run_id: str) -> RunInfo:
        for info in self.runs():
            if info.run_id == run_id:
                return info
        known = ", ".join(i.run_id for i in self.runs()[-5:]) or "none"
        raise StoreError(f"no run {run_id!r} in {self.path} (latest runs: {known}; see `kbench runs`)")

    def runs(self) -> list[RunInfo]:
        rows = self._rows(
            "SELECT r.*, COUNT(v.id), COALESCE(SUM(v.status = 'ok'), 0), GROUP_CONCAT(DISTINCT v.backend), "
            "GROUP_CONCAT(DISTINCT v.model) FROM runs r LEFT JOIN verdicts v ON v.run_id = r.run_id "
            "GROUP BY r.run_id ORDER BY r.created_at, r.run_id"
        )
        return [
            RunInfo(
                r[0],
                r[1],
                json.loads(r[2]),
                json.loads(r[3]),
                r[4],
                r[5],
                r[6],
                int(r[7]),
                int(r[8]),
                _names(r[9]),
                _names(r[10]),
            )  # fmt: skip
            for r in rows
        ]

    def drop_run_if_empty(self, run_id: str) -> bool:
        """Remove a run that holds no verdict and no request (one a configuration error stopped), with what
        it selected and the messages it had written."""
        with self._tx() as db:
            for table in ("verdicts", "requests"):
                if db.execute(f"SELECT 1 FROM {table} WHERE run_id = ? LIMIT 1", (run_id,)).fetchone():
                    return False
            db.execute("DELETE FROM run_problems WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM messages WHERE run_id = ?", (run_id,))
            return db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount == 1

    def put_run_problems(self, run_id: str, keys: Iterable[str]) -> None:
        """The problems a run selected, in order (kept on resume: a key already there stays)."""
        with self._tx() as db:
            db.executemany("INSERT OR IGNORE INTO run_problems VALUES (?, ?)", [(run_id, k) for k in keys])

    def run_problems(self, run_id: str) -> list[str]:
        """The problems a run selected, in the order given; empty for runs stored before kbench kept them."""
        rows = self._rows("SELECT problem_key FROM run_problems WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [r[0] for r in rows]

    # LLM requests ------------------------------------------------------------------------------------

    def record_request(self, run_id: str, r: RequestRecord) -> None:
        row = (run_id, r.problem_key, r.sample, r.turn, int(r.cached), r.error, r.input_tokens,
               r.output_tokens, r.cost_usd, r.latency_s, _now())  # fmt: skip
        with self._tx() as db:
            db.execute(
                "INSERT INTO requests (run_id, problem_key, sample, turn, cached, error, input_tokens, "
                "output_tokens, cost_usd, latency_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

    def requests(self, run_id: str) -> list[RequestRecord]:
        rows = self._rows(
            "SELECT problem_key, sample, turn, cached, error, input_tokens, output_tokens, cost_usd, "
            "latency_s FROM requests WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [RequestRecord(r[0], r[1], r[2], bool(r[3]), *r[4:]) for r in rows]

    def record_message(self, run_id: str, m: MessageRecord) -> None:
        """Keep what a run told the model at one turn (the first stored text of a key stays: on resume a
        turn is told the same again)."""
        row = (run_id, m.problem_key, m.sample, m.turn, m.role, m.text, _now())
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", row)

    def messages(self, run_id: str) -> list[MessageRecord]:
        """Every message a run sent, by problem, sample, turn, then system before user."""
        rows = self._rows(
            "SELECT problem_key, sample, turn, role, text FROM messages WHERE run_id = ? "
            "ORDER BY problem_key, sample, turn, role = 'user'",
            (run_id,),
        )
        return [MessageRecord(*r) for r in rows]

    def record_step(self, run_id: str, t: TranscriptStep) -> None:
        """Keep one step of an agent's session; a step already stored stays (a resumed session goes on
        after its last one)."""
        row = (run_id, t.problem_key, t.sample, t.step, t.role, json.dumps(t.message), t.input_tokens,
               t.output_tokens, t.seconds, _now())  # fmt: skip
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO transcript_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

    def transcript(self, run_id: str, problem_key: str | None = None) -> list[TranscriptStep]:
        """A run's agent transcripts (one problem's, given one), by problem, sample and step."""
        where, args = ("AND problem_key = ?", (run_id, problem_key)) if problem_key else ("", (run_id,))
        rows = self._rows(
            "SELECT problem_key, sample, step, role, message, input_tokens, output_tokens, seconds FROM "
            f"transcript_steps WHERE run_id = ? {where} ORDER BY problem_key, sample, step",
            args,
        )
        return [TranscriptStep(r[0], r[1], r[2], r[3], json.loads(r[4]), *r[5:]) for r in rows]

    # verdicts ----------------------------------------------------------------------------------------

    def record(
        self, run_id: str, key: VerdictKey, verdict: Verdict, candidate_source: str, completion_text: str = ""
    ) -> bool:
        """Store one verdict atomically. Returns False (and changes nothing) if the key is already stored."""
        row = (
            run_id,
            key.problem_key,
            key.sample,
            key.turn,
            key.backend,
            key.model,
            verdict.status.value,
            verdict.rule,
            dumps(verdict),
            candidate_source,
            _now(),
            completion_text,
        )
        with self._tx() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise StoreError(f"no run {run_id!r} in {self.path}: call start_run first")
            cur = db.execute(
                "INSERT OR IGNORE INTO verdicts (run_id, problem_key, sample, turn, backend, model, status, "
                "rule, verdict, candidate_source, created_at, completion_text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            return cur.rowcount == 1

    def done_keys(self, run_id: str) -> set[VerdictKey]:
        rows = self._rows(
            "SELECT problem_key, sample, turn, backend, model FROM verdicts WHERE run_id = ?", (run_id,)
        )
        return {VerdictKey(*r) for r in rows}

    def verdicts(self, run_id: str) -> list[tuple[VerdictKey, Verdict]]:
        return [(s.key, s.verdict) for s in self.records(run_id)]

    def records(self, run_id: str) -> list[StoredVerdict]:
        """Every verdict of a run with its candidate source and completion, in recording order."""
        rows = self._rows(
            "SELECT problem_key, sample, turn, backend, model, verdict, candidate_source, completion_text, "
            "created_at FROM verdicts WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        out = []
        for r in rows:
            key = VerdictKey(*r[:5])
            verdict = verdict_from_json(r[5], f"run {run_id} {key.problem_key}")
            out.append(StoredVerdict(run_id, key, verdict, r[6], r[7], r[8]))
        return out

    def find(self, run_id: str, key: VerdictKey) -> StoredVerdict | None:
        """The verdict stored under `key` in a run, or None (one indexed lookup: the unique key)."""
        rows = self._rows(
            "SELECT verdict, candidate_source, completion_text, created_at FROM verdicts WHERE run_id = ? "
            "AND problem_key = ? AND sample = ? AND turn = ? AND backend = ? AND model = ?",
            (run_id, key.problem_key, key.sample, key.turn, key.backend, key.model),
        )
        if not rows:
            return None
        verdict = verdict_from_json(rows[0][0], f"run {run_id} {key.problem_key}")
        return StoredVerdict(run_id, key, verdict, rows[0][1], rows[0][2], rows[0][3])

    # problem metadata --------------------------------------------------------------------------------

    def put_problems(self, problems: Iterable[Problem]) -> None:
        rows = [
            (p.key, p.source, p.level, p.number, p.name, json.dumps(list(p.tags)), p.code_hash)
            for p in problems
        ]
        with self._tx() as db:
            db.executemany("INSERT OR REPLACE INTO problems VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def problems(self) -> dict[str, ProblemMeta]:
        rows = self._rows("SELECT * FROM problems")
        return {r[0]: ProblemMeta(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6]) for r in rows}

    # baselines and speed of light --------------------------------------------------------------------

    def put_baseline(
        self,
        problem_key: str,
        preset: str,
        dtype: str,
        mode: str,
        fingerprint: str,
        torch_version: str,
        stats: TimingStats,
    ) -> None:
        """Store (or replace: a newer measurement wins) one reference timing."""
        row = (problem_key, preset, dtype, mode, fingerprint, torch_version, dumps(stats), _now())
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)

    def get_baseline(
        self, problem_key: str, preset: str, dtype: str, mode: str, fingerprint: str, torch_version: str
    ) -> TimingStats | None:
        rows = self._rows(
            "SELECT stats FROM baselines WHERE problem_key = ? AND preset = ? AND dtype = ? AND mode = ? "
            "AND fingerprint = ? AND torch_version = ?",
            (problem_key, preset, dtype, mode, fingerprint, torch_version),
        )
        if not rows:
            return None
        return from_dict(TimingStats, json.loads(rows[0][0]), f"baseline {problem_key} {mode}")  # type: ignore[no-any-return]

    def find_baselines(
        self, problem_key: str, preset: str, dtype: str, fingerprint: str, torch_version: str
    ) -> dict[str, tuple[TimingStats, str]]:
        """Every stored mode for one problem under these conditions: mode -> (stats, stored at)."""
        rows = self._rows(
            "SELECT mode, stats, created_at FROM baselines WHERE problem_key = ? AND preset = ? "
            "AND dtype = ? AND fingerprint = ? AND torch_version = ?",
            (problem_key, preset, dtype, fingerprint, torch_version),
        )
        return {
            r[0]: (from_dict(TimingStats, json.loads(r[1]), f"baseline {problem_key} {r[0]}"), r[2])
            for r in rows
        }

    def baselines(self, fingerprint: str | None = None) -> list[tuple[tuple[str, ...], TimingStats]]:
        """All stored baselines as ((problem_key, preset, dtype, mode, fingerprint, torch_version), stats)."""
        rows = self._rows("SELECT * FROM baselines ORDER BY problem_key, mode")
        return [
            (tuple(r[:6]), from_dict(TimingStats, json.loads(r[6]), f"baseline {r[0]}"))
            for r in rows
            if fingerprint is None or r[4] == fingerprint
        ]

    def put_sol(self, problem_key: str, preset: str, gpu: str, sol_ms: float) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO sol VALUES (?, ?, ?, ?)", (problem_key, preset, gpu, sol_ms))

    def get_sol(self, problem_key: str, preset: str, gpu: str) -> float | None:
        rows = self._rows(
            "SELECT sol_ms FROM sol WHERE problem_key = ? AND preset = ? AND gpu = ?",
            (problem_key, preset, gpu),
        )
        return float(rows[0][0]) if rows else None
