"""The modules kbench runs as processes of their own (`python -m MODULE`), each named once here.

The layers that start these processes (the host, the warm starter, the referee) may not import the modules
they start (the import contract's walls: the host never imports the worker, the sandbox sits below the
referee), so they name them; this module, in the lowest layer, is where every such name lives, and
tests/test_entries.py checks that each one is a module that runs.
"""

from __future__ import annotations

REFEREE = "kbench.referee"  # every job's trusted process: forks and commands the job's runner
CANDIDATE_RUNNER = "kbench.worker.candidate"  # runs a candidate's calls on the referee's command
REFERENCE_RUNNER = "kbench.worker.reference"  # runs the problem's Model on the referee's command
COUNTS = "kbench.worker.counts"  # a problem's FLOP and byte counts (the speed-of-light floor)
STARTER = "kbench.sandbox.zygote"  # the warm starter: preloads torch and kbench, forks workers
BUILDER = "kbench.backends.jitbuild"  # one confined build of a candidate's extensions
TRITON_CHECK = "kbench.backends.tritoncheck"  # compiles a Triton candidate's launches for a GPU ahead

# the runner a referee forks for each of its roles (a build job's runner imports the candidate to build it)
RUNNER_OF_ROLE = {"candidate": CANDIDATE_RUNNER, "build": CANDIDATE_RUNNER, "reference": REFERENCE_RUNNER}

ALL = (REFEREE, CANDIDATE_RUNNER, REFERENCE_RUNNER, COUNTS, STARTER, BUILDER, TRITON_CHECK)
