"""Our own failures: exceptions that say what went wrong and how to fix it.

A candidate's failure is never one of these: it is a Verdict status (types.Status).
"""


class KbenchError(Exception):
    """Base class; the CLI prints the message on one line and exits with code 2."""

    exit_code = 2


class ProblemError(KbenchError):
    """A problem is missing or malformed (names the file)."""


class ConfigError(KbenchError):
    """kbench is misconfigured (bad flag, missing tool, missing extra); the message says the fix."""


class WorkerError(KbenchError):
    """A worker failed for kbench's own reasons, not the candidate's (e.g. the GPU lease never came free)."""


class MissingExtraError(ConfigError):
    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"this feature needs the optional package '{module}'; install it with: pip install 'kbench[{extra}]'"
        )


def require(module: str, extra: str):  # type: ignore[no-untyped-def]
    """Import an optional dependency lazily; raise an error naming the pip extra when it is missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra) from exc
