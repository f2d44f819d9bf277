"""kbench as a library: an `Evaluator` opened once and kept warm (api/evaluator.py).

Importing this package does not import torch; the first Evaluator does.
"""

from kbench.api.evaluator import Evaluator, EvaluatorOptions, prewarm
from kbench.api.jobs import EvaluatorClosed, EvaluatorStats, JobState, KeyConflict, Submission, Ticket

__all__ = [
    "Evaluator",
    "EvaluatorClosed",
    "EvaluatorOptions",
    "EvaluatorStats",
    "JobState",
    "KeyConflict",
    "Submission",
    "Ticket",
    "prewarm",
]
