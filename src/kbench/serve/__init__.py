"""`kbench serve`: the evaluator as an HTTP service (FastAPI on uvicorn, the `serve` extra).

serve/wire.py is the JSON both ends speak (pydantic only: the client needs no FastAPI); serve/app.py the
routes (`create_app`); serve/server.py who may listen where, the bearer token, and uvicorn. Importing this
package does not import FastAPI.
"""

from kbench.serve.server import (
    MIN_TOKEN,
    TOKEN_ENV,
    ServiceLimits,
    check_bind,
    is_loopback,
    read_token,
    serve,
)

__all__ = ["MIN_TOKEN", "TOKEN_ENV", "ServiceLimits", "check_bind", "is_loopback", "read_token", "serve"]
