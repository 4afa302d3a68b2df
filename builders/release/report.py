"""The build report: one self-contained ``report.html`` beside a release (docs/architecture.md, "The release step").

Headline numbers, the per-step funnel (table + bar chart), kept/dropped by reason, the work done by this build, the
paper comparison, and histograms of segments per video, words per step, segment durations and video durations, each
with its mean. Charts are small inline SVGs drawn in pure Python (``builders.release.charts``: milliseconds a report,
no plotting library); CSS is inline, so the file is self-contained; every text that comes from data or statistics is
HTML-escaped. Works on an empty build (no videos kept): the plots say "no data".

The distributions are aggregated while streaming (``Tally``, ``ReportTallies``, in ``builders.release.tallies``): a
report over 370,000 videos holds counts of distinct (rounded) values, never the videos.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.atomic import atomic_write_text
from . import charts
from .tallies import ReportTallies, Tally

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


def _figure(svg: str, caption: str) -> str:
    """An inline SVG chart (``builders.release.charts``) and its caption."""
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
    """Write ``report.html`` at ``path`` (hidden temp file + rename, ``builders.core.atomic``). ``stats`` is the
    runner's statistics dict (``corpus``, ``drops``, ``counters``, ``steps``, ``release``, ``quantities``, optional
    ``histograms``: title -> ``{"edges", "counts"}``, optional ``this_build``); ``videos`` (any iterable, consumed
    once) are rows of the ``default`` config (``segments`` with ``start``/``end``/``text``, ``duration``), or
    ``tallies`` their distributions aggregated beforehand; ``explorer`` links ``explore.html``. Returns the path.
    """
    text = render_report(title=title, stats=stats, videos=videos, tallies=tallies, explorer=explorer)
    return atomic_write_text(path, text)
