"""The incremental re-split of an edited ``raw_caption.json`` (builders/sources/transcripts/raw_caption_resplit.py).

The invariant checked after every edit: what readers see of the split equals a full split of the new file (each
video's index sha256 and error, the bytes ``SplitIndex.read_bytes`` returns or the reason it refuses, ``ids()``, the
marker's counts and error). Each test also checks which path ran (a counter on the full split), so it can fail.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from builders.sources.transcripts import raw_caption_resplit as resplit
from builders.sources.transcripts import raw_caption_split as rcs
from builders.sources.transcripts import SplitIndex, TranscriptError, split_once

FULL_SPLIT = rcs.split_raw_captions  # the reference (the fixture counts the calls of split_once's)
CHUNK = 64  # bytes: much smaller than a video's entry, so the common prefix and suffix matter


def _video(i: int, text: str = "") -> dict:
    return {"start": [i, i + 0.5], "end": [i + 0.5, i + 1.25],
            "text": [text or f"now stir the sauce number {i}", f"then fold it over {i * 7}"]}


def _write(src: Path, text: str) -> None:
    """Write ``text`` and move the mtime on, so the split sees a change even when the size is the same."""
    before = src.stat().st_mtime_ns if src.exists() else 0
    src.write_bytes(text.encode("utf-8"))
    os.utime(src, ns=(before + 10**9, before + 10**9))


def _dump(caps: dict | list, ensure_ascii: bool = True) -> str:
    """A raw_caption.json text, one entry a line as HowTo100M's (``caps`` as pairs allows a repeated key)."""
    pairs = caps.items() if isinstance(caps, dict) else caps
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=ensure_ascii)}" for k, v in pairs) + "}"


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """Small chunks and blocks; ``full`` counts the full splits that ``split_once`` runs."""
    monkeypatch.setattr(resplit, "CHUNK_BYTES", CHUNK)
    monkeypatch.setattr(rcs, "BLOCK_VIDEOS", 4)
    full: list[Path] = []
    real = rcs.split_raw_captions

    def counted(src, out, wanted=None):
        full.append(src)
        return real(src, out, wanted)

    monkeypatch.setattr(rcs, "split_raw_captions", counted)
    return tmp_path / "raw_caption.json", tmp_path / "split", full


def _view(root: Path, ids: set[str]) -> dict:
    """What readers see of a split."""
    index = SplitIndex(root)
    entries = index.entries(ids)
    seen = {}
    for vid in sorted(ids):
        try:
            data: object = index.read_bytes(vid)
        except TranscriptError as err:
            data = err.reason
        entry = entries.get(vid)
        seen[vid] = (None if entry is None else entry[3:], data)
    marker = rcs._read_marker(root)
    index.close()
    return {"videos": seen, "ids": SplitIndex(root).ids(), "counts": marker["counts"], "error": marker["error"]}


def _rows(root: Path) -> dict[str, tuple]:
    con = sqlite3.connect(root / rcs.INDEX_FILE)
    try:
        return {r[0]: tuple(r[1:]) for r in con.execute("SELECT * FROM videos")}
    finally:
        con.close()


def _check(src: Path, out: Path, tmp: Path, wanted: set[str] | None = None, ids: set[str] = frozenset()) -> None:
    """The split in ``out`` equals a full split of ``src`` in everything readers see."""
    ref = tmp / f"ref{len(list(tmp.glob('ref*')))}"
    FULL_SPLIT(src, ref, wanted)
    every = set(_rows(ref)) | set(_rows(out)) | set(ids) | {"absent_video"}
    assert _view(out, every) == _view(ref, every)
    assert not list(out.glob(".*.tmp"))


CAPS = {f"vid{i:04d}": _video(i) for i in range(24)}


