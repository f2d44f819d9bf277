"""The host side of the sandbox: time limit kills the whole group; results are authenticated."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kbench.sandbox.host import run_worker
from kbench.sandbox.procs import members
from kbench.sandbox.protocol import ForgedResult, JobSpec, WorkerResult, read_result, write_result
from kbench.types import Problem
from kbench.worker.guards import changed

SPEC = JobSpec(
    role="candidate",
    problem=Problem(source="t", level=0, number=0, name="t", code=""),
    preset="full",
    dtype="fp32",
    device="cpu",
)


def _module(tmp_path: Path, body: str) -> dict[str, str]:
    (tmp_path / "fakeworker.py").write_text(body)
    # kbench stays importable where it runs from a source tree rather than an install (the GPU machine)
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)}


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    env = _module(tmp_path, "import subprocess, time\nsubprocess.Popen(['sleep', '200'])\ntime.sleep(200)\n")
    t0 = time.monotonic()
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=2.0, env=env)
    assert exit_.timed_out and exit_.returncode is None
    assert 2.0 <= exit_.seconds < 10  # killed at its limit, from the worker's start, not after 200 s
    assert time.monotonic() - t0 - exit_.spawn_s < 15  # the first call also starts the warm starter
    assert not members(exit_.pgid)


def test_a_slow_starter_does_not_eat_the_workers_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starter still importing torch when the job comes (seconds on a busy machine) used to leave the
    deadline past when the fork returned: the child was killed before it led its own group, the kill
    missed, and the host waited for the job's own end (200 s here)."""
    from kbench.sandbox import starter

    real = starter.start_worker

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(2.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(starter, "start_worker", slow)
    body = "import pathlib, subprocess, sys, time\npathlib.Path(sys.argv[1], 'ran').touch()\n"
    env = _module(tmp_path, body + "subprocess.Popen(['sleep', '200'])\ntime.sleep(200)\n")
    t0 = time.monotonic()
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=2.0, env=env)
    assert exit_.timed_out and exit_.returncode is None
    assert (tmp_path / "job" / "ran").exists()  # it got its 2 s, not a deadline already past
    assert 2.0 <= exit_.seconds < 10 and time.monotonic() - t0 < 20
    assert not members(exit_.pgid)


def test_a_timed_out_worker_dies_even_if_the_group_kill_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed before it called setsid is not yet its session's leader: the session kill misses."""
    from kbench.sandbox import procs

    monkeypatch.setattr(procs, "kill_session", lambda session: None)
    env = _module(tmp_path, "import time\ntime.sleep(200)\n")
    t0 = time.monotonic()
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=1.0, env=env)
    assert exit_.timed_out and time.monotonic() - t0 < 20


def test_leftover_children_are_reported_and_killed(tmp_path: Path) -> None:
    env = _module(tmp_path, "import subprocess\nsubprocess.Popen(['sleep', '200'])\n")
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env)
    assert exit_.returncode == 0 and exit_.leftover and not exit_.timed_out
    assert not members(exit_.pgid)


def test_log_tail_and_exit_code(tmp_path: Path) -> None:
    env = _module(tmp_path, "import sys\nfor i in range(100): print('line', i)\nsys.exit(3)\n")
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env)
    assert exit_.returncode == 3 and not exit_.leftover
    lines = exit_.log_tail.splitlines()
    assert len(lines) == 60 and lines[-1] == "line 99"


def test_signed_result_roundtrip_and_forgery(tmp_path: Path) -> None:
    key = b"k" * 32
    write_result(tmp_path, WorkerResult(message="hi"), key)
    result = read_result(tmp_path, key)
    assert result is not None and result.message == "hi"
    with pytest.raises(ForgedResult):
        read_result(tmp_path, b"x" * 32)
    (tmp_path / "result.json").write_text(json.dumps({"body": "{}", "mac": "0" * 64}))
    with pytest.raises(ForgedResult):
        read_result(tmp_path, key)
    (tmp_path / "result.json").write_text("not json")
    with pytest.raises(ForgedResult):
        read_result(tmp_path, key)


