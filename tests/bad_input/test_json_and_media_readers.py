"""Malformed raw_caption.json / transcripts, WARC records, page folders, YouCook2 annotations, video candidates,
HowToStep narrations and visual features (specs/sieve_swap.md §2.3, §6; marc.md §2, §6; howtostep.md §2, §7;
issue 14). Rows in are the ids asked for (or the records written); each ends kept or as a named drop."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from builders.core.errors import InputError
from builders.core.records import Drop
from builders.sources import transcripts as tr
from builders.sources import video_candidates, visual_features, warc, youcook2
from builders.sources.html_pages import read_html_pages
from builders.sources.narrations import NarrationReader

from .conftest import REPO, check_conserved

IDS = [f"v{i:02d}" for i in range(30)]


def _video(i: int) -> str:
    return f'"v{i:02d}": {{"text": ["stir the pot {i}", "then serve"], "start": [0, 2.5], "end": [2, 4]}}'


def _raw(bad: dict[int, str], cut: int | None = None) -> str:
    text = "{" + ", ".join(bad.get(i, _video(i)) for i in range(30)) + "}"
    return text[:cut] if cut else text


def _read_all(get, ids=IDS) -> list:
    out = []
    for vid in ids:
        try:
            out.append({"video_id": vid, "segments": get(vid).segments})
        except tr.TranscriptError as e:
            out.append(Drop(vid, "load_transcript", e.reason, e.detail))
    return out


RAW_CASES = [  # (case, bad values by index, cut, drops expected)
    ("nested_arrays_bomb", {5: '"v05": ' + "[" * 100_000 + "]" * 100_000}, None, {"malformed_transcript": 1}),
    ("nested_objects_bomb", {5: '"v05": ' + '{"a":' * 5_000 + "1" + "}" * 5_000}, None, {"malformed_transcript": 1}),
    ("nan_token", {4: _video(4).replace("[0, 2.5]", "[NaN, 2.5]")}, None, {}),
    ("infinity_tokens", {4: _video(4).replace("[2, 4]", "[Infinity, -Infinity]")}, None, {}),
    ("nan_inside_text_kept_as_text", {4: _video(4).replace("then serve", 'NaN \\" Infinity')}, None, {}),
    ("truncated_file", {}, 1200, {"malformed_transcript": 16}),  # 14 read whole, one cut, 15 never reached
    ("garbage_mid_file", {8: '"v08": {"text": [tru'}, None, {"malformed_transcript": 22}),
    ("value_not_object", {3: '"v03": [1, 2, 3]'}, None, {"malformed_transcript": 1}),
    ("missing_end_list", {3: '"v03": {"text": ["a"], "start": [1]}'}, None, {"malformed_transcript": 1}),
    ("non_numeric_time", {3: '"v03": {"text": ["a"], "start": ["soon"], "end": [2]}'}, None,
     {"malformed_transcript": 1}),
    ("text_not_string", {3: '"v03": {"text": [7], "start": [0], "end": [2]}'}, None, {"malformed_transcript": 1}),
    ("absent_video", {3: '"zz": {"text": ["a"], "start": [0], "end": [1]}'}, None, {"no_transcript": 1}),
    ("unsafe_key", {3: '"../../etc": {"text": ["a"], "start": [0], "end": [1]}'}, None, {"no_transcript": 1}),
]


@pytest.mark.parametrize("case,bad,cut,reasons", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_raw_caption_json(tmp_path, case, bad, cut, reasons):
    src = tmp_path / "raw_caption.json"
    src.write_text(_raw(bad, cut), encoding="utf-8")
    store = tr.open_transcripts(src, tmp_path / "work", set(IDS))
    rows, drops, _ = check_conserved(_read_all(store.get), len(IDS), reasons)
    if case.startswith(("nan", "infinity")):
        times = [t for s, e, _ in next(r for r in rows if r["video_id"] == "v04")["segments"] for t in (s, e)]
        assert any(not math.isfinite(t) for t in times) or case.startswith("nan_inside")
    assert all("Traceback" not in d.detail for d in drops)


def test_raw_caption_video_over_the_size_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(tr.transcript, "MAX_TRANSCRIPT_BYTES", 200)
    src = tmp_path / "raw_caption.json"
    src.write_text(_raw({6: '"v06": {"text": ' + json.dumps(["word"] * 100) + ', "start": [0], "end": [1]}'}))
    store = tr.open_transcripts(src, tmp_path / "work", set(IDS))
    _, drops, _ = check_conserved(_read_all(store.get), len(IDS), {"malformed_transcript": 1})
    assert "more than 200 bytes" in drops[0].detail


def test_raw_caption_bomb_stays_under_1_gib_of_address_space(tmp_path):
    """The sweep's 200 KB file of 100,000 nested arrays grew to 23 GB: split it under RLIMIT_AS = 1 GiB."""
    src = tmp_path / "raw_caption.json"
    src.write_text(_raw({5: '"v05": ' + "[" * 100_000 + "]" * 100_000}), encoding="utf-8")
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from builders.sources import transcripts as tr
        print(tr.split_raw_captions({str(src)!r}, {str(tmp_path / 'out')!r}))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "'too_big': 1" in done.stdout and "'videos': 30" in done.stdout