def _edit(caps: dict, how: str) -> dict:
    caps = dict(caps)
    ids = list(caps)
    if how == "middle":
        caps[ids[12]] = _video(12, "now whisk the sauce number twelve")
    elif how == "first":
        caps[ids[0]] = _video(0, "now whisk")
    elif how == "last":
        caps[ids[-1]] = _video(23, "now whisk the sauce number twenty-three, slowly")
    elif how == "same_length":
        caps[ids[12]] = _video(12, "now STIR the sauce number 12")
    elif how == "added":
        caps = {**{k: caps[k] for k in ids[:10]}, "newvid0001": _video(99), **{k: caps[k] for k in ids[10:]}}
    elif how == "added_last":
        caps["newvid0002"] = _video(98)
    elif how == "removed":
        del caps[ids[12]]
    elif how == "removed_first":
        del caps[ids[0]]
    elif how == "removed_last":
        del caps[ids[-1]]
    elif how == "two_far_apart":
        caps[ids[2]] = _video(2, "now whisk")
        caps[ids[21]] = _video(21, "now whisk it all, twenty-one")
    return caps


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("how", ["middle", "first", "last", "same_length", "added", "added_last", "removed",
                                 "removed_first", "removed_last", "two_far_apart"])
def test_an_edit_is_re_split_in_part_as_a_full_split_would_split_it(setup, tmp_path, caplog, how, ensure_ascii):
    src, out, full = setup
    caps = {k: v if i % 5 else {**v, "text": ["é à ü 😀 stir", *v["text"]]} for i, (k, v) in enumerate(CAPS.items())}
    _write(src, _dump(caps, ensure_ascii))
    split_once(src, out, None)
    assert len(full) == 1
    before = _rows(out)
    new = _edit(caps, how)
    _write(src, _dump(new, ensure_ascii))
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        split_once(src, out, None)
    assert len(full) == 1, caplog.text  # the incremental path ran
    changed = {k for k in new if new[k] != caps.get(k)}
    assert f"re-split {len(changed)} of {len(new)} videos" in caplog.text
    after = _rows(out)
    assert {k for k in new if k in before and after[k] != before[k]} == changed & set(before)  # the others kept theirs
    assert {k for k in after if k not in before or after[k][3] != before[k][3]} == changed
    _check(src, out, tmp_path)
    used = {r[0] for r in after.values()}
    assert {int(p.name[6:11]) for p in out.glob("block-*.jsonl")} == used  # blocks no longer used are gone


def test_whitespace_between_entries_and_a_touched_file(setup, tmp_path, caplog):
    src, out, full = setup
    text = _dump(CAPS)
    _write(src, text)
    split_once(src, out, None)
    before = _rows(out)
    cut = text.index('"vid0012"')
    _write(src, text[:cut] + "\n\t  " + text[cut:])  # the suffix moves by 4 bytes, no value changes
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        split_once(src, out, None)
        assert "re-split 0 of 24 videos" in caplog.text
        assert _rows(out) == before and len(full) == 1
        _check(src, out, tmp_path)
        _write(src, src.read_text(encoding="utf-8"))  # the same bytes, a new mtime
        index_stat = (out / rcs.INDEX_FILE).stat().st_mtime_ns
        split_once(src, out, None)
    assert len(full) == 1 and (out / rcs.INDEX_FILE).stat().st_mtime_ns == index_stat
    _check(src, out, tmp_path)


@pytest.mark.parametrize("how", ["unclosed", "stray", "comma", "no_comma", "closed_early"])
def test_an_edit_that_breaks_the_json_is_split_whole(setup, tmp_path, how):
    src, out, full = setup
    text = _dump(CAPS)
    _write(src, text)
    split_once(src, out, None)
    cut = text.index('"vid0012"')
    broken = {"unclosed": text[:cut] + '"vid0012": {"text": ["unclosed' + text[cut + 40:],
              "stray": text[:cut] + "x" + text[cut:],  # just before an unchanged entry
              "comma": text[:cut] + ", " + text[cut:],
              "no_comma": text[:cut - 2] + text[cut:],
              "closed_early": text[:cut - 2] + "} " + text[cut:]}[how]
    _write(src, broken)
    split_once(src, out, None)
    assert len(full) == 2
    _check(src, out, tmp_path, ids=set(CAPS))
    assert rcs._read_marker(out)["counts"]["json_error"] == (how != "closed_early")
    _write(src, text)  # and back: the split of a JSON error is never re-split in part (text after "}" is not read)
    split_once(src, out, None)
    assert len(full) == (2 if how == "closed_early" else 3)
    _check(src, out, tmp_path)


