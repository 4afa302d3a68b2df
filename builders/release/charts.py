"""Small inline SVG charts for the build report (``builders/release/report.py``), in pure Python, no plotting library.

Each chart is one ``<svg>`` element with a ``viewBox``, ``role="img"``, an ``aria-label`` and a ``<title>``; it scales
to its container (the report's CSS). Every text is escaped with ``html.escape``: labels come from data (drop
reasons, step names, config values). Long labels are cut with an ellipsis, the full text in the element's
``<title>`` (a tooltip). Axes get "nice" ticks (1, 2 or 5 x 10^k); there are no font metrics here, so text widths
are estimated.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

__all__ = ["BLUE", "GREEN", "ORANGE", "RED", "bar_chart", "binned_chart", "fmt_compact", "funnel_chart",
           "histogram", "histogram_bins", "nice_ticks"]

BLUE, ORANGE, GREEN, RED = "#4c72b0", "#dd8452", "#55a868", "#c44e52"
LIGHT = "#b8c4d9"  # the funnel's "rows in" bars
W = 600  # every chart is 600 viewBox units wide
_FS = 12  # font size of tick labels and axis labels
_CW = 0.6  # estimated width of a character, in font sizes
_INK, _GRID, _AXIS = "#333", "#e6e9ef", "#888"


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _f(x: float) -> str:
    """A coordinate, short: ``12.5``, ``300``."""
    s = f"{round(x, 1) + 0.0:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _width(s: str, size: float = _FS) -> float:
    return len(s) * size * _CW


def _text(x: float, y: float, s: str, *, size: float = _FS, anchor: str = "start", fill: str = _INK,
          limit: int | None = None, extra: str = "") -> str:
    """A ``<text>``; cut to ``limit`` characters with an ellipsis, the full text in its ``<title>``."""
    tip = ""
    if limit is not None and len(s) > limit:
        tip, s = f"<title>{_e(s)}</title>", s[:limit - 1] + "\u2026"
    return (f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"{extra}>'
            f"{tip}{_e(s)}</text>")


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str = _AXIS, extra: str = "") -> str:
    return f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}"{extra}/>'


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str = "", extra: str = "") -> str:
    body = f"<title>{_e(tip)}</title></rect>" if tip else "/>"
    return f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" fill="{fill}"{extra}' + (
        f">{body}" if tip else body)


def _svg(height: float, title: str, body: Iterable[str]) -> str:
    t = _e(title)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {_f(height)}" width="{W}" '
            f'height="{_f(height)}" role="img" aria-label="{t}"><title>{t}</title>'
            + _text(W / 2, 20, title, size=14, anchor="middle", limit=int((W - 20) / (14 * _CW)),
                    extra=' font-weight="600"') + "".join(body) + "</svg>")


def _nodata(title: str) -> str:
    return _svg(120, title, [_text(W / 2, 70, "no data", anchor="middle", fill="#7a8499")])


def nice_step(span: float, target: int = 5, integer: bool = False) -> float:
    """The smallest step of 1, 2 or 5 x 10^k that cuts ``span`` into at most ``target`` parts (>= 1 if ``integer``)."""
    raw = span / target if span > 0 and math.isfinite(span) else 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if raw <= m * mag * (1 + 1e-9))
    return max(1.0, step) if integer else step


def nice_ticks(lo: float, hi: float, target: int = 5, integer: bool = False) -> list[float]:
    """Ticks at multiples of ``nice_step`` from the last one <= ``lo`` to the first one >= ``hi`` (0-97: 0, 20 ..
    100); a range of one value is widened by 0.5 either side."""
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    step = nice_step(hi - lo, target, integer)
    digits = max(0, -math.floor(math.log10(step))) + 1
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, digits) + 0.0 for i in range(first, last + 1)]


def fmt_compact(x: float, step: float | None = None) -> str:
    """A number in a few characters: ``1,200``, ``12.3k``, ``4.5M``, ``0.25``; with a tick ``step``, the step's
    decimals (0.5, 1.0, 1.5)."""
    if abs(x) >= 10_000:
        x = float(f"{x:.3g}")
        for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
            if abs(x) >= div:
                return f"{x / div:.3g}{suffix}"
    if step is not None:
        return f"{x:,.{max(0, -math.floor(math.log10(step) + 1e-9))}f}" if step < 1 else f"{x:,.0f}"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:.3g}"


def histogram_bins(values: Sequence[float], counts: Sequence[int], integer: bool = False,
                   ) -> tuple[list[float], list[int]]:
    """(edges, counts) of weighted samples, as ``np.histogram`` bins them: with ``integer``, one bin per integer
    (edges at k - 0.5) while that is at most 60 bins, else 60 equal bins over [min, max]; otherwise
    min(60, max(5, 2 * int(sqrt(n)))) equal bins over [min, max] (widened by 0.5 each side for a single value)."""
    seen = [v for v, c in zip(values, counts) if c]
    if not seen:
        return [], []
    lo, hi = float(min(seen)), float(max(seen))
    k = math.floor(hi) - math.floor(lo) + 1
    if integer and k <= 60:
        first = math.floor(lo) - 0.5
        out = [0] * k
        for v, c in zip(values, counts):
            if c:
                out[min(k - 1, max(0, math.floor(v - first)))] += int(c)
        return [first + i for i in range(k + 1)], out
    k = 60 if integer else min(60, max(5, 2 * int(math.sqrt(sum(counts)))))
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    step, norm = (hi - lo) / k, k / (hi - lo)
    edges = [lo + i * step for i in range(k)] + [hi]
    out = [0] * k
    for v, c in zip(values, counts):  # an index from the value, corrected against the edges as numpy does
        if c:
            i = min(k - 1, int((v - lo) * norm))
            if v < edges[i]:
                i -= 1
            elif i != k - 1 and v >= edges[i + 1]:
                i += 1
            out[i] += int(c)
    return edges, out


def _weighted_median(values: Sequence[float], counts: Sequence[int], n: int) -> float:
    """numpy's default (linear) median of the weighted samples."""
    pairs = sorted((float(v), int(c)) for v, c in zip(values, counts) if c)
    h = (n - 1) * 0.5
    want, out, seen = [math.floor(h), math.ceil(h)], [], 0
    for v, c in pairs:
        seen += c
        while want and want[0] < seen:
            out.append(v)
            want.pop(0)
    return out[0] + (out[1] - out[0]) * (h - math.floor(h))


