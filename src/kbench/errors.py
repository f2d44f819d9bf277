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
    def __init__(self, module: str, extra: str, broken: str | None = None) -> None:
        if broken is None:
            super().__init__(
                f"this feature needs the optional package '{module}'; install it with: pip install 'kbench[{extra}]'"
            )
        else:  # installed, but its import fails here: reinstalling the same version would not help
            super().__init__(
                f"the optional package '{module}' is installed but does not import here ({broken}); its version "
                f"may not match this torch: install one that does (pip install -U 'kbench[{extra}]')"
            )


def require(module: str, extra: str):  # type: ignore[no-untyped-def]
    """Import an optional dependency lazily; raise an error naming the pip extra when it is missing, or
    saying why it does not import when it is installed (a version made for another torch, say)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        absent = (
            isinstance(exc, ModuleNotFoundError) and exc.name is not None and exc.name.split(".")[0] == top
        )
        broken = None if absent else f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        raise MissingExtraError(module, extra, broken) from exc
