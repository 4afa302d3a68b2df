"""TAN caption cleaning and sentencification of timed transcripts, as pure functions (docs/corpora/howtostep.md).

Rules from TAN's ``sentencify_text`` (GitHub ``TengdaHan/TemporalAlignNet``, ``filters/utils.py``), as the toolkit
applies them (docs/corpora/howtostep.md): for HowTo100M raw captions (``htm_raw``) the (b) length filter, the (c)–(e)
cleaning and the (f) count check; for punctuated input a word stream cut after sentence-final words; for unpunctuated
input on the CPU preset the ``no_punct_fallback`` (TAN's punctuation BERT is not available offline,
docs/corpora/howtostep.md, Presets). The (a) language filter needs ``langdetect`` (``builders.models.language``), so
:func:`narrations_from_transcript` takes it as a callable.

A sentence is ``(text, start, end)`` in seconds, the order of :mod:`builders.ops.transcript_sentences`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MIN_CAPTION_DURATION", "MIN_MERGED_CAPTIONS", "MIN_NARRATIONS", "Narrations", "RawWord", "Sentence", "Word",
    "drop_bad_timestamps", "ends_sentence", "is_punctuated", "narrations_from_transcript", "sentencify_no_punct",
    "sentencify_punctuated", "tan_clean_raw_captions", "tan_length_ok", "word_stream",
]

Sentence = tuple[str, float, float]
Word = tuple[str, float, float]
RawWord = tuple[str, float | None, float | None]  # a WhisperX word; times None when absent

# TAN's thresholds (Han et al., CVPR 2022; TAN filters/utils.py)
MIN_CAPTION_DURATION = 0.2  # (c) captions lasting <= 0.2 s are ASR glitches
LENGTH_MIN_CAPTIONS = 10  # (b) more than 10 captions ...
LENGTH_MIN_MEAN_WORDS = 5  # (b) ... and more than 5 words per caption on average
MIN_MERGED_CAPTIONS = 5  # (f) <= 5 captions after (c)-(e) -> too_few_narrations
MIN_NARRATIONS = 5  # all formats: at least 5 sentences
PUNCTUATED_SHARE = 0.5  # punctuated iff >= 50 % of captions contain ',' or '.'
GAP_S, MIN_WORDS, MAX_WORDS = 1.0, 20, 40  # no_punct_fallback (toolkit, CPU preset)

FORMATS = ("htm_raw", "sentencified", "whisperx", "segments", "asr")
MODE_PUNCTUATED, MODE_NO_PUNCT, MODE_SENTENCIFIED, MODE_WHISPERX_WORDS = (
    "punctuated", "no_punct_fallback", "sentencified", "whisperx_words")
TOO_FEW_NARRATIONS, NO_SPEECH, NOT_ENGLISH = "too_few_narrations", "no_speech", "not_english"
BAD_TIMESTAMP = "bad_timestamp"

_SENTENCE_END = (".", "!", "?")
_CLOSERS = "\"'”’)]}»›"  # closing quotes/brackets stripped before the sentence-end test


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _good_times(start: Any, end: Any) -> bool:
    """Finite, non-negative and ``end >= start`` (all transcript formats; ``bad_timestamp``)."""
    return _finite(start) and _finite(end) and 0 <= float(start) <= float(end)


# --------------------------------------------------------------------------------------------- htm_raw (b)-(e)


def tan_length_ok(texts: Sequence[str]) -> bool:
    """TAN filter (b): more than 10 captions and more than 5 whitespace words per caption on average."""
    if len(texts) <= LENGTH_MIN_CAPTIONS:
        return False
    return sum(len(str(t).split()) for t in texts) / len(texts) > LENGTH_MIN_MEAN_WORDS


def _dedup_linebreaks(caps: list[Sentence], counts: Counter) -> list[Sentence]:
    """(d) first half: a caption whose last line repeats as the next caption's first line loses that line; other
    line breaks become spaces (empty lines dropped)."""
    out = []
    for i, (text, start, end) in enumerate(caps):
        if "\n" in text:
            lines = [line.strip() for line in text.split("\n")]
            nxt = caps[i + 1][0].split("\n")[0].strip() if i + 1 < len(caps) else None
            if nxt is not None and lines[-1] == nxt:
                lines = lines[:-1]
                counts["linebreak_duplicate"] += 1
            text = " ".join(line for line in lines if line)
        out.append((text, start, end))
    return out


def _merge_prefix_runs(caps: list[Sentence], counts: Counter) -> list[Sentence]:
    """(d) second half: a run where each caption is a (string) prefix of the next becomes one caption with the
    run's first start, last end and last (longest) text."""
    out: list[Sentence] = []
    i = 0
    while i < len(caps):
        j = i
        while j + 1 < len(caps) and caps[j + 1][0].startswith(caps[j][0]):
            j += 1
        out.append((caps[j][0], caps[i][1], caps[j][2]))
        counts["prefix_merged"] += j - i
        i = j + 1
    return out


