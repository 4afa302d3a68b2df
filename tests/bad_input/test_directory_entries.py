"""One bad entry among the entries of an input directory is one named drop carrying its path, never the end of a
build (docs/reason-codes.md, ``unreadable_input_entry``): a dangling symbolic link, a loop of links, a directory
named like an input file and a FIFO, in each directory the CLI takes (MARC's ``--pages`` and ``--warc`` folder, a
WhisperX transcripts folder, HowToStep's ``--features`` and ``--media``). The fingerprint of such a directory (the
cache key of its stage) is computed, naming the entries it could not read. Every case runs under an alarm: a reader
that opened the FIFO fails, never hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from builders.core.fingerprint import file_fingerprint
from builders.sources import transcripts
from builders.sources.feature_files import index_feature_files
from builders.sources.narrations import NarrationReader
from builders.sources.visual_features import FeatureFileError, read_visual_features
from builders.sources.warc import find_warc_files, list_warc_records

from .conftest import REPO, tally

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symbolic links (POSIX)")

VID = "goodVID0001"
#: the bad entries :func:`_bad_entries` makes, by the id they name, with the problem the drop's detail gives
BAD = {"dangVID0001": "dangling symbolic link", "loopVID0001": "loop of symbolic links",
       "loopVID0002": "loop of symbolic links", "subdVID0001": "directory", "pipeVID0001": "FIFO"}


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    def _fail(*_: object) -> None:
        raise TimeoutError("a reader blocked on a FIFO among the directory's entries")

    old = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(120)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _bad_entries(folder: Path, suffix: str) -> Path:
    """A dangling link, a loop of two links, a sub-directory and a FIFO, each named ``<id><suffix>``."""
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(folder / "nowhere", folder / f"dangVID0001{suffix}")
    os.symlink(folder / f"loopVID0002{suffix}", folder / f"loopVID0001{suffix}")
    os.symlink(folder / f"loopVID0001{suffix}", folder / f"loopVID0002{suffix}")
    (folder / f"subdVID0001{suffix}").mkdir()
    os.mkfifo(folder / f"pipeVID0001{suffix}")
    return folder


def _check_fingerprint(folder: Path, suffix: str, files: int) -> None:
    """The fingerprint is computed; links it cannot follow are named, the directory and the FIFO skipped as always."""
    fp = file_fingerprint(folder)
    assert fp["files"] == files
    assert fp["unreadable"] == [{"path": f"dangVID0001{suffix}", "problem": "dangling symbolic link"},
                                {"path": f"loopVID0001{suffix}", "problem": "loop of symbolic links"},
                                {"path": f"loopVID0002{suffix}", "problem": "loop of symbolic links"}]


# ------------------------------------------------------------------------------------ MARC: a build that finishes


def test_marc_build_with_bad_entries_in_the_pages_and_warc_folders_exits_0_with_named_drops(tmp_path):
    sample = REPO / "builders" / "samples" / "marc"
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "toast.html").write_bytes((sample / "pages" / "banana_bread_plain_string.html").read_bytes())
    _bad_entries(pages, ".html")
    warcs = tmp_path / "warcs"
    (warcs / "sub").mkdir(parents=True)
    (warcs / "recipes.warc.gz").write_bytes((sample / "recipes.warc.gz").read_bytes())
    _bad_entries(warcs / "sub", ".warc.gz")
    _check_fingerprint(pages, ".html", 1)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "builders.build", "marc", "--pages", str(pages), "--warc", str(warcs),
                          "--out", str(out), "--no-progress", "-q"], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr

    import pyarrow.parquet as pq

    drops = pq.read_table(out / "marc" / "drops.parquet").to_pylist()
    warc_drops = sorted((d["item_id"], d["stage"], d["detail"]) for d in drops
                        if d["reason"] == "unreadable_input_entry")
    # the release names the paths as its manifest does: relative to the inputs' common folder (here tmp_path)
    assert warc_drops == sorted((f"sub/{vid}.warc.gz", "read_warc", f"warcs/sub/{vid}.warc.gz: {problem}")
                                for vid, problem in BAD.items())
    page_drops = {d["item_id"]: d["detail"] for d in drops if d["reason"] == "page_unreadable"}
    assert sorted(page_drops) == sorted(BAD)
    for vid, detail in page_drops.items():
        assert f"{vid}.html" in detail and str(tmp_path) not in detail
    assert "a loop of symbolic links" in page_drops["loopVID0001"] and "is a FIFO" in page_drops["pipeVID0001"]
    assert "is a directory" in page_drops["subdVID0001"] and "No such file" in page_drops["dangVID0001"]
    stats = json.loads((out / "marc" / "stats.json").read_text())
    assert stats["drops"]["unreadable_input_entry"] == 5 and stats["drops"]["page_unreadable"] == 5
    assert stats["steps"]["list_recipe_pages"]["dropped"]["unreadable_input_entry"] == 5


def test_warc_listing_drops_each_bad_entry_and_lists_the_good_files(tmp_path):
    folder = _bad_entries(tmp_path / "w", ".warc")
    (folder / "a.warc").write_bytes(b"")
    assert find_warc_files(folder) == [(folder / "a.warc", "a.warc")]
    rows, drops, _ = tally(list_warc_records(folder))
    assert rows == []
    assert [(d.item_id, d.reason, d.detail) for d in drops] == [
        (f"{vid}.warc", "unreadable_input_entry", f"{folder / vid}.warc: {problem}") for vid, problem in
        sorted(BAD.items())]


# ---------------------------------------------------------------------------- transcripts folders (WhisperX)


def _whisperx(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / f"{VID}.json").write_text(json.dumps({"segments": [
        {"start": 0.0, "end": 2.0, "text": "crack two eggs into the bowl"}]}))
    return _bad_entries(folder, ".json")


def test_sieve_swap_and_marc_whisperx_folder_bad_entry_is_that_videos_malformed_transcript(tmp_path):
    folder = _whisperx(tmp_path / "wx")
    _check_fingerprint(folder, ".json", 1)
    store = transcripts.open_transcripts(folder, tmp_path / "work")
    assert store.get(VID).segments
    for vid, problem in BAD.items():
        with pytest.raises(transcripts.TranscriptError) as err:
            store.get(vid)
        assert err.value.reason == "malformed_transcript"
        assert f"{folder / vid}.json" in err.value.detail
        assert {"dangling symbolic link": "dangling symbolic link", "loop of symbolic links": "loop of symbolic links",
                "directory": "is a directory", "FIFO": "is a FIFO"}[problem] in err.value.detail


def test_howtostep_whisperx_folder_bad_entry_is_that_videos_malformed_transcript(tmp_path):
    folder = _whisperx(tmp_path / "wx")
    (folder / "nested").mkdir()
    _bad_entries(folder / "nested", ".json")  # found by the recursive index, after the top-level entries
    reader = NarrationReader("whisperx", folder)
    assert reader.ids() == {VID, *BAD}
    assert reader.read(VID).segments
    for vid in BAD:
        assert reader.has(vid)
        with pytest.raises(transcripts.TranscriptError) as err:
            reader.read(vid)
        assert err.value.reason == "malformed_transcript" and f"{folder / vid}.json" in err.value.detail


# ------------------------------------------------------------------------------- HowToStep features and media


def test_howtostep_features_folder_bad_entry_is_that_videos_bad_features(tmp_path):
    folder = _bad_entries(tmp_path / "feats", ".npy")
    np.save(folder / f"{VID}.npy", np.ones((4, 8), np.float32))
    (folder / "subdVID0001.npy" / "x.txt").write_text("not a feature file")
    _check_fingerprint(folder, ".npy", 2)
    index = index_feature_files(folder)
    assert index == {VID: folder / f"{VID}.npy", **{vid: folder / f"{vid}.npy" for vid in BAD}}
    assert read_visual_features(index[VID], 8)[0].shape == (4, 8)
    for vid, problem in BAD.items():
        with pytest.raises(FeatureFileError) as err:
            read_visual_features(index[vid], 8)
        assert err.value.reason == "bad_features"
        assert str(folder / f"{vid}.npy") in str(err.value)


def test_a_feature_file_beats_a_directory_of_the_same_name(tmp_path):
    folder = tmp_path / "feats"
    (folder / "a" / f"{VID}.npy").mkdir(parents=True)
    (folder / "b").mkdir()
    np.save(folder / "b" / f"{VID}.pt.npy", np.ones((2, 8), np.float32))
    np.save(folder / "b" / f"{VID}.npy", np.ones((2, 8), np.float32))
    assert index_feature_files(folder) == {VID: folder / "b" / f"{VID}.npy", f"{VID}.pt": folder / "b" /
                                           f"{VID}.pt.npy"}


def test_howtostep_media_folder_bad_entry_is_that_videos_video_unreadable(tmp_path):
    from builders.models.media import MediaError, find_media, probe

    folder = _bad_entries(tmp_path / "media", ".mp4")
    (folder / "x").mkdir()
    (folder / "x" / f"{VID}.mp4").write_bytes(b"")  # a regular file wins over a bad entry of the same id
    _check_fingerprint(folder, ".mp4", 1)
    os.symlink(folder / "nowhere", folder / f"{VID}.mkv")
    found = find_media(folder)
    assert found == {VID: folder / "x" / f"{VID}.mp4", **{vid: folder / f"{vid}.mp4" for vid in BAD}}
    for vid, problem in BAD.items():
        with pytest.raises(MediaError) as err:
            probe(found[vid])
        assert err.value.reason == "video_unreadable" and str(folder / f"{vid}.mp4") in str(err.value)
    with pytest.raises(MediaError, match="dangling symbolic link"):
        probe(found["dangVID0001"])
