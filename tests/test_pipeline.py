"""`kbench run` end to end on CPU: the shipped solutions (with resume) and a model behind a local server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from evalfixtures import use_builds
from llmserver import load_server_module
from modelanswers import answer
from typer.testing import CliRunner

from kbench.cli import app
from kbench.store import Store
from kbench.types import Status

pytestmark = pytest.mark.slow


@pytest.mark.xdist_group("model-runs")  # the model runs' answers build once, on one worker
def test_run_model_against_local_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_builds: Path
) -> None:
    server_mod = load_server_module()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(use_builds(tmp_path / "cache", shared_builds)))
    monkeypatch.setenv("KBENCH_BASELINES", "eager")  # torch.compile on a CPU adds 10-20 s per problem
    store = tmp_path / "runs" / "kbench.db"
    with server_mod.LLMServer(respond=answer, p429=0.2, seed=3) as server:
        args = ["run", "--model", "openai/test", "--base-url", server.openai_url, "--level", "2",
                "--problems", "3", "--samples", "2", "--turns", "2", "--backend", "cpp", "--device", "cpu",
                "--preset", "small", "--store", str(store)]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert server.stats.statuses[429] > 0  # retried through
    with Store(store) as db:
        run = db.runs()[-1]
        verdicts = db.verdicts(run.run_id)
    keys = [k for k, _ in verdicts]
    assert len(keys) == len(set(keys)) == 3 * 2 * 2
    assert {(k.sample, k.turn) for k in keys} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(v.status is Status.OK for _, v in verdicts), [(k, v.status, v.message) for k, v in verdicts]
    assert Path(_closing(result.output)[1]).exists()


def _closing(output: str) -> tuple[str, str]:
    """The run id and the report's path from a run's closing line ('run ID: ...; report PATH')."""
    found = re.findall(r"^run (\S+): .*; report (.+)$", output, re.M)
    assert found, output
    return found[-1][0], found[-1][1].strip()


def test_run_solutions_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_DEVICE", "cpu")  # the CPU's solutions on any machine
    store = tmp_path / "kbench.db"
    args = ["run", "--solutions", "reference", "--problems", "2/24", "--store", str(store)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "1 new verdicts" in first.output and "2/24" in first.output
    run_id = _closing(first.output)[0]
    assert "numbers from CPU, small, fp32" in first.output
    again = CliRunner().invoke(app, [*args, "--resume", run_id])
    assert again.exit_code == 0, again.output
    assert "0 new verdicts, 1 kept from before" in again.output
    alone = CliRunner().invoke(app, ["run", "--resume", run_id, "--store", str(store)])  # the stored config
    assert alone.exit_code == 0 and "0 new verdicts, 1 kept from before" in alone.output, alone.output
    with Store(store) as db:
        [(key, verdict)] = db.verdicts(run_id)
        config = db.run(run_id).config
    assert key.model == "reference/cpp" and verdict.status is Status.OK and verdict.log_tail == ""
    assert (config["backend"], config["solution_backends"], config["preset"]) == ("cpp", ["cpp"], "small")
    # `kbench runs` in 80 columns: the whole id, the verdicts' model and backend, the CPU
    listed = CliRunner().invoke(app, ["runs", "--store", str(store)], env={"COLUMNS": "80"})
    row = next(line for line in listed.output.splitlines() if run_id in line)
    assert re.search(r"reference/cpp\s+cpp\s+small\s+CPU\s+1/1", row), listed.output
    as_json = json.loads(CliRunner().invoke(app, ["runs", "--store", str(store), "--format", "json"]).output)
    assert as_json[0]["model"] == "reference/cpp" and as_json[0]["device"] == "CPU"
    exported = CliRunner().invoke(app, ["export", run_id, "--format", "jsonl", "--store", str(store)])
    assert (
        exported.exit_code == 0 and json.loads(exported.output.splitlines()[0])["verdict"]["status"] == "ok"
    )


def test_baseline_command_times_in_the_reference_worker(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    args = ["baseline", "2/24", "--modes", "eager", "--preset", "small", "--store", str(store)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with Store(store) as db:
        [(key, stats)] = db.baselines()
    assert key[0] == "kbench:2/24" and "eager" in key
    assert stats.median_ms > 0 and stats.n >= 10 and stats.method == "referee-batches"
    bad = CliRunner().invoke(app, ["baseline", "2/24", "--modes", "warp-speed", "--store", str(store)])
    assert bad.exit_code != 0


def _engine(tmp_path: Path, **update: object) -> Any:
    """A CPU config for an Evaluator whose evaluations a test fakes: no build ahead, no warm starter."""
    from kbench.config import RunConfig

    cfg = RunConfig(device="cpu", preset="small", store=tmp_path / "k.db", cache_dir=tmp_path / "cache",
                    backend="cpp", worker_start="spawn")  # fmt: skip
    return cfg.model_copy(update=update)


def test_run_passes_stored_baselines_and_stores_only_measured_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    import torch

    from kbench.api import Evaluator, EvaluatorOptions
    from kbench.evaluate import flow
    from kbench.hardware import environment, fingerprint
    from kbench.problems import get_problem
    from kbench.store import reuse
    from kbench.types import Provenance, TimingStats, Verdict

    problem = get_problem("kbench:2/1")
    cfg = _engine(tmp_path)
    where = (problem.key, "small", "fp32")
    stored = TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 30, 0.001, provenance=Provenance(source=reuse.MEASURED))
    timed = replace(stored, median_ms=2.0)
    seen: list[dict[str, TimingStats]] = []

    def fake_evaluate(p, candidate, run_cfg, baselines=None, references=None, built=None, before=0.0):  # type: ignore[no-untyped-def]
        given = dict(baselines or {})
        seen.append(given)
        modes = {m: given.get(m, timed) for m in run_cfg.baselines}
        host = environment()["device"]  # baselines are stored only for the host's own device kind
        return Verdict(Status.OK, p.key, "cpp", "small", "fp32", host, baselines=tuple(modes.items()))

    monkeypatch.setattr(flow, "evaluate", fake_evaluate)
    with Store(cfg.store) as store:
        store.put_baseline(*where, "eager", fingerprint(), torch.__version__, stored)
    options = EvaluatorOptions(build_ahead=False)
    with Evaluator(cfg, options) as ev:
        assert ev.evaluate(problem, "x", sample=0).status is Status.OK
    assert set(seen[0]) == {"eager"} and reuse.source_of(seen[0]["eager"]) == reuse.STORED
    with Store(cfg.store) as store:
        found = store.find_baselines(*where, fingerprint(), torch.__version__)
    assert found["eager"][0] == stored  # the reused row is not rewritten with the store's notes
    assert found["compile"][0] == timed  # the measured mode is stored
    with Evaluator(cfg.model_copy(update={"reuse_baselines": False}), options) as ev:
        ev.evaluate(problem, "x", sample=1)
    assert seen[1] == {}


def test_a_closed_batch_shares_a_reference_run_only_among_jobs_of_one_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kbench run`'s batch (Evaluator.submit_many(closed=True)): a problem with one job runs its own
    reference; the jobs of a problem with several share one run, which leaves the pool with the last."""
    import pickle

    from kbench.api import Evaluator, EvaluatorOptions, Submission
    from kbench.api.runner import closed_batch
    from kbench.evaluate import flow
    from kbench.evaluate.reference_cache import ReferenceData
    from kbench.executors import Job
    from kbench.problems import get_problem
    from kbench.types import Candidate, Verdict

    pools: dict[tuple[str, int], Any] = {}
    runs: list[str] = []
    held: list[int] = []

    def fake_evaluate(p, candidate, run_cfg, baselines=None, references=None, built=None, before=0.0):  # type: ignore[no-untyped-def]
        pools[(p.key, int(candidate.source))] = references
        if references is not None:  # as pooled_reference asks it
            references.get(p.key, lambda: runs.append(p.key) or (None, ReferenceData()), group=p.key)
            held.append(len(references))
        return Verdict(Status.OK, p.key, "cpp", "small", "fp32", "cpu")

    monkeypatch.setattr(flow, "evaluate", fake_evaluate)
    once, twice = get_problem("kbench:2/1"), get_problem("kbench:2/3")
    batch = [Submission(p, str(n), sample=n) for p, n in ((once, 0), (twice, 0), (twice, 1))]
    with Evaluator(_engine(tmp_path), EvaluatorOptions(build_ahead=False)) as ev:
        assert [t.verdict(60).status for t in ev.submit_many(batch, closed=True)] == [Status.OK] * 3
    assert pools[(once.key, 0)] is None
    assert pools[(twice.key, 0)] is not None and pools[(twice.key, 0)] is pools[(twice.key, 1)]
    assert runs == [twice.key] and held == [1, 1] and len(pools[(twice.key, 1)]) == 0
    # what is expected travels to Ray workers with the stages; a pool told nothing shares every problem
    jobs = [Job(p, Candidate(p.key, "cpp", "x"), tag=n) for n, p in enumerate((once, twice, twice))]
    stages, portable = closed_batch(_engine(tmp_path), jobs)
    copy = pickle.loads(pickle.dumps(stages))
    assert copy.references.begin(once.key) is False and copy.references.begin(twice.key) is True
    assert [j.tag.ref for j in portable] == ["0", "1", "2"] and {j.tag.batch for j in portable} == {3}
    assert closed_batch(_engine(tmp_path), [])[0].references.begin(once.key) is True


