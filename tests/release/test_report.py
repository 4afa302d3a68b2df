from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from builders.release.report import write_report


NS = {"svg": "http://www.w3.org/2000/svg"}


def _svgs(html: str) -> list[ET.Element]:
    """The report's inline charts, each parsed as XML (a chart that is not well-formed fails here)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]


def stats(reason: str = "no_title_match") -> dict:
    return {"corpus": "sieve_swap", "drops": {reason: 2}, "counters": {"bad_segment": 3},
            "steps": {"read_metadata": {"pipeline": "videos", "rows_in": 5, "kept": 5, "dropped": {}, "counters": {},
                                        "seconds": 0.1, "shards": 1, "cached_shards": 0},
                      "title_sieve": {"pipeline": "videos", "rows_in": 5, "kept": 3, "dropped": {reason: 2},
                                      "counters": {}, "seconds": 0.2, "shards": 1, "cached_shards": 0}},
            "release": {"default": {"train": 3}},
            "quantities": {"videos_train": {"value": 3, "paper": 48000, "flag": "sample"}}}


def test_report_has_plots_and_escapes_text(tmp_path):
    videos = [{"duration": 100.0 + i, "segments": [{"start": 1.0, "end": 5.0 + i, "text": "Mix the <b>flour</b>."},
                                                  {"start": 9.0, "end": 12.0, "text": "Bake."}]} for i in range(4)]
    path = write_report(tmp_path / "report.html", title="T <i>", stats=stats("<script>alert(1)</script>"),
                        videos=videos)
    html = path.read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "T &lt;i&gt;" in html
    svgs = _svgs(html)
    assert len(svgs) == 6 and "data:image/png" not in html  # funnel, reasons and four histograms, inline
    assert [s.get("aria-label") for s in svgs] == [
        "rows in and kept per step (mean keep rate per step = 80.0%)", "kept and dropped, by reason",
        "segments per video", "words per step", "segment durations", "video durations"]
    assert "title_sieve" in html and "<script>alert(1)</script>" in "".join(svgs[1].itertext())
    assert "segments per video: mean 2.00 over 4 values" in html  # the captions stay


def test_report_without_videos(tmp_path):
    html = write_report(tmp_path / "r.html", title="empty", stats=stats(), videos=[]).read_text()
    assert "no data" in html.lower()
    assert html.count("segments per video: no data") == 1 and len(_svgs(html)) == 2  # the funnel and reasons


def test_corpus_histograms_are_drawn_and_empty_ones_say_no_data(tmp_path):
    from builders.release.report import render_report

    stats = {"corpus": "c", "steps": {}, "histograms": {
        "Stage-1 <score>": {"edges": [0.0, 0.5, 1.0], "counts": [3, 1]},
        "empty": {"edges": [0.0, 1.0], "counts": [0]}}}
    html = render_report(title="t", stats=stats, videos=[])
    assert "Corpus-specific distributions" in html
    assert "Stage-1 &lt;score&gt;: 4 values" in html
    (svg,) = _svgs(html)
    assert svg.get("aria-label") == "Stage-1 <score>" and len(svg.findall(".//svg:rect[@class='bar']", NS)) == 2
    assert "empty: no data" in html


def test_tally_matches_numpy_over_a_stream():
    import numpy as np

    from builders.release.report import Tally

    rng = np.random.default_rng(0)
    ints = rng.integers(0, 60, 5003)
    t = Tally(bins=(50, 0, 50), buffer=997)  # several flushes
    t.extend(ints.tolist() + [None, float("nan")])  # skipped
    assert t.n == ints.size and t.min == ints.min() and t.max == ints.max()
    assert t.mean == pytest.approx(ints.mean(), rel=1e-12) and t.std == pytest.approx(ints.std(), rel=1e-12)
    for q in (0.1, 0.5, 0.9, 0.0, 1.0):
        assert t.quantile(q) == pytest.approx(float(np.percentile(ints, 100 * q)), abs=1e-9)
    counts, edges = np.histogram(np.clip(ints, 0, 50), bins=50, range=(0, 50))
    assert t.histogram() == {"edges": edges.tolist(), "counts": counts.tolist()}
    scores = rng.random(20_000)
    exact = Tally(resolution=1e-4, bins=(20, 0, 1.0), buffer=4096)  # few distinct values: kept exactly
    exact.extend(scores)
    assert exact.median == float(np.median(scores)) and exact.quantile(0.1) == pytest.approx(np.percentile(scores, 10))
    s = Tally(resolution=1e-4, bins=(20, 0, 1.0), buffer=4096, exact_limit=5000)
    s.extend(scores)
    assert len(s.values()[0]) <= 10_001  # bounded by the resolution, not by the stream
    assert s.median == pytest.approx(float(np.median(scores)), abs=1e-4) and s.median == round(s.median, 4)
    assert s.mean == pytest.approx(scores.mean(), rel=1e-12)  # the mean stays exact
    assert s.histogram()["counts"] == np.histogram(scores, bins=20, range=(0, 1.0))[0].tolist()
    empty = Tally()
    assert empty.n == 0 and empty.mean is None and empty.median is None


def test_report_from_tallies_equals_report_from_the_videos_and_shows_this_build(tmp_path):
    from builders.release.report import ReportTallies, render_report

    videos = [{"duration": 100.0 + i, "segments": [{"start": 1.0, "end": 5.0 + i, "text": "Mix the flour."}]}
              for i in range(30)]
    s = {**stats(), "this_build": {"shards_computed": 3, "shards_reused": 9, "fits_ran": ["title_sieve"],
                                   "fits_reused": [], "counters": {"llm_requests": 12}}}
    from_list = render_report(title="t", stats=s, videos=videos)
    streamed = render_report(title="t", stats=s, tallies=ReportTallies.of(iter(videos)))
    assert from_list == streamed
    assert "Work done by this build" in streamed and "counter: llm_requests" in streamed
    assert "videos in this report" in streamed and ">30<" in streamed
    assert "Work done by this build" not in render_report(title="t", stats=stats(), videos=videos)


@pytest.mark.parametrize("kw", [{}, {"resolution": 0.01, "bins": (20, -3.0, 3.0)}, {"resolution": 1e-4,
                                                                                    "exact_limit": 300}])
def test_tally_merge_equals_one_pass(kw):
    """Tallies of parts merged in order summarise like one Tally of every value (the release's per-shard statistics)."""
    import random

    from builders.release.report import ReportTallies, Tally

    rng = random.Random(1)
    xs = [rng.gauss(0, 1) for _ in range(5000)]
    whole = Tally(**kw)
    whole.extend(xs)
    parts = [Tally(**kw) for _ in range(7)]
    for i, x in enumerate(xs):
        parts[i % 7].add(x)
    merged = Tally(**kw)
    for p in parts:
        merged.merge(p)
    assert merged.n == whole.n == 5000
    assert merged.mean == pytest.approx(whole.mean, abs=1e-12) and merged.std == pytest.approx(whole.std, rel=1e-12)
    assert (merged.min, merged.max) == (whole.min, whole.max)
    for q in (0.1, 0.5, 0.9):
        assert merged.quantile(q) == whole.quantile(q)
    if "bins" in kw:
        assert merged.histogram() == whole.histogram()
    with pytest.raises(ValueError, match="cannot merge"):
        merged.merge(Tally(resolution=0.5))
    a, b = ReportTallies(), ReportTallies()
    a.add({"duration": 10.0, "segments": [{"start": 0.0, "end": 2.0, "text": "cut it"}]})
    b.add({"duration": 20.0, "segments": []})
    a.merge(b)
    assert a.videos == 2 and a.video_durations.mean == 15.0 and a.segments_per_video.values()[1].tolist() == [1, 1]


def test_a_fixed_bin_histogram_is_drawn_over_the_bins_that_hold_data():
    """Narrations per video are tallied in 50 bins over 0-500; data in 0-30 is drawn over 0-30, not 0-500."""
    from builders.release.report import _trim_empty_bins

    edges = [float(e) for e in range(0, 510, 10)]
    counts = [0] * 50
    counts[0], counts[2] = 4, 1
    assert _trim_empty_bins(edges, counts) == ([0.0, 10.0, 20.0, 30.0], [4, 0, 1])
    assert _trim_empty_bins([0.0, 1.0], [0]) == ([0.0, 1.0], [0])


@pytest.mark.parametrize("kw", [{}, {"resolution": 1e-4, "exact_limit": 300, "bins": (20, -3.0, 3.0)}])
def test_compacted_partials_merge_to_the_very_same_state(kw):
    """``compact`` (a cached partial folds its buffer before it is kept) changes nothing a merge sees: the same
    mean, sum of squares, counts and histogram to the last bit; and ``values`` sorts again after a merge."""
    import pickle
    import random

    from builders.release.report import Tally

    rng = random.Random(2)
    chunks = [[rng.gauss(0, 1) for _ in range(400)] for _ in range(5)]

    def merged(compact: bool) -> Tally:
        out = None
        for xs in chunks:
            t = Tally(**kw)
            t.extend(xs)
            t = pickle.loads(pickle.dumps(t.compact() if compact else t))
            out = t if out is None else out.merge(t)
        return out

    a, b = merged(True), merged(False)
    assert (a.n, a.mean, a.std, a.min, a.max) == (b.n, b.mean, b.std, b.min, b.max)
    assert [x.tolist() for x in a.values()] == [x.tolist() for x in b.values()]
    assert [a.quantile(q) for q in (0.1, 0.5, 0.9)] == [b.quantile(q) for q in (0.1, 0.5, 0.9)]
    if "bins" in kw:
        assert a.histogram() == b.histogram()
    before = a.values()[0].size
    extra = Tally(**kw)
    extra.extend([10.0, 11.0])
    a.merge(extra)
    assert a.values()[0].size == before + 2 and a.max == 11.0
