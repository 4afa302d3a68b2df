"""The swap (Batra et al., ECCV 2024, Eq. 6-7) and the merge of consecutive swapped segments (supp. A.2)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__ as TOOLKIT_VERSION
from ...core.artefacts import artefact_dir, load_arrays, load_json, save_arrays, save_json
from ...core.fingerprint import hash_obj
from ...core.records import Out, Row
from ...core.step import FitInputs, Requirement, Resources, Step, execution_setting, gpus_for_device
from ...ops import merge as merge_ops
from ...ops import swap as swap_ops

log = logging.getLogger(__name__)

#: the pool matrix (an artefact of the fit) and the folder of its embedding blocks (under the work cache)
POOL = "pool_keys.npy"
POOL_BLOCKS = "pool_blocks"


@dataclass(eq=False)
class Swap(Step):
    """Eq. 6-7: replace each ASR segment by its nearest recipe step (cosine of sentence embeddings, MPNet in the
    paper) when the similarity is >= lambda_sim = 0.75; discard it otherwise. The pool is every step of R²
    (``global``, literal Eq. 6) or the video's own kept recipes (``paired``). ``sieve_settings`` (the sieves'
    thresholds) are written into each row's provenance.

    Row-wise (builders/core/row_reuse.py): a video's swap depends on its row, the parameters and the pool alone, so a
    redone shard swaps only its changed videos, in one call. For that, each video's segments are embedded in an
    encoder call of their own (cached per video): a transformer's last bits depend on the padded batch a text is
    encoded in, so embedding a shard's segments together would make a video's similarities depend on its shard
    mates. The global search stays one blocked matrix product over all the videos' segments (its rows do not depend
    on the other rows, except through the matrix-vector path of a one-row product, which is never taken)."""

    name = "swap"
    version = "5"
    id_field = "video_id"
    row_wise = True
    row_wise_batch = True
    side_inputs = ("recipes",)
    reads = {"video_id": str, "asr_segments": list, "recipe_ids": list}
    writes = {"swapped": list, "discarded_asr_indices": list, "provenance": dict}
    requires = (Requirement("sentence_transformers", "embed"),)

    embedding_model: str
    sim_threshold: float
    top_k: int
    retrieval_pool: str
    pool_chunk_size: int
    sieve_settings: dict[str, Any]
    device: str = execution_setting("cpu")
    encode_batch_size: int = execution_setting(64)
    search_block_queries: int = execution_setting(2048)
    search_block_keys: int = execution_setting(16384)

    def resources(self) -> Resources:
        return Resources(gpus=gpus_for_device(self.device))

    def fit(self, inputs: FitInputs) -> dict[str, Any]:
        """Global stage: embed the step pool of R² in content-keyed blocks of about ``pool_chunk_size`` distinct
        steps (cached on disk as they finish, so a killed build resumes inside the pool and one added step embeds
        one block again) and assemble it as the artefact ``pool_keys.npy`` (+ ``pool.npz``: recipe ids and step
        indices, ``pool_texts.json``), which every worker memory-maps."""
        from ...models.embedding_cache import PoolBlocks, encode_pool
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
        del recipes
        cache_dir = Path(inputs.cache_dir)
        encoder = get_encoder(self.embedding_model, self.device, self.encode_batch_size)
        digest = encode_pool(encoder, texts, PoolBlocks(cache_dir / POOL_BLOCKS), Path(inputs.artefact_dir) / POOL,
                             chunk_size=self.pool_chunk_size)
        save_arrays(inputs.artefact_dir, "pool", {"recipe_ids": np.asarray(rids, dtype=np.int64),
                                                  "step_index": np.asarray(sidx, dtype=np.int32)})
        save_json(inputs.artefact_dir, "pool_texts", texts)
        # the pool (a global input of every shard): a change of R² redoes every shard
        return {"cache_path": str(cache_dir / "embeddings.sqlite"), "model_id": encoder.model_id,
                "pool_steps": len(texts), "pool_sha256": digest, "pool_digest": hash_obj(rids, sidx, texts)}

    def setup(self, state: Any) -> None:
        from ...models.embedding_cache import EmbeddingCache
        from ...models.text_encoder import get_encoder

        root = artefact_dir(state)
        self.state = {**state, **load_arrays(root, "pool"), "texts": load_json(root, "pool_texts")}
        self.encoder = get_encoder(self.embedding_model, self.device, self.encode_batch_size)
        self.state["keys"] = self._map_pool(root)
        self.cache = EmbeddingCache(state["cache_path"])

    def _map_pool(self, root: Path) -> np.ndarray:
        """The pool matrix memory-mapped (one copy a machine, in the page cache), checked as read; a damaged or
        missing one is assembled again from the embedding blocks (those damaged too are encoded again)."""
        from ...core.errors import DamagedCache
        from ...models.embedding_cache import PoolBlocks, encode_pool, open_pool

        st, path = self.state, root / POOL
        try:
            return open_pool(path, st["pool_sha256"], st["pool_steps"])
        except (DamagedCache, FileNotFoundError) as err:
            log.warning("swap pool %s %s: assembled again from its embedding blocks", path,
                        f"damaged ({err.why})" if isinstance(err, DamagedCache) else "missing")
        blocks = PoolBlocks(Path(st["cache_path"]).parent / POOL_BLOCKS)
        digest = encode_pool(self.encoder, st["texts"], blocks, path, chunk_size=self.pool_chunk_size)
        return open_pool(path, digest, st["pool_steps"])

    def teardown(self) -> None:
        from ...models.text_encoder import release_encoder

        release_encoder(self.embedding_model, self.device, self.encode_batch_size)
        cache = getattr(self, "cache", None)
        if cache is not None:
            cache.close()
            self.cache = None
        self.encoder = None

    def _search(self, queries: np.ndarray, pool_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        keys = self.state["keys"] if pool_rows is None else self.state["keys"][pool_rows]
        sims, idx = swap_ops.topk_search(queries, keys, self.top_k, self.search_block_queries,
                                         self.search_block_keys)
        if pool_rows is not None:
            idx = np.where(idx >= 0, pool_rows[np.maximum(idx, 0)], -1)
        return sims, idx

    def _rows_of(self, recipe_ids: list[int]) -> np.ndarray:
        """The pool rows of ``recipe_ids`` in pool order (the pool is sorted by recipe id: two binary searches a
        recipe, no scan of the pool)."""
        ids = np.unique(np.asarray(recipe_ids, dtype=np.int64))
        pool_ids = self.state["recipe_ids"]
        lo, hi = np.searchsorted(pool_ids, ids, "left"), np.searchsorted(pool_ids, ids, "right")
        if not ids.size:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())])

    def _embed(self, rows: list[Row]) -> np.ndarray:
        """The ASR segments of ``rows``, in order, each video's embedded in one encoder call of its own (cached under
        the set of that video's distinct texts): a video's vectors never depend on the other rows."""
        from ...models.embedding_cache import encode_set_cached

        parts = [encode_set_cached(self.encoder, [s["text"] for s in r["asr_segments"]], self.cache) for r in rows]
        parts = [p for p in parts if len(p)]
        return np.concatenate(parts) if parts else np.zeros((0, self.encoder.dim), dtype=np.float32)

    def _search_all(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The global search of every segment of a batch at once. A one-row product would take BLAS's
        matrix-vector path, whose last bits differ from the matrix-matrix one: one segment is searched as two rows."""
        if len(emb) != 1:
            return self._search(emb, None)
        sims, idx = self._search(np.concatenate([emb, emb]), None)
        return sims[:1], idx[:1]

    def process(self, rows: list[Row], out: Out) -> None:
        st = self.state
        emb = self._embed(rows)
        if self.retrieval_pool == "global":
            sims, idx = self._search_all(emb)
        offset = 0
        provenance = {
            "builder_version": TOOLKIT_VERSION, "embedding_model": st["model_id"],
            "sim_threshold": self.sim_threshold, "iou_threshold": self.sieve_settings["iou_threshold"],
            "recall_threshold": self.sieve_settings["recall_threshold"],
            "val_iou_threshold": self.sieve_settings["val_iou_threshold"],
            "title_match": self.sieve_settings["title_match"], "retrieval_pool": self.retrieval_pool,
            "top_k": self.top_k}
        for r in rows:
            out.item = r["video_id"]  # its counters are its own (row_wise_batch)
            n = len(r["asr_segments"])
            if self.retrieval_pool == "global":
                v_sims, v_idx = sims[offset:offset + n], idx[offset:offset + n]
            else:
                pool_rows = self._rows_of(r["recipe_ids"])
                v_sims, v_idx = self._search(emb[offset:offset + n], pool_rows)
            offset += n
            keep = swap_ops.swap_decisions(v_sims[:, 0], self.sim_threshold)
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
        out.item = None


@dataclass(eq=False)
class Merge(Step):
    """Supp. A.2: merge consecutive swapped segments of the same step (each < 8 s, gap < 4 s, nothing discarded
    between them)."""

    name = "merge"
    id_field = "video_id"
    reads = {"swapped": list, "discarded_asr_indices": list}
    writes = {"segments": list}
    removes = ("swapped", "discarded_asr_indices")

    merge_max_dur_s: float
    merge_max_gap_s: float

    def process(self, rows: list[Row], out: Out) -> None:
        for r in rows:
            segs = merge_ops.merge_segments(r["swapped"], r["discarded_asr_indices"],
                                            max_dur_s=self.merge_max_dur_s, max_gap_s=self.merge_max_gap_s)
            out.count("segments_merged_away", len(r["swapped"]) - len(segs))
            row = {k: v for k, v in r.items() if k not in ("swapped", "discarded_asr_indices")}
            out.keep({**row, "segments": segs})
