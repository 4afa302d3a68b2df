"""``replay``: the recorded outputs of an earlier build (a JSONL file or the ``llm_outputs`` config of a release,
docs/corpora/howtostep.md "the raw output of every chunk is kept"); no model runs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.errors import describe
from .backend import LLMRequest, LLMResult, LLMSettings


def _read_jsonl(path: Path) -> Iterator[dict]:
    """The records of a replay JSONL file, one line at a time (a bad line raises ``ValueError`` naming it)."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                stage = row.get("stage")
                if stage is not None and not (isinstance(stage, str) and stage):
                    raise TypeError("stage is not a non-empty string")
                location = stage if stage is not None else str(int(row["chunk_index"]))
                finish = row.get("finish_reason")
                record = {"video_id": str(row["video_id"]), "location": location,
                          "raw_output": row["raw_output"], "prompt_id": row.get("prompt_id"),
                          "finish_reason": finish if isinstance(finish, str) else None}
                if not isinstance(record["raw_output"], str):
                    raise TypeError("raw_output is not a string")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path} line {n}: malformed LLM output record ({describe(exc, 200)}); expected "
                                 '{"video_id", "chunk_index" or "stage", "raw_output"}') from None
            yield record


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    folder = path / "llm_outputs" if (path / "llm_outputs").is_dir() else path
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise ValueError(f"llm_replay {path}: no JSONL file, release folder with llm_outputs/*.parquet, "
                         "or parquet file found")
    return files


def _read_llm_outputs(path: Path) -> Iterator[dict]:
    """The records of a release's ``llm_outputs`` Parquet, one row group at a time."""
    import pyarrow.parquet as pq

    for file in _parquet_files(path):
        for batch in pq.ParquetFile(file).iter_batches(batch_size=1000, columns=["video_id", "chunks"]):
            for video in batch.to_pylist():
                for chunk in video["chunks"] or []:
                    yield {"video_id": str(video["video_id"]), "location": str(int(chunk["chunk_index"])),
                           "raw_output": chunk.get("raw_output"), "prompt_id": chunk.get("prompt_id"),
                           "finish_reason": None}


ReplayOutputs = dict[tuple[str, str], tuple[str | None, str | None, str | None]]


def iter_replay_source(path: str | Path) -> Iterator[tuple[tuple[str, str], tuple[str | None, str | None,
                                                                             str | None]]]:
    """The records of a replay source as ``((video_id, location), (raw_output, prompt_id, finish_reason))``, streamed:
    a JSONL file (every line checked; a bad line raises ``ValueError`` naming the file and the line) or a release's
    ``llm_outputs`` Parquet. A missing or unreadable source raises ``ValueError``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"llm_replay {str(path)!r} does not exist")
    is_jsonl = path.is_file() and path.suffix != ".parquet"
    try:
        for row in _read_jsonl(path) if is_jsonl else _read_llm_outputs(path):
            yield (row["video_id"], row["location"]), (row["raw_output"], row["prompt_id"], row["finish_reason"])
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({describe(exc, 200)})") from None
    except (OSError, KeyError, TypeError) as exc:   # unreadable, or Parquet without the llm_outputs columns
        raise ValueError(f"{path}: not a replay source ({describe(exc, 200)})") from None


def _duplicate(path: Path, key: tuple[str, str]) -> ValueError:
    where = f"chunk {key[1]}" if key[1].isdigit() else f"stage {key[1]}"
    return ValueError(f"{path}: two different recorded outputs for video {key[0]} {where}")


def load_replay_source(path: str | Path) -> ReplayOutputs:
    """The recorded outputs of a replay source in memory, ``{(video_id, location): (raw_output, prompt_id,
    finish_reason)}`` (``iter_replay_source``); two different outputs for one request raise ``ValueError``. For small
    sources: :class:`ReplayBackend` keeps them on disk."""
    outputs: ReplayOutputs = {}
    for key, value in iter_replay_source(path):
        if outputs.setdefault(key, value) != value:
            raise _duplicate(Path(path), key)
    return outputs


def check_replay_source(path: str | Path) -> int:
    """Read and check every record of a replay source before any work (``ValueError`` for a malformed line), holding
    none of them; returns the number of records read.

    A source whose index is kept in the model cache for its files as they are now (:func:`open_index`: same path,
    size, mtime and inode, not modified in the last two seconds) was read and checked whole when that index was
    built: it is not read again (a rebuild would re-read a multi-GB source at paper scale), and the index's number
    of distinct records is returned."""
    kept = _kept_index(Path(path))
    if kept is not None:
        return kept[1]
    return sum(1 for _ in iter_replay_source(path))


#: bump when the index's layout changes (part of its key)
INDEX_VERSION = "1"
#: a source modified this recently may still be written to: its index is not kept for other processes
_RACY_NS = 2_000_000_000
#: the indexes this process opened: source identity -> (index file, digest, records)
_OPENED: dict[str, tuple[str, str, int]] = {}


def _source_identity(path: Path) -> tuple[str, bool]:
    """A key of the source's files as they are now (path, size, mtime, inode) and whether one was modified in the
    last two seconds (then it is not trusted across processes)."""
    files = [path] if path.is_file() else _parquet_files(path)
    now, racy, parts = time.time_ns(), False, []
    for f in files:
        st = f.stat()
        parts.append([str(f.resolve()), st.st_size, st.st_mtime_ns, st.st_ino])
        racy = racy or now - st.st_mtime_ns < _RACY_NS
    return hashlib.sha256(json.dumps([INDEX_VERSION, parts]).encode("utf-8")).hexdigest(), racy


def _index_dir() -> Path:
    from ..text_encoder import model_cache_dir

    return model_cache_dir() / "replay-index"


def _meta(db: Path) -> tuple[str, str, int, str] | None:
    """(key, digest, records, source) of a kept index; None when it is unreadable."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT key, digest, records, source FROM meta").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return (row[0], row[1], int(row[2]), row[3]) if row else None


