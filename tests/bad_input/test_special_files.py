"""Special files in place of inputs (issue 20, docs/reason-codes.md): a FIFO, ``/dev/zero`` or a loop of symbolic
links is refused before it is read, never waited on or read without limit. A per-item file (one video's transcript,
one web page) becomes that item's named drop; a whole input (a metadata CSV, a manifest, ``raw_caption.json``) is an
:class:`InputError` naming the file (exit 2). Every case runs under an alarm: a regression fails, never hangs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders.core.errors import InputError
from builders.sources import howto100m, safe_open, transcripts, video_manifest
from builders.sources.html_pages import read_html_page
from builders.sources.narrations import load_transcript_json

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Fail a case that blocks for 20 s (a FIFO opened for reading waits for a writer)."""
    def _fail(*_: object) -> None:
        raise TimeoutError("the reader blocked on a special file")

    old = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _loop(path: Path) -> Path:
    other = path.with_name(path.name + ".other")
    os.symlink(other, path)
    os.symlink(path, other)
    return path


def test_open_input_refuses_special_files_and_caps_bytes_read(tmp_path):
    with pytest.raises(safe_open.NotRegularFile, match="FIFO"):
        safe_open.open_input(_fifo(tmp_path / "pipe"), max_bytes=10)
    with pytest.raises(safe_open.NotRegularFile, match="character device"):
        safe_open.open_input("/dev/zero", max_bytes=10)
    with pytest.raises(safe_open.NotRegularFile, match="loop of symbolic links"):
        safe_open.open_input(_loop(tmp_path / "loop"), max_bytes=10)
    with pytest.raises(safe_open.NotRegularFile, match="directory"):
        safe_open.open_input(tmp_path, max_bytes=10)
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 101)
    assert safe_open.read_input_bytes(big, max_bytes=101) == b"x" * 101
    with pytest.raises(safe_open.InputTooLarge, match="more than 100 bytes"):
        safe_open.read_input_bytes(big, max_bytes=100)
    link = tmp_path / "link.json"
    link.symlink_to(big)  # a link to a regular file is followed
    assert safe_open.read_input_bytes(link, max_bytes=200) == b"x" * 101


def test_showhowto_transcript_path_fifo_is_that_videos_drop(tmp_path):
    """The sweep's hang: a manifest row whose transcript_path is a FIFO."""
    fifo = _fifo(tmp_path / "vidAAAAAAAA.json")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(f"video_id,video_path,title,transcript_path\nvidAAAAAAAA,a.mp4,Toast,{fifo.name}\n")
    (row,) = list(video_manifest.read_manifest(manifest))
    with pytest.raises(transcripts.TranscriptError) as err:
        video_manifest.read_transcript(row["transcript_path"])
    assert err.value.reason == "malformed_transcript" and "FIFO" in err.value.detail


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "loop"])
def test_per_video_transcript_special_file_is_malformed(tmp_path, special):
    path = {"fifo": lambda: _fifo(tmp_path / "v.json"), "/dev/zero": lambda: Path("/dev/zero"),
            "loop": lambda: _loop(tmp_path / "v.json")}[special]()
    with pytest.raises(transcripts.TranscriptError) as err:
        load_transcript_json(path)
    assert err.value.reason == "malformed_transcript"
    root = tmp_path / "whisperx"
    root.mkdir()
    _fifo(root / "vidAAAAAAAA.json")
    with pytest.raises(transcripts.TranscriptError) as err:
        transcripts.WhisperXStore(root).get("vidAAAAAAAA")
    assert err.value.reason == "malformed_transcript" and "not a regular file" in err.value.detail


def test_page_fifo_is_page_unreadable(tmp_path):
    (drop,) = read_html_page("k", _fifo(tmp_path / "k.html"))
    assert drop.reason == "page_unreadable" and "FIFO" in drop.detail


@pytest.mark.parametrize("reader", ["metadata", "manifest", "raw_caption", "task_ids"])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "loop"])
def test_whole_input_special_file_is_an_input_error(tmp_path, reader, special):
    path = {"fifo": lambda: _fifo(tmp_path / "in.csv"), "/dev/zero": lambda: Path("/dev/zero"),
            "loop": lambda: _loop(tmp_path / "in.csv")}[special]()
    call = {"metadata": lambda: howto100m.read_metadata(path),
            "manifest": lambda: list(video_manifest.read_manifest(path)),
            "raw_caption": lambda: transcripts.check_raw_caption_file(path),
            "task_ids": lambda: howto100m.read_task_ids(path)}[reader]
    with pytest.raises(InputError) as err:
        call()
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_media_path_that_is_a_fifo_is_video_unreadable_not_a_hang(tmp_path):
    """The demuxer is never handed a FIFO or a device (it would block or read without end)."""
    import os

    from builders.models.media import MediaError, _open

    fifo = tmp_path / "v.mp4"
    os.mkfifo(fifo)
    with pytest.raises(MediaError, match="video_unreadable.*not a regular file"):
        _open(fifo)