def _average_overlaps(caps: list[Sentence], counts: Counter) -> list[Sentence]:
    """(e) where ``start[i+1] < end[i]`` both become ``(end[i] + start[i+1]) / 2`` (from the un-modified values,
    as TAN's vectorised code does)."""
    starts = [s for _, s, _ in caps]
    ends = [e for _, _, e in caps]
    new_s, new_e = list(starts), list(ends)
    for i in range(len(caps) - 1):
        if starts[i + 1] < ends[i]:
            mid = (ends[i] + starts[i + 1]) / 2
            new_e[i] = new_s[i + 1] = mid
            counts["overlap_averaged"] += 1
    return [(t, s, e) for (t, _, _), s, e in zip(caps, new_s, new_e)]


def tan_clean_raw_captions(texts: Sequence[str], starts: Sequence[float],
                           ends: Sequence[float]) -> tuple[list[Sentence], Counter]:
    """TAN cleaning (c)–(e) on HowTo100M raw captions -> ``([(text, start, end)], counters)``.

    (c) drop captions lasting <= 0.2 s (``caption_too_short``; non-finite times fail the test as in TAN and count
    ``bad_timestamp``), empty after stripping (``caption_empty``) or holding both ``[`` and ``]`` (``caption_tag``,
    e.g. ``[Music]``); (d) rolling line-break duplicates (``linebreak_duplicate``), then prefix runs merged
    (``prefix_merged`` = captions merged away); (e) overlapping neighbours meet at the mean (``overlap_averaged``).
    The next caption of the (d) line test is the next one kept by (c) (the toolkit's order; TAN compares with the next
    caption before the empty/tag drops).
    """
    if not len(texts) == len(starts) == len(ends):
        raise ValueError(f"texts/starts/ends lengths differ: {len(texts)}, {len(starts)}, {len(ends)}")
    counts: Counter = Counter()
    kept: list[Sentence] = []
    for text, start, end in zip(texts, starts, ends):
        if not (_finite(start) and _finite(end)):
            counts[BAD_TIMESTAMP] += 1
            continue
        start, end = float(start), float(end)
        if not end - start > MIN_CAPTION_DURATION:
            counts["caption_too_short"] += 1
            continue
        text = str(text).strip()
        if not text:
            counts["caption_empty"] += 1
        elif "[" in text and "]" in text:
            counts["caption_tag"] += 1
        else:
            kept.append((text, start, end))
    caps = _average_overlaps(_merge_prefix_runs(_dedup_linebreaks(kept, counts), counts), counts)
    return caps, counts


# --------------------------------------------------------------------------------------------- word streams


def is_punctuated(texts: Sequence[str]) -> bool:
    """Toolkit rule: at least 50 % of the captions contain ``,`` or ``.`` (always true for Whisper output)."""
    if not texts:
        return False
    return sum(("," in t or "." in t) for t in texts) >= PUNCTUATED_SHARE * len(texts)


