"""The Sieve & Swap corpus (Batra et al., ECCV 2024, §4, supp. A.2, E.1): the corpus config mapped onto the steps.

Two pipelines (docs/corpora/sieve_swap.md):

* ``recipes``: RecipeNLG rows -> cleaned recipe database R (§4.2) with title and body content lemmas
  (:mod:`.recipes`);
* ``videos``: HowTo100M metadata -> video corpus V (§4.2, :mod:`.videos`) -> title sieve V¹ (Eq. 5) -> content sieve
  V² and the train/validation split (§4.2 "Sieving Videos", :mod:`.sieve`) -> swap (Eq. 6-7) -> merge (supp. A.2,
  :mod:`.swap`).

Global stages (``recipe_dedup``, ``exclusion_filter``, ``load_transcript``, ``task_size_filter``, the two sieves'
recipe index and ``swap``'s recipe-step pool) write their artefacts to their stage folder and are cached there, so a
resumed build never recomputes them. ``release`` turns the final rows into the ``default``, ``raw_asr`` and
``recipes`` configs.
"""

from __future__ import annotations

from ...core.step import Pipeline
from ...steps.howto100m import HowTo100MSource
from ...steps.transcripts import LoadTranscript
from .config import SieveSwapConfig
from .recipes import RecipeClean, RecipeDedup, RecipeLemmas, RecipeNLGSource
from .sieve import ContentSieve, TitleSieve
from .swap import Merge, Swap
from .videos import CleanTranscript, CookingFilter, DurationFilter, ExclusionFilter, TaskSizeFilter

__all__ = ["pipelines", "RecipeNLGSource", "RecipeClean", "RecipeDedup", "RecipeLemmas", "HowTo100MSource",
           "CookingFilter", "ExclusionFilter", "LoadTranscript", "DurationFilter", "TaskSizeFilter",
           "CleanTranscript", "TitleSieve", "ContentSieve", "Swap", "Merge"]


#: recipes a work shard of the recipes pipeline, at least (RecipeNLG has 2.2M recipes; ``recipe_lemmas`` reuses a
#: redone shard's unchanged recipes, so an edited recipe re-lemmatises that recipe alone)
RECIPE_SHARD_SIZE = 16384


def pipelines(cfg: SieveSwapConfig, shard_size: int = 2048) -> list[Pipeline]:
    """The two pipelines of the corpus, in run order: each config key goes to the steps whose output it changes."""
    generic = cfg.generic_word_set()
    return [
        Pipeline("recipes", RecipeNLGSource(recipes=cfg.recipes), [
            RecipeClean(min_step_chars=cfg.min_step_chars),
            RecipeDedup(),
            RecipeLemmas(generic_words=generic, spacy_model=cfg.spacy_model),
        ], shard_size=max(shard_size, RECIPE_SHARD_SIZE)),
        Pipeline("videos", HowTo100MSource(videos=cfg.videos, tasks=cfg.tasks, titles=cfg.titles,
                                           durations=cfg.durations, limit=cfg.limit), [
            CookingFilter(cooking_categories=list(cfg.cooking_categories)),
            ExclusionFilter(exclude=list(cfg.exclude)),
            LoadTranscript(transcripts=cfg.transcripts),
            DurationFilter(max_duration_s=cfg.max_duration_s),
            TaskSizeFilter(min_videos_per_task=cfg.min_videos_per_task),
            CleanTranscript(require_english=cfg.require_english),
            TitleSieve(spacy_model=cfg.spacy_model, generic_words=generic, title_match=cfg.title_match,
                       title_min_shared=cfg.title_min_shared, max_title_candidates=cfg.max_title_candidates),
            ContentSieve(spacy_model=cfg.spacy_model, title_match=cfg.title_match,
                         title_min_shared=cfg.title_min_shared, max_title_candidates=cfg.max_title_candidates,
                         iou_threshold=cfg.iou_threshold,
                         recall_threshold=cfg.recall_threshold, val_iou_threshold=cfg.val_iou_threshold),
            Swap(embedding_model=cfg.embedding_model, sim_threshold=cfg.sim_threshold, top_k=cfg.top_k,
                 retrieval_pool=cfg.retrieval_pool, pool_chunk_size=cfg.pool_chunk_size,
                 sieve_settings={"iou_threshold": cfg.iou_threshold, "recall_threshold": cfg.recall_threshold,
                                 "val_iou_threshold": cfg.val_iou_threshold, "title_match": cfg.title_match},
                 device=cfg.device, encode_batch_size=cfg.encode_batch_size,
                 search_block_queries=cfg.search_block_queries, search_block_keys=cfg.search_block_keys),
            Merge(merge_max_dur_s=cfg.merge_max_dur_s, merge_max_gap_s=cfg.merge_max_gap_s),
        ], shard_size=shard_size),
    ]
