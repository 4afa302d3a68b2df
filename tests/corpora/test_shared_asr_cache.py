"""HowTo100M transcribed once for every corpus (issue 35; docs/architecture.md "Caching and resume"): ShowHowTo and
HowToStep built on the same video files with one model-output cache (``--model-outputs``, by default
``OUT/.work/model-outputs``). The ASR engine is a stand-in ``whisperx`` module that counts what it transcribes (the
paper preset's backend, :class:`builders.models.asr.WhisperXASR`, runs on it unchanged; nothing downloads, no GPU).

Checked here: HowToStep built after ShowHowTo sends no ASR request for the videos ShowHowTo transcribed, and its
release rows equal those of a HowToStep build with a cache of its own; a damaged shared entry is transcribed again
(that one only) and written again; ``--model-outputs`` names the folder, and a file in its place is refused."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import io
import json
import shutil
import sys
import types
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main
from builders.models import media

from .howtostep.conftest import FAST, make_inputs, narration_chunks, numbered_steps, write_videos_csv
from .showhowto.conftest import SAMPLE as SHOWHOWTO_SAMPLE

pytestmark = pytest.mark.slow

#: the two spoken videos of the ShowHowTo sample (no transcript: ShowHowTo transcribes them), under HowToStep ids
SPOKEN = {"asrTea00001": SHOWHOWTO_SAMPLE / "videos" / "speech_tea.mp4",
          "asrEgg00001": SHOWHOWTO_SAMPLE / "videos" / "speech_eggs.mp4"}
#: the ShowHowTo sample with its recorded LLM answers (tests/corpora/showhowto/test_build.py)
SHOWHOWTO = ["--manifest", str(SHOWHOWTO_SAMPLE / "manifest_reasons.csv"),
             "--videos", str(SHOWHOWTO_SAMPLE / "HowTo100M_v1.csv"), "--tasks", str(SHOWHOWTO_SAMPLE / "task_ids.csv"),
             "--set", "llm=replay", "--set", f"llm_replay={SHOWHOWTO_SAMPLE / 'llm_outputs.jsonl'}",
             "--test-tasks", "2", "--test-size", "2", "--min-task-seqs", "1"]
SENTENCES = ["First we boil some fresh water in the kettle.", "Then we warm the pot with a little hot water.",
             "Now put two spoons of leaves into the pot.", "Pour the boiling water over the leaves slowly.",
             "Let it steep for about four minutes.", "Meanwhile we get the cups and the milk ready.",
             "Strain the tea into each cup carefully.", "Add a splash of milk if you like it.",
             "Stir in some sugar or honey to taste.", "Serve it right away while it is still hot.",
             "Clean the pot and the strainer afterwards.", "That is all you need for a good cup."]


def fake_whisperx(calls: list[str]) -> types.ModuleType:
    """A ``whisperx`` module whose pipeline appends the sha256 of every audio it transcribes to ``calls`` and
    answers twelve English sentences spread over the audio, aligned word by word."""
    mod = types.ModuleType("whisperx")
    mod.__spec__ = importlib.machinery.ModuleSpec("whisperx", None)  # found by the step's package check

    class Pipeline:
        def transcribe(self, audio, batch_size=None, **kw):
            calls.append(hashlib.sha256(audio.tobytes()).hexdigest())
            step = audio.size / 16000 / len(SENTENCES)
            return {"segments": [{"start": i * step, "end": (i + 0.9) * step, "text": " " + s}
                                 for i, s in enumerate(SENTENCES)], "language": "en"}

    def load_model(arch, device, compute_type="float16", download_root=None, language=None, **kw):
        return Pipeline()

    def load_align_model(language_code, device, model_name=None, model_dir=None):
        return "align-" + language_code, {"language": language_code}

    def align(segments, model, metadata, audio, device, return_char_alignments=False, **kw):
        out = []
        for s in segments:
            words, d = s["text"].split(), (s["end"] - s["start"]) / len(s["text"].split())
            out.append({**s, "words": [{"word": w, "start": s["start"] + k * d, "end": s["start"] + (k + 1) * d,
                                        "score": 0.9} for k, w in enumerate(words)]})
        return {"segments": out}

    mod.load_model, mod.load_align_model, mod.align = load_model, load_align_model, align
    return mod


def build(corpus: str, out: Path, *args: str) -> dict:
    """An in-process build (the stand-in module is seen by the ASR step); its release's ``stats.json``."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([corpus, "--out", str(out), "--no-progress", "-q", *args])
    assert rc == 0, err.getvalue()[-3000:]
    return json.loads((out / corpus / "stats.json").read_text())


def release_rows(root: Path) -> dict[str, list[dict]]:
    """Every Parquet table of a release, by its path in the release."""
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in sorted(root.rglob("*.parquet"))}