def _slots(tokens: Sequence[str], start: float, end: float) -> list[Word]:
    """Equal word slots over ``[start, end]`` (the caption/segment span split linearly)."""
    n = len(tokens)
    return [(w, start + (end - start) * i / n, start + (end - start) * (i + 1) / n) for i, w in enumerate(tokens)]


def _timed(word: RawWord) -> bool:
    _, s, e = word
    return _finite(s) and _finite(e) and float(e) >= float(s)


def _segment_words(entries: Sequence[RawWord], start: float, end: float) -> list[Word]:
    """WhisperX words of one segment: their own times when both are finite (and ``end >= start``); a run of words
    lacking them shares, in equal slots, the gap between its timed neighbours (the segment bounds at the edges).
    With no timed word this is :func:`_slots` over the segment ("the interpolated slot")."""
    words = [(w.strip(), s, e) for w, s, e in entries if isinstance(w, str) and w.strip()]
    out: list[Word] = []
    i = 0
    while i < len(words):
        if _timed(words[i]):
            w, s, e = words[i]
            out.append((w, float(s), float(e)))  # type: ignore[arg-type]
            i += 1
            continue
        j = i
        while j < len(words) and not _timed(words[j]):
            j += 1
        left = out[-1][2] if out else start
        right = float(words[j][1]) if j < len(words) else end  # type: ignore[arg-type]
        out.extend(_slots([w for w, _, _ in words[i:j]], left, max(left, right)))
        i = j
    return out


def word_stream(segments: Sequence[Sentence], words: Sequence[Sequence[RawWord] | None] | None = None) -> list[Word]:
    """The transcript as timed words ``(word, start, end)`` (docs/corpora/howtostep.md).

    ``words[k]`` are segment ``k``'s WhisperX words (times None when absent); when ``words`` is None, or
    ``words[k]`` is None or holds no non-blank word, segment ``k``'s text is split on whitespace into equal slots.
    """
    out: list[Word] = []
    for k, (text, start, end) in enumerate(segments):
        entries = words[k] if words is not None and k < len(words) else None
        timed = _segment_words(entries, start, end) if entries else []
        out.extend(timed if timed else _slots(str(text).split(), start, end))
    return out


def ends_sentence(word: str) -> bool:
    """True when ``word`` ends with ``.``, ``!`` or ``?`` once closing quotes/brackets are stripped (toolkit choice,
    docs/corpora/howtostep.md: toolkit choice; TAN cuts on a word *containing* them, which would split "1.5 cups")."""
    return word.rstrip(_CLOSERS).endswith(_SENTENCE_END)


def _sentence(buf: Sequence[Word]) -> Sentence:
    return " ".join(w for w, _, _ in buf), buf[0][1], buf[-1][2]


def sentencify_punctuated(words: Sequence[Word]) -> list[Sentence]:
    """Cut a punctuated word stream after every sentence-final word (:func:`ends_sentence`); the remainder after
    the last cut is the last sentence. Start = first word's start, end = last word's end."""
    out, buf = [], []
    for word in words:
        buf.append(word)
        if ends_sentence(word[0]):
            out.append(_sentence(buf))
            buf = []
    if buf:
        out.append(_sentence(buf))
    return out


def sentencify_no_punct(captions: Sequence[Sentence], gap_s: float = GAP_S, min_words: int = MIN_WORDS,
                        max_words: int = MAX_WORDS) -> list[Sentence]:
    """``no_punct_fallback`` (toolkit, CPU preset): words in equal slots per caption; cut before a caption that
    starts more than ``gap_s`` = 1.0 s after the buffer's end, else at a caption boundary once ``min_words`` = 20
    words are buffered, else hard when ``max_words`` = 40 words are buffered."""
    out: list[Sentence] = []
    buf: list[Word] = []
    for text, start, end in captions:
        tokens = _slots(str(text).split(), start, end)
        if not tokens:
            continue
        if buf and (tokens[0][1] - buf[-1][2] > gap_s or len(buf) >= min_words):
            out.append(_sentence(buf))
            buf = []
        for token in tokens:
            buf.append(token)
            if len(buf) >= max_words:
                out.append(_sentence(buf))
                buf = []
    if buf:
        out.append(_sentence(buf))
    return out


