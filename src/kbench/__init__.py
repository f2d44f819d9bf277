"""kbench: a trusted benchmark and toolkit for fused GPU kernels written by language models.

`from kbench import Evaluator, Submission` is the library's front door (kbench/api/); importing kbench
itself imports nothing else, so the entry point and every job process start light.
"""

from typing import Any

from kbench.version import VERSION as __version__

_API = ("Evaluator", "EvaluatorClosed", "EvaluatorOptions", "EvaluatorStats", "JobState", "KeyConflict",
        "Submission", "Ticket")  # fmt: skip
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        import kbench.api

        return getattr(kbench.api, name)
    raise AttributeError(f"module 'kbench' has no attribute {name!r}")
