"""`kbench run`: generate (or take the shipped solutions), evaluate, record and report in one command."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.markup import escape

from kbench import defaults
from kbench.cli.agent import agent_budget
from kbench.cli.app import app, console, err_console
from kbench.cli.devices import apply_device_defaults, cpu_reason, gpu_present
from kbench.cli.evaluate import prewarm_starter
from kbench.cli.generate import BACKENDS, problems_flag, select_problems
from kbench.cli.progress import Header, RunProgress
from kbench.config import RunConfig, resolve
from kbench.errors import ConfigError
from kbench.pipeline import RunOutcome
from kbench.problems import absolute_address
from kbench.protocols import get_protocol
from kbench.types import Problem


@dataclass(frozen=True)
class RunPlan:
    """What one invocation runs: the resolved config, its problems, and the shipped solutions' backends
    (empty for a model run)."""

    cfg: RunConfig
    problems: list[Problem]
    backends: list[str] = field(default_factory=list)
    default_temperature: bool = False  # the temperature was chosen by kbench (config.SAMPLING_TEMPERATURE)


def _solutions_config(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    asked_cpu = cfg.device == "cpu"
    cfg, backends, notice = defaults.solutions_config(cfg)
    if notice:
        err_console.print(f"[yellow]{cpu_reason(asked_cpu)}:[/] {escape(notice)}", highlight=False)
    return cfg, backends


def _selected(cfg: RunConfig) -> list[Problem]:
    """The problems `cfg` selects, once a mistyped preset (one no problem has, close to one that exists)
    has been refused."""
    from kbench.problems.loader import check_preset

    problems = select_problems(cfg)
    check_preset(problems, cfg.preset)
    return problems


def _fresh(given: RunConfig, solutions: str | None) -> RunPlan:
    if bool(solutions) == bool(given.model):
        raise ConfigError(
            "give exactly one of --solutions reference or --model PROVIDER/MODEL (or --resume RUN)"
        )
    # stored with absolute paths, so --resume finds the files from any working folder
    given = given.model_copy(update={"problems": [absolute_address(a) for a in given.problems]})
    if solutions:
        defaults.check_shipped_set(solutions)
        cfg, backends = _solutions_config(given)
        cfg = get_protocol(cfg.protocol).configure(cfg)
        return RunPlan(cfg, _selected(cfg), backends)
    if given.agent and given.turns > 1:
        raise ConfigError(
            "--agent runs one session per sample, whose tool calls are its turns: leave out --turns"
        )
    cfg = get_protocol(given.protocol).configure(apply_device_defaults(given))
    cfg = cfg.model_copy(update={"temperature": cfg.sampling_temperature})  # stored as sent
    return RunPlan(cfg, _selected(cfg), default_temperature=given.temperature is None)


def _stored_problems(
    run_id: str, keys: list[str], code_hashes: dict[str, str], cfg: RunConfig, places: list[str]
) -> list[Problem]:
    """A resumed run's problems, by the keys it stored: problem files by content, among the files and
    folders given with --problems, then those the run was started with."""
    from kbench.problems import find_problems

    found, missing = find_problems(keys, [*places, *cfg.problems, cfg.source], code_hashes)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(
            f"--resume {run_id}: {len(missing)} of the run's problems found nowhere ({shown}): give their "
            "files, or the folder they are in now, with --problems. A problem file edited since the run "
            "began is another problem: start a new run for it"
        )
    used = {os.path.abspath(p.path) for p in found if p.path}
    for place in places:
        path = Path(place).expanduser()
        if path.is_file() and os.path.abspath(path) not in used:
            raise ConfigError(
                f"--resume {run_id}: {place} is none of the run's problems (no stored key has its "
                "content); a resumed run keeps the problems it began with"
            )
    return found


def _resumed(given: RunConfig, run_id: str, solutions: str | None, places: list[str]) -> RunPlan:
    from kbench.resume import restore
    from kbench.store import Store

    if not given.store.exists():
        raise ConfigError(f"--resume {run_id}: no results database at {given.store} (see --store)")
    with Store(given.store) as store:
        info = store.run(run_id)
        keys = store.run_problems(info.run_id)
        code_hashes = {k: m.code_hash for k, m in store.problems().items()}
    cfg = restore(run_id, info.config, given)
    shipped = bool(cfg.solution_backends) or not cfg.model
    if solutions and not shipped:
        raise ConfigError(f"--resume {run_id}: a run of model {cfg.model}; leave out --solutions")
    problems = _stored_problems(run_id, keys, code_hashes, cfg, places) if keys else select_problems(cfg)
    if not shipped:
        return RunPlan(cfg, problems)
    backends = (
        cfg.solution_backends
        or list(info.backends)
        or defaults.solution_backends(gpu_present(cfg.device), None)
    )
    return RunPlan(cfg, problems, backends)


def _where(problems: str | None, resume: str | None) -> tuple[dict[str, object], list[str]]:
    """`--problems` as a setting and, with --resume, its files and folders apart: where the run's problem
    files are now (a resumed run's problems are the ones it stored); its addresses stay a setting."""
    chosen = problems_flag(problems)
    addresses = chosen.get("problems")
    if not resume or not isinstance(addresses, list):
        return chosen, []
    places = [str(a) for a in addresses if Path(str(a)).expanduser().exists()]
    others = [a for a in addresses if str(a) not in places]
    for address in map(str, others):  # a missing file or folder, not an address such as 2/24 or hf:1/3
        if address.endswith(".py") or address.startswith(("/", "./", "../", "~")):
            raise ConfigError(
                f"--resume {resume}: --problems {address}: no such file or folder (with --resume, --problems "
                "names where the run's problem files are now)"
            )
    return ({"problems": others} if others else {}), places


def _device(cfg: RunConfig) -> str:
    return "the CPU" if cfg.device == "cpu" else f"GPU {cfg.device}" if cfg.device != "auto" else "the GPU"


def _sampling(cfg: RunConfig, defaulted: bool) -> str:
    why = (
        " (kbench's default with --samples > 1; --temperature sets it)"
        if defaulted and cfg.samples > 1
        else ""
    )
    top_p = "server default" if cfg.top_p is None else f"{cfg.top_p:g}"
    return (
        f"temperature {cfg.sampling_temperature:g}{why}, top_p {top_p}, max_tokens {cfg.max_tokens}, "
        f"shots {cfg.shots}"
    )


def _cache(cfg: RunConfig, cached: bool | None) -> str:
    if cached:
        return f"on ({cfg.cache_dir / 'llm'}; --no-cache asks afresh)"
    return "off" if not cfg.response_cache else f"not used: {cfg.model.split('/')[0]} answers from files"


def _header(plan: RunPlan) -> Header:
    cfg = plan.cfg

    def text(run_id: str, total: int, done: int, cached: bool | None) -> str:
        lines = [f"run {run_id}" + (f" (resumed: {done} of {total} verdicts stored)" if done else "")]
        n = len(plan.problems)
        if plan.backends:
            lines.append(f"  candidates: {_shipped(plan)}: {total} verdict{'' if total == 1 else 's'}")
        elif cfg.agent:
            lines.append(f"  agent {cfg.model}: {n} problems x {cfg.samples} sessions = {total} verdicts")
            lines.append(f"  budget per session: {agent_budget(cfg)}")
            lines.append(f"  sampling: {_sampling(cfg, plan.default_temperature)}")
        else:
            size = f"{n} problems x {cfg.samples} samples x {cfg.turns} turns = {total} verdicts"
            lines.append(f"  model {cfg.model}: {size}")
            lines.append(f"  sampling: {_sampling(cfg, plan.default_temperature)}")
            lines.append(f"  response cache: {_cache(cfg, cached)}")
        backends = ", ".join(plan.backends) or cfg.backend
        lines.append(f"  evaluating: {backends} on {_device(cfg)}, preset {cfg.preset}, {cfg.dtype}")
        protocol = get_protocol(cfg.protocol)
        lines.append(
            f"  protocol: {protocol.correctness(cfg.dtype, cfg.seeds)}; fast_p: {protocol.rule.describe()}"
        )
        lines += [f"  note: {note}" for note in _preset_notes(plan)]
        lines.append(f"  continue a stopped run with: kbench run --resume {run_id} --store {cfg.store}")
        return "\n".join(lines)

    return text


def _shipped(plan: RunPlan) -> str:
    """Which shipped solutions a run evaluates: per backend, how many of the selected problems have one."""
    from kbench.solutions import shipped_candidate

    n = len(plan.problems)
    counts = [(b, sum(shipped_candidate(p, b) is not None for p in plan.problems)) for b in plan.backends]
    each = ", ".join(f"{b} for {k} of the {n} problems selected" for b, k in counts)
    lacking = " (the others have none)" if any(k < n for _, k in counts) else ""
    return f"the shipped solutions, {each}{lacking}"


def _uncertain_note(count: int) -> str:
    """The closing word on the speedups shown as uncertain, when there were any."""
    which = (
        "1 speedup above is uncertain: its" if count == 1 else f"{count} speedups above are uncertain: their"
    )
    return (
        f"{which} 95 % interval holds 1x, so {'it counts' if count == 1 else 'they count'} as not fast (fast_p "
        "in the README's Metrics). On a CPU shared with other work timings spread wide; a GPU's are tight."
    )


def _next_steps(cfg: RunConfig, run_id: str, shipped: bool) -> str:
    """What to try after a run: the summary again, one verdict by hand, a model's run."""
    steps = [f"kbench report {run_id} --store {cfg.store} (this summary again)"]
    if shipped:
        from kbench.backends import default_backend, get_backend
        from kbench.solutions import solution_paths

        gpu = cfg.device != "cpu"
        for backend in [*cfg.solution_backends, cfg.backend, default_backend(gpu)]:
            found = solution_paths(backend).get((2, 2))
            if found is not None and (gpu or not get_backend(backend).gpu_kernels):
                solution = found.relative_to(Path.cwd()) if found.is_relative_to(Path.cwd()) else found
                steps.append(f"kbench eval --problem 2/2 --candidate {solution} --backend {backend} (one "
                             "verdict; a copy of that file is where your own kernel starts)")  # fmt: skip
                break
        steps.append("kbench run -m openai/MODEL --level 2 --problems 5 (a model's kernels; README: Usage)")
    else:
        steps.append(f"kbench run --resume {run_id} (asks again what failed or is missing)")
    return "next: " + "; ".join(steps)


def _preset_notes(plan: RunPlan) -> list[str]:
    """One line for the problems that lack the run's preset and run at their files' own sizes."""
    from kbench.problems.loader import preset_note

    preset = plan.cfg.preset
    lacking = [(p.key, note) for p in plan.problems if (note := preset_note(p, preset))]
    if len(lacking) < 2:
        return [note for _, note in lacking]
    shown = ", ".join(k for k, _ in lacking[:3]) + (
        f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
    )
    return [
        f"{len(lacking)} problems have no `{preset}` preset: they run at the sizes their files set ({shown})"
    ]


def _report(cfg: RunConfig, run_id: str, html: Path | None) -> Path:
    from kbench.report import load_series, print_summary, write_html
    from kbench.store import Store

    with Store(cfg.store) as store:
        print_summary(load_series(store, [run_id]), console)
        path = write_html(store, [run_id], html or cfg.store.parent / f"{run_id}.html")
    return path


def _execute(plan: RunPlan, resume: str | None, view: RunProgress) -> RunOutcome:
    from kbench import pipeline

    problems = get_protocol(plan.cfg.protocol).problems(plan.problems)  # its tolerance, where it sets one
    if plan.backends:
        return pipeline.run_solutions(plan.cfg, problems, plan.backends, resume, view)
    if plan.cfg.agent:
        from kbench.agent import run_agent

        return run_agent(plan.cfg, problems, resume, view)
    return pipeline.run_model(plan.cfg, problems, resume, view)


@app.command("run")
def run_cmd(
    solutions: str | None = typer.Option(
        None,
        "--solutions",
        help="'shipped' (or 'reference'): evaluate the shipped hand-fused solutions (no model needed)",
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="PROVIDER/MODEL (openai/..., anthropic/..., replay/PATH)"
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML or JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s"),
    level: int | None = typer.Option(None, "--level", "-l"),
    problems: str | None = typer.Option(
        None, "--problems", help="N (the first N), or comma-separated addresses or problem files"
    ),
    tag: list[str] = typer.Option([], "--tag", "-t"),
    backend: str | None = typer.Option(
        None, "--backend", "-b", help=f"{BACKENDS} (default: cuda, or cpp without a GPU)"
    ),
    preset: str | None = typer.Option(None, "--preset", "-p", help="default: full on a GPU, small on CPU"),
    dtype: str | None = typer.Option(None, "--dtype"),
    device: str | None = typer.Option(None, "--device"),
    samples: int | None = typer.Option(None, "--samples", "-n", help="answers per problem (pass@k's n)"),
    turns: int | None = typer.Option(None, "--turns", help="refinement turns per sample"),
    temperature: float | None = typer.Option(
        None, "--temperature", help="default: 0 for one sample, 0.7 with --samples > 1"
    ),
    top_p: float | None = typer.Option(None, "--top-p", help="nucleus sampling (default: the server's)"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="longest answer, in tokens"),
    shots: str | None = typer.Option(None, "--shots", help="worked examples in the prompt: zero | one | few"),
    cache: bool | None = typer.Option(
        None, "--cache/--no-cache", help="answer identical requests from the response cache (default: on)"
    ),
    retries: int | None = typer.Option(None, "--retries", help="retries of a request on 429/5xx/errors"),
    base_url: str | None = typer.Option(None, "--base-url"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="variable holding the API key"),
    concurrency: int | None = typer.Option(None, "--concurrency", "-j"),
    executor: str | None = typer.Option(None, "--executor", help="local | ray"),
    cpu_lanes: int | None = typer.Option(None, "--cpu-lanes", help="CPU evaluations at once (1 when timed)"),
    ray_address: str | None = typer.Option(None, "--ray-address"),
    timeout: float | None = typer.Option(None, "--timeout", help="seconds per candidate worker"),
    noise_floor: float | None = typer.Option(
        None, "--noise-floor", help="relative speedup spread counted as noise (default 0.01)"
    ),
    protocol: str | None = typer.Option(
        None,
        "--protocol",
        help="the rules of correctness and fast_p: kbench (default) | kernelbench (upstream's published "
        "rules: allclose(atol=rtol=1e-2), 5 trials, mean speedup > p); anti-cheat is the same under both",
    ),
    store: Path | None = typer.Option(None, "--store", help="results database"),
    resume: str | None = typer.Option(
        None, "--resume", help="continue run RUN under its stored configuration: finished verdicts are kept"
    ),
    html: Path | None = typer.Option(None, "--html", help="where to write the HTML report"),
    no_static: bool = typer.Option(False, "--no-static", help="skip the static checks"),
    hidden_shapes: bool = typer.Option(
        False, "--hidden-shapes", help="ok candidates are also checked at sizes drawn per evaluation"
    ),
    agent: bool = typer.Option(
        False,
        "--agent",
        help="the model works each problem as an agent with kbench's MCP tools (needs the mcp extra)",
    ),
    agent_calls: int | None = typer.Option(None, "--agent-calls", help="tool calls per session (default 40)"),
    agent_evals: int | None = typer.Option(
        None, "--agent-evals", help="check/evaluate/profile calls per session (default 20)"
    ),
    agent_tokens: int | None = typer.Option(
        None, "--agent-tokens", help="input + output tokens per session (default 400,000)"
    ),
    agent_wall: float | None = typer.Option(
        None, "--agent-wall", help="seconds of answers and tool calls per session (default 3600)"
    ),
    agent_eval_seconds: float | None = typer.Option(
        None,
        "--agent-eval-seconds",
        help="seconds of check/evaluate/profile per session (GPU seconds; no limit)",
    ),
) -> None:
    """Generate (or take the shipped solutions), evaluate, store and report — the whole pipeline."""
    source = absolute_address(source) if source else None  # stored so, to be found from any folder
    flags = dict(
        model=model, source=source, level=level, tags=tag or None, dtype=dtype, device=device,
        samples=samples, turns=turns, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
        shots=shots, response_cache=cache, llm_retries=retries, base_url=base_url, api_key_env=api_key_env,
        concurrency=concurrency, executor=executor, ray_address=ray_address, timeout_s=timeout,
        cpu_lanes=cpu_lanes, noise_floor=noise_floor, protocol=protocol, store=store,
        static_checks=False if no_static else None,
        backend=backend, preset=preset, hidden_shapes=True if hidden_shapes else None,
        agent=True if agent else None, agent_max_calls=agent_calls, agent_max_evals=agent_evals,
        agent_max_tokens=agent_tokens, agent_max_wall_s=agent_wall, agent_max_device_s=agent_eval_seconds,
    )  # fmt: skip
    chosen, places = _where(problems, resume)
    given = resolve(config, flags | chosen)
    prewarm_starter(given)  # the warm starter imports torch while this process sets up
    plan = _resumed(given, resume, solutions, places) if resume else _fresh(given, solutions)
    with RunProgress(_header(plan), plan.cfg.noise_floor) as view:
        outcome = _execute(plan, resume, view)
    path = _report(plan.cfg, outcome.run_id, html)
    console.print(
        f"run {outcome.run_id}: {outcome.recorded} new verdicts, {outcome.skipped} kept from before; "
        f"store {outcome.store}; report {path}",
        highlight=False,
        soft_wrap=True,  # keep paths on one line for scripts that read them
    )
    if view.uncertain:
        console.print(_uncertain_note(view.uncertain), highlight=False, soft_wrap=True)
    console.print(_next_steps(plan.cfg, outcome.run_id, bool(plan.backends)), highlight=False, soft_wrap=True)
    if outcome.failed_requests:
        err_console.print(
            f"[yellow]{outcome.failed_requests} LLM requests failed[/] (first: {escape(outcome.failures[0])}); "
            f"re-run with --resume {outcome.run_id}",
            highlight=False,
            markup=True,
        )
        raise typer.Exit(1)