@pytest.mark.parametrize("where", ["earlier", "middle"])
def test_repeated_ids_are_split_whole(setup, tmp_path, caplog, where):
    src, out, full = setup
    pairs = list(CAPS.items())
    if where == "earlier":
        pairs.insert(12, ("vid0020", _video(5)))  # the last value wins: it depends on the whole file
    _write(src, _dump(pairs))
    split_once(src, out, None)
    # earlier: the value that is not used changes; middle: an edit repeats the id of an unchanged video
    pairs[12] = ("vid0020", _video(12, "a second vid0020" if where == "middle" else "not used"))
    _write(src, _dump(pairs))
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        split_once(src, out, None)
    assert len(full) == 2
    assert ("the earlier file repeats an id" if where == "earlier" else "repeats an unchanged one's id") in caplog.text
    _check(src, out, tmp_path)


def test_a_file_for_the_careful_reader_is_split_whole(setup, tmp_path):
    src, out, full = setup
    text = _dump(CAPS)
    _write(src, text)
    split_once(src, out, None)
    cut = text.index('"vid0012"')
    _write(src, text[:cut] + '"vid0012": {"start": [nan], "text": ["x"]}, ' + text[cut:])  # a bare nan: careful
    split_once(src, out, None)
    assert len(full) == 2
    _check(src, out, tmp_path)
    _write(src, _dump(_edit(CAPS, "middle")))  # the earlier split was the careful reader's: whole again
    split_once(src, out, None)
    assert len(full) == 3
    _check(src, out, tmp_path)


def test_wanted_ids_bad_ids_and_counts(setup, tmp_path, caplog):
    src, out, full = setup
    wanted = {k for i, k in enumerate(CAPS) if i % 3}
    pairs = list(CAPS.items())
    pairs.insert(5, ("../bad", _video(1)))
    _write(src, _dump(pairs))
    split_once(src, out, wanted)
    at = {k: i for i, (k, _) in enumerate(pairs)}
    pairs[at["vid0012"]] = ("vid0012", _video(12, "an unwanted video edited"))  # 12 % 3 == 0: not wanted
    pairs[at["vid0014"]] = ("vid0014", _video(14, "a wanted video edited"))
    pairs[at["vid0016"]:at["vid0016"]] = [("bad id two", _video(2)), ("unwanted_new", _video(3))]
    _write(src, _dump(pairs))
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        split_once(src, out, wanted)
    assert len(full) == 1 and "re-split" in caplog.text
    _check(src, out, tmp_path, wanted, ids=set(CAPS))
    counts = rcs._read_marker(out)["counts"]
    assert counts["bad_id"] == 2 and counts["skipped_unwanted"] == 9
    split_once(src, out, wanted | {"vid0000"})  # another wanted-id set: whole
    assert len(full) == 2
    _check(src, out, tmp_path, wanted | {"vid0000"}, ids=set(CAPS))


def test_repeated_edits_stay_within_the_block_bound(setup, tmp_path):
    """Each edit of a video in another block adds a block (its old block stays for the other videos): past
    BLOCK_GROWTH x the blocks of a full split plus BLOCK_SLACK, the file is split whole again."""
    src, out, full = setup
    caps = dict(CAPS)
    _write(src, _dump(caps))
    split_once(src, out, None)  # 24 videos in blocks of 4: 6 blocks, the bound is 2 x 6 + 2 = 14
    counts = []
    for n in range(12):
        vid = f"vid{(n * 4 + 1 + n // 6) % 24:04d}"  # a video of each block in turn, another one each round
        caps[vid] = _video(n, f"edit number {n}")
        _write(src, _dump(caps))
        split_once(src, out, None)
        counts.append(len(full))
        blocks = len(list(out.glob("block-*.jsonl")))
        assert blocks <= 2 * 6 + 2
        _check(src, out, tmp_path)
    assert counts == [1] * 8 + [2] * 4  # 6 + 8 blocks, then one more would pass the bound: one whole split