def test_tensor_files_round_trip_raw_and_reject_tampering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import kbench.sandbox.tensorfiles as tensorfiles

    monkeypatch.setattr(tensorfiles, "DIGEST_CHUNK_BYTES", 64)  # several chunks hashed in threads
    values = [
        torch.randn(3, 50),
        torch.tensor(True),
        torch.zeros(0, 5),
        torch.arange(6, dtype=torch.int64).reshape(2, 3)[:, 1],  # not contiguous
        torch.randn(2, 2).to(torch.bfloat16),
    ]
    files = tensorfiles.save_tensors(tmp_path, "out", values)
    assert [f.name for f in files] == [f"out_{i}.bin" for i in range(5)]
    assert [f.dtype for f in files] == ["float32", "bool", "float32", "int64", "bfloat16"]
    key = b"k" * 32
    write_result(tmp_path, WorkerResult(outputs={"1": files}), key)
    result = read_result(tmp_path, key)
    assert result is not None
    back = tensorfiles.load_tensors(tmp_path, result.outputs["1"])
    assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(values, back, strict=True))
    data = bytearray((tmp_path / "out_0.bin").read_bytes())
    data[-1] ^= 1  # one bit in the last chunk
    (tmp_path / "out_0.bin").write_bytes(bytes(data))
    with pytest.raises(ForgedResult, match="altered"):
        read_result(tmp_path, key)
    (tmp_path / "out_0.bin").write_bytes(bytes(data[:-4]))  # one element short
    with pytest.raises(ForgedResult, match="bytes, expected"):
        read_result(tmp_path, key)


