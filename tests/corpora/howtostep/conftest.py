"""Shared helpers of the fast HowToStep end-to-end tests (spec howtostep.md §3-§7).

A build here never loads a model: the LLM answers from a replay JSONL written by the test, the text encoders are the
deterministic hash encoder of ``builders.nasva.data`` (``hash:64``), and features are per-second files or simulated.
A whole build of a few videos takes a few seconds."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parents[3] / "builders" / "samples" / "howtostep"
#: four bundled WhisperX transcripts (22 / 17 / 19 / 14 segments, 98-211 s)
GOOD = ["Pk3nQ8vTz1L", "Gw7mR2cXh5D", "-Tp4kL9sWq2", "Mc8vN4dLs3F"]
#: the fast-build settings: no model is loaded anywhere (hash text encoders, a replayed LLM)
FAST = ["--set", "text_encoder=hash:64", "--set", "nasva_text_encoder=hash:64", "--set", "labeler_epochs=1"]


def sample_transcript(vid: str) -> Path:
    return SAMPLE / "transcripts" / f"{vid}.json"


def narration_texts(path: Path) -> list[str]:
    """The narration sentences of a bundled WhisperX transcript, as the pipeline cuts them (spec §3.2)."""
    from builders.ops.sentencify import narrations_from_transcript
    from builders.sources.narrations import parse_whisperx_json

    t = parse_whisperx_json(path.stem, json.loads(path.read_text()))
    res = narrations_from_transcript("whisperx", t.segments, t.words, language=t.language)
    return [s[0] for s in res.sentences]


def narration_chunks(path: Path, chunk_size: int = 10) -> list[str]:
    """The ``chunk_size``-sentence chunks of a sample transcript, joined by one space (spec §3.3)."""
    texts = narration_texts(path)
    return [" ".join(texts[i:i + chunk_size]) for i in range(0, len(texts), chunk_size)]


def numbered_steps(chunk: str, n: int = 4, words: int = 8) -> str:
    """A v3-style answer: up to ``n`` numbered steps, each ``words`` consecutive words of the chunk."""
    w = chunk.split()
    return "Here are the steps:\n" + "\n".join(
        f"{k + 1}. {' '.join(w[words * k:words * k + words])}" for k in range(min(n, len(w) // words)))


def write_replay(path: Path, answers: dict[str, list[str]], prompt_id: str | None = None) -> Path:
    """A replay JSONL ``{video_id, chunk_index, raw_output[, prompt_id]}`` (``builders.models.llm.ReplayBackend``)."""
    lines = []
    for vid, outs in answers.items():
        for ci, out in enumerate(outs):
            rec = {"video_id": vid, "chunk_index": ci, "raw_output": out}
            if prompt_id:
                rec["prompt_id"] = prompt_id
            lines.append(json.dumps(rec) + "\n")
    path.write_text("".join(lines))
    return path


def write_videos_csv(path: Path, ids: list[str]) -> Path:
    path.write_text("video_id,category_1,category_2,rank,task_id\n"
                    + "".join(f"{v},Food and Entertaining,Recipes,1,1\n" for v in ids))
    return path


def write_features(folder: Path, vid: str, T: int, dim: int, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    x = np.random.default_rng(seed).standard_normal((T, dim)).astype(np.float32)
    np.save(folder / f"{vid}.npy", x)
    return folder / f"{vid}.npy"


@dataclass
class Inputs:
    """A small HowToStep input set in ``root`` (see :func:`make_inputs`): WhisperX transcripts, a videos csv, a
    replay file answering every chunk with ``answer(vid, chunk_index, chunk_text)``, optional feature files;
    ``ids`` = every video, ``args`` = the build's input flags."""

    root: Path
    ids: list[str]
    args: list[str] = field(default_factory=list)


def write_whisperx(path: Path, sentences: list[tuple[str, float, float]], language: str | None = "en") -> Path:
    """A WhisperX json without word times: one segment per (text, start, end) (spec §2.2)."""
    obj: dict = {"segments": [{"start": s, "end": e, "text": t} for t, s, e in sentences]}
    if language:
        obj["language"] = language
    path.write_text(json.dumps(obj))
    return path


def make_inputs(root: Path, ids: list[str] | None = None, *, answer: Callable[[str, int, str], str | None] | None = None,
                features_dim: int | None = None, prompt_id: str | None = None,
                custom: dict[str, list[tuple[str, float, float]]] | None = None) -> Inputs:
    """``ids``: bundled transcripts (a bundled id keeps its own, another id takes one by position); ``custom``: more
    videos with the given (text, start, end) sentences as WhisperX segments."""
    ids = list(ids or GOOD)
    custom = custom or {}
    tr = root / "transcripts"
    tr.mkdir(parents=True, exist_ok=True)
    answers: dict[str, list[str]] = {}
    for i, vid in enumerate(ids + [v for v in custom if v not in ids]):
        if vid in custom:
            src = write_whisperx(tr / f"{vid}.json", custom[vid])
        else:
            src = sample_transcript(vid if vid in GOOD else GOOD[i % len(GOOD)])
            shutil.copyfile(src, tr / f"{vid}.json")
        outs = []
        for ci, chunk in enumerate(narration_chunks(src)):
            out = (answer or (lambda v, c, t: numbered_steps(t)))(vid, ci, chunk)
            if out is not None:
                outs.append(out)
        answers[vid] = outs
        if features_dim:
            T = int(json.loads(src.read_text())["segments"][-1]["end"]) + 1
            write_features(root / "features", vid, T, features_dim, seed=i)
    write_replay(root / "replay.jsonl", answers, prompt_id)
    write_videos_csv(root / "videos.csv", list(answers))
    args = ["--videos", str(root / "videos.csv"), "--transcripts", str(tr), "--transcript-format", "whisperx",
            "--set", "llm=replay", "--set", f"llm_replay={root / 'replay.jsonl'}"]
    if features_dim:
        args += ["--features", str(root / "features"), "--set", "visual_features=file",
                 "--set", f"visual_dim={features_dim}"]
    else:  # a real build never simulates features by default: the tests ask for it
        args += ["--set", "visual_features=simulated"]
    return Inputs(root, list(answers), args)


def run_build(out: Path, *args: str) -> tuple[int, str, Path]:
    """``python -m builders.build howtostep --out OUT ARGS`` in-process: (exit code, stderr, release folder)."""
    from builders.build import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["howtostep", "--out", str(out), "--no-progress", "-q", *args])
    return rc, err.getvalue(), out / "howtostep"


def build_ok(out: Path, *args: str) -> Path:
    rc, err, root = run_build(out, *args)
    assert rc == 0, err[-3000:]
    return root


def table(root: Path, config: str) -> list[dict]:
    return [r for p in sorted((root / config).glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def stats(root: Path) -> dict:
    return json.loads((root / "stats.json").read_text())


def manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())
