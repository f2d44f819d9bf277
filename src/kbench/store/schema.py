"""The SQLite schema as an ordered list of migrations; `schema_version` records which ones ran.

A database is brought up to date when it is opened: every migration above its version runs, each in its
own transaction together with the version bump, so an interrupted upgrade leaves a consistent database.
Never edit a released migration; append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from kbench.errors import KbenchError


class StoreError(KbenchError):
    """The results database is missing something asked for, or is newer than this kbench."""


def _script(db: sqlite3.Connection, sql: str) -> None:
    # Not executescript: it commits first, which would split a migration from its version bump.
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _v1(db: sqlite3.Connection) -> None:
    """Runs, verdicts (one row per key; the unique index makes resume idempotent), baselines."""
    _script(
        db,
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            config TEXT NOT NULL,
            hardware TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            kbench_version TEXT NOT NULL,
            git_commit TEXT
        );
        CREATE TABLE verdicts (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            problem_key TEXT NOT NULL,
            sample INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            status TEXT NOT NULL,
            rule TEXT NOT NULL,
            verdict TEXT NOT NULL,
            candidate_source TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (run_id, problem_key, sample, turn, backend, model)
        );
        CREATE TABLE baselines (
            problem_key TEXT NOT NULL,
            preset TEXT NOT NULL,
            dtype TEXT NOT NULL,
            mode TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            torch_version TEXT NOT NULL,
            stats TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (problem_key, preset, dtype, mode, fingerprint, torch_version)
        );
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    """Problem metadata (reports break down by tag without reloading problems), SOL, completions."""
    _script(
        db,
        """
        CREATE TABLE problems (
            problem_key TEXT PRIMARY KEY,
            source TEXT NOT NULL,
            level INTEGER NOT NULL,
            number INTEGER NOT NULL,
            name TEXT NOT NULL,
            tags TEXT NOT NULL,
            code_hash TEXT NOT NULL
        );
        CREATE TABLE sol (
            problem_key TEXT NOT NULL,
            preset TEXT NOT NULL,
            gpu TEXT NOT NULL,
            sol_ms REAL NOT NULL,
            PRIMARY KEY (problem_key, preset, gpu)
        );
        ALTER TABLE verdicts ADD COLUMN completion_text TEXT NOT NULL DEFAULT '';
        CREATE INDEX verdicts_status ON verdicts (run_id, status);
        """,
    )


def _v3(db: sqlite3.Connection) -> None:
    """The problems a run selected (metrics' denominators, progress totals, resume) and its LLM requests
    (tokens, cost, latency, cache hits and failure reasons of a run, read by reports)."""
    _script(
        db,
        """
        CREATE TABLE run_problems (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            problem_key TEXT NOT NULL,
            PRIMARY KEY (run_id, problem_key)
        );
        CREATE TABLE requests (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            problem_key TEXT NOT NULL,
            sample INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            cached INTEGER NOT NULL,
            error TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd REAL NOT NULL,
            latency_s REAL NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX requests_run ON requests (run_id);
        """,
    )


def _v4(db: sqlite3.Connection) -> None:
    """What a run told the model: the system prompt and the task at turn 0, the evaluator's feedback at
    every later turn (reports show them beside each verdict)."""
    _script(
        db,
        """
        CREATE TABLE messages (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            problem_key TEXT NOT NULL,
            sample INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (run_id, problem_key, sample, turn, role)
        );
        """,
    )


def _v5(db: sqlite3.Connection) -> None:
    """The jobs a service accepted (store/journal.py): what each was, by its id and the client's
    idempotency key, and whether it ended, so a restarted service queues the open ones again."""
    _script(
        db,
        """
        CREATE TABLE service_jobs (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            idempotency_key TEXT,
            problem_key TEXT NOT NULL,
            sample INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            source TEXT NOT NULL,
            completion TEXT NOT NULL,
            ended INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX service_jobs_idempotency ON service_jobs (run_id, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX service_jobs_open ON service_jobs (run_id, ended)
        """,
    )


def _v6(db: sqlite3.Connection) -> None:
    """Agent sessions' transcripts (agent/loop.py): every message of a session in order, the model's
    answers with their tokens and the tools' results with their seconds, and how the session ended."""
    _script(
        db,
        """
        CREATE TABLE transcript_steps (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            problem_key TEXT NOT NULL,
            sample INTEGER NOT NULL,
            step INTEGER NOT NULL,
            role TEXT NOT NULL,
            message TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            seconds REAL NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (run_id, problem_key, sample, step)
        )
        """,
    )


def _v7(db: sqlite3.Connection) -> None:
    """A service job's priority and its per-request timeout, so a restarted service queues it as asked."""
    _script(
        db,
        """
        ALTER TABLE service_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE service_jobs ADD COLUMN timeout_s REAL
        """,
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(db: sqlite3.Connection) -> int:
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)"
    )
    row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply migrations up to `target`; returns the version reached. `db` must be in autocommit mode."""
    version = current_version(db)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the results database has schema v{version} but this kbench knows v{SCHEMA_VERSION}; "
            "upgrade kbench to read it"
        )
    for number in range(version + 1, target + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            if current_version(db) >= number:  # another process migrated while we waited for the lock
                db.execute("ROLLBACK")
                continue
            MIGRATIONS[number - 1](db)
            db.execute("INSERT INTO schema_version VALUES (?, datetime('now'))", (number,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return max(version, target)