def drop_bad_timestamps(sentences: Sequence[Sentence]) -> tuple[list[Sentence], int]:
    """All transcript formats: strip each text, drop empty ones (not counted) and those with a NaN/inf or negative
    time or ``end < start`` (counted: the second value, counter ``bad_timestamp``). Times become floats."""
    kept, bad = [], 0
    for text, start, end in sentences:
        text = str(text).strip()
        if not text:
            continue
        if not _good_times(start, end):
            bad += 1
            continue
        kept.append((text, float(start), float(end)))
    return kept, bad


# --------------------------------------------------------------------------------------------- whole sentencification
# flow


@dataclass(frozen=True)
class Narrations:
    """Result of :func:`narrations_from_transcript`; unpacks as ``(sentences, counters, sentencify_mode, reason)``.
    ``reason`` is None when the video is kept; ``detail`` says why it was dropped (for ``dropped_videos``)."""

    sentences: list[Sentence]
    counters: Counter
    sentencify_mode: str
    reason: str | None
    detail: str = ""

    @property
    def mode(self) -> str:
        return self.sentencify_mode

    def __iter__(self) -> Iterator[Any]:
        return iter((self.sentences, self.counters, self.sentencify_mode, self.reason))


EnglishCheck = Callable[[list[str]], "tuple[bool, float] | bool"]


def _english(check: EnglishCheck, texts: list[str]) -> tuple[bool, str]:
    result = check(texts)
    if isinstance(result, tuple):
        return bool(result[0]), f"langdetect mean P(en) {float(result[1]):.3f}"
    return bool(result), "langdetect filter"


def _is_en(language: str) -> bool:
    return language.strip().lower().replace("_", "-").split("-")[0] in ("en", "english")


