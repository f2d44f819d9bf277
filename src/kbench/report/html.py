"""One self-contained HTML page: inline CSS and SVG, no script, nothing fetched from the network."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from html import escape

from kbench import metrics as m
from kbench.report import at_k, levels, passes, svg, transcripts
from kbench.report.data import MODES, MessageKey, Options, Row, Series, fmt_fast, fmt_speedup
from kbench.report.state import warnings
from kbench.report.summary import TURN_HEADER, ks_of, rules, sections, turn_rows
from kbench.store import MessageRecord, TranscriptStep
from kbench.store.export import message
from kbench.version import VERSION

# The per-problem table and the speedup histogram divide kbench's statistic whatever protocols the report
# applies (the per-level tables follow each protocol's own); every such number is labelled with it.
STATISTIC = m.KBENCH_RULE.statistic
SPEEDUPS = f"speedups: {STATISTIC}s (kbench)"

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
table{border-collapse:collapse;margin:8px 0 20px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
table.problems td{white-space:nowrap}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#b42318;font-weight:600}.warn{color:#9a6700}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:480px;font-size:12px}
svg.chart text{font:12px system-ui,sans-serif}section.verdict{border-top:1px solid #ddd;padding-top:6px}
.note{color:#555;max-width:900px}ul.warnings{background:#fff8c5;border:1px solid #d4a72c;padding:8px 28px}
td.section{background:#fafafa;font-weight:600}
"""


