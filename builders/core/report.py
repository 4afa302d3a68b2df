"""The build report: one self-contained ``report.html`` beside a release (docs/architecture.md, "The release step").

Headline numbers, the per-step funnel (table + bar chart), kept/dropped by reason, the work done by this build, the
paper comparison, and histograms of segments per video, words per step, segment durations and video durations, each
with its mean. Charts are small inline SVGs drawn in pure Python (``builders.core.charts``: milliseconds a report,
no plotting library); CSS is inline, so the file is self-contained; every text that comes from data or statistics is
HTML-escaped. Works on an empty build (no videos kept): the plots say "no data".

The distributions are aggregated while streaming (``Tally``, ``ReportTallies``): a report over 370,000 videos holds
counts of distinct (rounded) values, never the videos.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from builders.core import charts

__all__ = ["ReportTallies", "Tally", "render_report", "write_report"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:1.7em;margin:0 0 4px} h2{font-size:1.25em;margin:32px 0 12px;border-bottom:2px solid #dde2ea;padding-bottom:4px}
.sub{color:#5a6478;margin:0 0 20px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border-radius:8px;padding:12px 16px;box-shadow:0 1px 3px rgba(0,0,0,.08);min-width:150px}
.card .v{font-size:1.6em;font-weight:600} .card .k{color:#5a6478;font-size:.85em}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.08);margin:8px 0;font-size:.92em}
th,td{padding:6px 10px;border-bottom:1px solid #eceff4;text-align:left} td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#eef1f6}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:16px}
figure{margin:0;background:#fff;border-radius:8px;padding:8px;box-shadow:0 1px 3px rgba(0,0,0,.08)}
figure svg{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{color:#5a6478;font-size:.85em;padding:4px}
.nodata{background:#fff;border:1px dashed #b8c0cc;border-radius:8px;padding:28px;text-align:center;color:#7a8499}
.flag{color:#a33;font-weight:600} .ok{color:#2a7a3a}
"""


def _e(x: Any) -> str:
    """HTML-escape any value that comes from data or statistics."""
    return html.escape(str(x), quote=True)


def _num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if x.is_integer() and abs(x) >= 1000:
            return f"{int(x):,}"
        return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.1f}"
    return _e(x)