def narrations_from_transcript(fmt: str, segments: Sequence[Sentence],
                               words: Sequence[Sequence[RawWord] | None] | None = None, *, seed: int | None = None,
                               language: str | None = None, english_check: EnglishCheck | None = None,
                               min_narrations: int = MIN_NARRATIONS,
                               punctuate: Callable[[list[Sentence]], list[Sentence]] | None = None) -> Narrations:
    """The narration list N of one video (docs/corpora/howtostep.md; drops: docs/reason-codes.md) -> :class:`Narrations`
    (unpacks as ``(sentences, counters, sentencify_mode, reason)``).

    ``fmt``: ``htm_raw`` | ``sentencified`` | ``whisperx`` | ``segments`` | ``asr`` (WhisperX json from the ASR
    stage); ``segments`` are ``(text, start, end)``; ``words`` per segment as for :func:`word_stream`;
    ``language``: the WhisperX ``language`` field, if any. ``english_check(texts) -> (is_english, mean_prob)`` (or
    a bool) is the langdetect filter (a), e.g. ``functools.partial(builders.models.language.tan_language_filter,
    seed=seed)``: the seed of its caption sample is bound there (``seed`` here is accepted for the plan's call
    signature and not used by these pure functions). When ``english_check`` is None no langdetect decision is made.

    Order: no word at all -> ``no_speech``; ``whisperx``/``asr`` with a ``language`` other than ``en`` ->
    ``not_english``; ``htm_raw``: (a) on the raw caption texts -> ``not_english``, (b) :func:`tan_length_ok` ->
    ``too_few_narrations``, (c)–(e) :func:`tan_clean_raw_captions`, none left -> ``no_speech``, (f) <= 5 ->
    ``too_few_narrations``. Other formats first drop segments with bad times (toolkit choice, so that a broken
    segment does not void its neighbours' sentence; counted ``bad_timestamp``). Then ``sentencified`` is used
    as-is; punctuated text (:func:`is_punctuated`) is cut by :func:`sentencify_punctuated` (mode
    ``whisperx_words`` when WhisperX word times exist, else ``punctuated``); unpunctuated text by
    :func:`sentencify_no_punct` (``no_punct_fallback``, which ignores word times), or by ``punctuate(captions)``
    when given (``bert``: TAN's punctuation model, :func:`cut_at_punctuation_labels`). Finally
    :func:`drop_bad_timestamps`; no sentence -> ``no_speech``; fewer than ``min_narrations`` = 5 ->
    ``too_few_narrations``; for ``segments``/``asr``/``sentencified`` and ``whisperx`` without ``language``, (a) on
    the sentences. Counters: those of the cleaning, ``bad_timestamp``, ``narrations`` (kept sentences).
    """
    del seed  # bound inside english_check (see above)
    if fmt not in FORMATS:
        raise ValueError(f"unknown transcript format {fmt!r}; expected one of {', '.join(FORMATS)}")
    counts: Counter = Counter()
    segs = [(str(t), s, e) for t, s, e in segments]
    word_lists = list(words) if words is not None else None
    texts = [t for t, _, _ in segs]
    has_word_times = bool(word_lists) and any(_timed(w) for ws in word_lists if ws for w in ws)
    mode = _mode(fmt, texts, has_word_times)

    def drop(reason: str, detail: str) -> Narrations:
        return Narrations([], counts, mode, reason, detail)

    has_words = any(t.split() for t in texts) or (
        bool(word_lists) and any(isinstance(w, str) and w.strip() for ws in word_lists if ws for w, _, _ in ws))
    if not has_words:
        return drop(NO_SPEECH, f"no word in {len(segs)} segments")
    if fmt in ("whisperx", "asr") and language is not None and not _is_en(language):
        return drop(NOT_ENGLISH, f"WhisperX language {language!r}")

    if fmt == "htm_raw":
        if english_check is not None and not (check := _english(english_check, texts))[0]:
            return drop(NOT_ENGLISH, f"(a) on the raw captions: {check[1]}")
        if not tan_length_ok(texts):
            return drop(TOO_FEW_NARRATIONS, f"(b) {len(texts)} captions, "
                                            f"{sum(len(t.split()) for t in texts) / len(texts):.1f} words each")
        caps, clean_counts = tan_clean_raw_captions(texts, [s for _, s, _ in segs], [e for _, _, e in segs])
        counts.update(clean_counts)
        mode = _mode(fmt, [t for t, _, _ in caps], False)
        if not caps:
            return drop(NO_SPEECH, f"(c)-(e) removed all {len(texts)} captions")
        if len(caps) <= MIN_MERGED_CAPTIONS:
            return drop(TOO_FEW_NARRATIONS, f"(f) {len(caps)} captions after cleaning <= {MIN_MERGED_CAPTIONS}")
        segs, word_lists = caps, None
    else:
        keep = [k for k, (_, s, e) in enumerate(segs) if _good_times(s, e)]
        counts[BAD_TIMESTAMP] += len(segs) - len(keep)
        segs = [segs[k] for k in keep]
        word_lists = [word_lists[k] if k < len(word_lists) else None for k in keep] if word_lists else None

    if mode == MODE_SENTENCIFIED:
        sentences = list(segs)
    elif mode == MODE_NO_PUNCT and punctuate is not None:  # GPU preset: TAN's punctuation model (Han et al., CVPR 2022)
        mode = MODE_BERT
        sentences = punctuate(list(segs))
    elif mode == MODE_NO_PUNCT:
        sentences = sentencify_no_punct(segs)
    else:
        sentences = sentencify_punctuated(word_stream(segs, word_lists))
    sentences, bad = drop_bad_timestamps(sentences)
    counts[BAD_TIMESTAMP] += bad
    if not sentences:
        return drop(NO_SPEECH, f"no sentence left ({counts[BAD_TIMESTAMP]} with bad timestamps)")
    if len(sentences) < min_narrations:
        return drop(TOO_FEW_NARRATIONS, f"{len(sentences)} sentences < {min_narrations}")
    check_sentences = fmt in ("segments", "asr", "sentencified") or (fmt == "whisperx" and language is None)
    if english_check is not None and check_sentences and not (
            check := _english(english_check, [t for t, _, _ in sentences]))[0]:
        return drop(NOT_ENGLISH, f"(a) on the sentences: {check[1]}")
    counts["narrations"] += len(sentences)
    return Narrations(sentences, counts, mode, None)


