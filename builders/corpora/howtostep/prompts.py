"""The LLM prompts of HowToStep and MPTVA as versioned package data (docs/corpora/howtostep.md).

Each prompt's text lives in ``prompts/<id>.txt`` (verbatim, no trailing newline) and is sent as ONE user turn, no
system message, the transcript following the prompt after one newline (toolkit reading of Li et al., ECCV 2024, supp.
Table 6; MPTVA's joining is unstated, the same is used). ``version`` = first 12 hex digits of the sha256 of the text
(for the package files, equal to the hash of the file's bytes); it enters the LLM request-cache key and the provenance.

- ``howtostep_v3`` (default): Li et al., ECCV 2024, supplementary
  Table 6, third row, the chosen prompt (43.7 HT-Step R@1); input: the ASR transcript (sentences joined by a space).
- ``howtostep_v1_ts``: Table 6, first row (19.6 R@1); input carries timestamps, the LLM begins every sentence with an
  estimated timestamp (labeler ``llm_timestamps``); it asks for no numbers, so the parser's line fallback applies.
- ``howtostep_v2_ts``: Table 6, second row (its score is not legible in the paper text we used); timestamped input,
  numbered steps without timestamps.
- ``mptva``: Chen et al., ECCV 2024, §3.2.1, the prompt P; asks for no
  numbers.
Timestamped input lines are ``"{start:.2f} -> {end:.2f}: {text}"`` (toolkit choice).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

Sentence = tuple[str, float, float]
DEFAULT_PROMPT_ID = "howtostep_v3"

#: id -> (numbered, timestamped_input, timestamped_output); the texts are in ``prompts/<id>.txt``.
_FLAGS: dict[str, tuple[bool, bool, bool]] = {
    "howtostep_v3": (True, False, False),  # Li et al., ECCV 2024, Table 6 row 3 (chosen)
    "howtostep_v1_ts": (False, True, True),  # Li et al., ECCV 2024, Table 6 row 1
    "howtostep_v2_ts": (True, True, False),  # Li et al., ECCV 2024, Table 6 row 2
    "mptva": (False, False, False),  # Chen et al., ECCV 2024, §3.2.1
}


@dataclass(frozen=True)
class Prompt:
    """One prompt (Li et al., ECCV 2024, supp. Table 6): ``numbered`` = it asks for numbered steps (parser
    fallbacks);
    ``timestamped_input`` = transcript lines carry times; ``timestamped_output`` = steps begin with a timestamp."""

    id: str
    text: str
    numbered: bool
    timestamped_input: bool
    timestamped_output: bool
    version: str


def text_version(text: str) -> str:
    """sha256 of the UTF-8 prompt text, first 12 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _package_text(prompt_id: str) -> str:
    return (resources.files(__package__) / "prompts" / f"{prompt_id}.txt").read_text(encoding="utf-8")


def _load_builtin() -> dict[str, Prompt]:
    out = {}
    for pid, (numbered, ts_in, ts_out) in _FLAGS.items():
        text = _package_text(pid)
        out[pid] = Prompt(pid, text, numbered, ts_in, ts_out, text_version(text))
    return out


PROMPTS: dict[str, Prompt] = _load_builtin()


def load_prompt(prompt_id: str = DEFAULT_PROMPT_ID, template_path: str | Path | None = None) -> Prompt:
    """The packaged prompt ``prompt_id``; with ``template_path`` (``--prompt-template``) the file's text (surrounding
    whitespace stripped) replaces the packaged text, keeping ``prompt_id``'s flags; the id becomes
    ``f"{prompt_id}+file:{name}"`` and the version the hash of the file's text."""
    if prompt_id not in PROMPTS:
        raise ValueError(f"unknown prompt_id {prompt_id!r}; known: {', '.join(sorted(PROMPTS))}")
    base = PROMPTS[prompt_id]
    if template_path is None:
        return base
    path = Path(template_path)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"prompt template {path} cannot be read: {exc}") from exc
    if not text:
        raise ValueError(f"prompt template {path} is empty")
    return Prompt(
        f"{prompt_id}+file:{path.name}", text, base.numbered, base.timestamped_input, base.timestamped_output,
        text_version(text),
    )


def transcript_text(prompt: Prompt, sentences: list[Sentence]) -> str:
    """The chunk's transcript: sentence texts joined by one space, or, for timestamped-input prompts,
    one line ``"{start:.2f} -> {end:.2f}: {text}"`` per sentence."""
    if prompt.timestamped_input:
        return "\n".join(f"{start:.2f} -> {end:.2f}: {text.strip()}" for text, start, end in sentences)
    return " ".join(t for t in (text.strip() for text, _, _ in sentences) if t)


def render_chunk(prompt: Prompt, sentences: list[Sentence]) -> str:
    """The user message for one chunk: prompt text + ``"\\n"`` + transcript (toolkit reading)."""
    return prompt.text + "\n" + transcript_text(prompt, sentences)


def messages_for(prompt: Prompt, sentences: list[Sentence]) -> list[dict[str, str]]:
    """Chat messages for one chunk: one user turn, no system message (toolkit reading)."""
    return [{"role": "user", "content": render_chunk(prompt, sentences)}]


def input_words(sentences: list[Sentence]) -> int:
    """Whitespace words of the chunk's sentences (the ``input_words`` of ``ops.step_parser.parse_steps``)."""
    return sum(len(text.split()) for text, _, _ in sentences)


def check_config(cfg: Any) -> None:
    """The config's prompt resolves: a known ``prompt_id`` (or the labeler's own) and a readable, non-empty
    ``prompt_template``; ``ValueError`` before any work (docs/architecture.md, "Failures")."""
    prompt_id = getattr(cfg, "effective_prompt_id", None) or DEFAULT_PROMPT_ID
    load_prompt(prompt_id, getattr(cfg, "prompt_template", None))