def test_a_job_whose_reference_a_lane_prefetched_finds_it_in_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.api.runner import closed_batch
    from kbench.evaluate import flow, shared_reference
    from kbench.executors import Job
    from kbench.problems import get_problem
    from kbench.types import Candidate, Verdict

    cfg = _engine(tmp_path, backend="cuda")
    prefetched: list[tuple[str, str, object]] = []
    pools: list[object] = []

    def run(p, run_cfg, plan, reused, refs, workdir):  # type: ignore[no-untyped-def]
        prefetched.append((p.key, run_cfg.device, refs))
        return plan, SimpleNamespace(phases={"spawn": 0.1, "worker": 1.5})

    # the reference run itself (prefetch_reference decides whether it runs)
    monkeypatch.setattr(shared_reference, "pooled_reference", run)

    def fake_evaluate(p, candidate, run_cfg, baselines=None, references=None, built=None, before=0.0):  # type: ignore[no-untyped-def]
        pools.append(references)
        return Verdict(Status.OK, p.key, "cuda", "small", "fp32", run_cfg.device)

    monkeypatch.setattr(flow, "evaluate", fake_evaluate)
    problem = get_problem("kbench:2/1")
    stages, [job] = closed_batch(cfg, [Job(problem, Candidate(problem.key, "cuda", "x"), tag=0)])  # alone
    assert stages.prefetch(job, "cuda:0") == {"spawn": 0.1, "worker": 1.5}  # the run's phases
    assert stages.prefetch(job, "cuda:0") is None  # a second lane on the same device: nothing more to run
    assert prefetched == [(problem.key, "cuda:0", stages.references)]
    stages.evaluate(job, "cuda:0", None)  # its reference is in the pool: the evaluation takes it from there
    stages.evaluate(job, "cuda:1", None)  # on another device it was not prefetched: its own reference
    assert pools == [stages.references, None]
    # a pool already holding more than half its limit takes no prefetch: it could evict it unused
    full, [job] = closed_batch(cfg, [Job(problem, Candidate(problem.key, "cuda", "x"), tag=0)])
    assert full.references is not None
    full.references.max_bytes = 100
    monkeypatch.setattr(full.references, "held_bytes", lambda: 51)
    full.prefetch(job, "cuda:0")
    assert len(prefetched) == 1 and (problem.key, "cuda:0") not in full.prefetched
    full.references.max_bytes = 102
    full.prefetch(job, "cuda:0")
    assert len(prefetched) == 2


