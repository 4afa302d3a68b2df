"""ModelOutputCache (builders/models/request_cache.py): the model outputs that builds of every corpus share
(``--model-outputs``): the request cache's keys and values, one checked file a request, written atomically, several
processes at once, a damaged entry asked again, older answers read from a build's own request cache."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from builders.models.asr import transcribe_cached
from builders.models.request_cache import ModelOutputCache, RequestCache

KEY = RequestCache.key(audio_sha256="ab" * 32, model_id="m", decoding={"beam_size": 1}, code_version="1")


def test_the_key_is_the_request_caches_and_names_one_file(tmp_path):
    cache = ModelOutputCache(tmp_path / "asr")
    assert cache.key(a=1, b=[2]) == RequestCache.key(b=[2], a=1)
    assert cache.path(KEY) == tmp_path / "asr" / KEY[:2] / f"{KEY}.json"
    for bad in ("../../etc/passwd", KEY.upper(), KEY[:-1], ""):
        with pytest.raises(ValueError, match="64 hex digits"):
            cache.path(bad)


def test_put_get_roundtrip_as_the_request_cache_returns_it(tmp_path):
    value = {"segments": [{"text": "Add the flour.", "start": 0.5, "end": 2.0}], "language": "en"}
    shared, own = ModelOutputCache(tmp_path / "asr"), RequestCache(tmp_path / "r.sqlite")
    shared.put_many({KEY: value})
    own.put_many({KEY: value})
    got, reference = shared.get_many([KEY, "0" * 64]), own.get_many([KEY])
    assert got == reference == {KEY: value}
    # the same object, key order included: sorted, as the request cache stores its JSON text
    assert json.dumps(got[KEY]) == json.dumps(reference[KEY])
    assert list(got[KEY]) == ["language", "segments"] and list(got[KEY]["segments"][0]) == ["end", "start", "text"]
    text = shared.path(KEY).read_text(encoding="utf-8")
    body = json.dumps(got[KEY], ensure_ascii=False)
    assert text == f'{{"sha256": "{hashlib.sha256(body.encode()).hexdigest()}", "record": {body}}}'
    shared.put_many({KEY: {"language": "fr"}})  # replaced
    assert shared.get_many([KEY]) == {KEY: {"language": "fr"}} and len(shared) == 1
    assert not [p for p in (tmp_path / "asr").rglob("*") if p.name.startswith(".")]  # no temp file left
    with pytest.raises(ValueError):
        shared.put_many({KEY: {"x": float("nan")}})  # as json.dumps(allow_nan=False): the request cache refuses it


@pytest.mark.parametrize("damage", ["flip", "cut", "empty", "plain json"])
def test_a_damaged_entry_is_a_miss_then_written_again(tmp_path, caplog, damage):
    cache = ModelOutputCache(tmp_path / "asr")
    cache.put_many({KEY: {"text": "chop the onions"}})
    path = cache.path(KEY)
    data = path.read_bytes()
    if damage == "flip":
        k = data.index(b"onions")
        path.write_bytes(data[:k] + b"O" + data[k + 1:])  # still JSON, not what was written
    elif damage == "cut":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_text(json.dumps({"text": "chop the onions"}))  # no digest: not known to be what was written
    with caplog.at_level(logging.WARNING):
        assert cache.get_many([KEY]) == {}
    assert cache.damaged == 1
    assert any("damaged model-output cache" in r.getMessage() and KEY[:12] in r.getMessage() for r in caplog.records)
    cache.put_many({KEY: {"text": "chop the onions"}})
    assert cache.get_many([KEY]) == {KEY: {"text": "chop the onions"}} and cache.damaged == 1


def test_older_answers_are_read_from_the_builds_request_cache_and_copied(tmp_path):
    own = RequestCache(tmp_path / "work" / "cache" / "requests.sqlite")
    own.put_many({KEY: {"text": "older"}})
    cache = ModelOutputCache(tmp_path / "shared", fallback=own)
    assert cache.get_many([KEY]) == {KEY: {"text": "older"}}
    assert ModelOutputCache(tmp_path / "shared").get_many([KEY]) == {KEY: {"text": "older"}}  # copied for others
    other = RequestCache.key(prompt="p")
    cache.put_many({other: 1})
    assert own.get_many([other]) == {}  # new answers go to the shared folder only
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.get_many([KEY, other]) == {KEY: {"text": "older"}, other: 1}
    cache.close()
    copy.close()


def _worker(root: str, wid: int, rounds: int, queue, barrier) -> None:
    try:
        barrier.wait(timeout=60)
        cache = ModelOutputCache(root)
        for r in range(rounds):
            shared, own = RequestCache.key(shared=r % 7), RequestCache.key(own=wid, r=r)
            cache.put_many({shared: {"text": f"s{r % 7}", "pad": "x" * 4000}, own: {"text": f"{wid}:{r}"}})
            got = cache.get_many([shared, own])
            assert got[own] == {"text": f"{wid}:{r}"}, got
            assert got[shared] == {"text": f"s{r % 7}", "pad": "x" * 4000}, got
        queue.put((wid, "ok", cache.damaged))
    except Exception as exc:  # noqa: BLE001 - report to the parent rather than die silently
        queue.put((wid, repr(exc), -1))


def test_three_processes_write_and_read_overlapping_keys_at_once(tmp_path):
    """Two builds (or Ray workers) writing one entry at once: every read sees a whole, checked answer."""
    root = str(tmp_path / "asr")
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing inherited, like Ray workers
    queue, barrier = ctx.Queue(), ctx.Barrier(3)
    procs = [ctx.Process(target=_worker, args=(root, w, 150, queue, barrier)) for w in range(3)]
    for p in procs:
        p.start()
    reports = sorted(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert reports == [(0, "ok", 0), (1, "ok", 0), (2, "ok", 0)]
    cache = ModelOutputCache(root)
    assert len(cache) == 3 * 150 + 7
    assert not [p for p in (tmp_path / "asr").rglob("*") if p.name.startswith(".")]


class CountingASR:
    """A stand-in ASR backend (``builders.models.asr.ASRBackend``): a fixed answer, every call counted."""

    name = "whisperx"

    def __init__(self, model_id: str = "whisperx large-v2 + align", beam_size: int = 1):
        self.model_id, self.beam_size, self.calls = model_id, beam_size, 0

    def decoding(self) -> dict:
        return {"batch_size": 16, "beam_size": self.beam_size, "language": None}

    def info(self) -> dict:
        return {"model_id": self.model_id, **self.decoding()}

    def transcribe(self, audio: np.ndarray) -> dict:
        self.calls += 1
        return {"segments": [{"start": 0.0, "end": 1.0, "text": f"{audio.size} samples"}], "language": "en"}


def test_a_transcript_is_shared_only_under_the_same_audio_model_and_decoding(tmp_path):
    audio, other_audio = np.zeros(16000, np.float32), np.ones(16000, np.float32)
    first, second = CountingASR(), CountingASR()
    shared = tmp_path / "model-outputs" / "asr"
    a, cached = transcribe_cached(first, audio, ModelOutputCache(shared), "1")   # one corpus's build
    assert not cached and first.calls == 1
    b, cached = transcribe_cached(second, audio, ModelOutputCache(shared), "1")  # another corpus's build
    assert cached and second.calls == 0 and a == b
    for asr, code in ((CountingASR(model_id="faster-whisper:tiny.en"), "1"), (CountingASR(beam_size=5), "1"),
                      (CountingASR(), "2")):
        _, cached = transcribe_cached(asr, audio, ModelOutputCache(shared), code)
        assert not cached and asr.calls == 1
    _, cached = transcribe_cached(second, other_audio, ModelOutputCache(shared), "1")
    assert not cached and second.calls == 1
    # today's request key: an answer a build kept in its own request cache is found under the same key
    own = RequestCache(tmp_path / "own.sqlite")
    key = RequestCache.key(audio_sha256=hashlib.sha256(audio.tobytes()).hexdigest(), model_id=first.model_id,
                           decoding=first.decoding(), code_version="1")
    own.put_many({key: {"segments": [], "language": "older"}})
    got, cached = transcribe_cached(SimpleNamespace(model_id=first.model_id, decoding=first.decoding), audio,
                                    ModelOutputCache(tmp_path / "elsewhere", fallback=own), "1")
    assert cached and got == {"segments": [], "language": "older"}
