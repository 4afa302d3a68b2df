"""Parsing LLM output into procedural steps, and narration chunking (docs/corpora/howtostep.md).

Pure functions (``re`` + stdlib). The LLM rewrites each ~10-sentence narration chunk into numbered key steps
(Li et al., ECCV 2024, §3.1 and Table 6); :func:`parse_steps` turns its raw text into the
kept steps plus ``(text, reason)`` for every dropped item:

1. newlines normalised; markdown emphasis (``**``, ``__``, backticks) and header marks (``#`` at a line start) removed;
2. numbered mode: markers ``(?:^|\\s)(?:Step\\s*)?(\\d{1,2})\\s*[.):]\\s+`` anywhere; the first sets n0, a later one is
   accepted only when its number is previous+1; an item runs to the next accepted marker, a blank line or the end;
   text before the first marker is a preamble; text after a blank line ends the list unless it starts with the next
   accepted marker (toolkit reading of "text ... after a blank line ends the list": LLMs often put blank lines between
   items);
3. fallbacks: bullet lines (``-``, ``*``, ``•``); then, only when ``numbered=False`` (prompts that ask for no numbers),
   non-empty lines not ending in ``:``; else ``parse_mode="none"`` (the chunk counts ``llm_chunk_unparsable``);
4. cleaning and drops: ``empty_step`` (also an item without any letter: toolkit choice), ``step_too_long`` (> 40 words), ``duplicate_in_chunk`` (case-folded),
   ``overgeneration_cap`` (beyond 20 kept steps, or a step that would lift the kept words above 2x the chunk's input
   words; the cap is sticky: every later item gets it too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Marker rule of the numbered-step parser (docs/corpora/howtostep.md), with ``(?<!\S)`` for ``(?:^|\s)`` so that the
#: whitespace before a marker is not consumed.
MARKER_RE = re.compile(r"(?<!\S)(?:(?i:step)\s*)?(\d{1,2})\s*[.):]\s+")
BLANK_LINE_RE = re.compile(r"\n[^\S\n]*\n")
BULLET_RE = re.compile(r"^[^\S\n]*[-*\u2022][^\S\n]+(.*)$", re.MULTILINE)
HEADER_RE = re.compile(r"^[^\S\n]*#{1,6}[^\S\n]*", re.MULTILINE)
EMPHASIS_RE = re.compile(r"\*\*|__|`")

# Timestamps (item cleaning, and the v1 prompt's output: Li et al., ECCV 2024, supp. Table 6).
_CLOCK = r"\d{1,2}(?::\d{2}){1,2}(?:\.\d+)?"  # 0:12, 00:01:05, 1:23.5
_NUM = r"\d+(?:\.\d+)?"
_SEC = rf"{_NUM}\s*s(?:ec(?:ond)?s?)?\b"  # 10s, 12.5 sec
_ARROW = r"(?:->|-->|\u2192|-|\u2013|\u2014|to)"
# A time or range inside brackets ([10s-17s], (0:35), [00:12 - 00:20], (at 1:23)): bare integers alone do not count.
_STRONG = rf"(?:{_CLOCK}|{_SEC}|\d+\.\d+)"
_BRACKETED_RE = re.compile(
    rf"[\[(]\s*(?:at\s+)?(?:{_STRONG}\s*{_ARROW}\s*{_STRONG}|\d+\s*{_ARROW}\s*{_SEC}|{_STRONG})\s*[\])]",
    re.IGNORECASE,
)
_CLOCK_RANGE_RE = re.compile(rf"(?:\bfrom\s+)?(?<![\d:.]){_CLOCK}\s*{_ARROW}\s*{_CLOCK}(?![\d:])", re.IGNORECASE)
_AT_TIME_RE = re.compile(rf"\b(?:at|@)\s+(?:{_CLOCK}|{_SEC})(?:\s*{_ARROW}\s*(?:{_CLOCK}|{_SEC}))?", re.IGNORECASE)
# A leading timestamp: optional bracket, a time, an optional range end, optional closing bracket, a separator.
_UNIT = r"\s*s(?:ec(?:ond)?s?)?\b"
_LEAD_RE = re.compile(
    rf"^[\[(]?\s*(?P<t>{_CLOCK}|{_NUM})(?P<s>{_UNIT})?"
    rf"(?:\s*{_ARROW}\s*(?P<e>{_CLOCK}|{_NUM})(?P<es>{_UNIT})?)?\s*(?P<close>[\])])?"
    r"(?P<sep>\s*(?:->|[:\-\u2013\u2014]))?\s*",
    re.IGNORECASE,
)
_STEP_PREFIX_RE = re.compile(r"^(?i:step)\s*\d{1,2}\s*[.):\-\u2013]\s*")
_QUOTES = {'"': '"', "\u201c": "\u201d", "'": "'", "\u2018": "\u2019"}


@dataclass
class ParsedChunk:
    """One chunk's parse (docs/corpora/howtostep.md): kept steps, dropped ``(text, reason)``, the mode used, v1
    timestamps."""

    steps: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    parse_mode: str = "none"  # "numbered" | "bullets" | "lines" | "none"
    timestamps: list[float | None] = field(default_factory=list)  # per kept step, only with_timestamps=True


def normalise(raw: str) -> str:
    """Parser step 1: ``\\r\\n``/``\\r`` to ``\\n``; drop ``**``, ``__``, backticks and line-start ``#`` marks."""
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    text = EMPHASIS_RE.sub("", text)
    return HEADER_RE.sub("", text)


