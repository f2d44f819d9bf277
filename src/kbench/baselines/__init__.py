"""Baselines: the reference timed in eager and torch.compile modes.

`modes` is the one registry of modes (imported by the reference worker, so it imports nothing of the
host); `storage` stores, reuses and moves them to and from upstream KernelBench's JSON; `measure` is
`kbench baseline`'s timer, through the evaluator's reference run.
"""