RAW_FILE_ERRORS = [
    ("empty", "", "empty file"),
    ("top_level_list", "[1, 2]", "a JSON list"),
    ("garbage", "garbage!", "starts with"),
    ("garbage_after_brace", "{garbage", "invalid JSON at the start"),
    ("cut_after_first_key", '{"v00": ', "invalid JSON at the start|ends before"),
]


@pytest.mark.parametrize("case,text,message", RAW_FILE_ERRORS, ids=[c[0] for c in RAW_FILE_ERRORS])
def test_raw_caption_whole_file_is_an_input_error(tmp_path, case, text, message):
    src = tmp_path / "raw_caption.json"
    src.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        tr.check_raw_caption_file(src)
    with pytest.raises(InputError):
        tr.split_raw_captions(src, tmp_path / "out")


# ---------------------------------------------------------------------------------------------------- narrations

NARRATION_CASES = [  # (case, format, files {name: text}, drops expected); ids n0..n4
    ("whisperx_deep_file", "whisperx", {"n2.json": '{"segments": ' + "[" * 5000 + "]" * 5000 + "}"},
     {"malformed_transcript": 1}),
    ("whisperx_garbage", "whisperx", {"n2.json": '{"segments": [{"start": 0'}, {"malformed_transcript": 1}),
    ("segments_not_a_list", "segments", {"n2.json": '{"start": 0, "end": 1, "text": "a"}'},
     {"malformed_transcript": 1}),
    ("htm_raw_nan_and_bomb", "htm_raw", {"raw.json": None}, {"malformed_transcript": 1}),
    ("sentencified_truncated", "sentencified", {"raw.json": "cut"}, {"malformed_transcript": 2}),
]


@pytest.mark.parametrize("case,fmt,files,reasons", NARRATION_CASES, ids=[c[0] for c in NARRATION_CASES])
def test_howtostep_narrations(tmp_path, case, fmt, files, reasons):
    ids = [f"n{i}" for i in range(5)]
    if fmt in ("whisperx", "segments"):
        root = tmp_path / "dir"
        root.mkdir()
        for vid in ids:
            seg = [{"start": 0, "end": 1, "text": f"Boil {vid}."}]
            (root / f"{vid}.json").write_text(json.dumps({"segments": seg} if fmt == "whisperx" else seg))
        for name, text in files.items():
            (root / name).write_text(text)
        reader = NarrationReader(fmt, root)
    else:
        vals = {vid: {"text": [f"Boil {vid}."], "start": [0], "end": [1]} for vid in ids}
        text = json.dumps(vals)
        if files["raw.json"] == "cut":
            text = text[: text.index('"n3"') + 10]
        else:
            text = text.replace('"start": [0], "end": [1]}, "n2"', '"start": [NaN], "end": [1]}, "n2"')
            text = text.replace(json.dumps(vals["n3"]), "[" * 50_000 + "]" * 50_000)
        (tmp_path / "raw.json").write_text(text)
        reader = NarrationReader(fmt, tmp_path / "raw.json", tmp_path / "work", set(ids))
    check_conserved(_read_all(reader.read, ids), 5, reasons)


# ---------------------------------------------------------------------------------------------------- WARC

PAGE = ('<html><head><script type="application/ld+json">{{"@type": "Recipe", "name": "Dish {0}", '
        '"recipeIngredient": ["a"], "recipeInstructions": ["Mix {0}.", "Bake {0}."]}}</script></head></html>')


def _records(n: int, gz: bool, status: dict[int, str] | None = None, ctype: dict[int, str] | None = None) -> list:
    out = []
    for i in range(n):
        buf = io.BytesIO()
        w = WARCWriter(buf, gzip=gz)
        http = StatusAndHeaders((status or {}).get(i, "200 OK"),
                                [("Content-Type", (ctype or {}).get(i, "text/html; charset=utf-8"))],
                                protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(f"https://x.example/{i}", "response", payload=io.BytesIO(
            PAGE.format(i).encode()), http_headers=http, warc_headers_dict={"WARC-Record-ID": f"<urn:r:{i}>"}))
        out.append(buf.getvalue())
    return out


