"""Inline SVG charts generated in Python (no JavaScript, no network).

Every text that reaches the SVG goes through :func:`esc`.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

from ragmeter._text import markup

PALETTE = ["#3b6ea8", "#e07b39", "#4f9d69", "#b8474a", "#7a5ea8", "#9a7b4f", "#c55f9e", "#6d6d6d"]


#: HTML/XML-escape any value, control characters written as escapes (one rule for the whole report)
esc = markup


def _fmt(v: float, percent: bool) -> str:
    return f"{100 * v:.1f}%" if percent else f"{v:.3g}"


def bar_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Tuple[str, Sequence[Optional[float]], Sequence[Tuple[Optional[float], Optional[float]]]]],
    *,
    percent: bool = True,
    ymax: Optional[float] = None,
    notes: Optional[Sequence[str]] = None,
) -> str:
    """Grouped vertical bars with interval whiskers.

    ``series``: (name, values, intervals) per series, one value per label.
    ``notes``: text under each label (e.g. ``n=12/14``).
    """
    n, s = len(labels), max(1, len(series))
    group_w = max(76, 16 * s + 24)
    left, top, bottom = 48, 28, 64
    width = left + n * group_w + 20
    height = 260
    plot_h = height - top - bottom
    vals = [v for _, vs, _ in series for v in vs if v is not None]
    his = [h for _, _, cis in series for (_, h) in cis if h is not None]
    ymax = ymax or max([1e-9] + vals + his)
    if percent:
        ymax = 1.0 if ymax <= 1.0 else ymax

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(v, ymax)) / ymax)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="4" y="16" class="ct">{esc(title)}</text>',
    ]
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        yy = y(frac * ymax)
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" class="ax" text-anchor="end">{esc(_fmt(frac * ymax, percent))}</text>')
    bw = (group_w - 16) / s
    for i, label in enumerate(labels):
        gx = left + i * group_w + 8
        for k, (name, values, cis) in enumerate(series):
            v = values[i]
            x = gx + k * bw
            color = PALETTE[k % len(PALETTE)]
            if v is None:
                parts.append(f'<text x="{x + bw / 2:.1f}" y="{y(0) - 4:.1f}" class="ax" text-anchor="middle">n/a</text>')
                continue
            parts.append(
                f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{max(bw - 2, 1):.1f}" height="{max(y(0) - y(v), 0):.1f}" '
                f'fill="{color}"><title>{esc(name)} {esc(label)}: {esc(_fmt(v, percent))}'
                + (f" [{esc(_fmt(cis[i][0], percent))}, {esc(_fmt(cis[i][1], percent))}]" if cis[i][0] is not None else "")
                + "</title></rect>"
            )
            lo, hi = cis[i]
            if lo is not None and hi is not None:
                cx = x + (bw - 2) / 2
                parts.append(
                    f'<path d="M{cx:.1f},{y(lo):.1f}V{y(hi):.1f}M{cx - 4:.1f},{y(lo):.1f}h8M{cx - 4:.1f},{y(hi):.1f}h8" class="wh"/>'
                )
        cx = gx + (group_w - 16) / 2
        parts.append(f'<text x="{cx:.1f}" y="{height - bottom + 16}" class="ax" text-anchor="middle">{esc(_short(label))}<title>{esc(label)}</title></text>')
        if notes:
            parts.append(f'<text x="{cx:.1f}" y="{height - bottom + 30}" class="ax sm" text-anchor="middle">{esc(notes[i])}</text>')
    if len(series) > 1:
        lx = left
        for k, (name, _, _) in enumerate(series):
            parts.append(f'<rect x="{lx}" y="{height - 18}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>')
            parts.append(f'<text x="{lx + 14}" y="{height - 9}" class="ax">{esc(name)}</text>')
            lx += 24 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str, limit: int = 14) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def hbar_chart(title: str, items: Sequence[Tuple[str, int]], *, total: Optional[int] = None, colors: Optional[dict] = None) -> str:
    """Horizontal bars of counts (e.g. the diagnosis breakdown)."""
    total = total if total is not None else sum(c for _, c in items)
    label_w, bar_w, row_h = 170, 320, 22
    height = 28 + row_h * len(items) + 8
    width = label_w + bar_w + 110
    vmax = max([1] + [c for _, c in items])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="4" y="16" class="ct">{esc(title)}</text>',
    ]
    for i, (label, count) in enumerate(items):
        yy = 28 + i * row_h
        w = bar_w * count / vmax
        color = (colors or {}).get(label, PALETTE[i % len(PALETTE)])
        share = f"{100 * count / total:.1f}%" if total else "0%"
        parts.append(f'<text x="{label_w - 6}" y="{yy + 14}" class="ax" text-anchor="end">{esc(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{yy + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}"/>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{yy + 14}" class="ax">{count} ({esc(share)})</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, values: Sequence[float], *, bins: int = 10, lo: float = 0.0, hi: float = 1.0, n_missing: int = 0) -> str:
    """Histogram of values in [lo, hi]; ``n_missing`` unscored cases are noted."""
    counts = [0] * bins
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        k = int((v - lo) / (hi - lo) * bins) if hi > lo else 0
        counts[min(max(k, 0), bins - 1)] += 1
    width, height, left, top, bottom = 300, 170, 36, 26, 34
    plot_w, plot_h = width - left - 10, height - top - bottom
    cmax = max([1] + counts)
    bw = plot_w / bins
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="4" y="16" class="ct">{esc(title)}</text>',
    ]
    for k, c in enumerate(counts):
        h = plot_h * c / cmax
        x = left + k * bw
        a, b = lo + (hi - lo) * k / bins, lo + (hi - lo) * (k + 1) / bins
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" fill="{PALETTE[0]}">'
            f"<title>{a:.3g}-{b:.3g}: {c}</title></rect>"
        )
    parts.append(f'<text x="{left}" y="{height - bottom + 14}" class="ax">{lo:g}</text>')
    parts.append(f'<text x="{left + plot_w}" y="{height - bottom + 14}" class="ax" text-anchor="end">{hi:g}</text>')
    parts.append(f'<text x="{left - 4}" y="{top + 8}" class="ax" text-anchor="end">{cmax}</text>')
    scored = sum(counts)
    parts.append(
        f'<text x="{left}" y="{height - 6}" class="ax sm">n={scored} scored'
        + (f", {n_missing} unscored" if n_missing else "")
        + "</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(title: str, xs: Sequence[float], series: Sequence[Tuple[str, Sequence[Optional[float]]]], *, percent: bool = False, xlabel: str = "") -> str:
    """Lines over a shared x axis (e.g. a threshold sweep)."""
    width, height, left, top, bottom = 520, 240, 52, 28, 52
    plot_w, plot_h = width - left - 16, height - top - bottom
    xmin, xmax = (min(xs), max(xs)) if xs else (0.0, 1.0)
    xmax = xmax if xmax > xmin else xmin + 1
    vals = [v for _, vs in series for v in vs if v is not None]
    ymax = max([1e-9] + vals)
    ymax = 1.0 if percent and ymax <= 1 else ymax * 1.05

    def px(x: float) -> float:
        return left + plot_w * (x - xmin) / (xmax - xmin)

    def py(v: float) -> float:
        return top + plot_h * (1 - v / ymax)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="4" y="16" class="ct">{esc(title)}</text>',
    ]
    for frac in (0, 0.5, 1.0):
        yy = py(frac * ymax)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" class="ax" text-anchor="end">{esc(_fmt(frac * ymax, percent))}</text>')
    for x in xs:
        parts.append(f'<text x="{px(x):.1f}" y="{top + plot_h + 14}" class="ax sm" text-anchor="middle">{x:g}</text>')
    for k, (name, vs) in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = [(px(x), py(v)) for x, v in zip(xs, vs) if v is not None]
        if pts:
            d = "M" + "L".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
            for (a, b), x, v in zip(pts, xs, [v for v in vs if v is not None]):
                parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"><title>{esc(name)} @ {x:g}: {esc(_fmt(v, percent))}</title></circle>')
        parts.append(f'<rect x="{left + 110 * k}" y="{height - 16}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{left + 110 * k + 14}" y="{height - 7}" class="ax">{esc(name)}</text>')
    if xlabel:
        parts.append(f'<text x="{left + plot_w}" y="{top + plot_h + 28}" class="ax" text-anchor="end">{esc(xlabel)}</text>')
    parts.append("</svg>")
    return "".join(parts)