def _mode(fmt: str, texts: Sequence[str], has_word_times: bool) -> str:
    if fmt == "sentencified":
        return MODE_SENTENCIFIED
    if not is_punctuated(texts):
        return MODE_NO_PUNCT
    return MODE_WHISPERX_WORDS if has_word_times and fmt in ("whisperx", "asr") else MODE_PUNCTUATED


# ------------------------------------------------------------------------------------------- TAN punctuation model
MODE_BERT = "bert"
#: TAN's rule: with fewer than 20 pieces buffered only a full stop cuts; from 20 on any stop (adds , : ;)
FULL_STOPS, ANY_STOPS, SHORT_BUFFER, PIECE_GAP_S = ".!?", ".!?,:;", 20, 1.0


def cut_at_punctuation_labels(pieces: Sequence[str], continuation: Sequence[bool], starts: Sequence[float],
                              ends: Sequence[float], labels: Sequence[str], *, short: int = SHORT_BUFFER,
                              gap_s: float = PIECE_GAP_S) -> list[Sentence]:
    """TAN's cut rule over BERT word pieces (Han et al., CVPR 2022, ``TemporalAlignNet/sentencify_text``).

    ``labels`` are the punctuation model's classes per piece (``felflare/bert-restore-punctuation``: first character
    the mark after the word, ``O`` for none; second ``U`` for an upper-case word). Cut after piece i when fewer than
    ``short`` pieces are buffered and its label is a full stop, when ``short`` or more are buffered and it is any stop,
    or when the gap to the next piece exceeds ``gap_s``; never inside a word (the next piece continues it) or at an
    apostrophe. Words are rebuilt from their pieces, capitalised and punctuated as labelled."""
    n = len(pieces)
    out: list[Sentence] = []
    words: list[str] = []
    first = 0
    for i in range(n):
        text = pieces[i][2:] if continuation[i] and pieces[i].startswith("##") else pieces[i]
        if continuation[i] and words:
            words[-1] += text
        else:
            words.append(text)
        label = labels[i] if i < len(labels) else "OO"
        nxt_cont = i + 1 < n and continuation[i + 1]
        if not nxt_cont:  # the word is complete: apply its label
            if label[1:2] == "U":
                words[-1] = words[-1][:1].upper() + words[-1][1:]
            if label[:1] not in ("O", ""):
                words[-1] += label[0]
        buffered = i - first + 1
        mark = label[:1]
        apostrophe = "'" in (pieces[i], pieces[i + 1] if i + 1 < n else "") or mark == "'"
        gap = i + 1 < n and float(starts[i + 1]) - float(ends[i]) > gap_s
        stop = (buffered < short and mark in FULL_STOPS) or (buffered >= short and mark in ANY_STOPS)
        if i == n - 1 or (not nxt_cont and not apostrophe and (stop or gap)):
            out.append((" ".join(words), float(starts[first]), float(ends[i])))
            words, first = [], i + 1
    return out
