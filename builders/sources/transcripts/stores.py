"""Per-video transcript stores of Sieve & Swap and MARC (docs/corpora/sieve_swap.md, "Inputs"): a
``raw_caption.json`` split (:class:`RawCaptionStore`) or a directory of WhisperX outputs (:class:`WhisperXStore`),
opened by :func:`open_transcripts`, and what each video's transcript contributes to the cache keys of its rows
(:func:`transcript_item_digests`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .raw_caption_split import RAW_CAPTIONS_DIR, SplitIndex, _require_raw_caption_file, split_once
from .stop_words import STOPWORD_CHECK_MIN_TOKENS, lacks_stop_words
from .transcript import (
    Transcript,
    _checked_id,
    _load_json_file,
    _parse_json_bytes,
    is_valid_video_id,
    parse_raw_caption,
)
from .whisperx import parse_whisperx

logger = logging.getLogger(__name__)


def _require_dir(root: str | Path) -> Path:
    p = Path(root)
    if not p.is_dir():
        raise FileNotFoundError(f"transcript directory not found: {p}")
    return p


class RawCaptionStore:
    """Per-video raw captions of a split written by
    :func:`~builders.sources.transcripts.raw_caption_split.split_raw_captions` (``split_counts`` from its marker)."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)
        self.index = SplitIndex(self.root)
        self.split_counts: dict[str, int] | None = self.index.counts
        self.split_error: str = self.index.error
        self._warned: set[str] = set()

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`. Warns once per video on stop-word-free text."""
        vid = _checked_id(video_id)
        transcript = parse_raw_caption(vid, _parse_json_bytes(vid, self.index.read_bytes(vid)))
        if vid not in self._warned and lacks_stop_words(transcript.segments):
            self._warned.add(vid)
            logger.warning(
                "video %s: %d+ caption tokens and no English stop word; is this caption.json (stop words "
                "removed) instead of raw_caption.json? (docs/corpora/sieve_swap.md, Inputs)", vid,
                STOPWORD_CHECK_MIN_TOKENS,
            )
        return transcript


class WhisperXStore:
    """A directory of WhisperX outputs named ``<video_id>.json``."""

    def __init__(self, root: str | Path) -> None:
        self.root = _require_dir(root)

    def get(self, video_id: str) -> Transcript:
        """The video's transcript; raises :class:`TranscriptError`."""
        vid = _checked_id(video_id)
        return parse_whisperx(vid, _load_json_file(self.root / f"{vid}.json"))


def open_transcripts(
    path: str | Path, work_dir: str | Path, wanted_ids: set[str] | None = None
) -> RawCaptionStore | WhisperXStore:
    """A store over ``path``: a directory is read as WhisperX outputs; a file as HowTo100M ``raw_caption.json``,
    split once into ``work_dir/raw_captions`` (re-split only when the source file or ``wanted_ids`` changed).
    """
    src = Path(path)
    if src.is_dir():
        return WhisperXStore(src)
    if not src.exists():
        raise FileNotFoundError(f"transcripts not found: {src}")
    _require_raw_caption_file(src)
    out = Path(work_dir) / RAW_CAPTIONS_DIR
    split_once(src, out, wanted_ids)
    return RawCaptionStore(out)


def transcript_item_digests(video_ids: list[str], split_root: str | Path | None, whisperx_dir: str | Path | None,
                            memo: Any = None) -> list[str]:
    """What each video's transcript contributes to its rows, for a step's ``item_digest`` (README.md "Caching and resume": an
    edit reruns one video's shards): its entry of a ``raw_caption.json`` split under ``split_root``
    (:meth:`SplitIndex.digest`: the sha256 of its bytes, its error, ``-`` when absent), else the content sha256 of its
    WhisperX file ``<whisperx_dir>/<id>.json`` through the fingerprint ``memo`` (a ``stat`` and a look-up while
    unchanged; ``-`` when absent, the error's name when it cannot be read, e.g. a folder in its place). An id that is
    not a safe file name is refused unread by the stores: ``-``. Whether a split stopped at a JSON error (every video
    it did not reach is then ``malformed_transcript``) is not in these digests: key the whole stage on it."""
    from builders.core.fingerprint import item_file_sha

    if split_root is not None:
        index = SplitIndex(split_root)
        try:
            entries = index.entries(video_ids)
            return [index.digest(v, entries.get(v)) for v in video_ids]
        finally:
            index.close()
    out = []
    for v in video_ids:
        if not is_valid_video_id(v) or not whisperx_dir:
            out.append("-")
            continue
        try:
            out.append(item_file_sha(Path(whisperx_dir) / f"{v}.json", memo))
        except OSError as e:
            out.append(f"!{type(e).__name__}")
    return out
