"""The transcript loader: a video's timed ASR segments from HowTo100M ``raw_caption.json`` or a folder of WhisperX
JSON files (``builders/sources/transcripts/``; Batra et al., ECCV 2024, §4.2: segments keep their ASR times).

:class:`TranscriptStep` is what every step that reads transcripts shares: the split of ``raw_caption.json`` (``fit``),
the per-video cache keys (``item_digest``) and the per-video store (``setup``). :class:`LoadTranscript` attaches the
raw segments (Sieve & Swap); MARC's ``TranscriptSentences`` (``builders/corpora/marc/chat_content.py``) cuts them into
sentences and drops unusable videos at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.artefacts import artefact_dir
from ..core.fingerprint import hash_obj
from ..core.records import Out, Row
from ..core.step import FitInputs, Step, input_path
from ..sources import transcripts


@dataclass(eq=False)
class TranscriptStep(Step):
    """A step that reads the transcript of each row's ``video_id`` from ``transcripts`` (a ``raw_caption.json`` or a
    folder of WhisperX ``<video_id>.json``) through ``self.store`` (``.get(video_id)`` returns a
    :class:`~builders.sources.transcripts.Transcript` or raises ``TranscriptError``); subclasses write ``process``.

    Per-item input: a shard is keyed by the transcripts of its own videos only (:meth:`item_digest`: each video's
    entry of the split, or its WhisperX file), so an edit of one video's caption redoes the shard holding it, not the
    stage (the whole file's fingerprint keys the split, ``fit``, alone)."""

    item_fields = ("video_id",)
    #: the split is updated where ``raw_caption.json`` changed (``transcripts.split_once``), not made again
    fit_updates_artefacts = True

    transcripts: Path | None = input_path(per_item=True)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: a ``raw_caption.json`` is split once into blocks of the wanted videos (artefact
        ``raw_captions/``, ``transcripts.split_once``: an edited file is re-split where it changed); a WhisperX
        directory is read in place; no video (a text-only MARC build, no candidate of a corpus dish) reads nothing. A
        split stopped by a JSON error is in the state (every video it did not reach is then
        ``malformed_transcript``), so it redoes every shard."""
        wanted = {r["video_id"] for r in inputs.data.rows(["video_id"])}
        if not wanted:
            return {"kind": "none", "root": None}
        path = Path(self.transcripts)
        if path.is_file():
            root = inputs.artefact_dir / "raw_captions"
            transcripts.split_once(path, root, wanted)
            index = transcripts.SplitIndex(root)
            index.close()
            return {"kind": "raw", "root": "raw_captions", "split_error": index.error}
        return {"kind": "whisperx", "root": None}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        if state["kind"] == "none":
            return ""
        vids = [r["video_id"] for r in rows]
        root = artefact_dir(state) / state["root"] if state["kind"] == "raw" else None
        return hash_obj(vids, transcripts.transcript_item_digests(vids, root, self.transcripts, memo))

    def setup(self, state: Any) -> None:
        self.state = state
        self.store: transcripts.RawCaptionStore | transcripts.WhisperXStore | None = None
        if state["kind"] == "raw":
            self.store = transcripts.RawCaptionStore(str(artefact_dir(state) / state["root"]))
        elif state["kind"] == "whisperx":
            self.store = transcripts.WhisperXStore(str(self.transcripts))


@dataclass(eq=False)
class LoadTranscript(TranscriptStep):
    """Attach the raw ASR segments (``asr_raw``, ``asr_source``, ``asr_language``). Errors are recorded on the row
    (``asr_error``: ``<reason>: <detail>``) for a later step to turn into drops, so filters in between count videos
    as the paper does. A video with no metadata duration gets the last ASR end."""

    name = "load_transcript"
    version = "2"
    id_field = "video_id"
    reads = {"video_id": str, "duration": Any}
    writes = {"asr_source": str, "asr_raw": list, "asr_error": str, "asr_language": Any, "duration": Any}

    def process(self, rows: list[Row], out: Out) -> None:
        source = "howto100m_raw_caption" if self.state["kind"] == "raw" else "whisperx"
        for r in rows:
            row = {**r, "asr_source": source, "asr_raw": [], "asr_error": "", "asr_language": None}
            try:
                t = self.store.get(r["video_id"])
            except transcripts.TranscriptError as e:
                row["asr_error"] = f"{e.reason}: {e.detail}"
            else:
                row["asr_raw"] = [{"start": s, "end": e_, "text": x} for s, e_, x in t.segments]
                row["asr_language"] = t.language
                if t.length_mismatch:
                    out.count("caption_length_mismatch")
                ends = [e_ for _, e_, _ in t.segments if isinstance(e_, float) and math.isfinite(e_)]
                if row["duration"] is None and ends:
                    row["duration"] = max(ends)
                    out.count("duration_from_asr_last_end")
            out.keep(row)