def test_a_block_no_longer_used_is_removed(setup, tmp_path):
    src, out, full = setup
    _write(src, _dump(CAPS))
    split_once(src, out, None)
    for text in ("first edit", "second edit"):  # the block of the first edit holds no video after the second
        _write(src, _dump({**CAPS, "vid0009": _video(9, text)}))
        split_once(src, out, None)
    assert len(full) == 1
    assert sorted(p.name for p in out.glob("block-*.jsonl")) == [rcs.block_path(out, b).name for b in (0, 1, 2, 3, 4,
                                                                                                        5, 7)]
    _check(src, out, tmp_path)


def test_an_earlier_layout_or_a_broken_split_is_split_whole(setup, tmp_path):
    src, out, full = setup
    _write(src, _dump(CAPS))
    split_once(src, out, None)
    marker = rcs._read_marker(out)
    (out / rcs.SPLIT_MARKER).write_text(json.dumps({**marker, "layout": "blocks-v1"}))
    _write(src, _dump(_edit(CAPS, "middle")))
    split_once(src, out, None)
    assert len(full) == 2
    _check(src, out, tmp_path)
    con = sqlite3.connect(out / rcs.INDEX_FILE)
    con.execute("DELETE FROM spans WHERE video_id = 'vid0003'")  # an index that does not match its marker
    con.commit()
    con.close()
    _write(src, _dump(_edit(CAPS, "first")))
    split_once(src, out, None)
    assert len(full) == 3
    _check(src, out, tmp_path)


def test_random_edits_always_give_the_full_split(setup, tmp_path):
    """Random byte edits of every kind (JSON punctuation, digits, multi-byte text, spaces) anywhere in the file: the
    split is always what a full split of the new file gives, whichever path ran."""
    import random

    from builders.core.errors import InputError

    src, out, full = setup
    rng = random.Random(7)
    text = _dump({k: v if i % 4 else {**v, "text": ["é😀 stir", *v["text"]]} for i, (k, v) in enumerate(CAPS.items())},
                 ensure_ascii=False)
    _write(src, text)
    split_once(src, out, None)
    in_part = 0
    for n in range(60):
        at = rng.randrange(len(text))
        piece = "".join(rng.choice(['"', ",", ":", "{", "}", "1", "x", " ", "é", "vid0003", '"text"']) for _ in
                        range(rng.randint(0, 3)))
        edited = text[:at] + piece + text[at + rng.randint(0, 4):]
        if n % 3 == 0:  # a valid edit too, so that many take the incremental path
            edited = text.replace(f"number {n % 24}", f"number {n % 24}{n}", 1)
        _write(src, edited)
        before = len(full)
        try:
            split_once(src, out, None)
        except InputError:
            with pytest.raises(InputError):
                FULL_SPLIT(src, tmp_path / "ref_error")
            continue
        in_part += len(full) == before
        _check(src, out, tmp_path)
        try:  # go on from a valid edit (the split of a file with a JSON error is never re-split in part)
            json.loads(edited)
            text = edited
        except ValueError:
            pass
    assert 12 <= in_part < 60  # many re-split in part (not after a JSON error: whole), some whole


def test_a_large_changed_middle_is_split_whole(setup, tmp_path, monkeypatch, caplog):
    src, out, full = setup
    monkeypatch.setattr(resplit, "MAX_MIDDLE_BYTES", 1000)
    _write(src, _dump(CAPS))
    split_once(src, out, None)
    _write(src, _dump(_edit(CAPS, "middle")))  # one video: a small middle
    split_once(src, out, None)
    assert len(full) == 1
    _write(src, _dump(_edit(CAPS, "two_far_apart")))  # everything between the two edits is the middle
    with caplog.at_level(logging.INFO, logger="builders.sources.transcripts"):
        split_once(src, out, None)
    assert len(full) == 2 and "bytes changed, over 1000" in caplog.text
    _check(src, out, tmp_path)
