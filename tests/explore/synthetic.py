"""Hand-made release folders for the explorer's tests and benchmark: Parquet shards written with pyarrow in the
declared schemas of ``loading_scripts`` (``<config>/<split>-00000-of-00001.parquet``, 1,000-row row groups as the
release writer makes them), plus ``stats.json`` and ``manifest.json``. No build runs."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROW_GROUP = 1000
WORDS = ("add stir chop whisk fold pour simmer bake roast season the onions garlic tomatoes butter flour sugar eggs "
         "milk cream cheese rice pasta pan oven bowl until golden minutes gently slowly then now we").split()


def _schema(features: Any) -> Any:
    return features.arrow_schema


def write_config(root: Path, config: str, split: str, features: Any, rows: Iterable[dict[str, Any]],
                 batch: int = ROW_GROUP) -> Path:
    """Write ``rows`` (consumed ``batch`` at a time) as one shard of ``config``/``split`` in ``features``' schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = root / config / f"{split}-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = _schema(features)
    with pq.ParquetWriter(str(path), schema=schema) as w:
        buf: list[dict[str, Any]] = []
        for r in rows:
            buf.append(r)
            if len(buf) >= batch:
                w.write_table(pa.Table.from_pylist(buf, schema=schema), row_group_size=batch)
                buf = []
        if buf:
            w.write_table(pa.Table.from_pylist(buf, schema=schema), row_group_size=batch)
    return path


def write_meta(root: Path, corpus: str, config: dict[str, Any] | None = None) -> None:
    (root / "manifest.json").write_text(json.dumps({"corpus": corpus, "config": config or {}}), encoding="utf-8")
    (root / "stats.json").write_text(json.dumps({"corpus": corpus}), encoding="utf-8")
    (root / "report.html").write_text("<!DOCTYPE html><title>report</title><p>report</p>", encoding="utf-8")


