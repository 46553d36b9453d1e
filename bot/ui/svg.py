"""The page's two drawings as SVG text: the run's timeline of agent calls, and cost per day.

Both are built on the server from laid-out values (`policies.ui_timeline`, `policies.ui_costs`)
with every label escaped; colours are SVG attributes and classes, no inline style or script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from policies.ui_costs import Total
from policies.ui_timeline import Bar, Timeline, tick_step

WIDTH = 960
LANE = 22
AXIS = 22
LABEL_CHARS = 7.0  # average width of a label character at the page's font size, in px
COLOURS = {"done": "#2e7d32", "error": "#c62828", "running": "#1565c0", "pending": "#9e9e9e"}


def _seconds(value: float) -> str:
    if value == 0:
        return "0 s"
    if value >= 60:
        return f"{value / 60:.1f} min"
    return f"{value:g} s" if value >= 1 else f"{value * 1000:.0f} ms"


def _bar(bar: Bar, scale: float, href: str) -> str:
    call = bar.call
    x = bar.start * scale
    width = max(2.0, (bar.end - bar.start) * scale)
    y = AXIS + bar.lane * LANE + 2
    state = "running" if bar.running and call.state == "running" else call.state
    classes = f"bar s-{escape(state)}" + (" replayed" if call.replayed else "")
    colour = COLOURS.get(state, COLOURS["pending"])
    title = f"#{call.index} {call.label} — {state}"
    if call.replayed:
        title += " (replayed from the journal)"
    title += f", {_seconds(bar.end - bar.start)}"
    if call.phase:
        title += f", phase {call.phase}"
    text = ("↺ " if call.replayed else "") + call.label
    fits = int((width - 6) / LABEL_CHARS)
    label = ""
    if fits >= 3:
        shown = text if len(text) <= fits else text[: fits - 1] + "…"
        label = f'<text x="{x + 3:.1f}" y="{y + LANE - 8}" class="bar-label">{escape(shown)}</text>'
    dash = ' stroke="#333" stroke-dasharray="3 2"' if call.replayed else ""
    opacity = ' fill-opacity="0.55"' if call.replayed else ""
    return (
        f'<a href="{escape(href)}" class="{classes}" data-index="{call.index}">'
        f"<title>{escape(title)}</title>"
        f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{LANE - 4}" rx="3"'
        f' fill="{colour}"{opacity}{dash}/>{label}</a>'
    )


def _tick_label(x: float, text: str) -> str:
    """A tick's label right of its line, or left of it where it would run past the drawing's
    right edge (the last tick's, at the end of the span)."""
    if x + 2 + len(text) * LABEL_CHARS <= WIDTH:
        return f'<text x="{x + 2:.1f}" y="{AXIS - 8}" class="tick-label">{escape(text)}</text>'
    return (
        f'<text x="{x - 2:.1f}" y="{AXIS - 8}" class="tick-label"'
        f' text-anchor="end">{escape(text)}</text>'
    )


def timeline_svg(timeline: Timeline, href: Callable[[int], str]) -> Markup:
    """One lane per concurrent call; `href(index)` links each bar to its transcript."""
    height = AXIS + max(1, timeline.lanes) * LANE + 4
    scale = (WIDTH - 10) / timeline.span
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}"'
        f' width="{WIDTH}" height="{height}" role="img" aria-label="Timeline of the agent calls">'
    ]
    step = tick_step(timeline.span)
    tick = 0.0
    while tick <= timeline.span + 1e-9:
        x = tick * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{AXIS - 4}" x2="{x:.1f}" y2="{height}" class="tick"'
            ' stroke="#ddd"/>' + _tick_label(x, _seconds(tick))
        )
        tick += step
    if not timeline.bars:
        parts.append(f'<text x="4" y="{AXIS + 15}" class="empty">No agent call has started.</text>')
    parts.extend(_bar(bar, scale, href(bar.call.index)) for bar in timeline.bars)
    parts.append("</svg>")
    return Markup("".join(parts))


PALETTE = ("#5c6bc0", "#26a69a", "#ef6c00", "#8d6e63", "#ab47bc", "#78909c", "#d4e157", "#ec407a")


def cost_chart_svg(
    days: Sequence[tuple[str, Total]],
    series: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    by: str = "cost",
) -> Markup:
    """Stacked bars per day of `by` ('cost' or 'tokens'): `days` are (day name, total) in
    order, `values[i][j]` the share of `series[j]` on day i (`policies.ui_costs.stacks`)."""
    height, top, bottom, left = 260, 30, 36, 64
    sums = [sum(day) for day in values]
    peak = max(sums, default=0.0) or 1.0
    inner = height - top - bottom
    slot = (WIDTH - left - 8) / max(1, len(days))

    def unit(value: float) -> str:
        return f"${value:,.2f}" if by == "cost" else f"{value:,.0f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}"'
        f' width="{WIDTH}" height="{height}" role="img" aria-label="{escape(by)} per day">',
        f'<line x1="{left}" y1="{top + inner}" x2="{WIDTH - 8}" y2="{top + inner}" stroke="#999"/>',
        f'<text x="{left - 6}" y="{top + 10}" text-anchor="end" class="axis">{unit(peak)}</text>',
        f'<text x="{left - 6}" y="{top + inner}" text-anchor="end" class="axis">{unit(0)}</text>',
    ]
    x_key = left
    for j, name in enumerate(series):
        colour = PALETTE[j % len(PALETTE)]
        parts.append(
            f'<g class="key"><rect x="{x_key}" y="6" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x_key + 14}" y="15" class="axis">{escape(name)}</text></g>'
        )
        x_key += 24 + int(len(name) * 6.5)
    every = max(1, round(len(days) / 10))
    for i, (name, total) in enumerate(days):
        x = left + i * slot + slot * 0.15
        tip = f"{name}: {unit(sums[i])} ({total.runs} runs, {total.tokens:,} tokens)"
        parts.append(f'<g class="day"><title>{escape(tip)}</title>')
        base: float = top + inner
        for j, value in enumerate(values[i]):
            if value <= 0:
                continue
            bar = inner * value / peak
            base -= bar
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{slot * 0.7:.1f}" height="{bar:.1f}"'
                f' fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(name)} · '
                f"{escape(series[j])}: {unit(value)}</title></rect>"
            )
        parts.append("</g>")
        if i % every == 0:
            parts.append(
                f'<text x="{x:.1f}" y="{height - 18}" class="axis">{escape(name[5:])}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
