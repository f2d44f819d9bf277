"""The runner process as its referee sees it: forked first thing, walled in, heard through a bounded log,
ended with everything it started (trusted).

`fork_runner` is the referee's first act, before it has read the job's key or its secret parts, so the
runner's memory (a copy of the referee's at that moment) holds nothing it must not see. The child then
waits for its `Setup` (sandbox/commands.py) and, before any candidate code exists in it, enters its
namespaces (sandbox/isolate.py: with a PID namespace it forks once more and its child is that namespace's
init), mounts its own /proc and temporary folder, lowers its limits, takes its cores, confines itself
(sandbox/confine.py) and only then runs its role's module.

What it prints goes through a pipe to the referee (`LogRelay`), which writes at most `LOG_HEAD` bytes and
then keeps only the last `LOG_TAIL` bytes in memory, so a candidate that prints gigabytes fills neither
the disk nor anyone's memory. `leftovers` lists what the runner left running; `end` kills all of it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from kbench.sandbox import channel as chan
from kbench.sandbox import isolate, procs

LOG_HEAD = 4 << 20  # bytes of a runner's output written as they come
LOG_TAIL = 256 << 10  # and the last bytes kept after that
_TAIL_FLUSH_S = 0.5


class LogRelay:
    """Copies the runner's output from `source` (a pipe) into `path`, bounded (module doc)."""

    def __init__(self, source: int, path: Path) -> None:
        self.source, self.path = source, path
        self.written = 0
        self.dropped = 0
        self.tail = bytearray()
        self.out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.head_end = 0
        self.thread = threading.Thread(target=self._run, name="kbench-log", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import select

        last_flush, pending = time.monotonic(), False
        while True:
            ready = select.select([self.source], [], [], _TAIL_FLUSH_S)[0]
            if not ready:  # quiet for a while: what the tail holds goes to the file now
                if pending:
                    self._flush_tail()
                    last_flush, pending = time.monotonic(), False
                continue
            try:
                data = os.read(self.source, 1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            if self.written < LOG_HEAD:
                room = LOG_HEAD - self.written
                os.write(self.out, data[:room])
                self.written += min(room, len(data))
                data = data[room:]
                self.head_end = os.lseek(self.out, 0, os.SEEK_END)
            if data:
                self.dropped += len(data)
                self.tail += data
                del self.tail[: max(0, len(self.tail) - LOG_TAIL)]
                pending = True
                if time.monotonic() - last_flush > _TAIL_FLUSH_S:
                    self._flush_tail()
                    last_flush, pending = time.monotonic(), False
        self._flush_tail()

    def _flush_tail(self) -> None:
        if not self.dropped:
            return
        kept = len(self.tail)
        note = f"\n[... {self.dropped - kept} bytes of output not kept ...]\n".encode()
        try:
            os.ftruncate(self.out, self.head_end)
            os.write(self.out, note + bytes(self.tail))
        except OSError:
            pass

    def close(self, wait_s: float = 2.0) -> None:
        self.thread.join(wait_s)
        try:
            os.close(self.out)
        except OSError:
            pass


def _child(sock: object, out_w: int, module: str, referee: int) -> None:
    """The runner's first steps (trusted code): never returns."""
    import socket

    code = 1
    try:
        assert isinstance(sock, socket.socket)
        fd = sock.fileno()
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        keep = {0, 1, 2, fd}
        for other in _open_fds():
            if other not in keep:
                try:
                    os.close(other)
                except OSError:
                    pass
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        procs.die_with_parent(referee)
        link = chan.Channel(sock)
        from kbench.sandbox.commands import Ready, Setup

        setup, _ = link.receive(Setup)
        walls: dict[str, float] = {}
        confinement = _wall_in(setup, walls)
        os.environ["KBENCH_RUNNER_FD"] = str(fd)
        os.set_inheritable(fd, False)
        link.send(Ready(confinement=confinement, phases=walls))
        sys.argv = [module]
        import runpy

        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _wall_in(setup: object, seconds: dict[str, float]) -> str:
    """Namespaces, mounts, limits, cores, environment, Landlock: what held, for the verdict; each step's
    seconds into `seconds` (the verdict's `runner_walls_*` phases, inside the referee's `walls`)."""
    clock = [time.perf_counter()]
    from kbench.sandbox import confine
    from kbench.sandbox.commands import Setup

    assert isinstance(setup, Setup)

    def lap(name: str) -> None:
        now = time.perf_counter()
        seconds[name] = round(now - clock[0], 4)
        clock[0] = now

    os.environ.update(setup.env)
    import tempfile

    tempfile.tempdir = None  # the referee's answer is cached; the runner's own TMPDIR from now on
    parts = []
    done: list[str] = []
    if setup.walls is not None:
        walls = isolate.Walls(**setup.walls)
        capped = isolate.cgroup_pids(isolate.tasks(walls)) if os.getuid() == 0 else ""  # before the user ns
        lap("cgroup")
        try:
            done = isolate.enter(walls)
        except (isolate.Refused, OSError) as exc:
            done = []
            parts.append(f"no namespaces: {exc}")
        lap("namespaces")
        if "pid" in done:
            _become_init()
            if "mount" in done and isolate.mount_proc():
                done.append("proc")
            lap("pid_init")
        if "mount" in done and setup.tmp and isolate.mount_tmp(Path(setup.tmp), walls.tmp_mib):
            done.append("tmpfs")
            lap("tmpfs")
        if capped:
            done.append("pids-cgroup")
        if done:
            parts.append("namespaces " + "+".join(done))
        isolate.limit_self(walls)
        lap("limits")
    if setup.memory is not None:
        import resource

        name, limit = setup.memory
        try:
            resource.setrlimit(getattr(resource, name), (limit, limit))
        except (ValueError, OSError):
            pass
    if setup.cores:
        isolate.pin(0, setup.cores)
    if setup.cwd:
        os.chdir(setup.cwd)
        sys.path[0] = setup.cwd
    lap("cores")
    if setup.confine:
        reads = [Path(p) for p in setup.reads] if setup.reads is not None else None
        if reads is not None and "proc" not in done:  # the host's processes show in this /proc
            reads = confine.without_processes(reads)
        parts.insert(0, confine.confine([Path(p) for p in setup.writes], reads=reads))
        lap("landlock")
    return ", ".join(parts) if parts else "none: the trusted reference"


def _become_init() -> None:
    """After unsharing the PID namespace: fork its init, which goes on as the runner; this process stays
    behind only to pass on the init's exit status (and dies with the referee, the init with it)."""
    pid = os.fork()
    if pid == 0:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the waiter
        return
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


class RunnerProcess:
    """The forked runner, from the referee's side."""

    def __init__(self, module: str, log: Path | None = None) -> None:
        parent_sock, child_sock = chan.pair()
        out_r, out_w = os.pipe()
        referee = os.getpid()
        pid = os.fork()
        if pid == 0:
            parent_sock.close()
            os.close(out_r)
            _child(child_sock, out_w, module, referee)
        child_sock.close()
        # The referee's own output takes the same pipe: one writer of the log file, the relay.
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.close(out_w)
        self.pid = pid
        self.channel = chan.Channel(parent_sock)
        self._out = out_r
        self.relay: LogRelay | None = None
        self.returncode: int | None = None
        if log is not None:
            self.start_log(log)

    def start_log(self, path: Path) -> None:
        if self.relay is None:
            self.relay = LogRelay(self._out, path)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.returncode

    def _tree(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for pid in procs.all_pids():
            info = procs.info_of(pid)
            if info is not None and info.alive:
                children.setdefault(info.ppid, []).append(pid)
        return children

    @staticmethod
    def _below(children: dict[int, list[int]], roots: list[int]) -> list[int]:
        found, todo = [], list(roots)
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def descendants(self) -> list[int]:
        """Every live process below the referee: the runner, whatever it started (in its PID namespace, or
        orphans the referee adopted as subreaper), and the referee's builders."""
        children = self._tree()
        return self._below(children, children.get(os.getpid(), []))

    def leftovers(self, builders: frozenset[int] = frozenset()) -> list[int]:
        """What the runner started that still runs, asked while it waits for a command: anything below the
        referee but the runner (its PID namespace's init and that init's waiter) and the builders."""
        children = self._tree()
        everything = set(self._below(children, children.get(os.getpid(), [])))
        runner = {self.pid} | {p for p in children.get(self.pid, []) if _ns_init(p)}
        trusted = set(self._below(children, sorted(builders & everything)))
        return sorted(everything - runner - trusted)

    def end(self) -> None:
        """Kill the runner and everything below it, sweeping until nothing is left (a process that forks
        as fast as it can is caught on a later sweep; in a PID namespace the kernel ends them all with
        its init); reap."""
        procs.kill(self.pid)
        for _ in range(20):
            below = self.descendants()
            if not below:
                break
            for pid in below:
                procs.kill(pid)
            time.sleep(0.005)
        self.wait(5.0)
        isolate.drop_cgroup(self.pid)  # its pids cgroup, where it had one (root), now empty
        self.channel.close()
        sys.stdout.flush()
        sys.stderr.flush()
        after = os.open(self.relay.path, os.O_WRONLY | os.O_APPEND) if self.relay is not None else None
        null = os.open(os.devnull, os.O_WRONLY) if after is None else after
        os.dup2(null, 1)  # the pipe's last writer goes: the relay reads its end, writes the tail, stops
        os.dup2(null, 2)
        os.close(null)
        if self.relay is not None:
            self.relay.close()


def _ns_init(pid: int) -> bool:
    """Whether `pid` is the init of a PID namespace of its own (its status lists it as 1 there)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ids = line.split()[1:]
                return len(ids) > 1 and ids[-1] == "1"
    except OSError:
        return False
    return False