class Tally:
    """Numbers seen one at a time, summarised in memory bounded by the number of distinct (rounded) values.

    ``n``, ``mean``, ``std`` (ddof=0), ``min`` and ``max`` are exact. Quantiles and free-binned histograms come from
    counts per value: exact with ``resolution=None`` (for integers: counts, words, steps); with a ``resolution``
    (scores, seconds) exact too until more than ``exact_limit`` distinct values were seen, then per multiple of
    ``resolution`` (memory bounded by the value range over the resolution). ``bins=(k, lo, hi)`` also counts
    ``np.histogram(np.clip(x, lo, hi), k, range=(lo, hi))`` exactly. ``None`` and non-finite values are skipped.
    Values are buffered and folded in with numpy ``buffer`` at a time.
    """

    def __init__(self, resolution: float | None = None, bins: tuple[int, float, float] | None = None,
                 buffer: int = 1 << 16, exact_limit: int = 100_000) -> None:
        self.resolution = resolution
        self.bins = bins
        self._exact = True
        self._limit = exact_limit
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._counts: dict[float, int] = {}
        self._hist = [0] * bins[0] if bins else []
        self._buf: list[float] = []
        self._size = buffer

    def add(self, x: Any) -> None:
        if x is None:
            return
        x = float(x)
        if math.isfinite(x):
            self._buf.append(x)
            if len(self._buf) >= self._size:
                self._flush()

    def extend(self, xs: Iterable[Any]) -> None:
        for x in xs:
            self.add(x)

    def _flush(self) -> None:
        if not self._buf:
            return
        import numpy as np

        a = np.asarray(self._buf, dtype=np.float64)
        self._buf = []
        k, mean_b = a.size, float(a.mean())
        m2_b = float(((a - mean_b) ** 2).sum())
        n = self._n + k
        delta = mean_b - self._mean
        self._mean += delta * k / n
        self._m2 += m2_b + delta * delta * self._n * k / n
        self._n = n
        self._min, self._max = min(self._min, float(a.min())), max(self._max, float(a.max()))
        for v, c in zip(*np.unique(a if self._exact else self._round(a), return_counts=True)):
            self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if self._exact and self.resolution is not None and len(self._counts) > self._limit:
            self._exact = False
            keys, counts = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), counts):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if self.bins:
            bins, lo, hi = self.bins
            counts, _ = np.histogram(np.clip(a, lo, hi), bins=bins, range=(lo, hi))
            self._hist = [h + int(c) for h, c in zip(self._hist, counts)]

    def merge(self, other: Tally) -> Tally:
        """Fold in the values ``other`` saw (same ``resolution`` and ``bins``), as if added here: exact counts, Chan et
        al.'s pairwise update of the mean and the sum of squares. Returns ``self``."""
        if (other.resolution, other.bins) != (self.resolution, self.bins):
            raise ValueError(f"cannot merge a Tally of {other.resolution, other.bins} into one of "
                             f"{self.resolution, self.bins}")
        self._flush()
        other._flush()
        if not other._n:
            return self
        n = self._n + other._n
        delta = other._mean - self._mean
        self._mean += delta * other._n / n
        self._m2 += other._m2 + delta * delta * self._n * other._n / n
        self._n = n
        self._min, self._max = min(self._min, other._min), max(self._max, other._max)
        counts = other._counts
        if self._exact and not other._exact:
            self._exact = False
            keys, cs = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), cs):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        if not self._exact and other._exact and counts:
            import numpy as np

            keys = np.asarray(list(counts), dtype=np.float64)
            counts = {}
            for v, c in zip(self._round(keys), other._counts.values()):
                counts[float(v)] = counts.get(float(v), 0) + int(c)
        for v, c in counts.items():
            self._counts[v] = self._counts.get(v, 0) + c
        if self._exact and self.resolution is not None and len(self._counts) > self._limit:
            self._exact = False
            keys, cs = self.values()
            self._counts = {}
            for v, c in zip(self._round(keys), cs):
                self._counts[float(v)] = self._counts.get(float(v), 0) + int(c)
        self._hist = [a + b for a, b in zip(self._hist, other._hist)]
        return self

    def _round(self, a: Any) -> Any:
        """Values to the nearest multiple of ``resolution``, written with its decimals (0.3356, not 0.33560000000001)."""
        import numpy as np

        decimals = max(0, -math.floor(math.log10(self.resolution)))
        return np.round(np.round(a / self.resolution) * self.resolution, decimals)

    def _done(self) -> Tally:
        self._flush()
        return self

    @property
    def n(self) -> int:
        """How many values were added."""
        return self._done()._n

    @property
    def mean(self) -> float | None:
        return self._done()._mean if self.n else None

    @property
    def std(self) -> float | None:
        return math.sqrt(self._done()._m2 / self.n) if self.n else None

    @property
    def min(self) -> float | None:
        return self._done()._min if self.n else None

    @property
    def max(self) -> float | None:
        return self._done()._max if self.n else None

    def values(self) -> tuple[Any, Any]:
        """The distinct (rounded) values in increasing order and their counts, as numpy arrays."""
        import numpy as np

        if self._buf:
            self._flush()
        keys = sorted(self._counts)
        return np.asarray(keys, dtype=np.float64), np.asarray([self._counts[k] for k in keys], dtype=np.int64)

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1) with numpy's default linear interpolation between order statistics."""
        import numpy as np

        vals, counts = self.values()
        if not self.n:
            return None
        cum = np.cumsum(counts)
        h = (self.n - 1) * q
        i = math.floor(h)
        lo = float(vals[int(np.searchsorted(cum, i, side="right"))])
        hi = float(vals[int(np.searchsorted(cum, min(i + 1, self.n - 1), side="right"))])
        t = h - i
        return hi - (hi - lo) * (1 - t) if t >= 0.5 else lo + (hi - lo) * t  # numpy's _lerp, to the last bit

    @property
    def median(self) -> float | None:
        return self.quantile(0.5)

    def histogram(self) -> dict[str, list[float]]:
        """The exact fixed-bin histogram of ``bins``: ``{"edges": [...], "counts": [...]}``."""
        import numpy as np

        if not self.bins:
            raise ValueError("this Tally has no fixed bins")
        self._flush()
        bins, lo, hi = self.bins
        return {"edges": [float(e) for e in np.histogram_bin_edges([], bins=bins, range=(lo, hi))],
                "counts": list(self._hist)}