def _read_meta(db: Path, key: str) -> tuple[str, int] | None:
    """(digest, records) of a kept index built for ``key``; None when there is none or it is unreadable."""
    meta = _meta(db) if db.is_file() else None
    return (meta[1], meta[2]) if meta and meta[0] == key else None


def _drop_superseded(kept: Path, source: Path) -> None:
    """Remove the kept indexes of earlier versions of ``source`` (the cache holds one index a source)."""
    for other in kept.parent.glob("*.sqlite"):
        meta = _meta(other) if other != kept else None
        if meta is not None and meta[3] == str(source.resolve()):
            _remove(str(other))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _build_index(source: Path, db: str, key: str) -> tuple[str, int]:
    """Index every record of ``source`` into the SQLite file ``db`` (two different outputs for one request raise
    ``ValueError``); returns the content digest of the records (sorted) and their number."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("CREATE TABLE outputs (video_id TEXT, location TEXT, raw TEXT, prompt_id TEXT, finish TEXT, "
                    "PRIMARY KEY (video_id, location))")
        for k, value in iter_replay_source(source):
            cur = con.execute("INSERT OR IGNORE INTO outputs VALUES (?, ?, ?, ?, ?)", (*k, *value))
            if not cur.rowcount and ReplayBackend._lookup(con, k) != value:
                raise _duplicate(source, k)
        digest = hashlib.sha256()
        records = 0
        for vid, loc, raw, pid, fin in con.execute("SELECT * FROM outputs ORDER BY video_id, location"):
            digest.update(json.dumps([[vid, loc], [raw, pid, fin]], ensure_ascii=False).encode("utf-8") + b"\n")
            records += 1
        con.execute("CREATE TABLE meta (key TEXT, digest TEXT, records INTEGER, source TEXT)")
        con.execute("INSERT INTO meta VALUES (?, ?, ?, ?)", (key, digest.hexdigest(), records,
                                                            str(source.resolve())))
        con.commit()
    finally:
        con.close()
    return digest.hexdigest(), records


def _kept_path(key: str) -> Path:
    """Where the index of the source with identity ``key`` (:func:`_source_identity`) is kept in the model cache."""
    return _index_dir() / f"{key[:32]}.sqlite"


def _kept_index(source: Path) -> tuple[str, int] | None:
    """``(SQLite file, records)`` of the kept index of ``source`` as it is now, if there is one (never for a source
    modified in the last two seconds); None otherwise."""
    try:
        key, racy = _source_identity(source)
        if racy:
            return None
        kept = _kept_path(key)
        meta = _read_meta(kept, key)
    except OSError:
        return None
    return None if meta is None else (str(kept), meta[1])


def open_index(source: Path) -> tuple[str, str, int]:
    """The index of a replay source as ``(SQLite file, digest, records)``: built once per process, and kept in the
    model cache (``replay-index/``, keyed by the source files' identity) for the next build, unless the source was
    modified in the last two seconds or the cache cannot be written (then in the temp folder, removed at exit)."""
    import atexit
    import tempfile

    key, racy = _source_identity(source)
    if key in _OPENED and Path(_OPENED[key][0]).is_file():
        return _OPENED[key]
    kept = None
    if not racy:
        with contextlib.suppress(OSError):
            kept = _kept_path(key)
            meta = _read_meta(kept, key)
            if meta is not None:
                _OPENED[key] = (str(kept), *meta)
                return _OPENED[key]
            kept.parent.mkdir(parents=True, exist_ok=True)
    folder = kept.parent if kept is not None and kept.parent.is_dir() else None
    fd, db = tempfile.mkstemp(prefix=".procvid-replay-", suffix=".sqlite", dir=folder)
    os.close(fd)
    try:
        digest, records = _build_index(source, db, key)
    except BaseException:
        _remove(db)
        raise
    if folder is not None and kept is not None:
        os.replace(db, kept)
        db = str(kept)
        _drop_superseded(kept, source)
    else:
        atexit.register(_remove, db)
    _OPENED[key] = (db, digest, records)
    return _OPENED[key]


class ReplayBackend:
    """Answers from recorded outputs, keyed by (video_id, chunk_index) or (video_id, stage); no model runs.

    A recorded ``prompt_id`` (release rows carry one) must equal the request's, so outputs of another prompt are
    never parsed as if they answered this one. The content digest of the source is part of :meth:`decoding`.
    """

    name = "replay"
    runtime = "replay"
    keyed_by_location = True  # generate_cached keys (and de-duplicates) its requests by (video_id, chunk_index) too

    def __init__(self, settings: LLMSettings):
        if not settings.replay_path:
            raise ValueError("llm=replay needs the config key llm_replay (a JSONL file of {video_id, "
                             "chunk_index, raw_output} or a release folder with llm_outputs/)")
        self.path = Path(settings.replay_path)
        self.model_id = f"replay:{self.path.name}"
        self._open()

    def _open(self) -> None:
        """Open the source's SQLite index (:func:`open_index`, built once per process and kept for the next build):
        memory does not grow with the recorded outputs (a 20,000-video replay held ~100 MB as a dict), and a build
        no longer re-reads the whole source in each of the stages and the release that open the backend."""
        import sqlite3

        db, self.digest, self.records = open_index(self.path)
        self._con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)

    @staticmethod
    def _lookup(con: Any, key: tuple[str, str]) -> tuple[str | None, str | None, str | None]:
        row = con.execute("SELECT raw, prompt_id, finish FROM outputs WHERE video_id = ? AND location = ?",
                          key).fetchone()
        return (row[0], row[1], row[2]) if row else (None, None, None)

    def __getstate__(self) -> dict:  # a worker process indexes the source again
        return {k: v for k, v in self.__dict__.items() if k != "_con"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._open()

    def decoding(self) -> dict:
        return {"runtime": self.runtime, "source_sha256": self.digest}

    def info(self) -> dict:
        return {"backend": self.name, "model_id": self.model_id, "runtime": self.runtime,
                "records": self.records, "source_sha256": self.digest}

    def count_tokens(self, text: str) -> int:
        """Whitespace words: replay has no tokenizer."""
        return len(text.split())

    def context_budget(self) -> None:
        """None: a recorded answer has no prompt budget (chunks are never halved for it)."""
        return None

    def generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        out = []
        for r in requests:
            raw, prompt_id, finish = self._lookup(self._con, (r.video_id, r.location))
            where = f"stage {r.stage}" if r.stage else f"chunk {r.chunk_index}"
            if raw is None:
                error = f"llm_error: no recorded output for video {r.video_id} {where} in {self.path.name}"
            elif prompt_id and prompt_id != r.prompt_id:
                error = (f"llm_error: recorded output for video {r.video_id} {where} is for prompt "
                         f"{prompt_id}, not {r.prompt_id}")
            else:
                error = None
            out.append(LLMResult(r.request_id, None if error else raw, error, finish_reason=None if error else finish))
        return out
