"""The walls of a runner (sandbox/isolate.py): its environment, its namespaces, its limits and cores."""

from __future__ import annotations

import json
import os
import resource
import socket
from pathlib import Path
from typing import Any

import pytest

from kbench.sandbox import isolate


def test_the_environment_keeps_what_workers_need_and_no_secret() -> None:
    host = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LD_LIBRARY_PATH": "/opt/lib",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "TRITON_CACHE_DIR": "/c",
        "OMP_NUM_THREADS": "2",
        "KBENCH_OWNER": "12:34",
        "OPENAI_API_KEY": "sk-secret",
        "ANTHROPIC_API_KEY": "sk-ant",
        "KBENCH_SERVE_TOKEN": "tok",
        "HF_TOKEN": "hf",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GITHUB_TOKEN": "gh",
        "CUDA_AUTH_TOKEN": "sneaky",  # an allowed prefix, a secret's name: dropped
        "http_proxy": "http://proxy",
        "SOME_TOOL_SETTING": "x",
    }
    env = isolate.scrubbed_env(host, {"TMPDIR": "/job/tmp", "KBENCH_BUILD_PCH": "use"})
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LD_LIBRARY_PATH": "/opt/lib",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "TRITON_CACHE_DIR": "/c",
        "OMP_NUM_THREADS": "2",
        "KBENCH_OWNER": "12:34",
        "TMPDIR": "/job/tmp",
        "KBENCH_BUILD_PCH": "use",
    }


def test_worker_env_scrubs_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.sandbox.procs import OWNER_ENV, worker_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("KBENCH_SERVE_TOKEN", "tok")
    env = worker_env({"OMP_NUM_THREADS": "1"})
    assert "OPENAI_API_KEY" not in env and "KBENCH_SERVE_TOKEN" not in env
    assert env["OMP_NUM_THREADS"] == "1" and OWNER_ENV in env and env["PATH"] == os.environ["PATH"]


def test_numpys_blas_gets_one_thread_unless_the_host_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.sandbox.procs import BLAS_THREADS_ENV, worker_env
    from kbench.sandbox.starter import STARTUP_VARS

    monkeypatch.delenv(BLAS_THREADS_ENV, raising=False)
    assert worker_env({})[BLAS_THREADS_ENV] == "1"
    monkeypatch.setenv(BLAS_THREADS_ENV, "3")
    assert worker_env({})[BLAS_THREADS_ENV] == "3"
    assert BLAS_THREADS_ENV in STARTUP_VARS  # a starter made with another value is another starter


def _in_child(walls: isolate.Walls, probe: Any, init: bool = False) -> dict[str, Any]:
    """Run `probe()` in a forked child behind `walls` (as the runner's set-up enters them) and return what
    it reported (JSON through a pipe)."""
    from kbench.referee.runner import _become_init

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out: dict[str, Any] = {}
        try:
            out["entered"] = isolate.enter(walls)
            if "pid" in out["entered"]:
                _become_init()  # the waiter exits here with the init's status
                out["proc"] = isolate.mount_proc()
            out.update(probe())
        except Exception as exc:  # reported, not raised: the parent asserts
            out["error"] = f"{type(exc).__name__}: {exc}"
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data) if data else {}


def _needs_namespaces() -> None:
    got = _in_child(isolate.Walls(mount=False), dict)
    if "user" not in got.get("entered", []):
        pytest.skip(f"user namespaces are not available here ({got.get('error', 'refused')})")


def test_a_pid_namespace_hides_every_other_process_and_its_environ() -> None:
    _needs_namespaces()
    host_pid = os.getpid()

    def probe() -> dict[str, Any]:
        visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        try:
            Path(f"/proc/{host_pid}/environ").read_bytes()
            environ = "readable"
        except OSError as exc:
            environ = type(exc).__name__
        return {"me": os.getpid(), "visible": visible, "environ": environ}

    got = _in_child(isolate.Walls(pid=True, net=True), probe)
    assert set(got["entered"]) == {"user", "mount", "pid", "net"} and got["proc"]
    assert got["me"] == 1 and got["visible"] == [1]  # its own init alone
    assert got["environ"] != "readable"


def test_a_network_namespace_has_no_network() -> None:
    _needs_namespaces()

    def probe() -> dict[str, Any]:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", 22))
            return {"connect": "connected"}
        except OSError as exc:
            return {"connect": type(exc).__name__}
        finally:
            s.close()

    got = _in_child(isolate.Walls(net=True, mount=False), probe)
    assert got["connect"] in ("OSError", "ConnectionRefusedError", "TimeoutError")


def test_root_in_a_user_namespace_has_no_capability_over_the_machine() -> None:
    _needs_namespaces()

    def probe() -> dict[str, Any]:
        try:
            os.nice(-1)  # a raise of its own priority: CAP_SYS_NICE over the machine, harmless if it held
            raised = True
        except OSError:
            raised = False
        return {"uid": os.getuid(), "raised": raised}

    got = _in_child(isolate.Walls(mount=False), probe)
    assert got["uid"] == 0 and not got["raised"]  # root inside, no capability outside


