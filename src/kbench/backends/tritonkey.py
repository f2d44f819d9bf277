"""Triton's own cache key, kept in kbench's cache folder so that a fresh worker does not work it out again.

Triton names every compiled kernel in its cache by a digest that starts with `triton_key()`: a hash of its
own sources and of its compiled library (hundreds of MB), taken once per process at the first kernel
lookup -- 0.4 s on an H200 host, 0.6-1 s on a slower core. Every fresh worker that launches a Triton kernel
pays it: a candidate worker of a cold `kbench eval`, where it lengthened the set-up that runs beside the
reference, and a reference worker timing torch.compile (Inductor's kernels are Triton's).

So the value is kept in `<cache>/triton-key.json` beside a signature of the files it hashes (each file's
path, size and modification time in the packages it walks -- compiler, backends, language -- and in its
library's folder: a few ms to read, no import). A worker whose installed Triton still has that signature
takes the stored value (`install`: what Triton's own compile pool does for its workers) instead of
hashing; one that finds none, or another signature, hashes Triton's files itself.

Who writes it: only the host, a trusted process (`ensure`: on a GPU evaluation that runs Triton, in a
thread of its own the first time). The file lies beside the reference cache, outside what a confined
candidate may write (sandbox/confine.py: only the builds folder of the cache folder is its), unless the
cache folder itself lies in such a folder (in /tmp, say). Even then a forged key would only make Triton
look its kernels up under other names, in a cache folder a candidate may write anyway: a miss, or an
entry a candidate could have planted under the right name too.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

KEY_FILE = "triton-key.json"
PACKAGES = ("compiler", "backends", "language")  # what triton_key() walks, beside _C's library and cache.py
MAX_KEY_CHARS = 1 << 20  # a stored key is Triton's version and some hundred digests: a few KB
_tried: set[Path] = set()  # key files this process has seen to (ensure)
_lock = threading.Lock()


def key_file(cache_dir: Path | str) -> Path:
    return Path(cache_dir) / KEY_FILE


def triton_root() -> Path | None:
    """The installed Triton's package folder, found without importing it; None without Triton."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def _package_files(folder: Path) -> list[Path]:
    """The files of `folder` and of its subpackages (folders with an `__init__.py`), as
    `pkgutil.walk_packages` reaches them; folders that are no package (CUDA's headers and tools under the
    NVIDIA backend: thousands of files) are not read."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if os.path.exists(os.path.join(entry.path, "__init__.py")):
                found.extend(_package_files(Path(entry.path)))
        elif entry.is_file():
            found.append(Path(entry.path))
    return found


def signature(root: Path) -> str:
    """A digest of the path, size and modification time of every file `triton_key()` may read under `root`
    (a superset: every file of the packages it walks, and its library's folder): any change to those
    changes it."""
    digest = hashlib.sha256(f"{os.path.realpath(root)}\n".encode())
    paths = [root / "__init__.py", root / "runtime" / "cache.py", *_package_files(root / "_C")]
    for folder in PACKAGES:
        paths.extend(_package_files(root / folder))
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            digest.update(f"{path.relative_to(root)}\0missing\n".encode())
            continue
        digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def known(path: Path) -> str | None:
    """The key stored at `path` when it was taken from the Triton installed now; else None."""
    root = triton_root()
    if root is None:
        return None
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict):
        return None
    key = stored.get("key")
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        return None
    return key if stored.get("signature") == signature(root) else None


def install(key: str) -> None:
    """Make this process's `triton_key()` answer `key` without hashing: the function is replaced wherever
    a loaded module holds it (triton.runtime.cache, and modules that imported it by name). Imports Triton."""
    from triton.runtime import cache

    original = cache.triton_key

    @functools.cache
    def triton_key() -> str:
        return key

    triton_key()
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        if namespace.get("triton_key") is original:
            namespace["triton_key"] = triton_key


def learn(path: Path) -> str | None:
    """Work the key out in this process (imports Triton; trusted code only) and store it at `path`."""
    root = triton_root()
    if root is None:
        return None
    before = signature(root)
    from triton.runtime import cache

    key = cache.triton_key()
    if signature(root) != before:  # Triton changed while it was hashed: nothing stored
        return None
    from kbench.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"signature": before, "key": key, "triton": str(root)}))
    return key


def _learn_quietly(path: Path) -> None:
    try:
        if known(path) is None:
            learn(path)
    except Exception:  # only a head start for later workers: without it they hash themselves
        pass


def ensure(cache_dir: Path) -> threading.Thread | None:
    """Host side: make sure `cache_dir` holds the key of the installed Triton, in a thread of this process
    (returned, nothing to wait for: a worker that finds no key hashes itself), once per process and
    folder. Nothing on the caller's path: even the check that a stored key is current runs in the thread."""
    path = key_file(cache_dir)
    with _lock:
        if path in _tried:
            return None
        _tried.add(path)
    if triton_root() is None:
        return None
    thread = threading.Thread(target=_learn_quietly, args=(path,), name="kbench-triton-key", daemon=True)
    thread.start()
    return thread