class ReportTallies:
    """The report's distributions of the kept data, aggregated video by video (see ``render_report``).

    A video is a mapping with ``duration`` and ``segments`` (each with ``start``, ``end``, ``text``).
    """

    def __init__(self) -> None:
        self.videos = 0
        self.segments_per_video = Tally()
        self.words_per_step = Tally()
        self.segment_durations = Tally(resolution=0.01)
        self.video_durations = Tally(resolution=0.1)

    def add(self, video: Mapping[str, Any]) -> None:
        self.videos += 1
        segs = video.get("segments") or []
        self.segments_per_video.add(len(segs))
        for s in segs:
            self.words_per_step.add(_words(s.get("text")))
            if s.get("end") is not None and s.get("start") is not None:
                self.segment_durations.add(float(s["end"]) - float(s["start"]))
        if video.get("duration") is not None:
            self.video_durations.add(float(video["duration"]))

    def merge(self, other: ReportTallies) -> ReportTallies:
        """Fold in another part's tallies (``Tally.merge``); returns ``self``."""
        self.videos += other.videos
        for name in ("segments_per_video", "words_per_step", "segment_durations", "video_durations"):
            getattr(self, name).merge(getattr(other, name))
        return self

    @classmethod
    def of(cls, videos: Iterable[Mapping[str, Any]]) -> ReportTallies:
        out = cls()
        for v in videos:
            out.add(v)
        return out


def _figure(svg: str, caption: str) -> str:
    """An inline SVG chart (``builders.core.charts``) and its caption."""
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _nodata(what: str) -> str:
    return f'<div class="nodata">{_e(what)}: no data</div>'


def _histogram(tally: Tally, *, title: str, xlabel: str, unit: str = "", integer: bool = False) -> str:
    """A histogram with the mean drawn and written on it (``<figure>`` HTML), or a "no data" box."""
    if not tally.n:
        return _nodata(title)
    vals, counts = tally.values()
    mean, n = float(tally.mean), tally.n
    svg = charts.histogram(vals.tolist(), counts.tolist(), title=title, xlabel=xlabel, unit=unit, integer=integer,
                           mean=mean, median=float(tally.median))
    return _figure(svg, f"{title}: mean {mean:.2f}{unit} over {n:,} values")


def _trim_empty_bins(edges: list[float], counts: list[int]) -> tuple[list[float], list[int]]:
    """A fixed-bin histogram without its leading and trailing empty bins (a 0-500 axis for data in 0-30 shows 0-30)."""
    nonzero = [i for i, c in enumerate(counts) if c]
    if not nonzero:
        return edges, counts
    lo, hi = nonzero[0], nonzero[-1] + 1
    return edges[lo:hi + 1], counts[lo:hi]


def _binned(title: str, hist: Mapping[str, Any]) -> str:
    """A histogram a corpus computed itself (``{"edges": [...], "counts": [...]}``, e.g. score distributions)."""
    edges, counts = list(hist.get("edges") or []), list(hist.get("counts") or [])
    if len(edges) != len(counts) + 1 or not sum(counts):
        return _nodata(title)
    edges, counts = _trim_empty_bins(edges, counts)
    return _figure(charts.binned_chart(edges, counts, title=title), f"{title}: {sum(counts):,} values")


def _funnel_chart(steps: Mapping[str, Mapping[str, Any]]) -> str:
    names = list(steps)
    if not names:
        return _nodata("rows per step")
    rows_in = [int(steps[n].get("rows_in") or 0) for n in names]
    kept = [int(steps[n].get("kept") or 0) for n in names]
    return _figure(charts.funnel_chart(names, rows_in, kept), "rows in vs kept per step, in pipeline order")


