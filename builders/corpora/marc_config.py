"""Config of the MARC-style aligned recipe corpus builder: every default is the paper's
(``../shared/papers/002_dcd14287402b909e.txt``) or the spec's (``../shared/specs/marc.md`` §3), overridable with
``--config file.yaml`` / ``--set key=value``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.config import ConfigError


@dataclass(frozen=True)
class MarcConfig:
    # ---- inputs (spec §2); all empty = the bundled sample
    warc: list[str] = field(default_factory=list)       # WARC files or directories (§2.1)
    pages: str | None = None                             # a directory of <key>.html[.gz] pages (§2.1)
    videos: str | None = None                            # video_candidates.jsonl (§2.3)
    transcripts: str | None = None                       # raw_caption.json or a WhisperX json directory (§2.3)
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
    classifier: str = "logreg"                           # offline default; "lstm" = the paper's model
    chat_threshold: float = 0.5
    max_video_sentences: int = 100
    min_video_sentences: int = 2
    embedding_model: str = "minilm"
    # ---- §3.6 pairs and pruning (§2.3, A.1.4)
    text_match: float = 0.70                             # text-text and text-video ingredient overlap
    video_match: float = 0.90                            # video-video
    max_length_ratio: float = 2.0                        # text-text: one recipe at most twice the other
    # ---- §3.7 HMM + IBM1 (Eq. 1, A.2)
    aligner: str = "best"                                # "best" (documented preset) or "paper"
    text_min_count: int = 5                              # vocabulary cut-offs over the train split
    video_min_count: int = 15
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
        if self.aligner not in ("best", "paper"):
            raise ConfigError(f"aligner must be 'best' or 'paper', got {self.aligner!r}")
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
