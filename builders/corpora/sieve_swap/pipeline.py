"""The Sieve & Swap corpus (Batra et al., ECCV 2024, §4, supp. A.2, E.1).

Two pipelines (docs/corpora/sieve_swap.md):

* ``recipes``: RecipeNLG rows -> cleaned recipe database R (§4.2) with title and body content lemmas;
* ``videos``: HowTo100M metadata -> video corpus V (§4.2) -> title sieve V¹ (Eq. 5) -> content sieve V² and the
  train/validation split (§4.2 "Sieving Videos") -> swap (Eq. 6-7) -> merge (supp. A.2).

Global stages (``recipe_dedup``, ``exclusion_filter``, ``load_transcript``, ``task_size_filter``, the two sieves'
recipe index and ``swap``'s recipe-step pool) write their artefacts to their stage folder and are cached there, so a
resumed build never recomputes them. ``release`` turns the final rows into the ``default``, ``raw_asr`` and
``recipes`` configs.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ... import __version__ as TOOLKIT_VERSION
from ...core.artefacts import artefact_dir, load_arrays, load_json, save_arrays, save_json
from ...core.fingerprint import hash_obj
from ...core.records import Count, Drop, Out, Row
from ...core.step import FitInputs, Pipeline, Source, Step, gpus_for_device
from ...ops import merge as merge_ops
from ...ops import sieve as sieve_ops
from ...ops import swap as swap_ops
from ...ops.text import clean, has_alpha
from ...sources import exclusions, howto100m, recipenlg, transcripts
from .config import SieveSwapConfig

# ============================================================================ recipes pipeline (R)
class RecipeNLGSource(Source):
    """RecipeNLG ``full_dataset.csv`` streamed row by row (docs/corpora/sieve_swap.md, Inputs)."""

    name = "read_recipes"
    config_keys = ("recipes",)
    input_keys = ("recipes",)
    #: a row holds the recipe's values: an edited recipe file is listed again into the same folder, and the recipe
    #: stages redo only the shards whose recipes changed
    rows_carry_content = True

    def read(self) -> Iterator[Row | Drop | Count]:
        yield from recipenlg.read_recipenlg(self.cfg.recipes)


class RecipeClean(Step):
    """Clean titles and steps; drop recipes with no title or no step of >= ``min_step_chars`` characters."""

    name = "recipe_clean"
    config_keys = ("min_step_chars",)
    id_field = "recipe_id"

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            title = clean(r["title"])
            steps = [s for s in (clean(d) for d in r["directions"]) if len(s) >= self.cfg.min_step_chars]
            if not title or not has_alpha(title):
                out.drop(r["recipe_id"], "no_title", repr(r["title"])[:80])
            elif not steps:
                out.drop(r["recipe_id"], "no_directions", f"{len(r['directions'])} raw steps")
            else:
                out.keep({**r, "title": title, "directions": steps})


def _dedup_key(r: Row) -> str:
    from ...core.fingerprint import hash_obj

    return hash_obj(" ".join(r["title"].casefold().split()), r["directions"])


class RecipeDedup(Step):
    """Exact duplicates (casefolded, whitespace-collapsed title and same cleaned steps) keep the lowest id
    (docs/corpora/sieve_swap.md, Pipeline step 2).

    Global stage: ``fit`` writes the duplicates (recipe id -> the id it repeats) as the artefact ``duplicates.npz``."""

    name = "recipe_dedup"
    version = "2"
    id_field = "recipe_id"
    config_keys = ()

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        first: dict[str, int] = {}
        ids, keys = [], []
        for r in inputs.data.rows(["recipe_id", "title", "directions"]):
            k = _dedup_key(r)
            ids.append(r["recipe_id"])
            keys.append(k)
            if k not in first or r["recipe_id"] < first[k]:
                first[k] = r["recipe_id"]
        dup = sorted((i, first[k]) for i, k in zip(ids, keys) if first[k] != i)
        save_arrays(inputs.artefact_dir, "duplicates", {"recipe_id": np.asarray([d[0] for d in dup], np.int64),
                                                        "keeper": np.asarray([d[1] for d in dup], np.int64)})
        # the digest of the artefact: a changed duplicate table redoes every shard (the state keys them)
        return {"duplicates": len(dup), "digest": hash_obj(dup)}

    def setup(self, state: Any) -> None:
        a = load_arrays(artefact_dir(state), "duplicates")
        self.dup_ids, self.keepers = a["recipe_id"], a["keeper"]

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            j = int(np.searchsorted(self.dup_ids, r["recipe_id"]))
            if j < len(self.dup_ids) and self.dup_ids[j] == r["recipe_id"]:
                out.drop(r["recipe_id"], "duplicate_recipe", f"duplicate of recipe {int(self.keepers[j])}")
            else:
                out.keep(r)


class RecipeLemmas(Step):
    """``title_lemmas(r) = content_lemmas(title) - generic_words``, ``body_lemmas(r)`` over all steps (Batra et al.,
    ECCV 2024, Eq. 5, §4.2)."""

    name = "recipe_lemmas"
    id_field = "recipe_id"
    config_keys = ("generic_words", "spacy_model")

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        self.lemmatize = ContentLemmatizer(self.cfg.spacy_model)
        self.generic = self.cfg.generic_word_set()

    def process(self, rows: list[Row], out: Out) -> None:
        titles = self.lemmatize([r["title"] for r in rows])
        bodies = self.lemmatize([" ".join(r["directions"]) for r in rows])
        for r, t, b in zip(rows, titles, bodies):
            out.keep({**r, "title_lemmas": sorted(t - self.generic), "body_lemmas": sorted(b)})


# ============================================================================ videos pipeline (V to swap)
class HowTo100MSource(Source):
    """HowTo100M metadata joined with task names, titles and durations (docs/corpora/sieve_swap.md, Inputs)."""

    name = "read_metadata"
    config_keys = ("videos", "tasks", "titles", "durations", "limit")
    input_keys = ("videos", "tasks", "titles", "durations")
    #: a row holds every value its video gets from these files (metadata, task name, title, duration): an edit is
    #: listed again into the same folder and only the shards whose rows changed are redone downstream
    rows_carry_content = True

    def read(self) -> Iterator[Row | Drop | Count]:
        cfg = self.cfg
        tasks: dict[int, str] = {}
        titles: dict[str, str] = {}
        durations: dict[str, float] = {}
        if cfg.tasks:
            tasks, bad = howto100m.read_task_ids(cfg.tasks)
            yield from bad
        if cfg.titles:
            titles, bad = howto100m.read_titles(cfg.titles)
            yield from bad
        if cfg.durations:
            durations, bad = howto100m.read_durations(cfg.durations)
            yield from bad
        n = 0
        for rec in howto100m.read_metadata(cfg.videos):
            if cfg.limit is not None and n >= cfg.limit:
                break
            n += 1
            if isinstance(rec, Drop):
                yield rec
                continue
            vid = rec["video_id"]
            task_name = tasks.get(rec["task_id"])
            if task_name is None:
                yield Count("unknown_task_id")
                task_name = ""
            title = titles.get(vid)
            duration = durations.get(vid)
            yield {
                **rec,
                "task_name": task_name,
                "title": title if title else task_name,
                "title_source": "youtube_title" if title else "task_name",
                "duration": duration,
                "duration_source": "metadata" if duration is not None else "asr_last_end",
            }


class CookingFilter(Step):
    """Video corpus step 1: keep ``category_1`` in ``cooking_categories`` (paper §4.2: all HowTo100M cooking videos)."""

    name = "cooking_filter"
    id_field = "video_id"
    config_keys = ("cooking_categories",)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["category_1"] in self.cfg.cooking_categories:
                out.keep(r)
            else:
                out.drop(r["video_id"], "not_cooking", r["category_1"])


class ExclusionFilter(Step):
    """Video corpus step 2: drop excluded ids (YouCook2, paper supp. E.1) and later duplicate rows of a video id.

    Global stage: the exclusion files (their contents key the cache) and the repeated rows (row -> first row of the
    same id) are written as artefacts ``excluded.json`` and ``repeats.npz``."""

    name = "exclusion_filter"
    version = "2"
    id_field = "video_id"
    config_keys = ("exclude",)
    input_keys = ("exclude",)
    #: the lists key ``fit`` only, not the stage folder: the excluded ids are in the fitted state (its digest), which
    #: keys every shard, so an edited list redoes this stage's shards (a look-up) and later only the videos it moves
    item_input_keys = ("exclude",)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        first: dict[str, int] = {}
        ords: list[tuple[str, int]] = []
        for r in inputs.data.rows(["video_id", "_ord"]):
            ords.append((r["video_id"], r["_ord"]))
            first[r["video_id"]] = min(first.get(r["video_id"], r["_ord"]), r["_ord"])
        repeats = sorted((o, first[v]) for v, o in ords if first[v] != o)
        save_arrays(inputs.artefact_dir, "repeats", {"ord": np.asarray([x[0] for x in repeats], np.int64),
                                                     "first": np.asarray([x[1] for x in repeats], np.int64)})
        excluded = sorted(exclusions.read_exclusion_ids(self.cfg.exclude))
        save_json(inputs.artefact_dir, "excluded", excluded)
        return {"excluded": len(excluded), "repeated_rows": len(repeats), "digest": hash_obj(excluded, repeats)}

    def setup(self, state: Any) -> None:
        root = artefact_dir(state)
        self.excluded = set(load_json(root, "excluded"))
        a = load_arrays(root, "repeats")
        self.repeat_ords, self.repeat_first = a["ord"], a["first"]

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            vid = r["video_id"]
            j = int(np.searchsorted(self.repeat_ords, r["_ord"]))
            if vid in self.excluded:
                out.drop(vid, "excluded_id")
            elif j < len(self.repeat_ords) and self.repeat_ords[j] == r["_ord"]:
                out.drop(vid, "duplicate_video_row", f"row {r['_ord']} repeats row {int(self.repeat_first[j])}")
            else:
                out.keep(r)


class LoadTranscript(Step):
    """Attach the raw ASR segments (docs/corpora/sieve_swap.md, Inputs). Errors are recorded on the row and turned into
    drops by ``clean_transcript``, after the duration and task-size filters, so those count videos as the paper does.
    A video with no metadata duration gets the last ASR end (``duration_source = asr_last_end``).

    Per-item input: a shard is keyed by the transcripts of its own videos only (:meth:`item_digest`: each video's
    entry of the split, or its WhisperX file), so an edit of one video's caption redoes the shard holding it, not the
    stage (the whole file's fingerprint keys the split, ``fit``, alone)."""

    name = "load_transcript"
    version = "2"
    id_field = "video_id"
    config_keys = ("transcripts",)
    input_keys = ("transcripts",)
    item_input_keys = ("transcripts",)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: a ``raw_caption.json`` is split once into blocks of the wanted videos (artefact
        ``raw_captions/``, ``transcripts.split_raw_captions``); a WhisperX directory is read in place. A split stopped
        by a JSON error is in the state (every video it did not reach is then ``malformed_transcript``), so it redoes
        every shard."""
        path = Path(self.cfg.transcripts)
        if path.is_file():
            wanted = {r["video_id"] for r in inputs.data.rows(["video_id"])}
            root = inputs.artefact_dir / "raw_captions"
            transcripts.split_raw_captions(path, root, wanted)
            index = transcripts.SplitIndex(root)
            index.close()
            return {"kind": "raw", "root": "raw_captions", "split_error": index.error}
        return {"kind": "whisperx", "root": None}

    def item_digest(self, rows: list[Row], state: Any, memo: Any) -> str:
        vids = [r["video_id"] for r in rows]
        root = artefact_dir(state) / state["root"] if state["kind"] == "raw" else None
        return hash_obj(vids, transcripts.transcript_item_digests(vids, root, self.cfg.transcripts, memo))

    def setup(self, state: Any) -> None:
        self.state = state
        if state["kind"] == "raw":
            self.store = transcripts.RawCaptionStore(str(artefact_dir(state) / state["root"]))
        else:
            self.store = transcripts.WhisperXStore(str(self.cfg.transcripts))

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


class DurationFilter(Step):
    """Video corpus step 3: keep ``duration <= max_duration_s`` (paper §4.2: "a maximum duration of 10 minutes")."""

    name = "duration_filter"
    id_field = "video_id"
    config_keys = ("max_duration_s",)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            d = r["duration"]
            if d is not None and d > self.cfg.max_duration_s:
                out.drop(r["video_id"], "too_long", f"{d:.1f} s ({r['duration_source']})")
            else:
                out.keep(r)


class TaskSizeFilter(Step):
    """Video corpus step 4: keep tasks with >= ``min_videos_per_task`` videos surviving steps 1-3 (paper §4.2: "a
    minimum of five videos per cooking category"). The result is the paper's corpus V."""

    name = "task_size_filter"
    id_field = "video_id"
    config_keys = ("min_videos_per_task",)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        counts = Counter(r["task_id"] for r in inputs.data.rows(["task_id"]))
        table = {str(k): v for k, v in sorted(counts.items())}
        save_json(inputs.artefact_dir, "videos_per_task", table)
        return {"tasks": len(counts), "digest": hash_obj(table)}

    def setup(self, state: Any) -> None:
        self.per_task = {int(k): v for k, v in load_json(artefact_dir(state), "videos_per_task").items()}

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            n = self.per_task.get(r["task_id"], 0)
            if n < self.cfg.min_videos_per_task:
                out.drop(r["video_id"], "small_task", f"task {r['task_id']} has {n} videos")
            else:
                out.keep(r)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class CleanTranscript(Step):
    """Video corpus step 5: ``clean`` each segment, remove empty / ``end <= start`` / NaN segments (``bad_segment``),
    sort by start, clip ends to the duration; optional English check (off by default: the paper has none)."""

    name = "clean_transcript"
    version = "3"
    id_field = "video_id"
    config_keys = ("require_english",)

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            if r["asr_error"]:
                reason, _, detail = r["asr_error"].partition(": ")
                out.drop(r["video_id"], reason, detail)
                continue
            segs = []
            bad = 0
            for s in r["asr_raw"]:
                start, end, text = s["start"], s["end"], clean(s["text"] or "")
                # step 5 / docs/reason-codes.md: empty text after `clean` (e.g. only "[Music]"), garbled text (no
                # letter), NaN times or end <= start -> the segment is removed and counted
                if not (_finite(start) and _finite(end)) or end <= start or not text or not has_alpha(text):
                    bad += 1
                    continue
                segs.append({"start": float(start), "end": float(end), "text": text})
            out.count("bad_segment", bad)
            segs.sort(key=lambda s: (s["start"], s["end"]))
            duration = r["duration"]
            if duration is not None:
                inside = [{**s, "end": min(s["end"], duration)} for s in segs if s["start"] < duration]
                out.count("segment_after_duration", len(segs) - len(inside))
                segs = inside
            if not segs:
                out.drop(r["video_id"], "empty_transcript", f"{len(r['asr_raw'])} raw segments")
                continue
            if self.cfg.require_english:
                lang = r["asr_language"]
                if not lang:
                    import py3langid

                    lang = py3langid.classify(" ".join(s["text"] for s in segs))[0]
                if lang != "en":
                    out.drop(r["video_id"], "non_english_transcript", f"language {lang}")
                    continue
            row = {k: v for k, v in r.items() if k not in ("asr_raw", "asr_error", "asr_language")}
            out.keep({**row, "asr_segments": segs, "num_asr_segments": len(segs)})


class _RecipeIndexStep(Step):
    """Shared global stage of the two sieves: the recipe database as a lemma vocabulary, title index and body matrix,
    written as the artefact ``recipe_index.{npz,json}`` (``builders.ops.sieve`` ``to_state``) and loaded by path."""

    side_inputs = ("recipes",)
    version = "2"

    def fit(self, inputs: FitInputs) -> Any:
        ids, titles, bodies = [], [], []
        for r in inputs.side["recipes"].rows(["recipe_id", "title_lemmas", "body_lemmas"]):
            ids.append(r["recipe_id"])
            titles.append(r["title_lemmas"])
            bodies.append(r["body_lemmas"])
        vocab = sieve_ops.LemmaVocab()
        title_ids = [vocab.encode(t) for t in titles]
        body_ids = [vocab.encode(b) for b in bodies]
        rid = np.asarray(ids, dtype=np.int64)
        arrays: dict[str, np.ndarray] = {"recipe_ids": rid}
        meta: dict[str, Any] = {}
        for key, obj in (("vocab", vocab), ("titles", sieve_ops.TitleIndex(rid, title_ids, vocab_size=len(vocab))),
                         ("bodies", sieve_ops.BodyMatrix(body_ids, vocab_size=len(vocab)))):
            a, m = obj.to_state()
            arrays.update(a)
            meta[key] = m
        save_arrays(inputs.artefact_dir, "recipe_index", arrays, meta)
        return {"recipes": len(ids), "lemmas": len(vocab)}

    def setup(self, state: Any) -> None:
        from ...models.nlp import ContentLemmatizer

        arrays, meta = load_arrays(artefact_dir(state), "recipe_index", with_meta=True)
        self.state = {"vocab": sieve_ops.LemmaVocab.from_state(arrays, meta["vocab"]),
                      "titles": sieve_ops.TitleIndex.from_state(arrays, meta["titles"]),
                      "bodies": sieve_ops.BodyMatrix.from_state(arrays, meta["bodies"]),
                      "recipe_ids": arrays["recipe_ids"]}
        self.lemmatize = ContentLemmatizer(self.cfg.spacy_model)
        self.row_of = {int(r): i for i, r in enumerate(arrays["recipe_ids"])}


class TitleSieve(_RecipeIndexStep):
    """Eq. 5: pair each video with the recipes whose title shares a content lemma (generic words removed)."""

    name = "title_sieve"
    id_field = "video_id"
    config_keys = ("generic_words", "title_match", "title_min_shared", "max_title_candidates", "spacy_model")

    def process(self, rows: list[Row], out: Out) -> None:
        generic = self.cfg.generic_word_set()
        vocab: sieve_ops.LemmaVocab = self.state["vocab"]
        for r, lem in zip(rows, self.lemmatize([r["title"] for r in rows])):
            lemmas = sorted(lem - generic)
            if not lemmas:
                out.drop(r["video_id"], "no_title_content_words", r["title"][:120])
                continue
            cand_rows, shared, truncated = self.state["titles"].candidates(
                vocab.encode(lemmas, add=False), mode=self.cfg.title_match, min_shared=self.cfg.title_min_shared,
                max_candidates=self.cfg.max_title_candidates)
            if truncated:
                out.count("title_candidates_truncated")
            if len(cand_rows) == 0:
                out.drop(r["video_id"], "no_title_match", " ".join(lemmas)[:120])
                continue
            out.count("title_pairs", len(cand_rows))
            out.keep({**r, "title_lemmas": lemmas,
                      "candidate_recipe_ids": self.state["recipe_ids"][cand_rows].tolist()})


class ContentSieve(_RecipeIndexStep):
    """Content sieve (Batra et al., ECCV 2024, §4.2 "Sieving Videos"): keep pairs with token-IoU >= 0.1 and token-recall
    >= 0.3 over content lemmas of the whole transcript vs the recipe's steps; split validation iff max IoU >= 0.2."""

    name = "content_sieve"
    id_field = "video_id"
    config_keys = ("iou_threshold", "recall_threshold", "val_iou_threshold", "spacy_model")

    def process(self, rows: list[Row], out: Out) -> None:
        vocab: sieve_ops.LemmaVocab = self.state["vocab"]
        texts = [" ".join(s["text"] for s in r["asr_segments"]) for r in rows]
        for r, lem in zip(rows, self.lemmatize(texts)):
            cand = np.asarray([self.row_of[i] for i in r["candidate_recipe_ids"]], dtype=np.int64)
            iou, recall = self.state["bodies"].scores(cand, vocab.encode(lem, add=False), video_size=len(lem))
            keep = sieve_ops.content_sieve(iou, recall, self.cfg.iou_threshold, self.cfg.recall_threshold)
            if not keep.any():
                best = int(np.argmax(iou)) if len(iou) else -1
                detail = f"best iou {iou[best]:.3f} recall {recall[best]:.3f}" if best >= 0 else "no candidates"
                out.drop(r["video_id"], "content_sieve_failed", detail)
                continue
            ids = np.asarray(r["candidate_recipe_ids"], dtype=np.int64)[keep]
            k_iou, k_rec = iou[keep], recall[keep]
            order = np.lexsort((ids, -k_iou))  # token_iou desc, then recipe id
            max_iou = float(k_iou.max())
            out.count("kept_pairs", int(keep.sum()))
            row = {k: v for k, v in r.items() if k != "candidate_recipe_ids"}
            out.keep({**row, "recipe_ids": ids[order].tolist(),
                      "recipe_token_iou": k_iou[order].astype(float).tolist(),
                      "recipe_token_recall": k_rec[order].astype(float).tolist(),
                      "max_token_iou": max_iou,
                      "split": sieve_ops.split_for(max_iou, self.cfg.val_iou_threshold)})


class Swap(Step):
    """Eq. 6-7: replace each ASR segment by its nearest recipe step (cosine of sentence embeddings, MPNet in the
    paper) when the similarity is >= lambda_sim = 0.75; discard it otherwise. The pool is every step of R²
    (``global``, literal Eq. 6) or the video's own kept recipes (``paired``)."""

    name = "swap"
    version = "3"
    id_field = "video_id"
    side_inputs = ("recipes",)
    uses_model = True
    config_keys = ("embedding_model", "sim_threshold", "top_k", "retrieval_pool", "pool_chunk_size")

    def gpus(self) -> float:
        return gpus_for_device(self.cfg.device)

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: embed the step pool of R² (chunks of ``pool_chunk_size`` steps cached as they finish, so a
        killed build resumes inside the pool) and write it as the artefact ``pool.npz`` + ``pool_texts.json``."""
        from ...models.embedding_cache import EmbeddingCache, encode_set_cached
        from ...models.text_encoder import get_encoder

        r2 = set()
        for r in inputs.data.rows(["recipe_ids"]):
            r2.update(r["recipe_ids"])
        rids, sidx, texts = [], [], []
        recipes = sorted((r for r in inputs.side["recipes"].rows(["recipe_id", "directions"])
                          if r["recipe_id"] in r2), key=lambda r: r["recipe_id"])
        for r in recipes:
            for j, step in enumerate(r["directions"]):
                rids.append(r["recipe_id"])
                sidx.append(j)
                texts.append(step)
        cache_path = str(Path(inputs.cache_dir) / "embeddings.sqlite")
        encoder = get_encoder(self.cfg.embedding_model, self.cfg.device, self.cfg.encode_batch_size)
        cache = EmbeddingCache(cache_path)
        keys = encode_set_cached(encoder, texts, cache, chunk_size=self.cfg.pool_chunk_size)
        cache.close()
        save_arrays(inputs.artefact_dir, "pool", {"keys": keys, "recipe_ids": np.asarray(rids, dtype=np.int64),
                                                  "step_index": np.asarray(sidx, dtype=np.int32)})
        save_json(inputs.artefact_dir, "pool_texts", texts)
        # the pool (a global input of every shard): a change of R² redoes every shard
        return {"cache_path": cache_path, "model_id": encoder.model_id, "pool_steps": len(texts),
                "pool_digest": hash_obj(rids, sidx, texts)}

    def setup(self, state: Any) -> None:
        from ...models.embedding_cache import EmbeddingCache
        from ...models.text_encoder import get_encoder

        root = artefact_dir(state)
        self.state = {**state, **load_arrays(root, "pool"), "texts": load_json(root, "pool_texts")}
        self.encoder = get_encoder(self.cfg.embedding_model, self.cfg.device, self.cfg.encode_batch_size)
        self.cache = EmbeddingCache(state["cache_path"])

    def teardown(self) -> None:
        from ...models.text_encoder import release_encoder

        release_encoder(self.cfg.embedding_model, self.cfg.device, self.cfg.encode_batch_size)
        cache = getattr(self, "cache", None)
        if cache is not None:
            cache.close()
            self.cache = None
        self.encoder = None

    def _search(self, queries: np.ndarray, pool_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        keys = self.state["keys"] if pool_rows is None else self.state["keys"][pool_rows]
        sims, idx = swap_ops.topk_search(queries, keys, self.cfg.top_k, self.cfg.search_block_queries,
                                         self.cfg.search_block_keys)
        if pool_rows is not None:
            idx = np.where(idx >= 0, pool_rows[np.maximum(idx, 0)], -1)
        return sims, idx

    def process(self, rows: list[Row], out: Out) -> None:
        from ...models.embedding_cache import encode_set_cached

        st = self.state
        texts = [s["text"] for r in rows for s in r["asr_segments"]]
        emb = encode_set_cached(self.encoder, texts, self.cache)
        if self.cfg.retrieval_pool == "global":
            sims, idx = self._search(emb, None)
        offset = 0
        provenance = {
            "builder_version": TOOLKIT_VERSION, "embedding_model": st["model_id"],
            "sim_threshold": self.cfg.sim_threshold, "iou_threshold": self.cfg.iou_threshold,
            "recall_threshold": self.cfg.recall_threshold, "val_iou_threshold": self.cfg.val_iou_threshold,
            "title_match": self.cfg.title_match, "retrieval_pool": self.cfg.retrieval_pool, "top_k": self.cfg.top_k}
        for r in rows:
            n = len(r["asr_segments"])
            if self.cfg.retrieval_pool == "global":
                v_sims, v_idx = sims[offset:offset + n], idx[offset:offset + n]
            else:
                pool_rows = np.flatnonzero(np.isin(st["recipe_ids"], np.asarray(r["recipe_ids"], dtype=np.int64)))
                v_sims, v_idx = self._search(emb[offset:offset + n], pool_rows)
            offset += n
            keep = swap_ops.swap_decisions(v_sims[:, 0], self.cfg.sim_threshold)
            kept, discarded = [], []
            for j, seg in enumerate(r["asr_segments"]):
                if not keep[j]:
                    discarded.append(j)
                    continue
                cands = [{"text": st["texts"][c], "recipe_id": int(st["recipe_ids"][c]),
                          "step_index": int(st["step_index"][c]), "similarity": float(s)}
                         for s, c in zip(v_sims[j], v_idx[j]) if c >= 0]
                top = cands[0]
                kept.append({"start": seg["start"], "end": seg["end"], "text": top["text"],
                             "recipe_id": top["recipe_id"], "step_index": top["step_index"],
                             "similarity": top["similarity"], "candidates": cands, "asr_text": seg["text"],
                             "asr_index": j})
            out.count("segments_swapped", len(kept))
            out.count("segments_discarded", len(discarded))
            if not kept:
                best = float(v_sims[:, 0].max()) if n else float("nan")
                out.drop(r["video_id"], "no_swapped_segments", f"best similarity {best:.3f} of {n} segments")
                continue
            out.keep({**r, "swapped": kept, "discarded_asr_indices": discarded, "provenance": provenance})


class Merge(Step):
    """Supp. A.2: merge consecutive swapped segments of the same step (each < 8 s, gap < 4 s, nothing discarded
    between them)."""

    name = "merge"
    id_field = "video_id"
    config_keys = ("merge_max_dur_s", "merge_max_gap_s")

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            segs = merge_ops.merge_segments(r["swapped"], r["discarded_asr_indices"],
                                            max_dur_s=self.cfg.merge_max_dur_s, max_gap_s=self.cfg.merge_max_gap_s)
            out.count("segments_merged_away", len(r["swapped"]) - len(segs))
            row = {k: v for k, v in r.items() if k not in ("swapped", "discarded_asr_indices")}
            out.keep({**row, "segments": segs})


def pipelines(cfg: SieveSwapConfig, shard_size: int = 64) -> list[Pipeline]:
    """The two pipelines of the corpus, in run order. Adding a stage = adding a step to one of these lists."""
    return [
        Pipeline("recipes", RecipeNLGSource(cfg),
                 [RecipeClean(cfg), RecipeDedup(cfg), RecipeLemmas(cfg)], shard_size=max(shard_size, 4096)),
        Pipeline("videos", HowTo100MSource(cfg),
                 [CookingFilter(cfg), ExclusionFilter(cfg), LoadTranscript(cfg), DurationFilter(cfg),
                  TaskSizeFilter(cfg), CleanTranscript(cfg), TitleSieve(cfg), ContentSieve(cfg), Swap(cfg),
                  Merge(cfg)], shard_size=shard_size),
    ]
