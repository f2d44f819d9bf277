"""The run an Evaluator files its verdicts in (`kbench run`'s, the service's, an RL trainer's).

One Evaluator is one run in the results database (`cfg.store`): the run is started with the resolved
config and the machine's fingerprint, each verdict is written in its own transaction under its
`VerdictKey` (problem, sample, turn, backend, model) the moment it arrives, the problem's metadata beside
it, and the reference timings it measured become stored baselines. So `kbench report RUN` and
`kbench export RUN` read an Evaluator's run like any other.

Opening an existing run id continues it (with `resume` it must exist, as `kbench run --resume` asks): a
submission whose key is already stored gets the stored verdict back without being judged again, and
automatic sample numbers start after the highest one stored. Without recording, the store is only read (stored baselines), and only when
its file exists.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kbench.api.jobs import MAX_INDEX
from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.store import Store, StoredVerdict, VerdictKey, reuse
from kbench.types import Problem, TimingStats, Verdict

DEFAULT_MODEL = "api"  # the key's model when neither the submission nor the config names one


def open_run(cfg: RunConfig, problems: Sequence[Problem], resume: str | None) -> tuple[Store, str]:
    """The store and the run verdicts go to: `resume` (StoreError naming the known runs when it does not
    exist), else `cfg.run_id` (continued, or started under that id), else a new run. `problems`: the
    run's selection, filed with it (a report lists a selected problem without a verdict too)."""
    from kbench.hardware import environment

    store = Store(cfg.store)
    if resume is not None:
        store.run(resume)
    run_id = store.start_run(cfg.model_dump(mode="json"), environment(), resume or cfg.run_id)
    select(store, run_id, problems)
    return store, run_id


def select(store: Store, run_id: str, problems: Sequence[Problem]) -> None:
    store.put_problems(problems)
    store.put_run_problems(run_id, [p.key for p in problems])


def store_baselines(store: Store, problem: Problem, verdict: Verdict) -> None:
    """Keep the reference timings a verdict measured, per hardware fingerprint and torch version."""
    fresh = [(m, s) for m, s in verdict.baselines if reuse.source_of(s) != reuse.STORED]
    import torch

    from kbench.hardware import environment, fingerprint

    # The key has no device: a cpp verdict timed on a GPU host's CPU would replace that GPU's baseline.
    if not fresh or verdict.device.split(":")[0] != environment()["device"]:
        return
    for mode, stats in fresh:
        store.put_baseline(
            problem.key, verdict.preset, verdict.dtype, mode, fingerprint(), torch.__version__, stats
        )


class Session:
    def __init__(self, cfg: RunConfig, record: bool, resume: bool = False) -> None:
        self.cfg = cfg
        self.store: Store | None = None
        self.run_id: str | None = None
        self._lock = threading.Lock()
        self._next: dict[tuple[str, str, str], int] = {}  # (problem, backend, model) -> next free sample
        self._problems: set[str] = set()  # problems whose metadata this session stored
        self._baselines: dict[str, dict[str, TimingStats]] = {}
        if record:
            self.store, self.run_id = open_run(cfg, [], cfg.run_id if resume else None)
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

    def select(self, problems: Sequence[Problem]) -> None:
        """File `problems` as the run's selection (`kbench run`'s): the report counts the ones left unjudged."""
        if self.store is not None and self.run_id is not None:
            with self._lock:
                self._problems.update(p.key for p in problems)
            select(self.store, self.run_id, problems)

    def record(
        self, key: VerdictKey, problem: Problem, verdict: Verdict, source: str, completion: str = ""
    ) -> bool:
        """File one verdict (and the baselines it measured); False when its key was stored already."""
        if self.store is None or self.run_id is None:
            return False
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