def _reasons_chart(drops: Mapping[str, int], kept_final: int | None) -> str:
    items = sorted(((str(k), int(v)) for k, v in drops.items() if v), key=lambda kv: (-kv[1], kv[0]))
    if kept_final is None and not items:
        return _nodata("kept and dropped by reason")
    labels = ([("kept (release)", kept_final)] if kept_final is not None else []) + items
    colours = ([charts.GREEN] if kept_final is not None else []) + [charts.ORANGE] * len(items)
    total_drop = sum(v for _, v in items)
    mean_drop = total_drop / len(items) if items else 0.0
    svg = charts.bar_chart([k for k, _ in labels], [v for _, v in labels], colours,
                           title="kept and dropped, by reason",
                           footnote=f"dropped total = {total_drop:,}; mean per reason = {mean_drop:,.1f}")
    return _figure(svg, "rows kept in the release and rows dropped per named reason")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """``header`` and ``rows`` hold already-escaped HTML strings."""
    th = "".join(f'<th class="{"n" if n else ""}">{h}</th>' for h, n in zip(header, numeric))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"n" if n else ""}">{c}</td>' for c, n in zip(r, numeric)) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt_map(d: Mapping[str, Any] | None) -> str:
    if not d:
        return ""
    return ", ".join(f"{_e(k)}: {_num(v)}" for k, v in sorted(d.items(), key=lambda kv: (-(kv[1] or 0), str(kv[0]))))


def _words(text: Any) -> int:
    return len(str(text or "").split())


def _this_build_table(work: Mapping[str, Any]) -> str:
    """The "work done by this build" table: shards computed and reused, global stages fitted and reused, counters of
    the computed shards only (``BuildResult.this_build``)."""
    rows = [["shards computed", _num(work.get("shards_computed"))],
            ["shards reused from the cache", _num(work.get("shards_reused"))],
            ["global stages fitted", _e(", ".join(work.get("fits_ran") or []) or "none")],
            ["global stages reused", _e(", ".join(work.get("fits_reused") or []) or "none")]]
    rows += [[f"counter: {_e(k)}", _num(v)] for k, v in sorted((work.get("counters") or {}).items())]
    return _table(["work done by this build", ""], rows, [False, True])


