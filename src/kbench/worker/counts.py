"""The speed-of-light count worker (`python -m kbench.worker.counts JOBDIR`, usually forked by the warm
starter): counts a problem's FLOPs and bytes (analysis/roofline.py) into the cache folder the job names.

A first count imports torch._dynamo and traces the model on the meta device: seconds of imports that, on a
thread of the host, held the GIL and stalled the host's own calls into torch while it read and compared
outputs. Here they run beside the reference and candidate workers instead. Only the problem's own code runs
(never a candidate), and the host reads the counts back from the cache folder (evaluate/verdict.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kbench.sandbox import procs
from kbench.sandbox.protocol import JOB_FILE, JobSpec, announce, read_key


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # first: a worker must never outlive the kbench process that started it
    jobdir = Path(argv[1])
    read_key()  # nothing to sign: the counts go to the cache folder, and the host checks they are there
    spec = JobSpec.model_validate_json((jobdir / JOB_FILE).read_text())
    assert spec.problem is not None
    announce(jobdir, "count")
    from kbench.analysis.roofline import disk_counts

    disk_counts(spec.problem, spec.preset, spec.dtype, Path(spec.cache_dir))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # torch._dynamo's atexit hooks are not needed: the counts are written


if __name__ == "__main__":
    sys.exit(main(sys.argv))
