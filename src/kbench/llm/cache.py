"""On-disk response cache keyed by (model, prompt digest, sampling params, sample index).

One JSON file per answer under CACHE_DIR/llm/ab/abcdef....json, written atomically (temp file + rename)
so a killed run never leaves a half-written entry. Errors are never cached: asking again may succeed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path

from kbench.files import write_atomic
from kbench.llm.base import Request
from kbench.types import Completion


def request_digest(request: Request) -> str:
    """The prompt part of the key: system prompt and the whole conversation."""
    blob = json.dumps([request.system, [(m.role, m.content) for m in request.messages]])
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_key(request: Request) -> str:
    parts = {
        "model": request.model,
        "prompt": request_digest(request),
        "params": request.params.cache_fields(),
        "sample": request.sample,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, request: Request) -> Completion | None:
        path = self._path(cache_key(request))
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        completion = Completion(**data)
        # A hit costs nothing now and took no time; its tokens still describe the answer.
        return replace(
            completion, sample=request.sample, turn=request.turn, cached=True, latency_s=0.0, cost_usd=0.0
        )

    def put(self, request: Request, completion: Completion) -> None:
        if completion.error:
            return
        path = self._path(cache_key(request))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(completion)))