def render_report(*, title: str, stats: Mapping[str, Any], videos: Iterable[Mapping[str, Any]] = (),
                  tallies: ReportTallies | None = None, explorer: bool = False) -> str:
    """The report as an HTML string (see ``write_report``); ``tallies`` replace ``videos`` when given; ``explorer``
    links the ``explore.html`` beside it (docs/explorer.md)."""
    if tallies is None:
        tallies = ReportTallies.of(videos)
    steps: Mapping[str, Mapping[str, Any]] = stats.get("steps") or {}
    drops: Mapping[str, int] = stats.get("drops") or {}
    counters: Mapping[str, int] = stats.get("counters") or {}
    release: Mapping[str, Mapping[str, int]] = stats.get("release") or {}
    quantities: Mapping[str, Mapping[str, Any]] = stats.get("quantities") or {}
    corpus = stats.get("corpus", "")

    n_segments = tallies.words_per_step.n
    release_rows = {cfg: sum(int(n) for n in splits.values()) for cfg, splits in release.items()}
    first_in = int(next(iter(steps.values())).get("rows_in") or 0) if steps else None
    main_cfg = "default" if "default" in release else next(iter(release), None)
    kept_final = sum(int(n) for n in release[main_cfg].values()) if main_cfg is not None else None

    parts: list[str] = []
    parts.append(f"<h1>{_e(title)}</h1>")
    link = ' · <a id="explore-link" href="explore.html">explore the data</a>' if explorer else ""
    parts.append(f'<p class="sub">corpus <b>{_e(corpus)}</b> · {len(steps)} steps · build report{link}</p>')

    cards = []
    if first_in is not None:
        cards.append(("rows into the first step", _num(first_in)))
    cards.append(("videos in this report", _num(tallies.videos)))
    cards.append(("kept segments", _num(n_segments)))
    cards.append(("rows dropped", _num(sum(int(v) for v in drops.values()))))
    for cfg, n in release_rows.items():
        cards.append((f"release: {cfg}", _num(n)))
    total_s = sum(float(st.get("seconds") or 0.0) for st in steps.values())
    cards.append(("build time (steps)", f"{total_s:,.1f} s"))
    parts.append(
        '<div class="cards">'
        + "".join(f'<div class="card"><div class="v">{v}</div><div class="k">{_e(k)}</div></div>' for k, v in cards)
        + "</div>"
    )

    parts.append("<h2>Funnel: rows per step</h2>")
    if steps:
        rows = []
        for name, st in steps.items():
            r_in, k = int(st.get("rows_in") or 0), int(st.get("kept") or 0)
            rows.append(
                [
                    _e(name),
                    _e(st.get("pipeline", "")),
                    _num(r_in),
                    _num(k),
                    f"{100.0 * k / r_in:.1f}%" if r_in else "–",
                    _fmt_map(st.get("dropped")),
                    _fmt_map(st.get("counters")),
                    f"{float(st.get('seconds') or 0.0):.2f}",
                    f"{_num(st.get('cached_shards', 0))}/{_num(st.get('shards', 0))}",
                ]
            )
        parts.append(
            _table(
                ["step", "pipeline", "rows in", "kept", "kept %", "dropped by reason", "counters", "seconds",
                 "cached/shards"],
                rows,
                [False, False, True, True, True, False, False, True, True],
            )
        )
    parts.append(f'<div class="grid">{_funnel_chart(steps)}{_reasons_chart(drops, kept_final)}</div>')

    parts.append("<h2>Drops and counters</h2>")
    drop_rows = [[_e(k), _num(v)] for k, v in sorted(drops.items(), key=lambda kv: (-(kv[1] or 0), str(kv[0])))]
    parts.append(_table(["drop reason", "rows"], drop_rows, [False, True]) if drop_rows else _nodata("drops"))
    ctr_rows = [[_e(k), _num(v)] for k, v in sorted(counters.items(), key=lambda kv: str(kv[0]))]
    parts.append(_table(["counter", "count"], ctr_rows, [False, True]) if ctr_rows else _nodata("counters"))

    work = stats.get("this_build")
    if work:
        parts.append("<h2>Work done by this build</h2>")
        parts.append(_this_build_table(work))

    parts.append("<h2>Release</h2>")
    rel_rows = [[_e(cfg), _e(split), _num(n)] for cfg, splits in release.items() for split, n in splits.items()]
    parts.append(_table(["config", "split", "rows"], rel_rows, [False, False, True]) if rel_rows else _nodata("release"))

    parts.append("<h2>This build vs the paper</h2>")
    if quantities:
        q_rows = []
        for name, q in quantities.items():
            flag = str(q.get("flag") or "")
            flag_html = f'<span class="flag">{_e(flag)}</span>' if flag and flag.lower() != "ok" else (
                f'<span class="ok">{_e(flag)}</span>' if flag else ""
            )
            q_rows.append([_e(name), _num(q.get("value")), _num(q.get("paper")), flag_html])
        parts.append(_table(["quantity", "this build", "paper", "flag"], q_rows, [False, True, True, False]))
    else:
        parts.append(_nodata("paper comparison"))

    parts.append("<h2>Distributions of the kept data</h2>")
    parts.append(
        '<div class="grid">'
        + _histogram(tallies.segments_per_video, title="segments per video", xlabel="kept segments in a video",
                     integer=True)
        + _histogram(tallies.words_per_step, title="words per step", xlabel="words in a kept segment's text",
                     integer=True)
        + _histogram(tallies.segment_durations, title="segment durations", xlabel="end - start (s)", unit=" s")
        + _histogram(tallies.video_durations, title="video durations", xlabel="video duration (s)", unit=" s")
        + "</div>"
    )
    extra: Mapping[str, Mapping[str, Any]] = stats.get("histograms") or {}
    if extra:
        parts.append("<h2>Corpus-specific distributions</h2>")
        parts.append('<div class="grid">' + "".join(_binned(str(k), v) for k, v in extra.items()) + "</div>")

    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><main>\n" + "\n".join(parts) + "\n</main></body></html>\n"
    )


def write_report(
    path: str | os.PathLike, *, title: str, stats: Mapping[str, Any], videos: Iterable[Mapping[str, Any]] = (),
    tallies: ReportTallies | None = None, explorer: bool = False,
) -> Path:
    """Write ``report.html`` at ``path`` (hidden temp file + rename). ``stats`` is the runner's statistics dict
    (``corpus``, ``drops``, ``counters``, ``steps``, ``release``, ``quantities``, optional ``histograms``: title ->
    ``{"edges", "counts"}``, optional ``this_build``); ``videos`` (any iterable, consumed once) are rows of the
    ``default`` config (``segments`` with ``start``/``end``/``text``, ``duration``), or ``tallies`` their
    distributions aggregated beforehand; ``explorer`` links ``explore.html``. Returns the path.
    """
    path = Path(path)
    text = render_report(title=title, stats=stats, videos=videos, tallies=tallies, explorer=explorer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