def _columns(edges: Sequence[float], counts: Sequence[int], *, title: str, xlabel: str, integer: bool,
             mark: float | None = None, box: Sequence[str] = ()) -> str:
    """Vertical bars over ``edges`` with a count axis; ``mark`` a dashed red line, ``box`` lines of text top right."""
    L, R, T = 62, 16, 32
    B = 48 if xlabel else 30
    H = 320
    pw, ph = W - L - R, H - T - B
    x0, x1 = edges[0], edges[-1]
    pad = (x1 - x0) * 0.02
    dlo, dhi = x0 - pad, x1 + pad
    yticks = nice_ticks(0, max(1, max(counts) * 1.08), integer=True)  # headroom
    ytop = yticks[-1]

    def sx(v: float) -> float:
        return L + (v - dlo) / (dhi - dlo) * pw

    def sy(c: float) -> float:
        return T + ph - c / ytop * ph

    out: list[str] = []
    for t in yticks:
        out.append(_line(L, sy(t), L + pw, sy(t), _GRID))
        out.append(_text(L - 6, sy(t) + 4, fmt_compact(t, 1.0), anchor="end"))
    unit = integer and len(edges) > 1 and edges[1] - edges[0] == 1
    for a, b, c in zip(edges, edges[1:], counts):
        if c:
            where = fmt_compact(a + 0.5) if unit else f"{a:.4g} to {b:.4g}"
            out.append(_rect(sx(a), sy(c), sx(b) - sx(a), sy(0) - sy(c), BLUE, f"{where}: {c:,}",
                             ' class="bar" stroke="#fff" stroke-width="0.6"'))
    xticks = [t for t in nice_ticks(x0, x1, integer=integer) if dlo <= t <= dhi]
    step = xticks[1] - xticks[0] if len(xticks) > 1 else 1.0
    for t in xticks:
        out.append(_line(sx(t), T + ph, sx(t), T + ph + 4))
        out.append(_text(sx(t), T + ph + 17, fmt_compact(t, step), anchor="middle"))
    out.append(_line(L, T, L, T + ph) + _line(L, T + ph, L + pw, T + ph))
    if mark is not None:
        out.append(_line(sx(mark), T, sx(mark), T + ph, RED,
                         ' class="mean" stroke-width="1.5" stroke-dasharray="5 3"'))
    if box:
        bw, bh = max(_width(s, 11) for s in box) + 14, 15 * len(box) + 8
        out.append(_rect(L + pw - 6 - bw, T + 6, bw, bh, "#fff", "",
                         ' rx="4" fill-opacity="0.9" stroke="#ccc"'))
        spans = "".join(f'<tspan x="{_f(L + pw - 13)}" dy="{0 if i == 0 else 15}">{_e(s)}</tspan>'
                        for i, s in enumerate(box))
        out.append(f'<text x="{_f(L + pw - 13)}" y="{_f(T + 21)}" font-size="11" text-anchor="end" '
                   f'fill="{_INK}">{spans}</text>')
    if xlabel:
        out.append(_text(L + pw / 2, H - 10, xlabel, anchor="middle", limit=int(pw / (_FS * _CW))))
    out.append(_text(16, T + ph / 2, "count", anchor="middle", extra=f' transform="rotate(-90 16 {_f(T + ph / 2)})"'))
    return _svg(H, title, out)


