"""Triton's cache key kept in kbench's cache folder: stored by the host, taken by workers only while the
installed Triton still matches (backends/tritonkey.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.backends import tritonkey
from kbench.config import resolve
from kbench.evaluate.flow import runs_triton
from kbench.types import Candidate

triton = pytest.importorskip("triton")


def _tree(root: Path) -> Path:
    """A Triton-shaped folder: what triton_key() reads."""
    for rel in ("__init__.py", "runtime/cache.py", "compiler/__init__.py", "compiler/compiler.py",
                "backends/__init__.py", "backends/nvidia/__init__.py", "backends/nvidia/driver.py",
                "backends/nvidia/include/cuda.h", "language/__init__.py", "language/core.py",
                "_C/libtriton.so"):  # fmt: skip
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n")
    return root


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = _tree(tmp_path / "triton")
    monkeypatch.setattr(tritonkey, "triton_root", lambda: root)
    return root


def test_the_signature_follows_every_file_triton_hashes(fake_root: Path) -> None:
    first = tritonkey.signature(fake_root)
    assert tritonkey.signature(fake_root) == first  # stable
    library = fake_root / "_C" / "libtriton.so"
    library.write_text("# _C/libtriton.so, rebuilt\n")  # another size
    second = tritonkey.signature(fake_root)
    assert second != first
    stamp = time.time_ns() - 10**9
    os.utime(fake_root / "language" / "core.py", ns=(stamp, stamp))  # same size, another time
    third = tritonkey.signature(fake_root)
    assert third != second
    (fake_root / "backends" / "amd").mkdir()
    (fake_root / "backends" / "amd" / "__init__.py").write_text("")  # a new backend package
    fourth = tritonkey.signature(fake_root)
    assert fourth != third
    (fake_root / "runtime" / "cache.py").unlink()  # the file that defines triton_key
    assert tritonkey.signature(fake_root) != fourth


def test_folders_triton_does_not_hash_are_not_read(fake_root: Path) -> None:
    """Only packages are walked, as pkgutil.walk_packages walks them: CUDA's headers and tools beside the
    NVIDIA backend (thousands of files, none of them in Triton's key) leave the signature alone."""
    first = tritonkey.signature(fake_root)
    (fake_root / "backends" / "nvidia" / "include" / "cuda.h").write_text("// another CUDA, longer\n")
    (fake_root / "backends" / "nvidia" / "bin").mkdir()
    (fake_root / "backends" / "nvidia" / "bin" / "ptxas").write_text("")
    assert tritonkey.signature(fake_root) == first
    (fake_root / "backends" / "nvidia" / "driver.py").write_text("# patched, longer than before\n")
    assert tritonkey.signature(fake_root) != first


def test_a_stored_key_is_taken_only_for_the_installed_triton(fake_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "cache" / tritonkey.KEY_FILE
    assert tritonkey.known(path) is None  # nothing stored
    path.parent.mkdir()
    path.write_text(json.dumps({"signature": tritonkey.signature(fake_root), "key": "3.6.0-abc"}))
    assert tritonkey.known(path) == "3.6.0-abc"
    (fake_root / "compiler" / "compiler.py").write_text("# upgraded, longer than before\n")
    assert tritonkey.known(path) is None  # another Triton: hashed again
    for bad in ("{", "[1, 2]", json.dumps({"signature": tritonkey.signature(fake_root), "key": 7}),
                json.dumps({"signature": tritonkey.signature(fake_root), "key": ""}),
                json.dumps({"key": "3.6.0-abc"})):  # fmt: skip
        path.write_text(bad)
        assert tritonkey.known(path) is None, bad


def test_without_triton_nothing_is_stored_or_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tritonkey, "triton_root", lambda: None)
    assert tritonkey.known(tmp_path / tritonkey.KEY_FILE) is None
    assert tritonkey.learn(tmp_path / tritonkey.KEY_FILE) is None
    assert tritonkey.ensure(tmp_path) is None
    assert not (tmp_path / tritonkey.KEY_FILE).exists()


def _python(code: str, **env: str) -> str:
    run_env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | env
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=run_env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_host_stores_tritons_own_key_once(tmp_path: Path) -> None:
    """`ensure` works the key out in a thread the first time and stores what Triton itself computes; the
    next call finds it current and starts nothing."""
    out = _python(
        "from pathlib import Path\nfrom kbench.backends import tritonkey\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "thread = tritonkey.ensure(folder)\nassert thread is not None\nthread.join(120)\n"
        "print('again', tritonkey.ensure(folder))\n"
        "from triton.runtime import cache\n"
        "print('same', tritonkey.known(tritonkey.key_file(folder)) == cache.triton_key())\n"
    )
    assert "again None" in out and "same True" in out, out
    stored = json.loads((tmp_path / tritonkey.KEY_FILE).read_text())
    assert stored["signature"] == tritonkey.signature(Path(triton.__file__).parent)


def test_a_worker_takes_the_stored_key_instead_of_hashing(tmp_path: Path) -> None:
    """A candidate worker's hooks (a GPU worker: no interpreter) install the stored value wherever Triton
    holds its key function, modules that imported it by name included; with a stale signature the worker
    hashes as before."""
    root = Path(triton.__file__).parent
    path = tmp_path / tritonkey.KEY_FILE
    path.write_text(json.dumps({"signature": tritonkey.signature(root), "key": "stored-key"}))
    code = (
        "import time\nfrom pathlib import Path\n"
        "from triton.runtime import autotuner, cache\n"  # autotuner holds triton_key by name
        "from kbench.backends import KernelRecorder, get_backend\n"
        "t0 = time.perf_counter()\n"
        f"get_backend('triton').install_hooks(KernelRecorder(), Path({str(tmp_path)!r}))\n"
        "print('seconds', time.perf_counter() - t0)\n"
        "print('cache', cache.triton_key())\nprint('autotuner', autotuner.triton_key())\n"
    )
    out = _python(code)
    assert "cache stored-key" in out and "autotuner stored-key" in out, out
    path.write_text(json.dumps({"signature": "another triton", "key": "stored-key"}))
    out = _python(code)
    hashed = next(line for line in out.splitlines() if line.startswith("cache "))
    assert "stored-key" not in out and len(hashed) > 200, out  # Triton's own digests


def test_only_gpu_evaluations_that_run_triton_look_its_key_up() -> None:
    cfg = resolve(flags={"baselines": ["eager"]})
    both = resolve(flags={"baselines": ["eager", "compile"]})
    untimed = resolve(flags={"baselines": ["eager", "compile"], "measure": False})
    triton_cand, cuda_cand = Candidate("2/1", "triton", ""), Candidate("2/1", "cuda", "")
    assert runs_triton(triton_cand, cfg, "cuda:0")
    assert not runs_triton(triton_cand, cfg, "cpu")  # the interpreter: no key
    assert not runs_triton(cuda_cand, cfg, "cuda:0")
    assert runs_triton(cuda_cand, both, "cuda:0")  # torch.compile's baseline: Inductor's Triton kernels
    assert not runs_triton(cuda_cand, untimed, "cuda:0")
