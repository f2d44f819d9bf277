"""Starting `kbench serve`: who may listen where, the bearer token, and uvicorn on a socket bound here.

The service runs candidates' code, so anyone who can reach it can run code on this machine (inside the
sandbox, which is not a security boundary: sandbox/host.py says what it does not stop). Hence it binds
127.0.0.1 by default and refuses to listen on any other address without a bearer token; a token shorter
than MIN_TOKEN characters is refused too. The token comes from a file or the environment, never from a
flag (a command line is visible to every user of the machine in `ps`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import ConfigError, require

TOKEN_ENV = "KBENCH_SERVE_TOKEN"
MIN_TOKEN = 16  # characters: `secrets.token_urlsafe(32)` gives 43
GRACEFUL_S = 5  # seconds open requests (long polls) get to finish when the service stops
BACKLOG = 2048  # uvicorn's default


@dataclass(frozen=True)
class ServiceLimits:
    """What one request and the whole queue may hold."""

    max_body_bytes: int = 4 << 20  # a candidate is tens of KiB; a completion with reasoning, a few MiB
    max_queue: int = 256  # pending jobs beyond which submissions get 429
    max_wait_s: float = 60.0  # longest long poll (proxies and clients time out idle requests)
    keep_jobs: int = 10_000  # finished jobs kept for polling (their verdicts stay in the run)
    max_batch: int = 256  # submissions in one batch request
    max_episodes: int = 1024  # open remote episodes (the oldest ended ones are forgotten first)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve to any interface


def read_token(token_file: Path | None, environ: dict[str, str] | None = None) -> str | None:
    """The bearer token from `token_file` or KBENCH_SERVE_TOKEN (None: no token)."""
    environ = dict(os.environ if environ is None else environ)
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{token_file}: cannot read the token file ({exc.strerror})") from None
    else:
        token = environ.get(TOKEN_ENV, "").strip()
        if not token:
            return None
    if len(token) < MIN_TOKEN:
        raise ConfigError(
            f"the bearer token has {len(token)} characters; use at least {MIN_TOKEN}, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


def check_bind(host: str, token: str | None) -> None:
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"kbench serve runs submitted code: to listen on {host} it needs a bearer token "
            f"(set {TOKEN_ENV} or --token-file); without one it listens on 127.0.0.1 only"
        )


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def service_hosts(host: str, token: str | None) -> set[str] | None:
    """The names a service's Host header may carry: without a token (so on a loopback address) its own
    names there only, which keeps a web page whose name was rebound to 127.0.0.1 (DNS rebinding) from
    driving it through a browser; with a token, any (the browser does not know the token)."""
    return None if token is not None else {*LOOPBACK_NAMES, host}


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)  # connections wait here until uvicorn accepts: the announced URL is usable
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port") from None
    return sock


def serve(
    evaluator: object,
    host: str,
    port: int,
    token: str | None,
    limits: ServiceLimits,
    announce: Callable[[str], None],
) -> None:
    """Serve until stopped (SIGINT/SIGTERM: open requests get GRACEFUL_S, then the Evaluator closes).
    `announce` gets the URL once the socket is bound (port 0 picks a free port)."""
    from kbench.api import Evaluator

    assert isinstance(evaluator, Evaluator)
    check_bind(host, token)
    require("fastapi", "serve")
    uvicorn = require("uvicorn", "serve")
    from kbench.serve.app import BodyLimit, create_app

    app = BodyLimit(create_app(evaluator, token, limits, service_hosts(host, token)), limits.max_body_bytes)
    sock = bind(host, port)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=GRACEFUL_S, lifespan="on",
        backlog=BACKLOG,
    )  # fmt: skip
    name = f"[{host}]" if ":" in host else host
    announce(f"http://{name}:{sock.getsockname()[1]}")
    uvicorn.Server(config).run(sockets=[sock])