def test_tensor_files_of_earlier_versions_still_load(tmp_path: Path) -> None:
    import torch

    from kbench.sandbox.protocol import TensorFile
    from kbench.sandbox.tensorfiles import load_tensors, sha256_file

    torch.save(torch.arange(4.0), tmp_path / "out_0.pt")  # a reference cache written before raw files
    legacy = TensorFile(name="out_0.pt", digest=sha256_file(tmp_path / "out_0.pt"))
    write_result(tmp_path, WorkerResult(outputs={"1": [legacy]}), b"k" * 32)
    assert read_result(tmp_path, b"k" * 32) is not None
    assert load_tensors(tmp_path, [legacy])[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_missing_result_is_none(tmp_path: Path) -> None:
    assert read_result(tmp_path, b"k" * 32) is None


def test_guard_diff_ignores_added_names() -> None:
    assert changed({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == ["b"]
    assert changed({"a": 1}, {}) == ["a"]


_DYNAMO_SCRIPT = """
import functools, torch
from kbench.worker.guards import Guards
g = Guards()
import torch._dynamo  # wraps torch.manual_seed (torch's own wrapper): tolerated
assert g.violation("import") is None, g.violation("import")
orig = torch.manual_seed.__wrapped__
torch.manual_seed = functools.wraps(orig)(lambda seed: orig(seed))  # a foreign wrapper: caught
hit = g.violation("forward")
assert hit is not None and hit[0] == "reference-patched" and "manual_seed" in hit[1], hit
print("ok")
"""


def test_torch_own_dynamo_wrapper_is_not_a_patch() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _DYNAMO_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_forked_worker_gets_its_key_env_and_folder(tmp_path: Path) -> None:
    body = (
        "import os, sys\nfrom kbench.sandbox.protocol import read_key\n"
        "key = read_key()\nprint(len(key), os.environ.get('JOB_VAR'), os.getcwd() == sys.path[0], os.getsid(0) == os.getpid())\n"
        "print('fifo left', os.path.exists(os.path.join(sys.argv[1], 'key.fifo')))\n"
    )
    env = _module(tmp_path, body) | {"JOB_VAR": "x1"}
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env, start="fork")
    assert exit_.returncode == 0, exit_.log_tail
    assert exit_.log_tail.splitlines() == ["32 x1 True True", "fifo left False"]


def test_fork_request_carries_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.sandbox import starter

    seen: list[dict[str, object]] = []
    real = starter.Starter.start

    def spy(self, request, *args):  # type: ignore[no-untyped-def]
        seen.append(request)
        return real(self, request, *args)

    monkeypatch.setattr(starter.Starter, "start", spy)
    env = _module(tmp_path, "from kbench.sandbox.protocol import read_key\nread_key()\n")
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env, start="fork")
    assert exit_.returncode == 0 and len(seen) == 1
    assert exit_.key.hex() not in json.dumps(seen[0]) and exit_.key.decode("latin-1") not in json.dumps(
        seen[0]
    )


def test_a_forked_worker_writes_no_bytecode_where_its_starter_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a bytecode folder (kbench/sandbox/bytecode.py) the starter is its own (the prefix is part of its
    start-up), writes its own imports there, and forks workers that look there but write nothing (their
    jobs say so)."""
    from kbench.sandbox import bytecode

    where = tmp_path / "pycache"
    monkeypatch.setattr(bytecode, "_folder", lambda: where)
    body = (
        "import sys\nimport job_helper\n"
        "print(sys.dont_write_bytecode, sys.pycache_prefix, job_helper.__cached__)\n"
    )
    env = _module(tmp_path, body)
    (tmp_path / "job_helper.py").write_text("Y = 3\n")
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=120.0, env=env, start="fork")
    assert exit_.returncode == 0 and "starter" in exit_.start_phases, exit_.log_tail  # forked
    flag, prefix, helper = exit_.log_tail.split()[-3:]
    assert (flag, prefix) == ("True", str(where))
    assert Path(helper).is_relative_to(where) and not Path(helper).exists()  # looked for there, not written
    assert list(where.rglob("torch/__init__.*.pyc")), "the starter's own torch import was not written"


def test_a_killed_starter_is_replaced_and_its_jobs_still_end(tmp_path: Path) -> None:
    body = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.5)\n"
    env = _module(tmp_path, body)
    exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env, start="fork")
    assert not exit_.timed_out and exit_.returncode is not None  # followed through /proc, not hung
    env2 = _module(tmp_path, "import sys\nsys.exit(5)\n")
    again = run_worker("fakeworker", tmp_path / "job2", SPEC, budgets=20.0, env=env2, start="fork")
    assert again.returncode == 5


def test_starter_preloads_what_its_requests_name_per_triton_mode(tmp_path: Path) -> None:
    """The optional modules a request names (torch.utils.cpp_extension for a candidate runner, torch._dynamo
    for a reference timing torch.compile, triton.testing for a Triton runner) are preloaded after the
    worker that named them was forked, once the probe shows they are fork-safe, for the workers that
    follow; a name outside zygote.OPTIONAL_PRELOAD is never imported. Before any request names one,
    nothing optional is imported. TRITON_INTERPRET decides how triton binds at import, so each mode has
    its own starter."""
    from kbench.sandbox.host import worker_env
    from kbench.sandbox.starter import starter_for

    compiled = starter_for(worker_env(_module(tmp_path, "")))
    interpreted = starter_for(worker_env({**_module(tmp_path, ""), "TRITON_INTERPRET": "1"}))
    assert compiled is not None and interpreted is not None and compiled is not interpreted
    time.sleep(1.0)  # a preload of its own would have begun 20 ms after "ready"
    assert compiled.preloaded == [] and interpreted.preloaded == []
    body = (
        "import sys\nfrom triton.runtime import cache\n"
        "print('dynamo' if 'torch._dynamo' in sys.modules else 'cold')\n"
        "print('cpp_extension', 'torch.utils.cpp_extension' in sys.modules)\n"
        "print('key', cache.triton_key.cache_info().currsize)\n"
        "print('json.tool', 'json.tool' in sys.modules)\n"
    )
    env = _module(tmp_path, body)
    wanted = ["torch.utils.cpp_extension", "torch._dynamo", "triton.testing"]
    first = run_worker(
        "fakeworker", tmp_path / "job1", SPEC, 60.0, env=env, start="fork", preload=[*wanted, "json.tool"]
    )
    assert first.returncode == 0 and "cold" in first.log_tail, first.log_tail  # forked before any preload
    deadline = time.monotonic() + 180  # preloaded while no job waits (zygote.serve)
    while not set(wanted) <= set(compiled.preloaded) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert compiled.preloaded == wanted  # in OPTIONAL_PRELOAD's order; json.tool is not one of them
    # a later worker finds torch._dynamo imported and Triton's cache key computed (zygote.AFTER_PRELOAD)
    exit_ = run_worker("fakeworker", tmp_path / "job2", SPEC, budgets=60.0, env=env, start="fork")
    assert exit_.returncode == 0 and "dynamo" in exit_.log_tail, exit_.log_tail
    assert "key 1" in exit_.log_tail, exit_.log_tail
    assert "cpp_extension True" in exit_.log_tail, exit_.log_tail  # the runners' build hooks
    assert "json.tool False" in exit_.log_tail, exit_.log_tail
    assert interpreted.preloaded == []  # no request came to the other mode's starter


def test_a_one_shot_starter_preloads_nothing_more_and_forks_at_once(tmp_path: Path) -> None:
    """`kbench eval` asks for its workers once: its starter imports nothing optional, so a request that comes
    a moment after "ready" is forked at once instead of waiting behind a seconds-long torch._dynamo import."""
    from kbench.sandbox.host import worker_env
    from kbench.sandbox.starter import Starter
    from kbench.sandbox.starterwire import ForkRequest

    env = worker_env(
        _module(
            tmp_path, "import sys\nprint(sorted(m for m in sys.modules if m.startswith('torch._dynamo')))\n"
        )
    )
    one_shot = Starter(env, optional_preload=False)
    try:
        assert one_shot.wait_ready(), one_shot.reason
        time.sleep(1.0)  # a preload would have begun 20 ms after "ready"
        t0 = time.monotonic()
        log = tmp_path / "one.log"
        job = tmp_path / "one"
        job.mkdir()
        request = ForkRequest(id=0, module="fakeworker", jobdir=str(job), cwd=str(tmp_path), env=env,
                              log=str(log), limit=None, args=[])  # fmt: skip
        proc = one_shot.start(request)
        assert proc is not None and proc.wait(30) == 0
        assert time.monotonic() - t0 < 1.0  # no import stood in its way
        assert one_shot.preloaded == [] and log.read_text().strip() == "[]"
    finally:
        one_shot.close()


def test_prewarm_launches_the_starter_before_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The starter's process is launched by the call itself, not by a thread that would have to win the
    GIL from the host's torch import; the first job then waits for it to be ready."""
    from kbench.sandbox import starter
    from kbench.sandbox.host import worker_env

    monkeypatch.setattr(starter, "_starters", {})
    monkeypatch.setattr(starter, "_failed", {})
    starter.prewarm(one_shot=True)
    env = worker_env({})
    (launched,) = starter._starters.values()
    try:
        assert launched.alive()  # launched before prewarm returned; not waited for
        assert starter.starter_for(env) is launched and launched.ready  # the first job waits, then forks
        assert launched.preloaded == []  # one-shot: nothing optional
    finally:
        launched.close()


def test_spawn_is_used_when_no_starter_can_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.errors import ConfigError
    from kbench.sandbox import starter

    monkeypatch.setattr(starter, "starter_for", lambda env: None)
    env = _module(tmp_path, "import sys\nsys.exit(4)\n")
    assert run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env).returncode == 4
    with pytest.raises(ConfigError):
        run_worker("fakeworker", tmp_path / "job", SPEC, budgets=20.0, env=env, start="fork")


