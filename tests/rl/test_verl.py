"""verl's custom reward function (rl/verl.py), called as verl's reward managers call it: loaded by file
path, one item at a time (naive) and a batch at once (batch), on the CPU. Every item answers a dict whose
`score` is the reward; an item that cannot be judged is 0 with its reason, never an exception."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from apifixtures import HONEST, WRONG, shared_cache

import kbench.rl.verl as verl_module

pytestmark = pytest.mark.slow


def test_verl_calls_it_by_path_and_every_item_gets_a_score(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    shared_builds: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = shared_cache(tmp_path_factory, shared_builds)
    for name, value in {"DEVICE": "cpu", "BACKEND": "cpp", "PRESET": "small", "STORE": str(tmp_path / "k.db"),
                        "CACHE_DIR": str(cache), "BASELINES": '["eager"]', "TIMING_BUDGET_S": "0.5",
                        "MODEL": "policy-7b"}.items():  # fmt: skip
        monkeypatch.setenv(f"KBENCH_{name}", value)
    # verl: importlib.util.spec_from_file_location("custom_module", path), then getattr(module, name)
    spec = importlib.util.spec_from_file_location("custom_module", verl_module.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        batch = module.compute_score_batch(
            data_sources=["kbench"] * 4,
            solution_strs=[f"```python\n{HONEST}\n```", WRONG, "no code here", HONEST],
            ground_truths=["2/1", "2/1", "2/1", "9/999"],
            extra_infos=[{"index": i} for i in range(4)],
            reward="correct",  # reward_kwargs
        )
        single = module.compute_score(
            data_source="kbench", solution_str=WRONG, ground_truth="", extra_info={"problem": "2/1"}
        )
    finally:
        module.shared_evaluator().close()
    honest, wrong, empty, unknown = batch
    assert honest["score"] == 1.0 and honest["correct"] == 1.0 and honest["status"] == "ok", honest
    assert wrong["score"] == 0.0 and wrong["status"] == "mismatch" and not wrong["error"]
    assert empty["score"] == 0.0 and empty["status"] == "no_code"
    assert unknown["score"] == 0.0 and "no problem 9/999" in unknown["error"]
    assert single["status"] == "mismatch" and single["score"] <= 0.0
    from kbench.store import Store

    with Store(tmp_path / "k.db") as store:
        (run,) = store.runs()
        assert {k.model for k, _ in store.verdicts(run.run_id)} == {"policy-7b"}
