"""Transcript sentences with times for the MARC video recipes, as pure functions (docs/corpora/marc.md).

- WhisperX words: joined with spaces, split into sentences, each timed by its first word's start and last word's
  end; missing word times are interpolated from the neighbouring timed words.
- Raw caption lines: when at least 30 % of the lines end in ``.``, ``?`` or ``!`` the lines are joined and split into
  sentences, times interpolated by character offset inside each line; otherwise one line is one sentence.

The sentence splitter is a parameter (punkt in the builder), so these functions stay free of model loading.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Sentence = tuple[str, float, float]
Splitter = Callable[[str], list[str]]


def _spans(text: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans ``[a, b)`` of the splitter's sentences inside ``text``, searched left to right."""
    spans, cursor = [], 0
    for s in sentences:
        s = s.strip()
        if not s:
            continue
        a = text.find(s, cursor)
        if a < 0:  # the splitter normalised whitespace: fall back to the next non-space run of the same length
            while cursor < len(text) and text[cursor].isspace():
                cursor += 1
            a = cursor
        b = min(len(text), a + len(s))
        spans.append((a, b))
        cursor = b
    return spans


def interpolate_times(times: Sequence[float | None]) -> list[float]:
    """Fill missing (None/NaN) times linearly between the nearest timed neighbours (constant at the ends)."""
    vals = [t if t is not None and math.isfinite(t) else None for t in times]
    known = [i for i, t in enumerate(vals) if t is not None]
    if not known:
        raise ValueError("no timed word to interpolate from")
    out: list[float] = []
    for i, t in enumerate(vals):
        if t is not None:
            out.append(float(t))
            continue
        left = max((k for k in known if k < i), default=None)
        right = min((k for k in known if k > i), default=None)
        if left is None:
            out.append(float(vals[right]))  # type: ignore[arg-type]
        elif right is None:
            out.append(float(vals[left]))  # type: ignore[arg-type]
        else:
            lt, rt = float(vals[left]), float(vals[right])  # type: ignore[arg-type]
            out.append(lt + (rt - lt) * (i - left) / (right - left))
    return out


def sentences_from_words(words: Sequence[tuple[str, float | None, float | None]], split: Splitter) -> list[Sentence]:
    """WhisperX words ``(word, start, end)`` -> timed sentences (docs/corpora/marc.md)."""
    words = [(w.strip(), s, e) for w, s, e in words if w and w.strip()]
    if not words:
        return []
    starts = interpolate_times([s for _, s, _ in words])
    ends = interpolate_times([e for _, _, e in words])
    pieces, offsets, pos = [], [], 0
    for w, _, _ in words:
        offsets.append(pos)
        pieces.append(w)
        pos += len(w) + 1
    text = " ".join(pieces)
    word_at = []  # character -> word index
    for k, (w, _, _) in enumerate(words):
        word_at.extend([k] * (len(w) + 1))
    out = []
    for a, b in _spans(text, split(text)):
        first, last = word_at[a], word_at[max(a, b - 1)]
        out.append((text[a:b], starts[first], max(starts[first], ends[last])))
    return out


def ends_sentence(line: str) -> bool:
    return line.rstrip().endswith((".", "?", "!"))


def sentences_from_lines(lines: Sequence[tuple[str, float, float]], split: Splitter,
                         min_punctuated: float = 0.3) -> list[Sentence]:
    """Raw caption lines ``(text, start, end)`` -> timed sentences: split the joined text when at least
    ``min_punctuated`` of the lines end a sentence, else one line per sentence."""
    lines = [(t.strip(), float(s), float(e)) for t, s, e in lines if t and t.strip()]
    if not lines:
        return []
    if sum(ends_sentence(t) for t, _, _ in lines) < min_punctuated * len(lines):
        return [(t, s, e) for t, s, e in lines]
    text = " ".join(t for t, _, _ in lines)
    char_time: list[float] = []
    for t, s, e in lines:
        n = len(t)
        char_time.extend(s + (e - s) * (i / n) for i in range(n))
        char_time.append(e)  # the joining space belongs to the line's end
    out = []
    for a, b in _spans(text, split(text)):
        start = char_time[a]
        # the sentence's last character ends at the time of the next character position
        end = char_time[b] if b < len(char_time) else lines[-1][2]
        out.append((text[a:b], start, max(start, end)))
    return out
