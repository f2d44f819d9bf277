"""kbench's bytecode folder: used only where torch has no bytecode; trusted processes write it, workers
only read it (a worker forked from the starter: tests/sandbox/test_sandbox_host.py)."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kbench.sandbox import bytecode


def _package(root: Path, name: str, compiled: bool) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    if compiled:  # where an installer that compiles puts it
        cached = pkg / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(pkg / "__init__.py"), cfile=str(cached))


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    _package(root, "plainpkg", compiled=False)
    _package(root, "builtpkg", compiled=True)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return root


def test_a_package_without_bytecode_beside_it_is_told_apart(packages: Path) -> None:
    assert bytecode.has_bytecode("plainpkg") is False
    assert bytecode.has_bytecode("builtpkg") is True
    assert bytecode.has_bytecode("no_such_package_here") is None
    assert "plainpkg" not in sys.modules  # found, not imported


def test_the_folder_is_kept_only_where_python_would_compile_again(
    packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "candidate_writable", lambda: [tmp_path / "open"])
    env = {"KBENCH_CACHE_DIR": str(tmp_path / "cache")}
    assert bytecode.folder(env, "plainpkg") == tmp_path / "cache" / "pycache"
    assert bytecode.folder(env, "builtpkg") is None  # the installation's own bytecode serves
    assert bytecode.folder(env, "no_such_package_here") is None
    assert bytecode.folder(env | {"KBENCH_PYCACHE": "off"}, "plainpkg") is None
    assert bytecode.folder(env | {"PYTHONPYCACHEPREFIX": str(tmp_path / "mine")}, "plainpkg") is None


def test_a_folder_a_confined_candidate_could_write_is_never_used(
    packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its files are code kbench's own processes run: beneath a temporary folder (or a cache the sandbox
    opens to candidates) the cache folder is passed over for the default one, and else none is kept."""
    sandbox_own = bytecode.candidate_writable
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    env = {"KBENCH_CACHE_DIR": str(tmp_path / "tmp" / "cache")}
    monkeypatch.setattr(bytecode, "candidate_writable", lambda: [tmp_path / "tmp"])
    assert bytecode.folder(env, "plainpkg") == tmp_path / "home-cache" / "kbench" / "pycache"
    monkeypatch.setattr(bytecode, "candidate_writable", lambda: [tmp_path])
    assert bytecode.folder(env, "plainpkg") is None
    # the sandbox's own list: the temporary folder is in it, so a cache folder there is never used
    assert any(Path(tempfile.gettempdir()).resolve() == f for f in sandbox_own())


def test_children_read_the_folder_and_only_trusted_ones_write_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = tmp_path / "pycache"
    monkeypatch.setattr(bytecode, "_folder", lambda: where)
    src = tmp_path / "mods"
    src.mkdir()
    for name in ("trusted_mod", "worker_mod"):
        (src / f"{name}.py").write_text("X = 2\n")
    script = "import sys, {0}; print({0}.__cached__)"

    def child(name: str, writes: bool) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=str(src)) | bytecode.env(writes=writes)
        cmd = [sys.executable, "-c", script.format(name)]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=True)

    cached = Path(child("trusted_mod", writes=True).stdout.strip())
    assert cached.is_relative_to(where) and cached.exists()  # mirrored under the folder, written
    shown = Path(child("worker_mod", writes=False).stdout.strip())
    assert shown.is_relative_to(where) and not shown.exists()  # looked for there, never written
    assert not (src / "__pycache__").exists()


def test_no_folder_keeps_workers_from_writing_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bytecode, "_folder", lambda: None)
    assert bytecode.env() == bytecode.env(writes=True) == {"PYTHONDONTWRITEBYTECODE": "1"}
    from kbench.sandbox.procs import worker_env

    assert worker_env({}).get("PYTHONDONTWRITEBYTECODE") == "1"


def test_the_command_reads_and_writes_its_bytecode_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "_folder", lambda: tmp_path / "pycache")
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.use_here() == tmp_path / "pycache"
    assert sys.pycache_prefix == str(tmp_path / "pycache") and sys.dont_write_bytecode is False


def test_the_switch_is_not_taken_for_a_misspelt_setting() -> None:
    from kbench.config import env_overrides

    assert env_overrides({bytecode.SWITCH_ENV: "off"}) == {}
