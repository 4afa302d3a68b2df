from __future__ import annotations

from builders.core.report import write_report


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
    assert html.count("data:image/png;base64,") >= 4
    assert "title_sieve" in html


def test_report_without_videos(tmp_path):
    html = write_report(tmp_path / "r.html", title="empty", stats=stats(), videos=[]).read_text()
    assert "no data" in html.lower()


def test_corpus_histograms_are_drawn_and_empty_ones_say_no_data(tmp_path):
    from builders.core.report import render_report

    stats = {"corpus": "c", "steps": {}, "histograms": {
        "Stage-1 <score>": {"edges": [0.0, 0.5, 1.0], "counts": [3, 1]},
        "empty": {"edges": [0.0, 1.0], "counts": [0]}}}
    html = render_report(title="t", stats=stats, videos=[])
    assert "Corpus-specific distributions" in html
    assert "Stage-1 &lt;score&gt;: 4 values" in html and "data:image/png;base64," in html
    assert "empty: no data" in html
