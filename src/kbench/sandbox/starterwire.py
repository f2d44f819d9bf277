"""What a host and its warm starter (sandbox/zygote.py) say to each other, one JSON object per line.

The host writes a `ForkRequest` per worker; the starter writes `Ready` once (after its imports), then
`Started` or `Refused` for each request, `Exited` when a child ends, `Preloaded` for each optional module
it imported, and `Retired` when one proved unsafe (it forks no more). Typed here, for both ends; only
`typing` is imported, so the starter's start stays as light as it is.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict, final


class ForkRequest(TypedDict):
    id: int  # the host's number for the request, echoed in `Started`/`Refused`
    module: str  # run as `python -m MODULE JOBDIR ARGS...`
    jobdir: str
    cwd: str
    env: dict[str, str]
    log: str  # the child's stdout and stderr
    limit: tuple[str, int] | None  # an rlimit: its resource's name, bytes (a JSON list on the wire)
    args: list[str]
    # the host's scratch folders for this worker: the starter removes them when it ends (a killed host cannot)
    scratch: NotRequired[list[str]]
    # optional modules workers like this one import (zygote.OPTIONAL_PRELOAD names the allowed ones): the
    # starter imports them after forking it, for the workers that follow
    preload: NotRequired[list[str]]
    starter: NotRequired[int]  # added by the starter: its pid, which the child dies with


class Ready(TypedDict):
    ready: bool
    reason: str  # why not, when not
    imports: NotRequired[dict[str, float]]  # seconds of each preload
    age: NotRequired[float]  # seconds from its start to this answer


@final
class Started(TypedDict):
    started: int
    pid: int


@final
class Refused(TypedDict):
    refused: int


@final
class Exited(TypedDict):
    exit: int  # the child's pid
    code: int  # its exit code; negative: killed by that signal, as subprocess reports it


@final
class Preloaded(TypedDict):
    preloaded: str


@final
class Retired(TypedDict):
    retired: str


Answer = Started | Refused | Exited | Preloaded | Retired  # final: `"started" in msg` tells which
