"""The soak's figures over time as an SVG written by hand (no plotting library): one panel per figure."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 170, 70, 20, 28, 30
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def nice_max(value: float) -> float:
    """A round number at or above ``value`` for the top of an axis."""
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 10
    for factor in (1, 2, 2.5, 5, 10):
        if value <= step * factor:
            return step * factor
    return step * 10


def panel(
    top: float,
    title: str,
    minutes: Sequence[float],
    series: Sequence[tuple[str, Sequence[float]]],
    span: float,
    warmup: float,
) -> list[str]:
    """One panel: axes, grid, the warm-up shaded, a polyline per series and its legend."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
    peak = nice_max(max((max(values) for _, values in series if values), default=1.0))

    def x(minute: float) -> float:
        return LEFT + plot_w * minute / span

    def y(value: float) -> float:
        return top + TOP + plot_h * (1 - value / peak)

    out = [f'<text x="{LEFT}" y="{top + 18}" font-weight="bold">{escape(title)}</text>']
    if warmup > 0:
        out.append(
            f'<rect x="{x(0):.1f}" y="{top + TOP}" width="{x(min(warmup, span)) - x(0):.1f}" height="{plot_h}" '
            'fill="#eeeeee"/>'
        )
    for n in range(5):
        value = peak * n / 4
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>')
    step = 5.0 if span > 20 else 1.0
    minute = 0.0
    while minute <= span + 1e-9:
        out.append(f'<text x="{x(minute):.1f}" y="{top + PANEL_HEIGHT - 12}" text-anchor="middle">{minute:g}</text>')
        minute += step
    out.append(f'<rect x="{LEFT}" y="{top + TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888888"/>')
    for n, (label, values) in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        points = " ".join(f"{x(m):.1f},{y(v):.1f}" for m, v in zip(minutes, values, strict=False))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{points}"/>')
        legend_x = WIDTH - RIGHT - 150 * (len(series) - n)
        out.append(f'<rect x="{legend_x}" y="{top + 8}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{legend_x + 16}" y="{top + 18}">{escape(label)}</text>')
    return out


def soak_svg(
    minutes: Sequence[float],
    panels: Sequence[tuple[str, Sequence[tuple[str, Sequence[float]]]]],
    warmup: float,
    caption: str,
) -> str:
    """The whole figure: ``panels`` is ``[(title, [(series label, values per sample)])]`` over ``minutes``."""
    span = max(max(minutes, default=1.0), 1.0)
    height = PANEL_HEIGHT * len(panels) + 40
    body: list[str] = []
    for n, (title, series) in enumerate(panels):
        body += panel(n * PANEL_HEIGHT, title, minutes, series, span, warmup)
    body.append(f'<text x="{LEFT}" y="{height - 14}">{escape(caption)} (minutes; warm-up shaded)</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">\n'
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
