"""The `kbench` command's entry point (and `python -m kbench`'s): the warm starter first, then the CLI.

A cold `kbench eval` waits for the warm starter (sandbox/starter.py) to import torch before its first
worker forks: the longest step of the verdict. Launched by the CLI, the starter began only after the CLI
had imported itself (typer, rich, pydantic, every command's module: about a second on a GPU host). Here
a command that starts workers has its starter launched before any of that, from what its arguments and
KBENCH_* variables say (`early_start`); the CLI's own launch then finds it by its start-up environment. A
guess the settings later contradict (a --config file says otherwise) costs an idle starter, closed at
exit; where the arguments cannot tell, nothing is launched early.

Before anything else, where the installation keeps no bytecode for torch, this process reads and writes
its bytecode in kbench's cache folder (kbench/sandbox/bytecode.py): otherwise every command compiles torch's
modules again, seconds at each start.

The same commands start this process's own torch import on a thread at once: it takes as long as the
starter's, and the host needs torch before the verdict (the comparison on the device, the judge).

A stop signal (SIGINT, SIGTERM, SIGHUP) in the second or so before the CLI takes over their handling
(cli.main, sandbox/host.stop_on_signals) ends the command the same way: the early starter is ended, one
line says so, and the exit status is 128 + the signal's number, instead of a bare death by the signal or
a KeyboardInterrupt traceback from the middle of an import.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

# commands that start workers: one verdict and exit?
ONE_SHOT = {"eval": True, "run": False, "serve": False, "mcp": False}


def _stopped_early(signum: int, frame: object) -> None:
    """The handler of a stop signal while the CLI imports itself: nothing has run yet but the starter."""
    starter = sys.modules.get("kbench.sandbox.starter")
    if starter is not None:  # launched early: end it (it would die with this process; this is at once)
        try:
            starter.kill_all()
        except Exception:
            pass
    name = signal.Signals(signum).name
    os.write(2, f"stopped: interrupted by {name} while starting; nothing was evaluated\n".encode())
    os._exit(128 + signum)


def catch_early_stops() -> dict[int, Any]:
    """Until the CLI installs its own handlers, a stop signal ends the command with a message; the
    handlers this replaced, to put back then."""
    from kbench.sandbox.procs import STOP_SIGNALS

    return {sig: signal.signal(sig, _stopped_early) for sig in STOP_SIGNALS}


def _value(args: Sequence[str], *names: str) -> str | None:
    """The value given to option `names` (`--name value`, `--name=value`, `-n value`), else None."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def early_start(args: Sequence[str], environ: Mapping[str, str]) -> tuple[dict[str, str], bool] | None:
    """(startup environment, one_shot) of the starter command line `args` will ask for (api.prewarm decides
    the same from the resolved settings), or None when it starts no worker or cannot be told here."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command not in ONE_SHOT or {"--help", "-h", "--config"} & {a.split("=")[0] for a in args}:
        return None
    if environ.get("KBENCH_WORKER_START", "auto") == "spawn":
        return None
    from kbench.backends import startup_env

    backend = _value(args, "--backend", "-b") or environ.get("KBENCH_BACKEND", "")
    device = _value(args, "--device") or environ.get("KBENCH_DEVICE", "auto")
    return startup_env(backend, device), ONE_SHOT[command]


def main() -> None:
    try:  # first: everything this process imports from here on reads (or compiles once) kbench's bytecode
        from kbench.sandbox import bytecode

        bytecode.use_here()
    except Exception:  # only a head start: Python compiles as it would have
        pass
    previous = catch_early_stops()
    try:
        guess = early_start(sys.argv[1:], os.environ)
        if guess is not None:
            from kbench.sandbox.starter import import_torch_meanwhile, prewarm

            prewarm(guess[0], one_shot=guess[1])
            # This process's own torch import (seconds on a GPU host) from here, beside the starter's, and
            # not from the CLI's prewarm a second or two later: the offer of device buffers and the judge
            # need it, and on a cold `kbench eval` the candidate waited for it.
            import_torch_meanwhile()
    except Exception:  # an early start is only a head start: the CLI launches its starter anyway
        pass
    from kbench.cli import main as cli_main

    # The CLI installs its own handlers at once, and puts these back when its command is done.
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    cli_main()
