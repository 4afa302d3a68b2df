"""The MARC-style aligned recipe corpus (Lin et al., ACL 2020, §2-§5, A.1-A.2; docs/corpora/marc.md): the corpus
config mapped onto the steps.

Four pipelines, in run order (each stage cached per shard, so a killed build resumes):

* ``text``: Common Crawl WARC files and HTML pages -> Schema.org recipes (§2.1, :mod:`.extraction`) -> instructions,
  per-recipe instruction units and language (``recipe_instructions``), the five recipe filters, dishes and dish splits
  (§2, A.1.1) -> ingredient terms (§2.3, A.1.4) (:mod:`.text`);
* ``videos``: video candidates per dish (:mod:`.videos`) -> transcripts -> sentences -> chat/content classifier
  (A.1.3, :mod:`.chat_content`) -> videos per dish -> ingredient terms of the content sentences (:mod:`.videos`);
* ``pairs``: within-dish pairs with ingredient and length pruning (§2.3, A.1.4) -> HMM+IBM1 posteriors in both
  directions (§3.1, Eq. 1, A.2) (:mod:`.pairs`);
* ``dishes``: the instruction graph of each dish -> joint alignment (maximum spanning forest, §3.2,
  :mod:`.joint_alignment`).

Paraphrases (§5.2) and multi-step breakdowns (§5.3) are pure functions of the pairwise posteriors, computed by the
release (``marc.release``).

Per-item invalidation (README.md "Caching and resume"): a WARC record's pointer row carries the sha256 of the record's bytes
and a page of ``--pages`` keys its shard of ``read_recipe_pages`` by its content; a video's transcript (its entry of
the ``raw_caption.json`` split, or its WhisperX file) keys its shard of ``load_transcript``; the video candidates carry
their dish's name, split and size (joined from the text pipeline when listed). So editing one page or one transcript
redoes the shards holding it in the ``text`` / ``videos`` pipelines, and the global stages whose input changed:
``select_text_recipes`` (fitted again over the recipes' facts; it redoes the shards whose recipes' outcomes changed),
``video_recipe`` (the dish vocabulary: every shard again after a page edit, an intersection), ``load_transcript`` /
``chat_filter`` / ``pick_videos`` (fitted again; the classifier comes from the build's cache), and the whole ``pairs``
and ``dishes`` pipelines (HMM+IBM1 is trained by EM on every train pair, then every dish graph changes).
"""

from __future__ import annotations

from ...core.step import Pipeline
from .chat_content import ChatFilter, TranscriptSentences
from .config import MarcConfig
from .extraction import ParseRecipePages, RecipePagesSource
from .joint_alignment import DishGraphSource, JointAlignment
from .pairs import DishPairsSource, HmmIbm1Align
from .text import IngredientTerms, RecipeInstructions, SelectTextRecipes
from .videos import DishVideos, PickVideos, VideoCandidatesSource, VideoRecipe, VideoTerms

__all__ = ["pipelines", "RecipePagesSource", "ParseRecipePages", "RecipeInstructions", "SelectTextRecipes",
           "IngredientTerms", "VideoCandidatesSource", "DishVideos", "TranscriptSentences", "ChatFilter",
           "PickVideos", "VideoTerms", "VideoRecipe", "DishPairsSource", "HmmIbm1Align", "DishGraphSource",
           "JointAlignment"]


def pipelines(cfg: MarcConfig, shard_size: int = 64) -> list[Pipeline]:
    """The four pipelines of the corpus, in run order: each config key goes to the steps whose output it changes.
    Pages and pairs are cheap per item: their shards are four times larger (at most 256 items, unless ``shard_size``
    is larger)."""
    large = max(shard_size, min(256, 4 * shard_size))
    text_min_count, video_min_count = cfg.min_counts()
    return [
        Pipeline("text", RecipePagesSource(warc=list(cfg.warc), pages=cfg.pages, limit=cfg.limit), [
            ParseRecipePages(pages=cfg.pages),
            RecipeInstructions(instruction_unit=cfg.instruction_unit),
            SelectTextRecipes(instruction_unit=cfg.instruction_unit, max_title_words=cfg.max_title_words,
                              min_steps=cfg.min_steps, title_word_quantile=cfg.title_word_quantile,
                              min_recipes_per_dish=cfg.min_recipes_per_dish,
                              max_recipes_per_dish=cfg.max_recipes_per_dish, test_dishes=cfg.test_dishes,
                              validation_dishes=cfg.validation_dishes, paper_dishes=cfg.paper_dishes),
            IngredientTerms(spacy_model=cfg.spacy_model),
        ], shard_size=large),
        Pipeline("videos", VideoCandidatesSource(videos=cfg.videos), [
            DishVideos(),
            TranscriptSentences(transcripts=cfg.transcripts, require_english=cfg.require_english_transcript),
            ChatFilter(classifier=cfg.classifier, embedding_model=cfg.embedding_model,
                       chat_threshold=cfg.chat_threshold, max_video_sentences=cfg.max_video_sentences,
                       min_video_sentences=cfg.min_video_sentences, chat_model=cfg.chat_model,
                       youcook2=cfg.youcook2, youcook2_transcripts=cfg.youcook2_transcripts,
                       device=cfg.device, encode_batch_size=cfg.encode_batch_size),
            PickVideos(video_ratio=cfg.video_ratio, min_videos_per_dish=cfg.min_videos_per_dish,
                       max_videos_per_dish=cfg.max_videos_per_dish),
            VideoTerms(spacy_model=cfg.spacy_model),
            VideoRecipe(),
        ], shard_size=shard_size),
        Pipeline("pairs", DishPairsSource(text_match=cfg.text_match, video_match=cfg.video_match,
                                          max_length_ratio=cfg.max_length_ratio), [
            HmmIbm1Align(aligner=cfg.aligner, text_min_count=text_min_count, video_min_count=video_min_count,
                         tokens=cfg.tokens, spacy_model=cfg.spacy_model),
        ], shard_size=large),
        Pipeline("dishes", DishGraphSource(), [JointAlignment(edge_threshold=cfg.edge_threshold)],
                 shard_size=shard_size),
    ]
