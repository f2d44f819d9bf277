"""The run an Evaluator files its verdicts in, exactly as `kbench run` files them (pipeline.py).

One Evaluator is one run in the results database (`cfg.store`): the run is started with the resolved
config and the machine's fingerprint, each verdict is written in its own transaction under its
`VerdictKey` (problem, sample, turn, backend, model) the moment it arrives, the problem's metadata beside
it, and the reference timings it measured become stored baselines. So `kbench report RUN` and
`kbench export RUN` read an Evaluator's run like any other.

Opening an existing run id continues it (as `kbench run --resume`): a submission whose key is already
stored gets the stored verdict back without being judged again, and automatic sample numbers start
after the highest one stored. Without recording, the store is only read (stored baselines), and only when
its file exists.
"""

from __future__ import annotations

import threading

from kbench.api.jobs import MAX_INDEX
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.store import Store, StoredVerdict, VerdictKey, reuse
from kbench.types import Problem, TimingStats, Verdict

DEFAULT_MODEL = "api"  # the key's model when neither the submission nor the config names one


class Session:
    def __init__(self, cfg: RunConfig, record: bool) -> None:
        from kbench.pipeline import open_run

        self.cfg = cfg
        self.store: Store | None = None
        self.run_id: str | None = None
        self._lock = threading.Lock()
        self._next: dict[tuple[str, str, str], int] = {}  # (problem, backend, model) -> next free sample
        self._problems: set[str] = set()  # problems whose metadata this session stored
        self._baselines: dict[str, dict[str, TimingStats]] = {}
        if record:
            self.store, self.run_id = open_run(cfg, [], None)  # cfg.run_id: continue that run, or start it
            for key in self.store.done_keys(self.run_id):
                self._bump(key)
        elif cfg.store.exists():
            self.store = Store(cfg.store)

    @property
    def recording(self) -> bool:
        return self.run_id is not None

    def model(self, given: str | None) -> str:
        return given or self.cfg.model or DEFAULT_MODEL

    def _bump(self, key: VerdictKey) -> None:
        triple = (key.problem_key, key.backend, key.model)
        self._next[triple] = max(self._next.get(triple, 0), key.sample + 1)

    def reserve(self, problem_key: str, backend: str, model: str) -> int:
        """The next free sample number for (problem, backend, model) in this run; it is never given again."""
        with self._lock:
            triple = (problem_key, backend, model)
            sample = self._next.get(triple, 0)
            if sample > MAX_INDEX:
                raise ConfigError(
                    f"no sample number left for {problem_key} ({backend}, {model}): sample {MAX_INDEX} was "
                    "used; submit with an explicit sample"
                )
            self._next[triple] = sample + 1
            return sample

    def key(self, problem_key: str, backend: str, model: str, sample: int | None, turn: int) -> VerdictKey:
        if sample is None:
            sample = self.reserve(problem_key, backend, model)
        key = VerdictKey(problem_key, sample, turn, backend, model)
        with self._lock:
            self._bump(key)  # an explicit sample moves automatic numbering past it
        return key

    def find(self, key: VerdictKey) -> StoredVerdict | None:
        """The verdict this run already holds under `key` (None without recording)."""
        if self.store is None or self.run_id is None:
            return None
        return self.store.find(self.run_id, key)

    def baselines(self, problem: Problem) -> dict[str, TimingStats]:
        """Stored baselines the evaluations of `problem` reuse (store/reuse.py), looked up once per problem
        and session: a lookup that changed mid-session would change the reference pool's key (the modes
        it skips) and run the problem's reference a second time."""
        with self._lock:
            found = self._baselines.get(problem.key)
        if found is None:
            found = reuse.baselines_for(self.store, problem.key, self.cfg) if self.store is not None else {}
            with self._lock:
                found = self._baselines.setdefault(problem.key, found)
        return found

    def record(
        self, key: VerdictKey, problem: Problem, verdict: Verdict, source: str, completion: str = ""
    ) -> bool:
        """File one verdict (and the baselines it measured); False when its key was stored already."""
        if self.store is None or self.run_id is None:
            return False
        from kbench.pipeline import store_baselines

        with self._lock:
            new_problem = problem.key not in self._problems
            self._problems.add(problem.key)
        if new_problem:
            self.store.put_problems([problem])
        recorded = self.store.record(self.run_id, key, verdict, source, completion)
        store_baselines(self.store, problem, verdict)
        return recorded

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
