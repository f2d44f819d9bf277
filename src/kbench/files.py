"""kbench's files: where its cache folder is by default, and files that other processes may read at any
moment, written whole or not at all."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def default_cache_dir() -> Path:
    """The cache folder when no setting names one (RunConfig.cache_dir): $XDG_CACHE_HOME/kbench."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kbench"


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
