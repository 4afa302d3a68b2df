"""The report's inline SVG charts (builders/release/charts.py), checked by hand: bins, bar heights, the mean line, ticks,
escaping, edge cases. Every chart must parse as XML."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from builders.release import charts

NS = {"svg": "http://www.w3.org/2000/svg"}


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("role") == "img" and root.get("viewBox")
    assert root.find("svg:title", NS) is not None and root.get("aria-label") == root.find("svg:title", NS).text
    return root


def bars(root: ET.Element) -> list[dict[str, float]]:
    return [{k: float(r.get(k)) for k in ("x", "y", "width", "height")}
            for r in root.iterfind(".//svg:rect[@class='bar']", NS)]


def texts(root: ET.Element) -> list[str]:
    """The words of each ``<text>`` (not the full label in a tooltip ``<title>``), then of each of its ``<tspan>``."""
    out = []
    for el in root.iter("{http://www.w3.org/2000/svg}text"):
        own = (el.text or "") + "".join(c.tail or "" for c in el)
        out += ([own] if own else []) + [s.text or "" for s in el.iterfind("svg:tspan", NS)]
    return out


def test_nice_ticks_and_numbers():
    assert charts.nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert charts.nice_ticks(0, 3, integer=True) == [0, 1, 2, 3]
    assert charts.nice_ticks(0.013, 0.98) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert charts.nice_ticks(0, 0.7, integer=True) == [0, 1]  # no 0.5 on a count axis
    assert charts.nice_ticks(1200, 48_000) == [0, 10_000, 20_000, 30_000, 40_000, 50_000]
    assert [charts.fmt_compact(x) for x in (0, 1200, 9999, 12_345, 999_999.9, 2.5e6, 0.25, 3.14159)] == [
        "0", "1,200", "9,999", "12.3k", "1M", "2.5M", "0.25", "3.14"]
    assert [charts.fmt_compact(x, 0.5) for x in (0, 0.5, 1.0)] == ["0.0", "0.5", "1.0"]


def test_integer_histogram_bins_bars_and_mean_line():
    """Values 1, 2, 2, 3, 10 with counts 1, 2, 2, 1, 1: one bin per integer 1..10, bars of 1, 4, 1 and 1."""
    edges, counts = charts.histogram_bins([1, 2, 2.0, 3, 10], [1, 2, 2, 1, 1], integer=True)
    assert edges == [k - 0.5 for k in range(1, 12)] and counts == [1, 4, 1, 0, 0, 0, 0, 0, 0, 1]
    root = parse(charts.histogram([1, 2, 3, 10], [1, 4, 1, 1], title="steps", xlabel="n", integer=True))
    b = bars(root)
    assert len(b) == 4  # the empty bins 4..9 draw nothing
    assert [round(r["height"] / b[0]["height"], 2) for r in b] == [1, 4, 1, 1]
    bottom = {round(r["y"] + r["height"], 1) for r in b}
    assert len(bottom) == 1  # every bar stands on the axis
    assert b[1]["width"] == pytest.approx(b[0]["width"], abs=0.15) and b[1]["x"] == pytest.approx(
        b[0]["x"] + b[0]["width"], abs=0.15)
    (mean,) = root.iterfind(".//svg:line[@class='mean']", NS)
    x = float(mean.get("x1"))
    assert mean.get("x1") == mean.get("x2") and mean.get("stroke") == charts.RED and mean.get("stroke-dasharray")
    assert b[2]["x"] < x < b[2]["x"] + b[2]["width"]  # mean 22/7 = 3.14: inside the bar of 3
    assert ["mean = 3.14", "median = 2.00", "n = 7"] == [s.text for s in root.iterfind(".//svg:tspan", NS)]


def test_histogram_bins_match_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(3)
    values = sorted({round(rng.gauss(5, 2), 2) for _ in range(3000)})
    counts = [rng.randint(1, 4) for _ in values]
    edges, got = charts.histogram_bins(values, counts)
    k = min(60, max(5, 2 * int(sum(counts) ** 0.5)))
    want, want_edges = np.histogram(values, bins=k, range=(min(values), max(values)), weights=counts)
    assert got == want.astype(int).tolist() and edges == pytest.approx(want_edges.tolist(), abs=1e-12)
    wide = list(range(0, 500, 7))  # integers over more than 60 bins: 60 equal bins
    edges, got = charts.histogram_bins(wide, [1] * len(wide), integer=True)
    assert got == np.histogram(wide, bins=60)[0].tolist() and len(edges) == 61


def test_single_value_and_empty_data():
    edges, counts = charts.histogram_bins([3.3], [7])
    assert edges == pytest.approx([2.8, 3.0, 3.2, 3.4, 3.6, 3.8]) and counts == [0, 0, 7, 0, 0]  # numpy's +- 0.5
    root = parse(charts.histogram([3.3], [7], title="one", unit=" s"))
    assert len(bars(root)) == 1 and "mean = 3.30 s" in texts(root)
    root = parse(charts.histogram([4], [2], title="one int", integer=True))
    assert len(bars(root)) == 1
    for svg in (charts.histogram([], [], title="none"), charts.histogram([1.0], [0], title="zero"),
                charts.binned_chart([0, 1, 2], [0, 0], title="zero bins"),
                charts.binned_chart([0, 1], [1, 2], title="edges and counts do not match")):
        root = parse(svg)
        assert "no data" in texts(root) and not bars(root)


def test_binned_bars_are_as_wide_as_their_bins():
    root = parse(charts.binned_chart([0.0, 0.5, 0.75, 1.0], [4, 2, 0], title="Stage-1 score"))
    b = bars(root)
    assert len(b) == 2 and b[0]["height"] == pytest.approx(2 * b[1]["height"], abs=0.15)
    assert b[0]["width"] == pytest.approx(2 * b[1]["width"], abs=0.15)


def test_labels_are_escaped_and_long_ones_cut_with_their_full_text_in_a_title():
    evil = '<script>&"'
    long = "a_drop_reason_with_a_name_much_longer_than_the_label_column"
    svg = charts.bar_chart(["kept (release)", evil, long], [30, 12, 1], [charts.GREEN, charts.ORANGE, charts.ORANGE],
                           title=f"by reason {evil}", footnote="dropped total = 13; mean per reason = 6.5")
    assert "<script>" not in svg and "&lt;script&gt;&amp;&quot;" in svg
    root = parse(svg)
    assert root.get("aria-label") == f"by reason {evil}" and evil in texts(root)
    cut = next(el for el in root.iter("{http://www.w3.org/2000/svg}text") if el.find("svg:title", NS) is not None
               and el.find("svg:title", NS).text == long)
    shown = "".join(c.tail or "" for c in cut)
    assert shown.endswith("\u2026") and long.startswith(shown[:-1]) and len(shown) < len(long)
    assert [r.get("fill") for r in root.iterfind(".//svg:rect[@class='bar']", NS)] == [
        charts.GREEN, charts.ORANGE, charts.ORANGE]
    assert {" 30", " 12", " 1", "dropped total = 13; mean per reason = 6.5"} <= set(texts(root))


def test_funnel_chart_writes_kept_and_rate_after_the_kept_bar():
    root = parse(charts.funnel_chart(["read", "sieve", "empty"], [200, 150, 0], [150, 50, 0]))
    assert root.get("aria-label") == "rows in and kept per step (mean keep rate per step = 54.2%)"
    t = texts(root)
    assert {" 150 (75%)", " 50 (33%)", " 0 (0%)", "rows in", "kept"} <= set(t)
    b = bars(root)
    assert len(b) == 4  # the step with no rows draws no bar
    assert b[1]["width"] == pytest.approx(0.75 * b[0]["width"], abs=0.15)  # kept over rows in, same scale
    assert b[0]["y"] < b[1]["y"] < b[2]["y"]  # in pipeline order, top to bottom


def test_many_bars_and_big_numbers():
    labels = [f"reason_{i}" for i in range(150)]
    root = parse(charts.bar_chart(labels, [10_000 * (i + 1) for i in range(150)], [charts.ORANGE] * 150, title="many"))
    assert len(bars(root)) == 150
    assert float(root.get("viewBox").split()[3]) > 150 * 15  # the chart grows with its bars
    assert "1.5M" in texts(root)  # compact ticks
