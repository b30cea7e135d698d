"""Latency distributions as an SVG, written by hand (no plotting library): one empirical CDF per
series on a log-scale millisecond axis, with each series' p50 and p99 in the legend.

  cdf_svg([("allot run --wait", "#1f77b4", [ms, ...]), ...], "title", "subtitle") -> str
"""

import math
from xml.sax.saxutils import escape

W, PLOT_H = 760, 330
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 58, 46


def pct(xs, p):
    """The p-th percentile of xs, nearest rank (as bench/session_start/local_cluster.py)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _ticks(lo, hi):
    """1-2-5 ticks from lo to hi (both > 0)."""
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                out.append(v)
    return out


def _label(v):
    return f"{v:g}" if v < 1000 else f"{v / 1000:g} s"


def cdf_svg(series, title, subtitle=""):
    """series: (name, colour, samples in ms) each, samples > 0."""
    every = [x for _, _, xs in series for x in xs]
    lo = max(v for v in _ticks(1e-3, 1e7) if v <= max(min(every), 1e-3))
    hi = min(v for v in _ticks(1e-3, 1e7) if v >= max(every))
    if hi <= lo:
        hi = lo * 10
    pw, ph = W - LEFT - RIGHT, PLOT_H
    height = TOP + ph + BOTTOM + 18 * len(series) + 8

    def x(v):
        return LEFT + (math.log10(max(v, lo)) - math.log10(lo)) / (
            math.log10(hi) - math.log10(lo)) * pw

    def y(f):
        return TOP + (1 - f) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
           f'viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
           f'<text x="{LEFT}" y="40" fill="#555">{escape(subtitle)}</text>']
    for v in _ticks(lo, hi):
        out.append(f'<line x1="{x(v):.1f}" y1="{TOP}" x2="{x(v):.1f}" y2="{TOP + ph}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{x(v):.1f}" y="{TOP + ph + 16}" text-anchor="middle">'
                   f'{_label(v)}</text>')
    for f in (0, 0.25, 0.5, 0.75, 0.9, 1):
        out.append(f'<line x1="{LEFT}" y1="{y(f):.1f}" x2="{LEFT + pw}" y2="{y(f):.1f}" '
                   f'stroke="{"#bbb" if f == 0.5 else "#eee"}"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(f) + 4:.1f}" text-anchor="end">'
                   f'{f * 100:g}%</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#333"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{TOP + ph + 34}" text-anchor="middle">'
               f'milliseconds, spawn to exit (log scale)</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {TOP + ph / 2})">fraction of runs at or below</text>')
    for i, (name, colour, xs) in enumerate(series):
        xs = sorted(xs)
        pts = [(x(xs[0]), y(0))]
        for k, v in enumerate(xs):  # a step up at each sample
            pts += [(x(v), y(k / len(xs))), (x(v), y((k + 1) / len(xs)))]
        path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"/>')
    for i, (name, colour, xs) in enumerate(series):  # the legend, under the plot
        ly = TOP + ph + BOTTOM + 14 + i * 18
        out.append(f'<line x1="{LEFT}" y1="{ly - 4}" x2="{LEFT + 24}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{LEFT + 30}" y="{ly}">{escape(name)}: n={len(xs)}, p50 '
                   f'{pct(xs, 50):.1f} ms, p99 {pct(xs, 99):.1f} ms</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