@pytest.mark.gpu
def test_forked_worker_uses_cuda_when_the_starter_runs(tmp_path: Path) -> None:
    from kbench.sandbox.starter import failure_reason, starter_for

    body = (
        "import torch\nfrom kbench.sandbox.protocol import read_key\nread_key()\n"
        "x = torch.ones(1000, device='cuda')\nprint('sum', float(x.sum()))\n"
    )
    env = _module(tmp_path, body)
    gpu_spec = SPEC.model_copy(update={"device": "cuda:0"})
    exit_ = run_worker("fakeworker", tmp_path / "job", gpu_spec, budgets=60.0, env=env)
    assert exit_.returncode == 0 and "sum 1000.0" in exit_.log_tail, exit_.log_tail
    from kbench.sandbox.host import worker_env

    # forked, not spawned: importing torch must not initialise CUDA, whatever libraries it maps
    assert starter_for(worker_env(env)) is not None, failure_reason(worker_env(env))


_PRELOAD_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from kbench.sandbox import zygote
path = Path(sys.argv[1], "probes.json")
known = {}
probed = zygote._preload("threaded_mod", path, known)  # the probe sees the thread: not imported
print(json.dumps({"probed": probed, "known": list(known.values()), "loaded": "threaded_mod" in sys.modules}))
known[zygote._probe_key("threaded_mod")] = True  # a remembered answer that no longer holds
try:
    zygote._preload("threaded_mod", path, known)
    print(json.dumps({"unsafe": False}))
