"""The speed-of-light worker (`python -m kbench.worker.floor JOBDIR`): trusted code only.

It traces the problem's `Model` on the meta device (analysis/roofline.py) and signs the floor no honest
kernel can beat on the job's GPU (`SOL.floor_ms` at TF32 rates, the most permissive). The host once did
this on a thread beside its own work: the first trace imports sympy and runs for ~2 s holding the
interpreter lock, and the output comparisons that ran meanwhile took six times as long (a cold
`kbench eval` spent 1-1.9 s comparing 32-256 MiB outputs that take 0.05-0.4 s). In its own process it
costs the host nothing; it needs no GPU and takes no lease.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kbench.sandbox import procs
from kbench.sandbox.protocol import JOB_FILE, JobSpec, WorkerResult, read_key, write_result


def compute_floor(spec: JobSpec) -> WorkerResult:
    from kbench.analysis.gpus import match_device_name
    from kbench.analysis.roofline import speed_of_light

    result = WorkerResult()
    t0 = time.perf_counter()
    gpu = match_device_name(spec.gpu)
    if spec.problem is None or gpu is None:
        result.message = f"no problem or no known GPU named {spec.gpu!r}"
    else:
        try:
            result.floor_ms = speed_of_light(spec.problem, spec.preset, spec.dtype, gpu, tf32=True).floor_ms
        except Exception as exc:  # the problem's trace failed: the host runs the verdict without the rule
            result.message = f"{type(exc).__name__}: {exc}"[:2000]
    result.phases = {"floor": round(time.perf_counter() - t0, 3)}
    return result


def main(argv: list[str]) -> int:
    procs.bind_to_parent()  # first: a worker must never outlive the kbench process that started it
    jobdir = Path(argv[1])
    key = read_key()
    spec = JobSpec.model_validate_json((jobdir / JOB_FILE).read_text())
    write_result(jobdir, compute_floor(spec), key)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing to tear down


if __name__ == "__main__":
    sys.exit(main(sys.argv))