def _text(rng: random.Random, lo: int = 5, hi: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def vid(i: int) -> str:
    """An 11-character YouTube-like id."""
    return f"v{i:010d}"


# -------------------------------------------------------------------------------------------------- howtostep
def howtostep_rows(n: int, seed: int = 0, narrations: int = 100, steps: int = 12,
                   text: Callable[[random.Random, int], str] | None = None) -> tuple[Iterator[dict], Iterator[dict],
                                                                                         Iterator[dict]]:
    """``steps``, ``narrations`` and ``dropped_steps`` rows of ``n`` videos (generators; same seed, same rows)."""
    def t(rng: random.Random, k: int) -> str:
        return text(rng, k) if text else _text(rng)

    def steps_rows() -> Iterator[dict]:
        rng = random.Random(seed)
        for i in range(n):
            dur = 60.0 + 600 * rng.random()
            out = []
            for k in range(steps):
                s = dur * k / steps
                low = k % 5 == 4
                out.append({"step_index": k, "chunk_index": k // 5, "text": t(rng, k), "start": s, "end": s + 8.0,
                            "score": rng.random(), "stage1_start": None if low else s + 1, "stage1_end": None if low
                            else s + 5, "stage1_score": rng.random(), "pathway_scores": []})
            yield {"video_id": vid(i), "task_id": str(1000 + i % 50), "task_name": f"Make dish {i % 50}",
                   "category_1": "Food and Entertaining", "category_2": "Recipes", "duration": dur,
                   "num_frames": int(dur), "num_raw_steps": steps + 2, "steps": out,
                   "provenance": {"labeler": "two_stage", "epsilon1": 0.2, "epsilon2": 0.8}}

    def narr_rows() -> Iterator[dict]:
        rng = random.Random(seed + 1)
        for i in range(n):
            yield {"video_id": vid(i), "duration": 600.0, "language": "en", "transcript_source": "whisperx",
                   "narrations": [{"index": k, "text": t(rng, -1 - k), "start": 5.0 * k, "end": 5.0 * k + 4.5}
                                  for k in range(narrations)]}

    def dropped_rows() -> Iterator[dict]:
        rng = random.Random(seed + 2)
        for i in range(n):
            for k in range(2):
                yield {"video_id": vid(i), "step_index": steps + k, "chunk_index": 0, "text": t(rng, 100 + k),
                       "stage": "stage2", "reason": "stage2_below_eps2", "score": rng.random()}

    return steps_rows(), narr_rows(), dropped_rows()


def write_howtostep(root: Path, n: int, seed: int = 0, **kw: Any) -> Path:
    from loading_scripts.howtostep import FEATURES

    steps, narr, dropped = howtostep_rows(n, seed, **kw)
    write_config(root, "steps", "train", FEATURES["steps"], steps)
    write_config(root, "narrations", "train", FEATURES["narrations"], narr)
    write_config(root, "dropped_steps", "train", FEATURES["dropped_steps"], dropped, batch=2 * ROW_GROUP)
    write_meta(root, "howtostep", {"labeler": "two_stage"})
    return root


# ------------------------------------------------------------------------------------------------- sieve_swap
def write_sieve_swap(root: Path, n: int, seed: int = 0, segments: int = 100,
                     text: Callable[[random.Random, int], str] | None = None, title: str | None = None) -> Path:
    """``default``, ``raw_asr`` and ``recipes`` of ``n`` videos: every fourth raw segment is kept (swapped)."""
    from loading_scripts.sieve_swap import FEATURES

    def t(rng: random.Random, k: int) -> str:
        return text(rng, k) if text else _text(rng)

    def default_rows() -> Iterator[dict]:
        rng = random.Random(seed)
        for i in range(n):
            kept = [{"start": 5.0 * k, "end": 5.0 * k + 4.5, "text": t(rng, k), "recipe_id": i, "step_index": k // 4,
                     "similarity": 0.75 + 0.2 * rng.random(), "candidates": [], "asr_text": t(rng, -k),
                     "num_merged": 1} for k in range(0, segments, 4)]
            yield {"video_id": vid(i), "title": title if title is not None else f"How to cook dish {i}",
                   "title_source": 0, "task_id": 100 + i % 30, "task_name": f"Cook dish {i % 30}",
                   "category_1": "Food and Entertaining", "category_2": "Recipes", "duration": 5.0 * segments,
                   "duration_source": 0, "asr_source": 0, "recipe_ids": [i], "recipe_token_iou": [0.3],
                   "recipe_token_recall": [0.6], "max_token_iou": 0.3, "num_asr_segments": segments,
                   "segments": kept, "provenance": {"sim_threshold": 0.75, "embedding_model": "mpnet"}}

    def raw_rows() -> Iterator[dict]:
        rng = random.Random(seed + 1)
        for i in range(n):
            yield {"video_id": vid(i), "duration": 5.0 * segments, "asr_source": 0,
                   "segments": [{"start": 5.0 * k, "end": 5.0 * k + 4.5, "text": t(rng, -1 - k)}
                                for k in range(segments)]}

    def recipe_rows() -> Iterator[dict]:
        rng = random.Random(seed + 2)
        for i in range(n):
            yield {"recipe_id": i, "title": t(rng, 0), "ingredients": [t(rng, 1)], "directions": [t(rng, 2)] * 6,
                   "ner": [], "link": "www.example.com/r", "source": 0, "num_segments_top1": 3}

    write_config(root, "default", "train", FEATURES["default"], default_rows())
    write_config(root, "raw_asr", "train", FEATURES["raw_asr"], raw_rows())
    write_config(root, "recipes", "train", FEATURES["recipes"], recipe_rows())
    write_meta(root, "sieve_swap")
    return root


# -------------------------------------------------------------------------------------------------- showhowto
def tiny_jpeg(colour: tuple[int, int, int], size: tuple[int, int] = (96, 54)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def write_showhowto(root: Path, n: int, seed: int = 0, steps: int = 6, images: bool = True) -> Path:
    """``sequences`` (and ``images`` with tiny JPEGs) of ``n`` sequences of ``steps`` key steps."""
    from loading_scripts.showhowto import FEATURES

    jpegs = [tiny_jpeg(((37 * k) % 256, (91 * k) % 256, (53 * k) % 256)) for k in range(16)]

    def rows(with_images: bool) -> Iterator[dict]:
        rng = random.Random(seed)
        for i in range(n):
            st = [{"instruction": _text(rng), "start": 10.0 * k, "end": 10.0 * k + 8, "frame_time": 10.0 * k + 4,
                   "start_sec": 10 * k + 4, "frame_idx": 0, "score": None} for k in range(steps)]
            r = {"sequence_id": f"{vid(i)}_0", "video_id": vid(i), "task_id": str(i % 40), "task": f"Task {i % 40}",
                 "category_1": "Food", "category_2": "Recipes", "title": f"video {i}",
                 "wikihow_title": f"Task {i % 40}",
                 "duration": 10.0 * steps, "num_steps": steps, "mean_score": None, "aligner": "middle", "steps": st}
            if with_images:
                r["images"] = [{"bytes": jpegs[(i + k) % len(jpegs)], "path": None} for k in range(steps)]
            yield r

    write_config(root, "sequences", "train", FEATURES["sequences"], rows(False))
    if images:
        write_config(root, "images", "train", FEATURES["images"], rows(True))
    write_meta(root, "showhowto", {"filter_mode": "apply"})
    return root


# ------------------------------------------------------------------------------------------------------- marc
def write_marc(root: Path, n: int, seed: int = 0, steps: int = 10) -> Path:
    """``pairwise_text_video`` with ``n`` pairs and the ``recipes`` they name."""
    from loading_scripts.marc import FEATURES

    def pairs() -> Iterator[dict]:
        rng = random.Random(seed)
        for i in range(n):
            al = [{"target_index": min(steps - 1, k + rng.choice((-1, 0, 1))) if k % 7 else -1,
                   "probability": rng.random(), "top_indices": [k], "top_probabilities": [0.5]}
                  for k in range(steps)]
            yield {"pair_id": f"dish{i % 100}:t:{i:016x}|v:{vid(i)}", "dish_id": f"dish{i % 100}", "pair_type": 1,
                   "recipe_a": f"t:{i:016x}", "recipe_b": f"v:{vid(i)}",
                   "a_instructions": [_text(rng) for _ in range(steps)],
                   "b_instructions": [_text(rng) for _ in range(steps)], "a_start": [], "a_end": [],
                   "b_start": [4.0 * k for k in range(steps)], "b_end": [4.0 * k + 3 for k in range(steps)],
                   "ingredient_match": 0.5, "a_to_b": al, "b_to_a": al, "model_a_to_b": "hmm_ibm1/x",
                   "model_b_to_a": "hmm_ibm1/y"}

    def recipes() -> Iterator[dict]:
        for i in range(n):
            for rid, modality in ((f"t:{i:016x}", 0), (f"v:{vid(i)}", 1)):
                yield {"recipe_id": rid, "dish_id": f"dish{i % 100}", "dish_name": f"Dish {i % 100}",
                       "modality": modality, "title": f"Recipe {rid}", "url": "https://example.com/" + rid,
                       "language": "en", "ingredients": [], "ingredient_terms": [], "instructions": [],
                       "step_index": [], "section": [], "start": [], "end": [], "num_chat_removed": 0,
                       "source": {"extraction": 0, "warc_filename": None, "warc_record_offset": None,
                                  "warc_record_id": None, "recipe_index_in_page": 0, "asr_source": None,
                                  "chat_classifier": None}}

    write_config(root, "pairwise_text_video", "train", FEATURES["pairwise"], pairs())
    write_config(root, "recipes", "train", FEATURES["recipes"], recipes(), batch=2 * ROW_GROUP)
    write_meta(root, "marc")
    return root


WRITERS: dict[str, Callable[..., Path]] = {"howtostep": write_howtostep, "sieve_swap": write_sieve_swap,
                                            "showhowto": write_showhowto, "marc": write_marc}