class World:
    """The inputs of both corpora, the stand-in engine's calls and the ASR settings both builds give."""

    def __init__(self, root: Path, calls: list[str]):
        self.root, self.calls = root, calls
        for name in ("whisperx-large-v2", "wav2vec2-align"):
            (root / name).mkdir()
        self.asr = ["--set", "asr=whisperx", "--set", f"asr_model_path={root / 'whisperx-large-v2'}",
                    "--set", f"asr_align_model_path={root / 'wav2vec2-align'}"]
        media_dir = root / "media"
        media_dir.mkdir()
        from builders.models.asr import ASRSettings, make_asr

        asr = make_asr(ASRSettings(backend="whisperx", model_path=str(root / "whisperx-large-v2"),
                                   align_model_path=str(root / "wav2vec2-align"), language="en"))
        inputs = make_inputs(root / "howtostep")
        replay = (root / "howtostep" / "replay.jsonl").open("a", encoding="utf-8")
        self.audio: dict[str, str] = {}
        for vid, src in SPOKEN.items():
            shutil.copyfile(src, media_dir / f"{vid}.mp4")   # HowToStep finds a video file by its id
            audio = media.decode_audio(src)
            self.audio[vid] = hashlib.sha256(audio.tobytes()).hexdigest()
            whisperx_json = root / f"{vid}.json"   # what the ASR step will get: the replayed LLM answers its chunks
            whisperx_json.write_text(json.dumps(asr.transcribe(audio)))
            for ci, chunk in enumerate(narration_chunks(whisperx_json)):
                replay.write(json.dumps({"video_id": vid, "chunk_index": ci, "raw_output": numbered_steps(chunk)})
                             + "\n")
        replay.close()
        write_videos_csv(root / "howtostep" / "videos.csv", [*inputs.ids, *SPOKEN])
        calls.clear()
        # every step kept (no threshold drops): the spoken videos reach the release
        self.howtostep = [*inputs.args, "--media", str(media_dir), *FAST, "--set", "epsilon1=0", "--set",
                          "epsilon2=-1", *self.asr]
        self.showhowto = [*SHOWHOWTO, *self.asr]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "whisperx", fake_whisperx(calls))
        yield World(tmp_path_factory.mktemp("shared_asr"), calls)


@pytest.fixture(scope="module")
def own_cache(world):
    """HowToStep built alone, with a model-output cache of its own (a fresh ``--out``: its default one)."""
    n = len(world.calls)
    st = build("howtostep", world.root / "alone", *world.howtostep)
    assert sorted(world.calls[n:]) == sorted(world.audio.values())   # both spoken videos transcribed
    assert st["this_build"]["counters"]["asr_requests"] == 2
    assert (world.root / "alone" / ".work" / "model-outputs" / "asr").is_dir()   # the default location
    return release_rows(world.root / "alone" / "howtostep")


@pytest.fixture(scope="module")
def after_showhowto(world):
    """ShowHowTo built into ``together``: its two spoken videos transcribed into the default shared cache."""
    out = world.root / "together"
    n = len(world.calls)
    st = build("showhowto", out, *world.showhowto)
    assert sorted(world.calls[n:]) == sorted(world.audio.values())
    assert st["this_build"]["counters"]["asr_requests"] == 2
    return out


def test_howtostep_after_showhowto_sends_no_asr_request(world, own_cache, after_showhowto):
    n = len(world.calls)
    st = build("howtostep", after_showhowto, *world.howtostep)   # the same --out: the same default shared cache
    assert world.calls[n:] == []
    work = st["this_build"]["counters"]
    assert work["asr_cache_hits"] == 2 and "asr_requests" not in work and "asr_cache_damaged" not in work
    rows = release_rows(after_showhowto / "howtostep")
    assert rows == own_cache
    narrations = {r["video_id"]: r for p, t in rows.items() if p.startswith("narrations/") for r in t}
    assert {narrations[v]["transcript_source"] for v in SPOKEN} == {"asr"}   # the spoken videos are in the release


def test_a_damaged_shared_entry_is_transcribed_again(world, own_cache, after_showhowto):
    shared = world.root / "shared"
    shutil.copytree(after_showhowto / ".work" / "model-outputs", shared)
    entries = sorted((shared / "asr").glob("??/*.json"))
    assert len(entries) == 2
    damaged = entries[0]
    data = damaged.read_bytes()
    k = data.index(b"kettle")
    damaged.write_bytes(data[:k] + b"K" + data[k + 1:])   # still JSON, not what was written
    n = len(world.calls)
    st = build("howtostep", world.root / "elsewhere", *world.howtostep, "--model-outputs", str(shared))
    assert len(world.calls[n:]) == 1 and world.calls[n] in world.audio.values()   # that video only
    work = st["this_build"]["counters"]
    assert work["asr_requests"] == 1 and work["asr_cache_hits"] == 1 and work["asr_cache_damaged"] == 1
    assert release_rows(world.root / "elsewhere" / "howtostep") == own_cache
    assert damaged.read_bytes() == data   # written again, as it was
    assert not (world.root / "elsewhere" / ".work" / "model-outputs").exists()   # --model-outputs named the folder


def test_a_file_in_place_of_the_model_outputs_folder_is_refused(tmp_path):
    (tmp_path / "not-a-folder").write_text("x")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["howtostep", "--out", str(tmp_path), "--no-progress", "-q",
                   "--model-outputs", str(tmp_path / "not-a-folder")])
    assert rc == 2 and "--model-outputs" in err.getvalue() and "not a directory" in err.getvalue()
