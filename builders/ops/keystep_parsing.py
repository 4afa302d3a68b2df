"""ShowHowTo LLM text in and out: transcript rendering, the Yes/No filter parser, key-step JSON parsing and validation
(docs/corpora/showhowto.md; reason codes: docs/reason-codes.md).

Paper: Souček et al., CVPR 2025 Sec. 3 ("Filtering of irrelevant videos", "Extracting key steps")
and App. A / Fig. 19-20 (the two prompts; videos with "incomplete descriptions" are dropped) [paper]. The transcript
renderings follow the upstream prompt file [code]; the Yes/No parser, the robust JSON parser (fence handling, bracket
matching, ``json_repair`` retry) and the validation tolerance are [toolkit].

Bad LLM text never raises: :func:`parse_keysteps` returns :class:`ParsedSteps` or a :class:`Failure`, and
:func:`validate_keysteps` returns ``None`` or a :class:`Failure`. A :class:`Failure` *is* its reason-code string
(``Failure("too_few_steps", "...") == "too_few_steps"``) and carries a human ``detail``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Self

import json_repair  # the json-repair package (parsing step 3)

__all__ = [
    "LLM_MALFORMED",
    "LLM_NO_JSON",
    "STEPS_NOT_ORDERED",
    "STEPS_OUT_OF_RANGE",
    "TOO_FEW_STEPS",
    "Failure",
    "KeyStep",
    "ParsedSteps",
    "parse_filter_answer",
    "parse_keysteps",
    "render_transcript_block",
    "render_transcript_text",
    "validate_keysteps",
]

LLM_NO_JSON = "llm_no_json"
LLM_MALFORMED = "llm_malformed"
STEPS_OUT_OF_RANGE = "steps_out_of_range"
STEPS_NOT_ORDERED = "steps_not_ordered"
TOO_FEW_STEPS = "too_few_steps"

FilterAnswer = Literal["yes", "no", "ambiguous"]


class Failure(str):
    """A reason code of docs/reason-codes.md (the string itself) with a human ``detail``; ``.reason`` gives the plain
    code."""

    detail: str

    def __new__(cls, reason: str, detail: str = "") -> Self:
        obj = super().__new__(cls, reason)
        obj.detail = detail
        return obj

    @property
    def reason(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Failure({self.reason!r}, {self.detail!r})"

    def __reduce__(self):
        return (Failure, (self.reason, self.detail))


class KeyStep(NamedTuple):
    """One parsed step: stripped instruction and its LLM interval in seconds (float)."""

    instruction: str
    start: float
    end: float


@dataclass
class ParsedSteps:
    """A parsed key-step completion (robust JSON parsing, toolkit): steps renumbered 0..n-1 in list order."""

    wikihow_title: str | None
    steps: list[KeyStep] = field(default_factory=list)
    parse_repaired: bool = False


# ---------------------------------------------------------------------------------------------------- rendering


def render_transcript_text(segments: Sequence[Mapping[str, Any]], base_limit: int = 1500, long_bonus: int = 2000,
                           long_after: float = 400.0) -> str:
    """The filter prompt's transcript (the filter prompt of upstream ``soCzech/ShowHowTo``): segment texts joined by one
    space, verbatim; cut to ``base_limit`` (+ ``long_bonus`` when the last segment, by list order, ends strictly after
    ``long_after`` s) characters plus ``"..."``. No segments → ``""``."""
    if not segments:
        return ""
    text = " ".join(seg["text"] for seg in segments)
    limit = base_limit + (long_bonus if float(segments[-1]["end"]) > long_after else 0)
    if len(text) > limit:
        text = text[:limit] + "..."
    return text


def render_transcript_block(segments: Sequence[Mapping[str, Any]]) -> str:
    """The key-step prompt's transcript block (the key-step prompt of upstream ``soCzech/ShowHowTo``): ``[start of
    transcript]``, one line ``f'{start:.2f} - {end:.2f}: "{text}"'`` per segment (text verbatim), ``[end of
    transcript]``; joined by ``\\n``."""
    lines = ["[start of transcript]"]
    lines += [f'{float(seg["start"]):.2f} - {float(seg["end"]):.2f}: "{seg["text"]}"' for seg in segments]
    lines.append("[end of transcript]")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ Yes/No filter

_LEAD_STRIP = " \t\r\n*#>\"'`\u201c\u201d\u2018\u2019"
_LEADING_ANSWER_RE = re.compile(r"(yes|no)(?![a-z])", re.IGNORECASE)
_TOKEN_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_EXPLANATION_RE = re.compile(r"explanation\s*:", re.IGNORECASE)


def parse_filter_answer(text: str) -> tuple[FilterAnswer, str]:
    """Yes/No parsing of the filter completion (toolkit rule, docs/corpora/showhowto.md) → ``(answer, explanation)``.

    Strip whitespace and leading ``*``, ``#``, ``>``, quotes. Only the text before the first ``Explanation:``
    (case-insensitive) decides: if its whole-word ``yes``/``no`` tokens hold both values → ``ambiguous`` (the toolkit's
    "Yes or no? No" case, which also starts with "Yes"); else (1) a leading ``yes``/``no`` followed by a non-letter or
    the end → that answer; (2) else exactly one distinct token value → that answer; (3) else ``ambiguous``. The
    explanation is the first non-empty line after ``Explanation:`` (``*`` and spaces stripped), ``""`` without one.
    """
    body = (text or "").strip().lstrip(_LEAD_STRIP)
    marker = _EXPLANATION_RE.search(body)
    head = body[: marker.start()] if marker else body
    explanation = ""
    if marker:
        for line in body[marker.end():].splitlines():
            line = line.strip().strip("*").strip()
            if line:
                explanation = line
                break
    values = {t.lower() for t in _TOKEN_RE.findall(head)}
    if len(values) > 1:
        return "ambiguous", explanation
    lead = _LEADING_ANSWER_RE.match(body)
    if lead:
        return lead.group(1).lower(), explanation  # type: ignore[return-value]
    if len(values) == 1:
        return values.pop(), explanation  # type: ignore[return-value]
    return "ambiguous", explanation


# -------------------------------------------------------------------------------------------- key-step JSON

_FENCE_RE = re.compile(r"```[ \t]*(?:json\b)?[ \t]*\r?\n?", re.IGNORECASE)
_CLOSERS = {"[": "]", "{": "}"}


def _strip_fences(text: str) -> str:
    """Parsing step (1): drop an opening ```json fence that comes before any bracket, then cut at the next ```."""
    bracket = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    fence = _FENCE_RE.search(text)
    if fence and (bracket < 0 or fence.start() < bracket):
        text = text[fence.end():]
    cut = text.find("```")
    return text if cut < 0 else text[:cut]


def _bracket_span(text: str, start: int) -> str | None:
    """Parsing step (2): the span from ``text[start]`` to its matching bracket, aware of JSON strings and escapes;
    ``None`` when it never closes or a closer does not match."""
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in "]}":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start: i + 1]
    return None


def _number(value: Any) -> float | None:
    """A finite float from a JSON number or a string ``float()`` accepts; ``None`` otherwise (bools included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def _shape(data: Any) -> tuple[Any, list[Any]] | Failure:
    """Parsing step (4): ``(title, raw steps)`` from the accepted shapes, or ``llm_malformed``."""
    if (isinstance(data, list) and len(data) == 2 and all(isinstance(d, dict) for d in data)
            and "WikiHow Title" in data[0] and "steps" in data[1] and "instruction" not in data[0]):
        title, steps = data[0]["WikiHow Title"], data[1]["steps"]
    elif isinstance(data, dict) and "steps" in data:
        title, steps = data.get("WikiHow Title"), data["steps"]
    elif isinstance(data, list) and all(isinstance(d, dict) for d in data):
        title, steps = None, data
    else:
        return Failure(LLM_MALFORMED, f"unexpected JSON shape ({type(data).__name__})")
    if title is not None and not isinstance(title, str):
        return Failure(LLM_MALFORMED, f"'WikiHow Title' is a {type(title).__name__}, not a string")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return Failure(LLM_MALFORMED, "'steps' is not a list of objects")
    return title, steps


def parse_keysteps(completion: str) -> ParsedSteps | Failure:
    """Parse a key-step completion (robust JSON parsing, steps (1)-(5) [toolkit]).

    (1) fences: an opening ```` ```json ```` before the first bracket is dropped (the prompt ends inside an opened
    fence, so a model that reopens one writes it first), then the text is cut at the next ```` ``` ````; (2) the span
    from the first ``[``/``{`` to its matching bracket is ``json.loads``-ed; (3) on failure (or no matching bracket)
    ``json_repair.loads`` retries on the span, else on the rest of the text, and ``parse_repaired=True``; (4) shapes:
    ``[{"WikiHow Title": str}, {"steps": [...]}]``, ``{"steps": [...], "WikiHow Title"?: str}`` or a bare list of step
    objects; (5) every step needs a non-blank string ``instruction`` (stored stripped) and finite
    ``start_timestamp``/``end_timestamp`` (numbers or numeric strings); ``step`` numbers are ignored and the steps
    kept in list order. No bracket or nothing decodable → ``llm_no_json``; anything else wrong → ``llm_malformed``
    (no partial repair). Never raises on any text.
    """
    text = _strip_fences(completion or "")
    first = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    if first < 0:
        return Failure(LLM_NO_JSON, "no '[' or '{' in the completion")
    span = _bracket_span(text, first)
    repaired = False
    data: Any = None
    ok = False
    if span is not None:
        try:
            data, ok = json.loads(span), True
        except (ValueError, RecursionError):
            pass
    if not ok:
        repaired = True
        try:
            data = json_repair.loads(span if span is not None else text[first:])
        except Exception as exc:  # noqa: BLE001 - json_repair may raise anything on hostile text
            return Failure(LLM_NO_JSON, f"json_repair failed: {type(exc).__name__}: {exc}")
        if data is None or data == "":
            return Failure(LLM_NO_JSON, "no decodable JSON, even after json_repair")
    shaped = _shape(data)
    if isinstance(shaped, Failure):
        return shaped
    title, raw = shaped
    steps: list[KeyStep] = []
    for i, item in enumerate(raw):
        instruction = item.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            return Failure(LLM_MALFORMED, f"step {i}: missing or empty instruction")
        start, end = _number(item.get("start_timestamp")), _number(item.get("end_timestamp"))
        if start is None or end is None:
            return Failure(LLM_MALFORMED, f"step {i}: missing, non-numeric or non-finite timestamp "
                                          f"({item.get('start_timestamp')!r}, {item.get('end_timestamp')!r})")
        steps.append(KeyStep(instruction.strip(), start, end))
    return ParsedSteps(title, steps, repaired)


def validate_keysteps(steps: Sequence[tuple[str, float, float]], duration: float | None, t_last: float | None,
                      min_steps: int = 2, tolerance: float = 1.0, *,
                      last_segment_end: float | None = None) -> Failure | None:
    """Validation (Souček et al., CVPR 2025, Sec. 3, plus toolkit checks): ``None`` when the steps pass, else the first
    failing check:

    1. every ``0 ≤ start ≤ end`` (finite) → else ``llm_malformed``;
    2. every ``end ≤ min(duration, t_last) + tolerance`` and ``start < t_last`` → else ``steps_out_of_range``
       (a ``None`` bound is left out of the min; with both ``None`` — transcript-only — ``last_segment_end`` stands in
       for both; with all three ``None``: ValueError, a caller error);
    3. starts and ends both non-decreasing in list order → else ``steps_not_ordered``;
    4. ``len(steps) ≥ min_steps`` → else ``too_few_steps``.
    """
    bounds = [float(x) for x in (duration, t_last) if x is not None]
    if not bounds:
        if last_segment_end is None:
            raise ValueError("validate_keysteps needs duration, t_last or last_segment_end")
        bounds = [float(last_segment_end)]
    end_limit = min(bounds) + float(tolerance)
    start_limit = float(t_last) if t_last is not None else (
        float(duration) if duration is not None else float(last_segment_end))  # type: ignore[arg-type]
    starts = [float(s[1]) for s in steps]
    ends = [float(s[2]) for s in steps]
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        if not (math.isfinite(s) and math.isfinite(e) and 0.0 <= s <= e):
            return Failure(LLM_MALFORMED, f"step {i}: need 0 <= start <= end, got [{s}, {e}]")
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        if e > end_limit or s >= start_limit:
            return Failure(STEPS_OUT_OF_RANGE, f"step {i}: [{s}, {e}] beyond the video (end limit {end_limit:g} s, "
                                               f"start limit {start_limit:g} s)")
    for i in range(1, len(steps)):
        if starts[i] < starts[i - 1] or ends[i] < ends[i - 1]:
            return Failure(STEPS_NOT_ORDERED, f"step {i}: [{starts[i]}, {ends[i]}] after "
                                              f"[{starts[i - 1]}, {ends[i - 1]}]")
    if len(steps) < min_steps:
        return Failure(TOO_FEW_STEPS, f"{len(steps)} step(s), need at least {min_steps}")
    return None