def test_cpu_baselines_on_a_gpu_host_are_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench import hardware
    from kbench.api.session import store_baselines
    from kbench.problems import get_problem
    from kbench.types import TimingStats, Verdict

    gpu_host = {"gpu": "NVIDIA H200", "driver": "570", "cuda": "12.8", "torch": "2.13.0", "device": "cuda"}
    monkeypatch.setattr(hardware, "environment", lambda: gpu_host)
    problem, stats = get_problem("kbench:2/1"), TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 30, 0.001)
    store = Store(tmp_path / "k.db")

    def verdict(device: str) -> Verdict:
        return Verdict(Status.OK, problem.key, "cpp", "small", "fp32", device, baselines=(("eager", stats),))

    store_baselines(store, problem, verdict("cpu"))
    assert store.baselines() == []
    store_baselines(store, problem, verdict("cuda:0"))
    [(key, _)] = store.baselines()
    assert key[4] == hardware.fingerprint(gpu_host)


def test_model_run_without_a_gpu_defaults_to_the_small_preset(tmp_path: Path) -> None:
    """`--preset` left out on a CPU: the small preset, as documented (the replayed model
    answers in prose, so the verdict is `no_code` and nothing is built)."""
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "level_2_problem_24_sample_0_turn_0.md").write_text(
        "Fuse the three operations into one loop.\n"
    )
    store = tmp_path / "kbench.db"
    args = ["run", "--model", f"replay/{replay}", "--problems", "2/24", "--backend", "cpp", "--device", "cpu",
            "--store", str(store)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with Store(store) as db:
        ((_, verdict),) = db.verdicts(db.runs()[-1].run_id)
    assert verdict.status is Status.NO_CODE and verdict.preset == "small"