def histogram(values: Sequence[float], counts: Sequence[int], *, title: str, xlabel: str = "", unit: str = "",
              integer: bool = False, mean: float | None = None, median: float | None = None) -> str:
    """A histogram of weighted samples (``histogram_bins``) with the mean as a dashed red line and a box "mean = ..,
    median = .., n = ..". ``mean`` and ``median`` are computed from the samples unless given."""
    edges, binned = histogram_bins(values, counts, integer)
    n = sum(binned)
    if not n:
        return _nodata(title)
    if mean is None:
        mean = sum(float(v) * int(c) for v, c in zip(values, counts)) / n
    if median is None:
        median = _weighted_median(values, counts, n)
    box = [f"mean = {mean:.2f}{unit}", f"median = {median:.2f}{unit}", f"n = {n:,}"]
    return _columns(edges, binned, title=title, xlabel=xlabel, integer=integer, mark=mean, box=box)


def binned_chart(edges: Sequence[float], counts: Sequence[int], *, title: str, xlabel: str = "") -> str:
    """Bars of a histogram binned beforehand: ``len(edges) == len(counts) + 1``, each bar as wide as its bin."""
    if len(edges) != len(counts) + 1 or not sum(counts):
        return _nodata(title)
    return _columns([float(e) for e in edges], [int(c) for c in counts], title=title, xlabel=xlabel, integer=False)


def _hbars(labels: Sequence[str], groups: Sequence[Sequence[tuple[int, str, str]]], *, title: str, xlabel: str,
           legend: Sequence[tuple[str, str]] = (), footnote: str = "") -> str:
    """Horizontal bars, top to bottom: ``groups[i]`` are the bars of ``labels[i]``, each (value, colour, text drawn
    after the bar)."""
    limit, bar_h = 28, 15
    per = max((len(g) for g in groups), default=1)
    row_h = per * bar_h + 10
    L = 14 + _width("x" * min(limit, max((len(s) for s in labels), default=1)))
    R = 14 + max((_width(t, 11) for g in groups for _, _, t in g), default=0.0)
    T, B = (52 if legend else 34), 40 + (16 if footnote else 0)
    H = T + B + row_h * len(labels)
    pw = W - L - R
    ticks = nice_ticks(0, max(1, max((v for g in groups for v, _, _ in g), default=1)), integer=True)

    def sx(v: float) -> float:
        return L + v / ticks[-1] * pw

    out: list[str] = []
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for t in ticks:
        out.append(_line(sx(t), T, sx(t), T + row_h * len(labels), _GRID))
        out.append(_text(sx(t), T + row_h * len(labels) + 16, fmt_compact(t, step), anchor="middle"))
    for i, (label, group) in enumerate(zip(labels, groups)):
        y0 = T + i * row_h + 5
        out.append(_text(L - 6, y0 + per * bar_h / 2 + 4, label, anchor="end", limit=limit))
        for j, (v, colour, after) in enumerate(group):
            y = y0 + j * bar_h
            if v > 0:
                out.append(_rect(L, y, sx(v) - L, bar_h - 2, colour, f"{label}: {v:,}", ' class="bar"'))
            if after:
                out.append(_text(sx(v) + 2, y + bar_h / 2 + 3, after, size=11, extra=' class="value"'))
    out.append(_line(L, T, L, T + row_h * len(labels)))
    x = W - 12
    for name, colour in reversed(legend):
        x -= _width(name, 11) + 4
        out.append(_text(x, 40, name, size=11))
        x -= 14
        out.append(_rect(x, 31, 10, 10, colour))
        x -= 12
    out.append(_text(L + pw / 2, T + row_h * len(labels) + 32, xlabel, anchor="middle"))
    if footnote:
        out.append(_text(W - 8, H - 6, footnote, size=11, anchor="end", fill="#444"))
    return _svg(H, title, out)


def funnel_chart(names: Sequence[str], rows_in: Sequence[int], kept: Sequence[int]) -> str:
    """Rows in and kept per step (two bars a step, " k (p%)" after the kept one), titled with the mean keep rate."""
    rates = [100.0 * k / r for k, r in zip(kept, rows_in) if r]
    title = f"rows in and kept per step (mean keep rate per step = {(sum(rates) / len(rates) if rates else 0.0):.1f}%)"
    groups = [[(r, LIGHT, ""), (k, BLUE, f" {k:,} ({(100.0 * k / r if r else 0):.0f}%)")]
              for r, k in zip(rows_in, kept)]
    return _hbars([str(n) for n in names], groups, title=title, xlabel="rows",
                  legend=[("rows in", LIGHT), ("kept", BLUE)])


def bar_chart(labels: Sequence[str], values: Sequence[int], colours: Sequence[str], *, title: str,
              xlabel: str = "rows", footnote: str = "") -> str:
    """One horizontal bar a label, in its own colour, its value written after it; ``footnote`` bottom right."""
    groups = [[(int(v), c, f" {int(v):,}")] for v, c in zip(values, colours)]
    return _hbars([str(s) for s in labels], groups, title=title, xlabel=xlabel, footnote=footnote)
