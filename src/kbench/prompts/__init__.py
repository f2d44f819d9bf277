"""Prompts: problem -> first-turn prompt (templates/, examples/), verdict -> refinement feedback."""

from kbench.prompts.builder import PromptOptions, build_prompt, strip_kbench_metadata
from kbench.prompts.feedback import feedback, refine_message

__all__ = ["PromptOptions", "build_prompt", "feedback", "refine_message", "strip_kbench_metadata"]
