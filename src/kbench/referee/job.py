"""What every referee does for its job, whatever the role: the runner's walls and start, phases and their
budgets, the GPU lease, the log, the end (trusted).

The job folder (`JOBDIR`, made by the host) belongs to the host and the referee: `job.json` (the spec,
secret parts included), the key's FIFO, `phase`, `result.json`, the outputs' files, `log.txt`. The
runner never reads or writes it: it works in `JOBDIR/run`, the only folder of the job it may write (with
its temporary folder), and reads nothing of the job but what the referee hands it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from kbench.referee import Stop
from kbench.referee.runner import RunnerProcess
from kbench.referee.session import Phase, Session
from kbench.sandbox import confine, lease
from kbench.sandbox.commands import Ready, RunnerSpec, Setup
from kbench.sandbox.protocol import LOG_FILE, JobSpec, WorkerResult, announce

RUN_FOLDER = "run"
BUILDS_FOLDER = "builds"  # the job's copies of its verified builds: its runner reads them, never writes


# The folders a runner's tools keep their files in, inside its working folder. That folder is the first
# entry of its import path (as `python -m` has it), so none is named as a module could be: a folder `triton`
# there would be imported as a namespace package where Triton is not installed, and torch would take it for
# Triton and fail.
RUNNER_FOLDERS = {
    "home": ".home",
    "tmp": ".tmp",
    "triton": "triton-cache",
    "nv": "nv-cache",
    "cache": "xdg-cache",
    "inductor": "inductor-cache",
}


def runner_env(run: Path, device: str, untrusted: bool = True) -> dict[str, str]:
    """Where a runner's tools keep their files: all in its own folder (nothing shared with another job:
    Triton's, Inductor's (torch.compile, and the code Helion generates) and the CUDA driver's kernel caches
    included, which a candidate could otherwise poison). Inductor's is named outright for a candidate's
    runner (its default lies under the temporary folder the warm starter read before this one was set); a
    trusted runner keeps the one it was started with (a reference's torch.compile: the cache's trusted
    folder, evaluate/prebuild.py `reference_env`, warm across jobs)."""
    f = {k: run / v for k, v in RUNNER_FOLDERS.items()}
    return {
        "HOME": str(f["home"]),
        "TMPDIR": str(f["tmp"]),
        "TRITON_CACHE_DIR": str(f["triton"]),
        "TRITON_HOME": str(f["home"]),
        "CUDA_CACHE_PATH": str(f["nv"]),
        "TORCH_EXTENSIONS_DIR": str(f["tmp"] / "extensions"),
        "XDG_CACHE_HOME": str(f["cache"]),
        "PYTHONDONTWRITEBYTECODE": "1",
    } | ({"TORCHINDUCTOR_CACHE_DIR": str(f["inductor"])} if untrusted else {})


class Job:
    def __init__(self, jobdir: Path, spec: JobSpec, key: bytes, runner: RunnerProcess) -> None:
        self.jobdir, self.spec, self.key, self.runner = jobdir, spec, key, runner
        self.result = WorkerResult()
        self.run = jobdir / RUN_FOLDER
        self.leased = False
        from kbench.backends.jitbuild import BUILD_NICE
        from kbench.referee.builds import Builder

        nice = BUILD_NICE if spec.role == "build" else 0  # ahead of the GPU queue: below the lanes
        budget = spec.budgets.get("build", 600.0)
        self.builds = jobdir / BUILDS_FOLDER
        self.builder = Builder(
            Path(spec.cache_dir), budget, dict(os.environ), spec.confine, nice, hand_to=self.builds
        )
        self.session = Session(runner, self.builder if spec.role != "reference" else None, self.log_tail)

    def log_tail(self, nbytes: int = 16 << 10) -> str:
        try:
            with (self.jobdir / LOG_FILE).open("rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - nbytes))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def phase(self, name: str) -> Phase:
        """Enter phase `name`: the host is told (its backstop budget), the referee keeps the budget."""
        phase = Phase(name, self.spec.budgets.get(name, 600.0), lambda n: announce(self.jobdir, n))
        self.session.enter(phase)
        return phase

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.result.phases[name] = round(time.perf_counter() - t0, 3)

    def setup(self, untrusted: bool) -> None:
        """Send the runner its walls; wait until it stands behind them."""
        for sub in RUNNER_FOLDERS.values():
            (self.run / sub).mkdir(parents=True, exist_ok=True)
        env = runner_env(self.run, self.spec.device, untrusted)
        cache = Path(self.spec.cache_dir)
        reads = None
        self.builds.mkdir(exist_ok=True)  # Landlock grants reads on what exists
        if untrusted and self.spec.confine:
            extra = [self.run, self.builds, cache / "pycache", cache / "triton-key.json"]
            reads = [str(p) for p in confine.standard_reads(extra)]
        memory = None
        if self.spec.memory_limit_gb > 0:
            name = "RLIMIT_DATA" if self.spec.device.startswith("cuda") else "RLIMIT_AS"
            memory = (name, int(self.spec.memory_limit_gb * 2**30))
        setup = Setup(
            walls=self.spec.walls if untrusted else None,
            cores=self.spec.cores,
            confine=untrusted and self.spec.confine,
            writes=[str(self.run)],
            reads=reads,
            env=env,
            tmp=str(self.run),  # its memory file system: every byte it writes counts against its cap
            cwd=str(self.run),
            memory=memory,
        )
        with self.timed("walls"):  # not `runner_setup`: the runner's role module reports that phase itself
            self.runner.channel.send(setup)
            ready = self._first_answer()
        for step, seconds in ready.phases.items():  # the runner's own account: where its walls took time
            self.result.phases[f"runner_walls_{step}"] = seconds  # inside `walls`: not added again
        self.result.confinement = ready.confinement if untrusted else ""

    def _first_answer(self) -> Ready:
        from kbench.sandbox.channel import ChannelError

        try:
            ready, _ = self.runner.channel.receive(Ready, timeout=self.spec.budgets.get("start", 120.0))
        except ChannelError as exc:
            raise self.session._died(f"did not start ({exc})") from None
        return ready

    def start_role(self, spec: RunnerSpec) -> Ready:
        """Send the runner its role's spec; its answer once the role stands (imports, hooks, snapshots).
        Where no timing loop runs on the device, the runner starts CUDA meanwhile, under the device's
        timing lock held shared here (sandbox/timinglock.py)."""
        with self._early_cuda(spec) as early:
            spec.early_cuda = early
            self.runner.channel.send(spec)
            return self._first_answer()

    @contextlib.contextmanager
    def _early_cuda(self, spec: RunnerSpec) -> Iterator[bool]:
        if not lease.required(self.spec.role, self.spec.device) or spec.role == "build":
            yield False
            return
        from kbench.sandbox import timinglock

        with timinglock.shared_window(self.spec.device) as taken:
            yield taken

    def take_lease(self) -> None:
        if not lease.required(self.spec.role, self.spec.device):
            return
        self.phase("lease")
        with self.timed("lease"):
            try:
                lease.acquire(
                    lease.device_id(self.spec.device), self.jobdir, self.spec.lease_wait_s, self.spec.role
                )
            except lease.LeaseTimeout as exc:
                self.result.error = str(exc)
                raise Abort() from None
        self.leased = True

    def give_lease(self) -> None:
        if self.leased:
            lease.release()
            self.leased = False

    def fail(self, stop: Stop) -> None:
        self.result.status, self.result.message, self.result.rule = stop.status, stop.message, stop.rule


class Abort(Exception):
    """kbench's own failure (result.error is set): the job ends without a verdict."""


def cpu_seconds(pids: list[int]) -> float:
    """CPU time the processes `pids` and their threads used so far (their schedstat: nanoseconds)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9