except zygote.Unsafe:
    print(json.dumps({"unsafe": True, "forgotten": zygote._probe_key("threaded_mod") not in json.loads(path.read_text())}))
"""


def test_a_preload_that_starts_a_thread_is_refused_and_forgotten(tmp_path: Path) -> None:
    """A module whose import starts a thread is never imported by the starter on a fresh probe; when a
    remembered probe says it is safe but the import then starts a thread, the starter stops forking
    (`Unsafe`) and forgets the answer, so the next starter probes again."""
    import subprocess
    import sys

    (tmp_path / "threaded_mod.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", _PRELOAD_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first == {"probed": False, "known": [False], "loaded": False}
    assert second == {"unsafe": True, "forgotten": True}


def test_reference_outputs_are_read_into_private_memory_and_checked_there(tmp_path: Path) -> None:
    """The reference's files are checked as they are read into the host's own memory: a rewrite before the
    read is caught, a rewrite after it changes nothing the host compares with (a mapped file would)."""
    import torch

    from kbench.sandbox.tensorfiles import load_verified, save_tensors

    values = [torch.arange(1000, dtype=torch.float32), torch.ones(3, 5, dtype=torch.float64)]
    files = save_tensors(tmp_path, "out_1", values)
    loaded = load_verified(tmp_path, files)
    assert all(torch.equal(a, b) for a, b in zip(loaded, values, strict=True))
    (tmp_path / files[0].name).write_bytes(torch.zeros(1000, dtype=torch.float32).numpy().tobytes())
    assert torch.equal(loaded[0], values[0])  # the private copy did not follow the file
    with pytest.raises(ForgedResult, match="altered"):
        load_verified(tmp_path, files)


def test_torch_cuda_is_started_once_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's torch CUDA start (after an offer of device buffers) runs on one thread per device,
    however many offers a run makes."""
    import threading

    from kbench.sandbox import starter

    started: list[str] = []
    done = threading.Event()

    def record(device: str) -> None:
        started.append(device)
        if len(started) == 2:
            done.set()

    monkeypatch.setattr(starter, "_start_torch_cuda", record)
    monkeypatch.setattr(starter, "_cuda_ready", set())
    for device in ("cuda:0", "cuda:0", "cuda:1", "cuda:0"):
        starter.start_torch_cuda_meanwhile(device)
    assert done.wait(10)
    assert sorted(started) == ["cuda:0", "cuda:1"]


def test_a_first_fork_says_how_long_it_waited_for_the_starter_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first job of a starter launched just before waits for its torch import: its `spawn` says how
    much of it was that wait and what the starter spent it on; a later job waits for none of it."""
    from kbench.sandbox import starter
    from kbench.sandbox.host import worker_env

    monkeypatch.setattr(starter, "_starters", {})
    monkeypatch.setattr(starter, "_failed", {})
    env = _module(tmp_path, "print('ran')\n")
    starter.starter_for(worker_env(env), wait=False)  # launched, as prewarm does
    try:
        first = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=60.0, env=env, start="fork")
        again = run_worker("fakeworker", tmp_path / "job2", SPEC, budgets=60.0, env=env, start="fork")
    finally:
        for found in starter._starters.values():
            found.close()
    assert first.returncode == 0 and again.returncode == 0, first.log_tail + again.log_tail
    phases = first.start_phases
    assert set(phases) == set(starter.START_PHASES), phases
    assert 0.0 < phases["starter"] <= first.spawn_s
    assert phases["starter_torch"] > 0.1 and phases["starter_kbench"] > 0.0  # torch, then the worker modules
    # its own start covers its imports, and the job waited for no more than that start
    assert phases["starter_start"] >= phases["starter_torch"] + phases["starter_kbench"]
    assert phases["starter"] <= phases["starter_start"] + 0.5
    assert list(again.start_phases) == ["starter"] and again.start_phases["starter"] < 0.005


def test_a_starter_ended_while_starting_is_forgotten_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill_all (a signal, the last Evaluator closing) ends a starter that is still importing torch: the
    next job of the same process starts a new one and forks from it, rather than taking the ended one
    for a starter that cannot start and spawning every worker from then on."""
    from kbench.sandbox import starter
    from kbench.sandbox.host import worker_env

    monkeypatch.setattr(starter, "_starters", {})
    monkeypatch.setattr(starter, "_retired", [])
    monkeypatch.setattr(starter, "_failed", {})
    env = _module(tmp_path, "print('ran')\n")
    starter.starter_for(worker_env(env), wait=False)  # launched, still importing torch
    starter.kill_all()
    try:
        exit_ = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=60.0, env=env, start="fork")
        assert exit_.returncode == 0 and "ran" in exit_.log_tail, exit_.log_tail
        assert starter.failure_reason(worker_env(env)) is None
        assert starter.starter_for(worker_env(env)) is not None
    finally:
        starter.kill_all()


