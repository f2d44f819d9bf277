"""The counts worker (`python -m kbench.worker.counts JOBDIR`): a problem's FLOP and byte counts, kept.

Trusted code only (the reference problem on the meta device, analysis/roofline.py). The host asks for it
where it would otherwise count on one of its own threads (evaluate/floor.py): forked from the warm
starter, which imported torch already, it pays only the counting's own imports and the trace, on its own
core. It reads its `CountRequest` (sandbox/protocol.py) in JOBDIR, writes the counts where
`roofline.disk_counts` keeps them, and exits 0; anything else is a failure the host answers by counting
itself.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from kbench.sandbox import procs
from kbench.sandbox.protocol import COUNT_FILE, CountRequest


def refuse_triton() -> None:
    """Keep Triton out of this process unless it is loaded already (a starter that preloaded it).

    Counting imports torch.utils.flop_counter, which imports Triton only to recognise Triton kernels that a
    model's forward launches, and loading Triton's library was 0.4-0.6 s of a 0.7-2 s first count. A
    reference problem is PyTorch code and launches none; were one to, its FLOPs would go uncounted and the
    floor would only be lower (more permissive): never a false `beyond-speed-of-light`."""
    if "triton" not in sys.modules:
        sys.modules["triton"] = None  # type: ignore[assignment]  # `import triton` raises ImportError
        logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)  # its "triton not found"


def count(jobdir: Path) -> None:
    refuse_triton()
    from kbench.analysis.roofline import disk_counts

    request = CountRequest.model_validate_json((jobdir / COUNT_FILE).read_text())
    disk_counts(request.problem, request.preset, request.dtype, Path(request.folder))


COUNT_NICE = 10  # background work: the host's and the workers' threads take its core first


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # a worker never outlives the kbench process that started it
    os.nice(COUNT_NICE)
    count(Path(argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as the other workers: no interpreter teardown after torch


if __name__ == "__main__":
    sys.exit(main(sys.argv))
