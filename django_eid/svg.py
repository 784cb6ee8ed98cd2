"""Charts drawn on the server as inline SVG: no script, no external asset.

Each chart is an ``<svg role="img">`` named by its ``<title>`` (``aria-labelledby``); the
page shows its numbers in a table beside it, for screen readers and for copying. Every
label is escaped here; colours come from CSS classes (the dashboard's template), so the
admin's light and dark themes both apply. Each bar carries its number in ``data-value``
and in a ``<title>`` (the browser's tooltip).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH = 720
HEIGHT = 240
#: Room for the axis' numbers (left) and the labels under the bars (bottom).
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 12, 28

_NOT_A_CLASS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Series:
    """One layer of a stacked chart: its name (the legend's), a CSS class, one value a bar."""

    name: str
    css_class: str
    values: Sequence[float]


def css_class(value: str) -> str:
    """``value`` as a CSS class name: letters, digits, ``_`` and ``-`` only."""
    return _NOT_A_CLASS.sub("", value)


def nice_max(value: float) -> float:
    """The axis' top: ``value`` rounded up to 1, 2, 2.5 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover - the loop's last step always fits


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def _open(chart_id: str, title: str, height: int = HEIGHT) -> list[str]:
    ident = escape(chart_id)
    return [
        f'<svg class="eid-chart" role="img" aria-labelledby="{ident}-title" '
        f'viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="xMinYMin meet" '
        f'xmlns="http://www.w3.org/2000/svg" id="{ident}">',
        f'<title id="{ident}-title">{escape(title)}</title>',
    ]


def _axis(top: float, unit: str = "") -> list[str]:
    """Horizontal grid lines at 0, half and the top, with their numbers."""
    out = []
    plot_height = HEIGHT - TOP - BOTTOM
    for fraction in (0, 0.5, 1):
        if fraction == 0.5 and top % 2:
            continue  # counts: no line at 2.5
        y = TOP + plot_height * (1 - fraction)
        out.append(
            f'<line class="eid-grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        out.append(
            f'<text class="eid-axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_number(top * fraction))}{escape(unit)}</text>"
        )
    return out


def stacked_bars(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    tick_every: int = 1,
) -> SafeString:
    """Vertical bars, one per label, each stacked from ``series`` (first at the bottom).
    Every ``tick_every``-th label is written under its bar."""
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    top = nice_max(max(totals, default=0))
    out = _open(chart_id, title)
    out += _axis(top)
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(labels), 1)
    bar = slot * 0.72
    for i, label in enumerate(labels):
        x = LEFT + i * slot + (slot - bar) / 2
        base = float(TOP + plot_height)
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            height = plot_height * value / top
            base -= height
            out.append(
                f'<rect class="eid-bar {escape(css_class(s.css_class))}" x="{x:.1f}" '
                f'y="{base:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'data-label="{escape(label)}" data-series="{escape(s.name)}" '
                f'data-value="{escape(_number(value))}">'
                f"<title>{escape(label)}: {escape(s.name)} {escape(_number(value))}</title></rect>"
            )
        if i % tick_every == 0 or i == len(labels) - 1:
            out.append(
                f'<text class="eid-axis" x="{x + bar / 2:.1f}" y="{HEIGHT - 8}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    out.append("</svg>")
    return mark_safe("".join(out))  # noqa: S308 - every value above is escaped


def bars(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    series_name: str,
    css: str = "eid-bar-plain",
    tick_every: int = 1,
) -> SafeString:
    """Vertical bars, one value per label."""
    return stacked_bars(
        chart_id, title, labels, [Series(series_name, css, values)], tick_every=tick_every
    )


def rate_bars(chart_id: str, title: str, rows: Sequence[tuple[str, float | None]]) -> SafeString:
    """Horizontal bars of shares between 0 and 1 (``None``: no bar), labelled on the left,
    the percentage written at the bar's end."""
    row_height = 26
    label_width = 190
    height = TOP + row_height * max(len(rows), 1) + 8
    out = _open(chart_id, title, height)
    width = WIDTH - label_width - RIGHT - 48
    for i, (label, share) in enumerate(rows):
        y = TOP + i * row_height
        out.append(
            f'<text class="eid-label" x="{label_width - 8}" y="{y + 16}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        out.append(
            f'<rect class="eid-track" x="{label_width}" y="{y + 4}" width="{width}" height="16"/>'
        )
        if share is None:
            continue
        percent = round(share * 100, 1)
        out.append(
            f'<rect class="eid-bar eid-bar-rate" x="{label_width}" y="{y + 4}" '
            f'width="{width * share:.1f}" height="16" data-label="{escape(label)}" '
            f'data-value="{escape(_number(percent))}">'
            f"<title>{escape(label)}: {escape(_number(percent))} %</title></rect>"
        )
        out.append(
            f'<text class="eid-axis" x="{label_width + width + 6}" y="{y + 16}">'
            f"{escape(_number(percent))} %</text>"
        )
    out.append("</svg>")
    return mark_safe("".join(out))  # noqa: S308 - every value above is escaped
