"""Files that other processes may read at any moment: written whole or not at all."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the whole new one, never a part.

    The temporary file is this thread's own (process and thread in its name, next to `path` so the rename
    stays on one file system): two writers of one path, processes or threads, never write into one
    temporary file. It is removed when the write fails."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