def _longer(record: bytes, gz: bool, extra: int) -> bytes:
    raw = gzip.decompress(record) if gz else record
    raw = re.sub(rb"Content-Length: (\d+)", lambda m: b"Content-Length: %d" % (int(m.group(1)) + extra), raw, count=1)
    return gzip.compress(raw) if gz else raw


def _warc_case(case: str, gz: bool) -> tuple[bytes, dict[str, int], int]:
    """The file bytes, the drops expected and the records written (6 each)."""
    recs = _records(6, gz, status={3: "404 Not Found"} if case == "http_404" else None,
                    ctype={3: "image/png"} if case == "not_html" else None)
    if case == "content_length_too_large":  # absorbs the whole next record (plain) / runs off its member (gz)
        recs[2] = _longer(recs[2], gz, len(recs[3]) if not gz else 50)
        return b"".join(recs), {"warc_corrupt" if not gz else "warc_truncated": 1}, 6
    if case == "truncated_last_record":
        data = b"".join(recs)
        if gz:
            return data[: -len(recs[5])] + gzip.compress(gzip.decompress(recs[5])[:-80]), {"warc_truncated": 1}, 6
        return data[:-80], {"warc_truncated": 1}, 6
    if case == "garbage_between_records":
        # the garbage is one more item (a warc_corrupt drop); reading resumes at the next record: all 6 pages kept
        return b"".join(recs[:3]) + b"GARBAGE\r\n\r\n" + b"".join(recs[3:]), {"warc_corrupt": 1}, 7
    return b"".join(recs), {{"http_404": "http_status"}.get(case, case): 1}, 6


WARC_CASES = [(c, gz) for c in ("content_length_too_large", "truncated_last_record", "http_404", "not_html")
              for gz in (False, True)] + [("garbage_between_records", False)]


@pytest.mark.parametrize("case,gz", WARC_CASES, ids=[f"{c}-{'gz' if gz else 'plain'}" for c, gz in WARC_CASES])
def test_warc_records(tmp_path, case, gz):
    data, reasons, n = _warc_case(case, gz)
    path = tmp_path / ("crawl.warc.gz" if gz else "crawl.warc")
    path.write_bytes(data)
    rows, _, _ = check_conserved(warc.read_warc(path), n, reasons, kept=n - sum(reasons.values()))
    # no page is released under another record's id: each kept page holds its own recipe only
    assert all(r["html"].count("Dish ") == 1 and f"Dish {r['page_id'][7:-1]}" in r["html"] for r in rows)


def test_warc_payload_over_the_cap(tmp_path):
    path = tmp_path / "c.warc.gz"
    path.write_bytes(b"".join(_records(4, True)))
    check_conserved(warc.read_warc(path, max_payload_bytes=100), 4, {"payload_too_large": 4})


# ---------------------------------------------------------------------------------------------------- --pages

PAGE_CASES = ["directory_named_html", "dangling_symlink", "broken_gzip", "too_large"]


@pytest.mark.parametrize("case", PAGE_CASES)
def test_pages_directory(tmp_path, case):
    for i in range(4):
        (tmp_path / f"p{i}.html").write_text(PAGE.format(i))
    if case == "directory_named_html":
        (tmp_path / "bad.html").mkdir()
    elif case == "dangling_symlink":
        os.symlink(tmp_path / "nowhere.html", tmp_path / "bad.html")
    elif case == "broken_gzip":
        (tmp_path / "bad.html.gz").write_bytes(gzip.compress(PAGE.encode())[:20])
    else:
        (tmp_path / "bad.html").write_text("x" * 5000)
    reason = "payload_too_large" if case == "too_large" else "page_unreadable"
    _, drops, _ = check_conserved(read_html_pages(tmp_path, max_bytes=4000), 5, {reason: 1})
    assert drops[0].item_id == "bad"


# ---------------------------------------------------------------------------------------------------- YouCook2

def _yc2(i: int) -> dict:
    return {"duration": 100.0, "subset": "training", "recipe_type": "101", "video_url": "",
            "annotations": [{"segment": [1, 5], "id": 0, "sentence": "crack the eggs"}]}


YC2_CASES = {
    "negative_segment": lambda e: e["annotations"][0].update(segment=[5, 1]),
    "entry_not_object": None,
    "bad_subset": lambda e: e.update(subset="train"),
    "nan_duration": lambda e: e.update(duration=float("nan")),
    "sentence_not_string": lambda e: e["annotations"][0].update(sentence=7),
}