def test_the_last_evaluators_close_keeps_an_idle_starter_and_ends_a_busy_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """end_workers (the last Evaluator closing): a starter whose workers all ended stays, the same process,
    for the next job of this process; one with a worker still running is ended, and that worker with it."""
    import threading

    from kbench.sandbox import starter
    from kbench.sandbox.host import worker_env

    monkeypatch.setattr(starter, "_starters", {})
    monkeypatch.setattr(starter, "_retired", [])
    monkeypatch.setattr(starter, "_failed", {})
    hold = tmp_path / "hold"
    env = _module(tmp_path, f"import os, time\nwhile os.path.exists({str(hold)!r}):\n    time.sleep(0.05)\n")
    try:
        done = run_worker("fakeworker", tmp_path / "job", SPEC, budgets=60.0, env=env, start="fork")
        assert done.returncode == 0, done.log_tail
        kept = starter.starter_for(worker_env(env))
        assert kept is not None and kept.idle()
        starter.end_workers()
        assert kept.alive() and starter.starter_for(worker_env(env)) is kept  # no second torch import

        hold.touch()
        busy: list[Any] = []
        job = threading.Thread(
            target=lambda: busy.append(
                run_worker("fakeworker", tmp_path / "job2", SPEC, budgets=60.0, env=env, start="fork")
            )
        )
        job.start()
        deadline = time.monotonic() + 30
        while kept.idle() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not kept.idle()  # its worker waits on the hold file
        starter.end_workers()
        job.join(30)
        assert not kept.alive() and busy and busy[0].returncode != 0  # ended, with its worker
        starter.starter_for(worker_env(env), wait=False)  # the next job's: a new one
        assert starter._starters and kept not in starter._starters.values()
    finally:
        hold.unlink(missing_ok=True)
        starter.kill_all()


def test_the_starter_waits_only_for_its_own_workers_and_reports_one_whose_exit_was_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process a preloaded module started (ldconfig, a compiler probe) is left to its own Popen: a wait
    for any child took it from there, and that Popen's later wait for the same pid could take a new
    worker's exit, which was then never reported (the host waited for it forever). A worker whose exit
    another waiter took is reported as lost, not waited for."""
    from kbench.sandbox import zygote

    sent: list[dict[str, int]] = []
    monkeypatch.setattr(zygote, "_send", sent.append)
    monkeypatch.setattr(zygote, "_children", {})
    worker, other = os.fork(), 0
    if worker == 0:
        os._exit(3)
    other = os.fork()
    if other == 0:
        os._exit(5)
    zygote._children[worker] = []
    deadline = time.monotonic() + 10
    while not sent and time.monotonic() < deadline:
        zygote._reap()
        time.sleep(0.01)

    def state(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return "reaped"

    while state(other) not in ("Z", "reaped"):
        time.sleep(0.01)  # the other child has ended too: a wait for any child would take it now
    zygote._reap()
    assert state(other) == "Z", "the starter waited for a child that is not its worker"
    assert sent == [{"exit": worker, "code": 3}] and zygote._children == {}
    # not the starter's: still there for its own waiter
    assert os.waitstatus_to_exitcode(os.waitpid(other, 0)[1]) == 5

    taken = os.fork()
    if taken == 0:
        os._exit(4)
    zygote._children[taken] = []
    os.waitpid(taken, 0)  # another waiter takes its status
    zygote._reap()
    assert sent[-1] == {"exit": taken, "code": zygote.LOST_EXIT} and zygote._children == {}
