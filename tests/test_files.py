"""write_atomic: a reader sees the old file or the whole new one, whoever writes at the same time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kbench.files import write_atomic


def test_concurrent_writers_of_one_path_never_leave_a_mixed_file(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    texts = [str(i) * 200_000 for i in range(8)]  # large enough for writes to interleave
    seen: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            if path.exists():
                seen.append(path.read_text())

    def write(text: str) -> None:
        for _ in range(20):
            write_atomic(path, text)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(t,)) for t in texts]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert path.read_text() in texts
    assert seen and all(text in texts for text in seen)  # every read was one writer's whole text
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    write_atomic(path, "old")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\ud800")  # a lone surrogate cannot be encoded: the write fails midway
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