def test_a_size_capped_working_folder_keeps_what_it_held(tmp_path: Path) -> None:
    _needs_namespaces()
    folder = tmp_path / "run"
    (folder / "home" / "deep").mkdir(parents=True)
    (folder / "candidate.py").write_text("x = 1\n")

    def probe() -> dict[str, Any]:
        ok = isolate.mount_tmp(folder, 1)
        held = (folder / "candidate.py").read_text() == "x = 1\n" and (folder / "home" / "deep").is_dir()
        try:  # in small files too: the cap is the folder's, not a file's
            for i in range(4):
                (folder / "home" / f"part{i}").write_bytes(b"x" * (512 << 10))
            wrote = True
        except OSError:
            wrote = False
        return {"mounted": ok, "held": held, "wrote": wrote}

    got = _in_child(isolate.Walls(), probe)
    assert got["mounted"] and got["held"] and not got["wrote"], got
    assert not (folder / "home" / "part0").exists()  # the mount, and what was written there, stayed in it
    assert (folder / "candidate.py").read_text() == "x = 1\n"


def test_limits_bound_files_and_their_size(tmp_path: Path) -> None:
    def probe() -> dict[str, Any]:
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        # room for a few more files than the child inherited (a test worker may hold dozens open)
        top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        isolate.limit_self(isolate.Walls(files=top + 16, file_mib=1))
        try:
            (tmp_path / "big").write_bytes(b"x" * (2 << 20))
            big = "written"
        except OSError as exc:
            big = type(exc).__name__
        opened = []
        try:
            for _ in range(top + 116):  # more than the limit, even with every number under it free
                opened.append(os.open(os.devnull, os.O_RDONLY))
            files = "unbounded"
        except OSError:
            files = "bounded"
        return {
            "big": big,
            "files": files,
            "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
        }

    got = _in_child(isolate.Walls(user=False, mount=False), probe)
    assert got["big"] == "OSError" and got["files"] == "bounded" and got["core"] == 0
    assert (tmp_path / "big").stat().st_size <= 1 << 20


def test_cores_shared_by_every_runner_of_a_run() -> None:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("one core: nothing to choose")
    assert isolate.share_cores(1) == mine[:1]
    assert isolate.share_cores(0) == [] and isolate.share_cores(len(mine)) == []

    def probe() -> dict[str, Any]:
        return {"pinned": isolate.pin(0, mine[:1]), "now": sorted(os.sched_getaffinity(0))}

    got = _in_child(isolate.Walls(user=False, mount=False), probe)
    assert got["pinned"] == mine[:1] == got["now"]


def test_walls_by_device() -> None:
    cpu, gpu = isolate.for_device("cpu", True), isolate.for_device("cuda:0", True)
    assert cpu is not None and cpu.pid and cpu.net and cpu.user and cpu.mount
    # CUDA's interprocess memory handles do not cross PID namespaces: a GPU runner keeps the host's
    assert gpu is not None and not gpu.pid and not gpu.net and gpu.user
    assert isolate.for_device("cpu", False) is None
    assert "subreaper" in isolate.describe(["user"], True)


def test_no_process_outside_a_runners_user_namespace_has_a_readable_environ() -> None:
    """A GPU runner shares the host's PID namespace; its user namespace is what keeps every other process's
    environment (API keys, a service's token) and memory out of its reach: /proc/PID/environ of a process
    outside needs CAP_SYS_PTRACE in that process's namespace. kbench's own processes are besides not
    dumpable (`protect_self`), which holds where user namespaces are refused and kbench is not root."""
    import ctypes
    import subprocess
    import sys

    _needs_namespaces()
    secret = "sk-isolate-test-secret"
    code = (
        "import sys, time\n"
        "from kbench.sandbox import isolate\n"
        "if sys.argv[1] == 'protect':\n    isolate.protect_self()\n"
        "print('ready', flush=True)\ntime.sleep(30)\n"
    )
    env = {**os.environ, "KBENCH_TEST_SECRET": secret}
    for mode in ("open", "protect"):
        child = subprocess.Popen([sys.executable, "-c", code, mode], env=env, stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
            assert secret.encode() in Path(f"/proc/{child.pid}/environ").read_bytes() or mode == "protect"

            def probe(pid: int = child.pid) -> dict[str, Any]:
                try:
                    return {"read": secret.encode() in Path(f"/proc/{pid}/environ").read_bytes()}
                except OSError as exc:
                    return {"read": False, "why": exc.strerror}

            got = _in_child(isolate.for_device("cuda", True) or isolate.Walls(), probe)
            assert got["read"] is False and got["why"] == "Permission denied", (mode, got)
        finally:
            child.kill()
            child.wait()
    isolate.protect_self()  # idempotent; this test's process is kbench's host here
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE
