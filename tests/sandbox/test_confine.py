"""Landlock confinement of the candidate worker (sandbox/confine.py): what a confined process can still do,
what it cannot, and a whole evaluation whose C++ extension tries to rewrite a file of the evaluator's.

Each check runs in a forked child that confines itself: confinement cannot be undone, so the test
process itself stays free. Skipped, with the reason, on kernels without Landlock.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from evalfixtures import cpu_config, use_builds

from kbench.sandbox import confine

ABI, WHY = confine.abi()


def needs_abi(version: int) -> None:
    if ABI < max(version, confine.MIN_ABI):
        pytest.skip(f"needs Landlock ABI {version}: this kernel has {ABI or 'none'} ({WHY or 'too old'})")


def confined(allowed: list[Path], action: Callable[[], object]) -> int:
    """Run `action` in a forked child confined to writing beneath `allowed`; 0 when it succeeded, else
    the errno it failed with (-1: confinement was not applied)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = -1
        try:
            os.close(read)
            if confine.confine(allowed).startswith("landlock"):
                try:
                    action()
                    code = 0
                except OSError as exc:
                    code = exc.errno or 255
        finally:
            os.write(write, str(code).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return int(answer or "-1")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "mine.txt").write_text("mine")
    return folder


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "evaluator.txt"
    path.parent.mkdir()
    path.write_text("the evaluator's")
    return path


def test_writes_beneath_the_job_folder_work(job: Path) -> None:
    needs_abi(confine.MIN_ABI)
    assert confined([job], lambda: (job / "out.bin").write_bytes(b"1")) == 0
    assert confined([job], lambda: (job / "mine.txt").write_text("changed")) == 0
    assert confined([job], lambda: os.replace(job / "mine.txt", job / "sub.txt")) == 0
    assert confined([job], lambda: (job / "sub.txt").unlink()) == 0
    assert confined([job], lambda: os.write(os.open("/dev/null", os.O_WRONLY), b"x")) == 0


@pytest.mark.parametrize(
    "name",
    ["rewrite", "truncate", "create", "remove", "rename-away", "rename-into-job", "mkdir", "symlink"],
)
def test_writes_outside_fail(job: Path, host_file: Path, name: str) -> None:
    needs_abi(confine.MIN_ABI)
    folder = host_file.parent
    actions: dict[str, Callable[[], object]] = {
        "rewrite": lambda: host_file.write_text("tampered"),
        "truncate": lambda: os.truncate(host_file, 0),
        "create": lambda: (folder / "new.txt").write_text("x"),
        "remove": host_file.unlink,
        "rename-away": lambda: os.rename(host_file, folder / "moved.txt"),
        "rename-into-job": lambda: os.rename(host_file, job / "stolen.txt"),
        "mkdir": lambda: (folder / "d").mkdir(),
        "symlink": lambda: (folder / "link").symlink_to(job),
    }
    assert confined([job], actions[name]) in (errno.EACCES, errno.EPERM, errno.EXDEV)
    assert host_file.read_text() == "the evaluator's"
    assert sorted(p.name for p in folder.iterdir()) == ["evaluator.txt"]


def test_shm_is_not_writable(job: Path) -> None:
    """Job folders may live on /dev/shm: the device nodes allowed are not all of /dev."""
    needs_abi(confine.MIN_ABI)
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm here")
    path = Path("/dev/shm") / f"kbench-confine-test-{os.getpid()}"
    try:
        assert confined([job], lambda: path.write_text("x")) == errno.EACCES
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)


def test_tcp_connect_fails(job: Path) -> None:
    needs_abi(4)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert (
            confined([job], lambda: socket.create_connection(("127.0.0.1", port), timeout=5)) == errno.EACCES
        )
    assert confined([job], lambda: socket.socket().bind(("127.0.0.1", 0))) == errno.EACCES


def test_signals_reach_only_the_workers_own_processes(job: Path) -> None:
    needs_abi(6)
    parent = os.getpid()
    assert confined([job], lambda: os.kill(parent, 0)) == errno.EPERM  # 0: the permission check only

    def kill_own_child() -> None:
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    assert confined([job], kill_own_child) == 0  # a worker still ends what it started (compile checks)


