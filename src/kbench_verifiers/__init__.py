"""kbench's taskset for `verifiers` under the id verifiers looks up (`vf-eval kbench-verifiers`,
`vf.TasksetConfig(id="kbench-verifiers")`): verifiers imports a taskset as a top-level package exporting its
`Taskset` subclass through `__all__`. Everything lives in kbench.rl.verifiers_env (the `verifiers` extra)."""

from kbench.rl.verifiers_env import KernelTaskset

__all__ = ["KernelTaskset"]