def _table(cls: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(f'<tr class="{cls}-row">' + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _runs(series: Sequence[Series]) -> str:
    rows = []
    for s in series:
        hw, r = s.run.hardware, s.run
        gpu = hw.get("gpu") or f"CPU: {hw.get('cpu', '?')}"
        rows.append(
            [escape(s.label), escape(r.run_id), escape(r.created_at), f"<b>{escape(s.where)}</b>",
             escape(s.judged), escape(str(gpu)), escape(str(hw.get("torch")))]
            + [escape(r.fingerprint), escape(r.kbench_version), escape((r.git_commit or "–")[:10])]
        )  # fmt: skip
    header = ["series", "run", "started", "numbers from", "correctness judged under", "hardware", "torch",
              "fingerprint", "kbench", "commit"]  # fmt: skip
    return _table("runs", header, rows)


def _warnings(series: Sequence[Series]) -> str:
    lines = warnings(series)
    if not lines:
        return ""
    return '<ul class="warnings">' + "".join(f"<li>warning: {escape(w)}</li>" for w in lines) + "</ul>"


def _headline(series: Sequence[Series], options: Options) -> str:
    """The headline sections (report/summary.py), one column per series."""
    body = []
    for title, rows in sections(series, options):
        body.append(f'<tr><td class="section" colspan="{len(series) + 1}">{escape(title)}</td></tr>')
        body += [
            f'<tr class="headline-row"><td>{escape(label)}</td>'
            + "".join(f'<td class="num">{escape(c)}</td>' for c in cells)
            + "</tr>"
            for label, cells in rows
        ]
    head = "".join(f"<th>{escape(h)}</th>" for h in ["metric", *(s.label for s in series)])
    return f'<table class="headline"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _levels(series: Sequence[Series], options: Options) -> str:
    """Per level, one table per series and protocol (report/levels.py)."""
    parts = []
    for s in series:
        for protocol in options.protocols:
            rows = [[escape(c) for c in row] for row in levels.rows(s, protocol, options.thresholds)]
            header = [escape(h) for h in levels.header(options.thresholds)]
            parts.append(f"<h3>{escape(levels.title(s, protocol))}</h3>" + _table("levels", header, rows))
    return "".join(parts)


def _at_k(series: Sequence[Series], options: Options) -> str:
    """pass@k and fast_p@k per level, one table per series and protocol (report/at_k.py)."""
    parts = [
        "<h2 id='at-k'>pass@k and fast_p@k</h2><p class='note'>over samples (the unbiased estimator; a "
        "sample passes when one of its turns does), per level, at every threshold p, against eager and "
        "torch.compile; averaged over the problems with at least k samples (the problems column)</p>"
    ]
    for s in series:
        for protocol in options.protocols:
            found = at_k.rows(s, protocol, options.thresholds, ks_of(s, options))
            header = [escape(h) for h in at_k.header(options.thresholds)]
            table = _table("at-k", header, [[escape(c) for c in row] for row in found])
            parts.append(f"<h3>{escape(at_k.title(s, protocol))}</h3>" + table)
    return "".join(parts)


def _turns(series: Sequence[Series], options: Options) -> str:
    """Per turn, one table per series (every sample of the turn)."""
    parts = []
    for s in series:
        rows = [[escape(c) for c in row] for row in turn_rows(s, options.protocols[0])]
        parts.append(f"<h3>{escape(s.label)}</h3>" + _table("turns", TURN_HEADER, rows))
    return "".join(parts)


def _fast_p_chart(series: Sequence[Series], options: Options, p_max: float = 3.0) -> str:
    ps = [i * 0.05 for i in range(int(p_max / 0.05) + 1)]
    lines = []
    for i, s in enumerate(series):
        for mode, dashed in zip(MODES, (False, True), strict=True):
            curve = [m.fast_p(s.verdicts, p, mode, s.rule(options.protocols[0])) for p in ps]
            label = f"{s.label} vs {mode} (n = {len(s.verdicts)})"
            lines.append(svg.Line(label, [(f.p, f.rate) for f in curve], svg.color(i), dashed))
    return svg.line_chart("fast_p over p", lines, p_max, "speedup threshold p", "fast_p")


# Speedup histogram bins on a log2 scale: (<1/8), [1/8, 1/4) ... [4, 8), (>=8).
EDGES = [2.0**k for k in range(-3, 4)]


def _bin(value: float) -> int:
    return sum(value >= e for e in EDGES)


def _bin_names() -> list[str]:
    names = [f"<{EDGES[0]:g}"]
    names += [f"{a:g}–{b:g}" for a, b in zip(EDGES, EDGES[1:], strict=False)]
    return [*names, f"≥{EDGES[-1]:g}"]


def _histogram(series: Sequence[Series], mode: str = "eager") -> str:
    groups = []
    for i, s in enumerate(series):
        counts = [0] * (len(EDGES) + 1)
        for v in s.verdicts:
            sp = m.speedup(v, mode, STATISTIC)
            if sp is not None:
                counts[_bin(sp.value)] += 1
        label = f"{s.label} (n = {sum(counts)} timed of {len(s.verdicts)})"
        groups.append((label, counts, svg.color(i)))
    title = f"speedup vs {mode} ({STATISTIC}s, kbench)"
    return svg.histogram(title, _bin_names(), groups, f"{title}: correct, timed verdicts")


def _group_table(
    cls: str, series: Sequence[Series], by: Callable[[m.Record], list[str]], options: Options
) -> str:
    def cells(s: Series) -> dict[str, str]:
        def cell(vs: list[m.Verdict]) -> str:
            fast = fmt_fast(m.fast_p(vs, 1.0, "eager", s.rule(options.protocols[0])))
            return f"{sum(v.ok for v in vs)}/{len(vs)} correct, fast<sub>1</sub> {fast}"

        return m.breakdown(s.records, by, cell)

    tables = [cells(s) for s in series]
    groups = sorted({g for t in tables for g in t})
    rows = [[escape(g)] + [t.get(g, "–") for t in tables] for g in groups]
    return _table(cls, ["group", *(escape(s.label) for s in series)], rows)


RowKey = tuple[str, int, int, str]


def _row_key(r: Row) -> RowKey:
    k = r.stored.key
    return (k.problem_key, k.sample, k.turn, k.backend)


def _natural(key: RowKey) -> tuple[object, ...]:
    problem = key[0]
    source, _, rest = problem.rpartition(":")
    parts = tuple(int(x) if x.isdigit() else math.inf for x in rest.split("/"))
    return (source, parts, problem, *key[1:])


def _status_cell(r: Row) -> str:
    v = r.stored.verdict
    cls = "ok" if v.ok else "bad"
    rule = f" ({escape(v.rule)})" if v.rule else ""
    return f'<a class="{cls}" href="#{r.anchor}">{escape(v.status.value)}</a>{rule}'


def _problem_cells(r: Row | None) -> list[str]:
    if r is None:
        return ["–"] * 4
    v = r.stored.verdict
    frac = m.sol_fraction(v)
    sol = "–" if frac is None else f'<span class="{"bad" if frac > 1 else ""}">{frac:.0%}</span>'
    speedups = [fmt_speedup(m.speedup(v, mode, STATISTIC)) for mode in MODES]
    return [_status_cell(r), *speedups, sol]


def _problems(series: Sequence[Series], names: dict[str, str]) -> str:
    by_series = [{_row_key(r): r for r in s.rows} for s in series]
    keys = sorted({k for t in by_series for k in t}, key=_natural)
    rows = []
    for key in keys:
        any_row = next(t[key] for t in by_series if key in t)
        label = escape(key[0]) + (f" <small>{escape(names[key[0]])}</small>" if key[0] in names else "")
        cells = [label, f"{key[1]}/{key[2]}", escape(", ".join(any_row.record.tags))]
        for table in by_series:
            cells += _problem_cells(table.get(key))
        rows.append(cells)
    header = ["problem", "sample/turn", "tags"]
    for s in series:
        lab = escape(s.label)
        header += [f"{lab}: status", f"speedup vs eager ({STATISTIC}s) [95 % CI]",
                   f"vs compile ({STATISTIC}s) [95 % CI]", "SOL fraction"]  # fmt: skip
    return _table("problems", header, rows)


def _stats(name: str, t: m.TimingStats | None) -> list[str]:
    if t is None:
        return []
    flag = "" if t.meaningful else " (not meaningful: interpreter)"
    return [
        f"{escape(name)}: median {t.median_ms:.4g} ms, mean {t.mean_ms:.4g} ± {t.std_ms:.2g} ms, "
        f"rse {t.rse:.2%}, n={t.n}, {escape(t.method)} on {escape(t.device)}{flag}"
    ]


def _told(messages: Sequence[MessageRecord]) -> list[tuple[str, str]]:
    """(block name, text) for what a turn told the model: the system prompt and the task, or the feedback."""
    return [(f"{msg.kind} sent at turn {msg.turn}", msg.text) for msg in messages]


def _details(
    r: Row,
    told: dict[MessageKey, list[MessageRecord]],
    sessions: dict[transcripts.SessionKey, list[TranscriptStep]] | None = None,
) -> str:
    s, v = r.stored, r.stored.verdict
    k = s.key
    facts = [
        f"<b>{escape(v.status.value)}</b>{' · rule ' + escape(v.rule) if v.rule else ''} · "
        + escape(message(v)).replace("\n", "<br>"),
        f"model {escape(k.model)} · sample {k.sample} · turn {k.turn} · backend {escape(k.backend)} · "
        f"preset {escape(v.preset)} · {escape(v.dtype)} on {escape(v.device)} · {v.seconds:.1f} s",
    ]
    facts += _stats("candidate", v.timing)
    for mode, stats in v.baselines:
        facts += _stats(f"baseline {mode}", stats)
    facts += [escape(line) for line in passes.pass_lines(v)]
    if v.correctness is not None:
        c = v.correctness
        facts.append(
            f"correctness: seeds {list(c.seeds)}, max abs err {c.max_abs_err:.3g}, max rel {c.max_rel_err:.3g}"
        )
    facts += [f'<span class="warn">warning: {escape(w)}</span>' for w in v.warnings]
    facts += [f"check {escape(f.rule)} ({f.severity.value}): {escape(f.message)}" for f in v.checks.findings]
    blocks = [("mismatch report", v.correctness.report if v.correctness else ""), ("log tail", v.log_tail)]
    blocks += _told(told.get((k.problem_key, k.sample, k.turn), []))
    blocks += [("candidate source", s.candidate_source), ("completion", s.completion_text)]
    title = f"{escape(k.problem_key)} · {escape(k.model)} · s{k.sample} t{k.turn}"
    session = transcripts.transcript_block((sessions or {}).get((k.problem_key, k.sample), []))
    return (
        f'<section class="verdict" id="{r.anchor}"><h3>{title}</h3><p>{"<br>".join(facts)}</p>'
        f"{session}{_blocks(blocks)}</section>"
    )


def _blocks(blocks: Sequence[tuple[str, str]]) -> str:
    """Collapsed <pre> blocks (the candidate source open), empty ones left out."""
    return "".join(
        f"<details{' open' if name == 'candidate source' else ''}><summary>{escape(name)}</summary>"
        f"<pre>{escape(text)}</pre></details>"
        for name, text in blocks
        if text
    )


def _unjudged(s: Series) -> str:
    """A section per turn that the run told the model something at but holds no verdict of (its request
    failed, or the run stopped first), with what it told and why there is no verdict."""
    judged = {(r.record.problem_key, r.record.sample, r.record.turn) for r in s.rows}
    answered = {(q.problem_key, q.sample, q.turn) for q in s.requests if not q.error}
    failed = {(q.problem_key, q.sample, q.turn): q.error for q in s.requests if q.error}
    told = s.told()
    parts = []
    for key in sorted(set(told) - judged, key=lambda k: _natural((*k, ""))):
        problem, sample, turn = key
        why = "no verdict stored"
        if key in failed and key not in answered:
            why = f"no verdict: the LLM request failed ({failed[key]})"
        title = f"{escape(problem)} · {escape(s.model)} · s{sample} t{turn} · no verdict"
        parts.append(
            f'<section class="verdict unjudged"><h3>{title}</h3><p>{escape(why)}</p>'
            f"{_blocks(_told(told[key]))}</section>"
        )
    return "".join(parts)


def _verdicts(series: Sequence[Series]) -> str:
    """Every verdict's details, then the turns without a verdict, each with what it told the model."""
    return (
        "<h2 id='details'>Verdict details</h2><p class='note'>each verdict with what its turn told the "
        "model; then the turns the model was told something at but that have no verdict</p>"
        + "".join(
            _details(r, s.told(), transcripts.sessions(s.transcript) if s.transcript else None)
            for s in series
            for r in s.rows
        )
        + "".join(_unjudged(s) for s in series)
    )


def render(
    series: Sequence[Series], names: dict[str, str] | None = None, options: Options | None = None
) -> str:
    """The whole page. `names` maps problem keys to problem names for the per-problem table."""
    names, options = names or {}, options or Options()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    first = options.protocols[0].name
    notes = "".join(f"<li>{escape(line)}</li>" for line in rules(series, options))
    parts = [
        f"<h1>kbench report</h1><p class='note'>kbench {escape(VERSION)} · generated {stamp} · "
        f"{sum(len(s.rows) for s in series)} verdicts in {len(series)} series</p>",
        _warnings(series),
        "<h2 id='runs'>Runs</h2>" + _runs(series),
        f"<h2 id='headline'>Headline</h2><ul class='note'>{notes}</ul><p class='note'>Per-problem rows "
        "divide by the problems the run selected; a problem without a verdict counts as not correct.</p>"
        + _headline(series, options),
        "<h2 id='levels'>Per level</h2><p class='note'>as upstream KernelBench's analysis counts: compiled, "
        "correct, the geometric-mean speedup of the correct ones and fast_p per threshold, first attempt "
        "and best of k</p>" + _levels(series, options),
        _at_k(series, options),
        f"<h2 id='fast-p'>fast_p over p</h2><p class='note'>all verdicts pooled, {escape(first)} rules; "
        "solid: vs eager; dashed: vs torch.compile; n: the verdicts of each line</p>",
        _fast_p_chart(series, options),
        f"<h2 id='distribution'>Speedup distribution</h2><p class='note'>{escape(SPEEDUPS)}, whatever "
        "the protocol; n: the correct, timed verdicts of each series</p>" + _histogram(series),
        f"<h2 id='tags'>Per fusion pattern</h2><p class='note'>all verdicts, {escape(first)} rules</p>"
        + _group_table("tags", series, m.by_tag, options),
    ]
    if any(s.turns > 1 for s in series):
        parts.append(
            f"<h2 id='turns'>Per turn</h2><p class='note'>{escape(first)} rules</p>" + _turns(series, options)
        )
    trained = passes.passes_table([(s.label, [r.stored.verdict for r in s.rows]) for s in series])
    if trained:
        parts.append(trained)
    agents = [(s.label, s.transcript, s.solved) for s in series if s.transcript]
    if agents:
        parts.append(transcripts.agents_table(agents))
    parts.append(
        f"<h2 id='problems'>Per problem</h2><p class='note'>{escape(SPEEDUPS)}, whatever the protocol, "
        "with their 95 % interval; the per-level tables give each protocol's own</p>"
        + _problems(series, names)
    )
    parts.append(_verdicts(series))
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>kbench report</title><style>{CSS}</style></head><body>{body}</body></html>"
    )
