"""The two ShowHowTo prompts as versioned package data (docs/corpora/showhowto.md; Souček et al., CVPR 2025, App. A,
Fig. 19 (filter) and Fig. 20 (key steps)).

The texts in ``prompts/<id>.txt`` are the project's own writing after the layout the paper's figures and the upstream
prompt file show (task definition, example titles, four worked examples, the query; instructions, two worked examples
with timestamped transcripts and their JSON, the query ending in an opened ```` ```json ```` fence). Their few-shot
examples are our own; the fixture's real transcripts stay test inputs.

Placeholders: ``{title}`` and ``{transcript}`` (exact tokens, replaced by plain substitution so the JSON braces of the
examples stay as they are). ``--prompt-template`` / ``--filter-prompt-template`` substitute a user's file (for
instance the authors' released prompts rewritten with these two placeholders); its id becomes
``<id>+file:<name>``. ``version`` = the first 12 hex digits of the text's sha256; id and version enter the LLM
request-cache key and the card.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ...ops.keystep_parsing import render_transcript_block, render_transcript_text

FILTER_PROMPT_ID = "filter_v1"
KEYSTEPS_PROMPT_ID = "keysteps_v1"
PLACEHOLDERS = ("{title}", "{transcript}")
MAX_TEMPLATE_BYTES = 1 << 20

#: the target JSON shape of upstream's key-step prompt (``soCzech/ShowHowTo``): ``[{"WikiHow Title": str}, {"steps":
#: [{step, instruction, start_timestamp, end_timestamp}, ...]}]``; used for vLLM structured outputs
#: (``constrained_json``) only, the parser is the same.
KEYSTEPS_JSON_SCHEMA: dict[str, Any] = {
    "type": "array", "minItems": 2, "maxItems": 2,
    "prefixItems": [
        {"type": "object", "properties": {"WikiHow Title": {"type": "string"}}, "required": ["WikiHow Title"],
         "additionalProperties": False},
        {"type": "object", "required": ["steps"], "additionalProperties": False,
         "properties": {"steps": {"type": "array", "minItems": 1, "items": {
             "type": "object", "additionalProperties": False,
             "required": ["step", "instruction", "start_timestamp", "end_timestamp"],
             "properties": {"step": {"type": "integer"}, "instruction": {"type": "string", "minLength": 1},
                            "start_timestamp": {"type": "number"}, "end_timestamp": {"type": "number"}}}}}},
    ],
    "items": False,
}


def keysteps_schema(max_steps: int = 26) -> dict[str, Any]:
    """:data:`KEYSTEPS_JSON_SCHEMA` with at most ``max_steps`` steps (the paper's longest sequence has 26)."""
    steps = dict(KEYSTEPS_JSON_SCHEMA["prefixItems"][1]["properties"]["steps"], maxItems=int(max_steps))
    second = dict(KEYSTEPS_JSON_SCHEMA["prefixItems"][1], properties={"steps": steps})
    return {**KEYSTEPS_JSON_SCHEMA, "prefixItems": [KEYSTEPS_JSON_SCHEMA["prefixItems"][0], second]}


def keysteps_regex(max_steps: int = 26) -> str:
    """The same shape as a regular expression (SmolLM2's guided decoding, ``builders.models.llm``): the two-element
    list, 1..``max_steps`` steps, strings of at most 300 characters, numbers with at most 3 decimals, bounded
    whitespace (so a model cannot loop on blanks)."""
    ws = r"[ \n]{0,4}"
    string = r'"(?:[^"\\\n]|\\.){1,300}"'
    num = r"-?\d{1,5}(?:\.\d{1,3})?"

    def key(name: str, value: str) -> str:
        return f'{ws}"{name}"{ws}:{ws}{value}{ws}'

    step = (r"\{" + key("step", r"\d{1,3}") + "," + key("instruction", string) + "," + key("start_timestamp", num)
            + "," + key("end_timestamp", num) + r"\}")
    steps = f"{ws}{step}(?:{ws},{ws}{step}){{0,{int(max_steps) - 1}}}{ws}"
    return (ws + r"\[" + ws + r"\{" + key("WikiHow Title", string) + r"\}" + ws + "," + ws + r"\{" + ws
            + r'"steps"' + ws + ":" + ws + r"\[" + steps + r"\]" + ws + r"\}" + ws + r"\]")


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    version: str


def text_version(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _packaged(prompt_id: str) -> Prompt:
    """The packaged prompt ``prompt_id``; an id with no packaged text raises ``ValueError`` naming the known ids."""
    folder = resources.files(__package__) / "prompts"
    known = sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))
    if prompt_id not in known:
        raise ValueError(f"unknown prompt id {prompt_id!r}; known: {', '.join(known)}")
    text = (folder / f"{prompt_id}.txt").read_text(encoding="utf-8")
    return Prompt(prompt_id, text, text_version(text))


def load_prompt(prompt_id: str, template_path: str | Path | None = None) -> Prompt:
    """The packaged prompt, or a user's file in its place (it must hold both placeholders)."""
    if template_path is None:
        return _packaged(prompt_id)
    path = Path(template_path)
    try:
        if path.stat().st_size > MAX_TEMPLATE_BYTES:
            raise ValueError(f"prompt template {path} is over {MAX_TEMPLATE_BYTES} bytes")
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"prompt template {path} cannot be read: {exc}") from exc
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise ValueError(f"prompt template {path} lacks the placeholder(s) {', '.join(missing)}")
    return Prompt(f"{prompt_id}+file:{path.name}", text, text_version(text))


def fill(prompt: Prompt, title: str, transcript: str) -> str:
    return prompt.text.replace("{title}", title).replace("{transcript}", transcript)


def filter_message(prompt: Prompt, title: str, segments: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Filter prompt: the title and the transcript rendered (joined, cut at 1500 (+2000 past 400 s) + "...")
    as one user message."""
    return [{"role": "user", "content": fill(prompt, title, render_transcript_text(segments))}]


def keysteps_message(prompt: Prompt, title: str, segments: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Key-step prompt: the unquoted title and the ``[start of transcript]`` block, ending in the opened
    ```` ```json ```` fence."""
    return [{"role": "user", "content": fill(prompt, title, render_transcript_block(segments))}]


def check_config(cfg: Any) -> None:
    """Both prompts of a config resolve (the packaged texts, or the ``--prompt-template`` /
    ``filter_prompt_template`` files with their placeholders): ``ValueError`` before any work (docs/architecture.md,
    "Failures")."""
    load_prompt(FILTER_PROMPT_ID, getattr(cfg, "filter_prompt_template", None))
    load_prompt(KEYSTEPS_PROMPT_ID, getattr(cfg, "prompt_template", None))
