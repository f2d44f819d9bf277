"""The jobs a service accepted, kept in its store so that they outlive the service (`kbench serve`).

Each accepted job is written before its id is answered: the verdict key it was given (its sample already
chosen, so queueing it again never files a second sample), its candidate and completion, and the
client's idempotency key if it sent one. A job is marked ended once it has a verdict, failed with its own
error, or was cancelled by a client; one that a stopping or killed service dropped stays open, and the
service started again on the same run (`kbench serve --run RUN`) queues it again under the same id.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbench.store.db import Store, _now
from kbench.store.records import VerdictKey


@dataclass(frozen=True)
class JournalEntry:
    id: str
    run_id: str
    key: VerdictKey
    source: str
    completion: str
    idempotency_key: str | None
    ended: bool
    priority: int = 0
    timeout_s: float | None = None


_COLUMNS = (
    "id, run_id, idempotency_key, problem_key, sample, turn, backend, model, source, completion, ended, priority, "
    "timeout_s"
)


def _entry(row: tuple[object, ...]) -> JournalEntry:
    (
        ident,
        run_id,
        idem,
        problem_key,
        sample,
        turn,
        backend,
        model,
        source,
        completion,
        ended,
        priority,
        timeout,
    ) = row
    key = VerdictKey(str(problem_key), int(sample), int(turn), str(backend), str(model))  # type: ignore[call-overload]
    return JournalEntry(str(ident), str(run_id), key, str(source), str(completion),
                        None if idem is None else str(idem), bool(ended), int(priority),  # type: ignore[call-overload]
                        None if timeout is None else float(timeout))  # type: ignore[arg-type]  # fmt: skip


class Journal:
    """A service's accepted jobs in `store` (its own table; the verdicts stay where every run keeps them)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def accept(self, run_id: str, ident: str, key: VerdictKey, source: str, completion: str,
               idempotency_key: str | None = None, priority: int = 0, timeout_s: float | None = None) -> None:  # fmt: skip
        row = (ident, run_id, idempotency_key, key.problem_key, key.sample, key.turn, key.backend, key.model,
               source, completion, _now(), priority, timeout_s)  # fmt: skip
        with self.store._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO service_jobs (id, run_id, idempotency_key, problem_key, sample, turn, "
                "backend, model, source, completion, created_at, priority, timeout_s) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

    def end(self, ident: str) -> None:
        with self.store._tx() as db:
            db.execute("UPDATE service_jobs SET ended = 1 WHERE id = ?", (ident,))

    def find(self, ident: str) -> JournalEntry | None:
        rows = self.store._rows(f"SELECT {_COLUMNS} FROM service_jobs WHERE id = ?", (ident,))
        return _entry(rows[0]) if rows else None

    def by_idempotency_key(self, run_id: str, idempotency_key: str) -> JournalEntry | None:
        rows = self.store._rows(
            f"SELECT {_COLUMNS} FROM service_jobs WHERE run_id = ? AND idempotency_key = ?",
            (run_id, idempotency_key),
        )
        return _entry(rows[0]) if rows else None

    def open_jobs(self, run_id: str) -> list[JournalEntry]:
        """The run's jobs that never ended, oldest first."""
        rows = self.store._rows(
            f"SELECT {_COLUMNS} FROM service_jobs WHERE run_id = ? AND ended = 0 ORDER BY rowid", (run_id,)
        )
        return [_entry(r) for r in rows]