def numbered_items(text: str) -> list[str]:
    """Parser step 2: the raw items of the first consecutively numbered list in ``text`` (may be empty)."""
    markers = list(MARKER_RE.finditer(text))
    if not markers:
        return []
    blanks = [m.start() for m in BLANK_LINE_RE.finditer(text)]
    items: list[str] = []
    prev = int(markers[0].group(1))
    pos = markers[0].end()
    mi = 1
    while True:
        # next accepted marker at or after pos
        nxt = None
        while mi < len(markers):
            m = markers[mi]
            if m.start() >= pos and int(m.group(1)) == prev + 1:
                nxt = m
                break
            mi += 1
        blank = next((b for b in blanks if b >= pos), None)
        if nxt is not None and (blank is None or nxt.start() <= blank):
            items.append(text[pos:nxt.start()])
            prev, pos, mi = prev + 1, nxt.end(), mi + 1
            continue
        if blank is None:
            items.append(text[pos:])
            return items
        items.append(text[pos:blank])
        restart = len(text) - len(text[blank:].lstrip())  # first non-space character after the blank line(s)
        if nxt is None or nxt.start() != restart:  # chatter after a blank line ends the list
            return items
        prev, pos, mi = prev + 1, nxt.end(), mi + 1


def bullet_items(text: str) -> list[str]:
    """Parser step 3: the text of every bullet line (``-``, ``*``, ``•``)."""
    return [m.group(1) for m in BULLET_RE.finditer(text)]


def line_items(text: str) -> list[str]:
    """Parser step 3 (prompts without numbers only): non-empty lines not ending in ``:``."""
    return [ln for ln in (s.strip() for s in text.split("\n")) if ln and not ln.endswith(":")]


def timestamp_seconds(token: str) -> float:
    """``"12.3"`` -> 12.3, ``"0:12"`` -> 12.0, ``"00:01:05"`` -> 65.0 (``h:m:s`` / ``m:s`` / seconds)."""
    total = 0.0
    for part in token.split(":"):
        total = total * 60.0 + float(part)
    return total


def split_leading_timestamp(text: str, lenient: bool) -> tuple[float | None, str]:
    """A leading timestamp of an item -> (seconds, rest); (None, text) when there is none.

    Always recognised: a clock (``0:12``, ``00:01:05``), a bracketed time (``[00:12]``, ``(12.3s)``), a time with an
    ``s`` unit, or a decimal range (``12.3 -> 15.0:``). ``lenient`` (v1 prompt, Li et al., ECCV 2024, supp. Table 6,
    which asks every sentence to begin with a timestamp) also accepts a bare decimal (``12.3 Boil water``) and a bare
    number followed by a separator (``12: ...``, ``12 - ...``, ``12 -> 15: ...``).
    """
    m = _LEAD_RE.match(text)
    if not m:
        return None, text
    opened = text.startswith(("[", "("))
    if opened != bool(m.group("close")):
        return None, text
    token, end = m.group("t"), m.group("e") or ""
    strong = ":" in token or bool(m.group("s") or m.group("es")) or opened or (bool(end) and "." in token + end)
    weak = "." in token or bool(m.group("sep"))
    if not (strong or (lenient and weak)):
        return None, text
    return timestamp_seconds(token), text[m.end():]


def _strip_quotes(text: str) -> str:
    """Remove one pair of wrapping quotes (a final ``.``, ``!`` or ``?`` after the closing quote is kept)."""
    if len(text) >= 2 and text[0] in _QUOTES:
        close = _QUOTES[text[0]]
        body, tail = (text[:-1], text[-1]) if text[-1] in ".!?" and len(text) >= 3 else (text, "")
        if body.endswith(close) and len(body) >= 2 and close not in body[1:-1]:
            return (body[1:-1].strip() + tail).strip()
    return text


