"""The speed-of-light counts of a first evaluation come from a worker, not the host (evaluate/verdict.py)."""

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kbench.analysis.roofline import counts_path, kept_counts, problem_flops
from kbench.config import RunConfig
from kbench.evaluate.verdict import count_in_worker
from kbench.problems import get_problem
from kbench.sandbox import procs
from kbench.sandbox.host import Cancelled
from kbench.sandbox.protocol import LOG_FILE


def _model(forward: str) -> str:
    return (
        "import time\n"
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        f"        {forward}\n"
        "def get_inputs():\n"
        "    return [torch.randn(2)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )


def test_a_first_count_is_made_by_a_worker_and_kept_for_the_host(tmp_path: Path) -> None:
    """The host gets the in-process counts without importing torch._dynamo (its seconds of imports held
    the GIL beside the host's own work), and they stay on disk for the next evaluation."""
    script = (
        "import sys; from pathlib import Path\n"
        "from kbench.config import RunConfig\n"
        "from kbench.evaluate.verdict import count_in_worker\n"
        "from kbench.analysis.roofline import kept_counts\n"
        "from kbench.problems import get_problem\n"
        "p, tmp = get_problem('kbench:2/1'), Path(sys.argv[1])\n"
        "cfg = RunConfig(cache_dir=tmp / 'cache', preset='small')\n"
        "count_in_worker(p, cfg, tmp / 'flops', tmp / 'job')\n"
        "c = kept_counts(p, 'small', 'fp32', tmp / 'flops')\n"
        "print(c.matmul_flops, c.bytes, 'torch._dynamo' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = problem_flops(get_problem("kbench:2/1"), "small", "fp32")
    assert run.stdout.split() == [str(expected.matmul_flops), str(expected.bytes), "False"]
    assert kept_counts(get_problem("kbench:2/1"), "small", "fp32", tmp_path / "flops") == expected


def test_a_count_that_fails_leaves_nothing_and_raises_nothing(tmp_path: Path) -> None:
    broken = replace(get_problem("kbench:2/1"), code=_model("raise ValueError('no model here')"), presets=())
    cfg = RunConfig(cache_dir=tmp_path / "cache")
    count_in_worker(broken, cfg, tmp_path / "flops", tmp_path / "job")
    assert kept_counts(broken, "full", "fp32", tmp_path / "flops") is None
    assert not counts_path(broken, "full", "fp32", tmp_path / "flops").exists()
    assert "no model here" in (tmp_path / "job" / LOG_FILE).read_text()


def test_a_count_no_longer_needed_is_ended(tmp_path: Path) -> None:
    """The evaluator sets the event when its verdict is decided without the floor: the worker is killed."""
    pidfile = tmp_path / "pid"
    forward = f"open({str(pidfile)!r}, 'w').write(str(__import__('os').getpid())); time.sleep(600)"
    slow = replace(get_problem("kbench:2/1"), code=_model(forward), presets=())
    cfg = RunConfig(cache_dir=tmp_path / "cache")
    cancel = threading.Event()
    started = threading.Event()

    def cancel_once_counting() -> None:
        deadline = time.monotonic() + 120  # the starter's torch import on a loaded host
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        started.set()
        cancel.set()

    threading.Thread(target=cancel_once_counting, daemon=True).start()
    with pytest.raises(Cancelled):
        count_in_worker(slow, cfg, tmp_path / "flops", tmp_path / "job", cancel)
    assert started.is_set() and pidfile.exists()
    pid = int(pidfile.read_text())
    info = procs.info_of(pid)
    assert info is None or not info.alive