@pytest.mark.parametrize("case", list(YC2_CASES))
def test_youcook2_annotations(tmp_path, case):
    db = {f"yc{i}": _yc2(i) for i in range(6)}
    if YC2_CASES[case] is None:
        db["yc3"] = [1, 2]
    else:
        YC2_CASES[case](db["yc3"])
    path = tmp_path / "yc2.json"
    path.write_text(json.dumps({"database": db}))
    videos, drops = youcook2.read_youcook2_annotations(path)
    check_conserved([*({"id": v} for v in videos), *drops], 6, {"malformed_annotation": 1})


@pytest.mark.parametrize("text,message", [("{", "not valid JSON"), ('{"db": {}}', "expected")],
                         ids=["not_json", "no_database"])
def test_youcook2_whole_file_is_an_input_error(tmp_path, text, message):
    path = tmp_path / "yc2.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        youcook2.read_youcook2_annotations(path)


# ---------------------------------------------------------------------------------------------------- candidates

CANDIDATE_CASES = [
    ("invalid_json", "{dish_id: 1}", "malformed_candidate"),
    ("rank_not_int", '{"dish_id": "d", "rank": "1", "video_id": "vX"}', "malformed_candidate"),
    ("bad_video_id", '{"dish_id": "d", "rank": 9, "video_id": "a b"}', "malformed_candidate"),
    ("duplicate", '{"dish_id": "d", "rank": 9, "video_id": "v1"}', "duplicate_candidate"),
]


@pytest.mark.parametrize("case,line,reason", CANDIDATE_CASES, ids=[c[0] for c in CANDIDATE_CASES])
def test_video_candidates(tmp_path, case, line, reason):
    lines = [json.dumps({"dish_id": "d", "rank": i, "video_id": f"v{i}", "title": "t"}) for i in range(8)]
    path = tmp_path / "video_candidates.jsonl"
    path.write_text("\n".join([*lines, line]) + "\n")
    by_dish, drops = video_candidates.read_video_candidates(path)
    check_conserved([*({"id": c.video_id} for c in by_dish["d"]), *drops], 9, {reason: 1}, kept=8)


# ---------------------------------------------------------------------------------------------------- features

FEATURE_CASES = [
    ("nan_rows_over_5_percent", lambda x: x.__setitem__(slice(0, 10), np.nan), "bad_features"),
    ("wrong_dimension", "dim", "bad_features"),
    ("zero_rows_T_0", "empty", "bad_features"),
    ("corrupt_npy", "corrupt", "bad_features"),
    ("missing_file", "missing", "missing_features"),
    ("all_zero_rows", lambda x: x.__setitem__(slice(None), 0), "bad_features"),
]


@pytest.mark.parametrize("case,mutate,reason", FEATURE_CASES, ids=[c[0] for c in FEATURE_CASES])
def test_visual_features(tmp_path, case, mutate, reason):
    rng = np.random.default_rng(0)
    for i in range(5):
        x = rng.standard_normal((40, 8)).astype(np.float32)
        if i == 2 and callable(mutate):
            mutate(x)
        elif i == 2 and mutate == "dim":
            x = x[:, :4]
        elif i == 2 and mutate == "empty":
            x = x[:0]
        np.save(tmp_path / f"f{i}.npy", x)
    if mutate == "corrupt":
        (tmp_path / "f2.npy").write_bytes(b"\x93NUMPY garbage")
    elif mutate == "missing":
        (tmp_path / "f2.npy").unlink()
    items = []
    for i in range(5):
        try:
            x, _ = visual_features.read_visual_features(tmp_path / f"f{i}.npy", 8)
            items.append({"id": i, "T": x.shape[0]})
        except visual_features.FeatureFileError as e:
            items.append(Drop(f"f{i}", "features", e.reason, e.detail))
    check_conserved(items, 5, {reason: 1}, kept=4)


def test_visual_features_few_nan_rows_are_repaired_and_counted(tmp_path):
    x = np.ones((40, 8), np.float32)
    x[3] = np.nan
    np.save(tmp_path / "f.npy", x)
    y, counters = visual_features.read_visual_features(tmp_path / "f.npy", 8)
    assert counters == {"features_repaired": 1} and np.isfinite(y).all()


@pytest.mark.parametrize("text", ['["a"]', "{", '{"v": 3}'], ids=["list", "invalid", "non_string_value"])
def test_feature_index_json_is_an_input_error(tmp_path, text):
    (tmp_path / "index.json").write_text(text)
    with pytest.raises(InputError, match="feature index"):
        visual_features.FeatureIndex(tmp_path, tmp_path / "index.json")