def test_a_runner_sharing_the_hosts_pids_reads_no_other_process(job: Path) -> None:
    """A GPU runner keeps the host's PID namespace (CUDA's interprocess handles do not cross one), so its
    /proc lists every process of the machine: confined with `without_processes`, it reads the system's
    entries and its own folder, and neither the list of processes nor another one's command line (where
    a user's token may sit); a program it starts still runs."""
    import json
    import subprocess
    import sys

    needs_abi(confine.MIN_ABI)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--token=sk-cmdline"])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        out: dict[str, object] = {}
        try:
            os.close(read)
            reads = confine.without_processes(confine.standard_reads([job]))
            out["confined"] = confine.confine([job], reads=reads)
            for name, path in (
                ("other", f"/proc/{sleeper.pid}/cmdline"),
                ("own", "/proc/self/status"),
                ("cpuinfo", "/proc/cpuinfo"),
            ):
                try:
                    out[name] = len(Path(path).read_bytes()) > 0
                except OSError as exc:
                    out[name] = exc.strerror
            try:
                out["listing"] = len(os.listdir("/proc"))
            except OSError as exc:
                out["listing"] = exc.strerror
            run = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
            out["child"] = run.stdout.strip()
        except Exception as exc:  # reported, not raised: the parent asserts
            out["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(write, json.dumps(out).encode())
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            got = json.loads(pipe.read() or "{}")
        os.waitpid(pid, 0)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert str(got.get("confined", "")).endswith("+reads"), got
    assert got["other"] == "Permission denied" and got["listing"] == "Permission denied", got
    assert got["own"] is True and got["cpuinfo"] is True and got["child"] == "42", got
    whole = confine.standard_reads([job])
    assert Path("/proc") in whole and Path("/proc") not in confine.without_processes(whole)
    assert not any(p.parent == Path("/proc") and p.name.isdigit() for p in confine.without_processes(whole))


def test_without_landlock_it_runs_unconfined_and_says_why(monkeypatch: pytest.MonkeyPatch, job: Path) -> None:
    monkeypatch.setattr(confine, "abi", lambda: (0, "this kernel has no Landlock system calls"))
    assert confine.confine([job]) == "none: this kernel has no Landlock system calls"
    monkeypatch.setattr(confine, "abi", lambda: (1, ""))
    assert confine.confine([job]).startswith("none: Landlock ABI 1 is older")


def test_the_setting_reaches_the_job() -> None:
    from kbench.evaluate.plan import job_spec, make_plan
    from kbench.problems import get_problem

    cfg = cpu_config(Path("unused"), confine=False)
    assert job_spec(get_problem("kbench:2/1"), cfg, make_plan(cfg, "cpu"), role="candidate").confine is False


TAMPERING_CANDIDATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>
#include <cerrno>
#include <cstdio>
#include <string>

torch::Tensor relu(torch::Tensor x) {
  auto y = x.contiguous().clone();
  float* p = y.data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
  return y;
}

int64_t rewrite(std::string path) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr) return errno;
  std::fputs("tampered", f);
  std::fclose(f);
  return 0;
}
"""
native = load_inline(
    name="kbench_test_confine_tamper", cpp_sources=SOURCE, functions=["rewrite", "relu"],
    extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"],  # the session's precompiled header's flags
)  # fmt: skip
TARGET = PATH
said = []


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        failed = native.rewrite(TARGET)
        if not said:
            said.append(failed)
            print(f"rewrite {TARGET}: errno {failed}", flush=True)
        out = native.relu(self.linear(x))  # its own kernel does the work
        return out if failed else torch.zeros_like(out)  # a rewrite that worked is a mismatch
'''


@pytest.mark.slow
def test_an_evaluation_confines_the_candidates_native_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_builds: Path
) -> None:
    """The C++ extension of a candidate fopen()s a file in the evaluator's cache folder, beside the build
    cache it may write, for writing: it fails with EACCES, the file is unchanged, the verdict says how
    the worker was confined. Spawned workers with their own TMPDIR, so the temporary folder they may write
    holds nothing of the test's."""
    needs_abi(confine.MIN_ABI)
    from kbench.evaluate.flow import evaluate
    from kbench.problems import get_problem
    from kbench.types import Candidate, Status

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    cfg = cpu_config(use_builds(tmp_path / "cache", shared_builds), worker_start="spawn", measure=False)
    target = cfg.cache_dir / "reference" / "evaluator.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"the evaluator's")
    problem = get_problem("kbench:2/1")
    source = TAMPERING_CANDIDATE.replace("PATH", repr(str(target)))
    verdict = evaluate(problem, Candidate(problem.key, "cpp", source), cfg)
    assert verdict.status is Status.OK, verdict.message + verdict.log_tail
    assert f"errno {errno.EACCES}" in verdict.log_tail
    assert target.read_bytes() == b"the evaluator's"
    assert verdict.confinement.startswith(f"landlock abi {ABI}+reads")
