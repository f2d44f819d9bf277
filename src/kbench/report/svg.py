"""Inline SVG charts (no JavaScript, no network): a line chart and a grouped histogram."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# Colour-blind-safe palette (Okabe-Ito), cycled over series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
W, H = 980, 340
LEFT, RIGHT, TOP, BOTTOM = 56, 330, 16, 44


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[tuple[float, float]]
    color: str
    dashed: bool = False


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _frame(title: str, x_label: str, y_label: str, body: list[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" viewBox="0 0 {W} {H}" '
        f'width="{W}" height="{H}"><title>{escape(title)}</title>'
    )
    axes = (
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})">{escape(y_label)}</text>'
    )
    return head + axes + "".join(body) + "</svg>"


def _legend(items: Sequence[tuple[str, str, bool]]) -> list[str]:
    out = []
    for i, (label, col, dashed) in enumerate(items):
        y = TOP + 10 + 18 * i
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<line x1="{W - RIGHT + 10}" y1="{y}" x2="{W - RIGHT + 34}" y2="{y}" stroke="{col}" '
            f'stroke-width="2.5"{dash}/><text x="{W - RIGHT + 40}" y="{y + 4}" class="legend">{escape(label)}</text>'
        )
    return out


def line_chart(title: str, lines: Sequence[Line], x_max: float, x_label: str, y_label: str) -> str:
    """Lines over x in [0, x_max] and y in [0, 1] (a rate)."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + pw * x / x_max

    def sy(y: float) -> float:
        return H - BOTTOM - ph * y

    body = []
    for k in range(6):
        y = k / 5
        body.append(f'<line x1="{LEFT}" y1="{sy(y):.1f}" x2="{W - RIGHT}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        body.append(f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0%}</text>')
    for k in range(int(x_max) * 2 + 1):
        x = k / 2
        body.append(f'<text x="{sx(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x:g}</text>')
    for line in lines:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line.points)
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        body.append(
            f'<polyline class="series" fill="none" stroke="{line.color}" stroke-width="2.5"{dash} points="{pts}"/>'
        )
    body += _legend([(ln.label, ln.color, ln.dashed) for ln in lines])
    return _frame(title, x_label, y_label, body)


def histogram(
    title: str, bins: Sequence[str], groups: Sequence[tuple[str, Sequence[int], str]], x_label: str
) -> str:
    """Grouped bars: one group of bars per bin, one bar per (label, counts, colour)."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    top = max([1, *(c for _, counts, _ in groups for c in counts)])
    slot = pw / max(len(bins), 1)
    bar = slot * 0.8 / max(len(groups), 1)
    body = []
    for k in range(5):
        value = top * k / 4
        y = H - BOTTOM - ph * k / 4
        body.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        body.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    for b, name in enumerate(bins):
        x0 = LEFT + slot * b + slot * 0.1
        body.append(
            f'<text x="{x0 + slot * 0.4:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{escape(name)}</text>'
        )
        for g, (label, counts, col) in enumerate(groups):
            h = ph * counts[b] / top
            body.append(
                f'<rect class="bar" x="{x0 + bar * g:.1f}" y="{H - BOTTOM - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{col}"><title>{escape(label)}: {counts[b]} in {escape(name)}</title></rect>'
            )
    body += _legend([(label, col, False) for label, _, col in groups])
    return _frame(title, x_label, "verdicts", body)