def clean_step(item: str, with_timestamps: bool = False) -> tuple[str, float | None]:
    """Parser step 4: strip ``Step N:``, a leading timestamp (parsed when ``with_timestamps``), wrapping quotes,
    inline timestamps (``[10s-17s]``, ``(0:35)``, ``00:12 - 00:20``, ``at 1:23``); collapse spaces."""
    text = " ".join(item.split())
    text = _STEP_PREFIX_RE.sub("", text)
    seconds, text = split_leading_timestamp(text, lenient=with_timestamps)
    text = _STEP_PREFIX_RE.sub("", text)  # "0:12 - Step 1: ..."
    text = _strip_quotes(text)
    text = _BRACKETED_RE.sub(" ", text)
    text = _CLOCK_RANGE_RE.sub(" ", text)
    text = _AT_TIME_RE.sub(" ", text)
    text = " ".join(text.split())
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"^[\s\-\u2013\u2014:,>]+", "", text)
    text = _strip_quotes(text.strip())
    if not any(ch.isalpha() for ch in text):  # no letter at all ("...", "1:10:11"): nothing to ground, as empty
        text = ""
    return text, seconds if with_timestamps else None


def parse_steps(
    raw: str,
    *,
    numbered: bool = True,
    input_words: int | None = None,
    max_step_words: int = 40,
    max_steps_per_chunk: int = 20,
    with_timestamps: bool = False,
) -> ParsedChunk:
    """Parse one chunk's LLM output into steps (docs/corpora/howtostep.md; defaults ``max_step_words=40``,
    ``max_steps_per_chunk=20``).

    ``numbered``: the prompt asks for numbered steps (``howtostep_v3``, ``howtostep_v2_ts``); only when False is the
    plain-lines fallback used. ``input_words``: whitespace words of the chunk's transcript; kept steps never exceed
    2x that many words (``overgeneration_cap``; None disables the word cap). ``with_timestamps`` (v1 prompt): each
    item's leading timestamp is parsed to seconds into ``timestamps`` (None when absent) and removed from the text.
    """
    text = normalise(raw or "")
    out = ParsedChunk()
    finders = [("numbered", numbered_items), ("bullets", bullet_items)]
    if not numbered:
        finders.append(("lines", line_items))
    items: list[str] = []
    for mode, finder in finders:
        items = finder(text)
        if any(it.strip() for it in items):
            out.parse_mode = mode
            break
    if out.parse_mode == "none":
        return out
    word_budget = None if input_words is None else 2 * input_words
    seen: set[str] = set()
    kept_words = 0
    capped = False
    for item in items:
        step, seconds = clean_step(item, with_timestamps)
        if capped:
            out.dropped.append((step, "overgeneration_cap"))
            continue
        if not step:
            out.dropped.append((" ".join(item.split()), "empty_step"))
            continue
        n_words = len(step.split())
        if n_words > max_step_words:
            out.dropped.append((step, "step_too_long"))
            continue
        key = step.casefold()
        if key in seen:
            out.dropped.append((step, "duplicate_in_chunk"))
            continue
        if word_budget is not None and kept_words + n_words > word_budget:
            capped = True
            out.dropped.append((step, "overgeneration_cap"))
            continue
        seen.add(key)
        kept_words += n_words
        out.steps.append(step)
        if with_timestamps:
            out.timestamps.append(seconds)
        if len(out.steps) >= max_steps_per_chunk:
            capped = True
    return out


def chunk_ranges(num_sentences: int, chunk_size: int = 10) -> list[tuple[int, int]]:
    """Li et al., ECCV 2024, §3.1: consecutive non-overlapping ``[first, last]`` (inclusive) chunks of ``chunk_size``
    (10, paper "around 10 sentences", MPTVA exactly 10); the last chunk takes the remainder (1..chunk_size)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return [(a, min(a + chunk_size, num_sentences) - 1) for a in range(0, max(num_sentences, 0), chunk_size)]


def halve_ranges(first: int, last: int) -> list[tuple[int, int]]:
    """Toolkit rule: a chunk over the LLM's input budget is halved -> ``[(first, mid), (mid+1, last)]``, the first half
    taking the extra sentence; a one-sentence chunk cannot be split and comes back unchanged."""
    if last < first:
        raise ValueError(f"empty range [{first}, {last}]")
    if first == last:
        return [(first, last)]
    mid = (first + last) // 2
    return [(first, mid), (mid + 1, last)]


def split_to_budget(first: int, last: int, fits) -> list[tuple[int, int]]:
    """Toolkit rule: halve ``[first, last]`` recursively until ``fits(first, last)`` holds (single sentences are
    returned even when they do not fit; the caller decides what to do with them)."""
    if fits(first, last) or first == last:
        return [(first, last)]
    out: list[tuple[int, int]] = []
    for a, b in halve_ranges(first, last):
        out.extend(split_to_budget(a, b, fits))
    return out
