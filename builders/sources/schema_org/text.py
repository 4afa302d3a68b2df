"""Text helpers of the Schema.org Recipe extraction (docs/corpora/marc.md, "Pipeline" step 1): HTML unescaping, tag
stripping and whitespace, and the splitting of instruction strings into steps (Lin et al., ACL 2020, §2.1, A.1.1)."""

from __future__ import annotations

import html as html_lib
import re
import unicodedata

_WS_RE = re.compile(r"\s+")
_TAG_RE = re.compile(r"<!--.*?-->|<[A-Za-z/!?][^<>]*>", re.DOTALL)
_INLINE_TAG_RE = re.compile(r"</?(?:a|abbr|b|bdi|bdo|cite|code|data|dfn|em|font|i|kbd|mark|q|s|samp|small|span|strong|"
                            r"sub|sup|time|u|var)\b[^<>]*>", re.IGNORECASE)
_BREAK_RE = re.compile(r"<\s*br\s*/?\s*>|<\s*/\s*(?:p|li)\s*>", re.IGNORECASE)
_ENTITY_RE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_LINES_RE = re.compile(r"[\r\n\u2028\u2029]+")
# a sentence end glued to the next capitalised sentence ("oil.Put"): split between them (string instructions only)
_GLUED_SENTENCE_RE = re.compile(r"(?<=[a-z0-9)][.!?])(?=[A-Z][a-z])")
# "1. " / "2)" at the start of a step text (followed by a letter, not "1.5")
_NUMBER_MARK_RE = re.compile(r"\s*(\d{1,2})[.)]\s*(?=[^\W\d_])")


def unescape_html(text: str) -> str:
    """HTML-unescape at most twice (``&amp;#39;`` occurs on real pages)."""
    once = html_lib.unescape(text)
    return html_lib.unescape(once) if _ENTITY_RE.search(once) else once


def collapse(text: str) -> str:
    """Runs of whitespace (``\\xa0`` included) -> one space, stripped."""
    return _WS_RE.sub(" ", text).strip()


def strip_tags(text: str) -> str:
    """Remove HTML tags and comments: inline tags (``<b>``, ``<a>``, ``<span>``, ...) vanish, others become a space;
    a ``<`` not followed by a letter, ``/``, ``!`` or ``?`` is kept."""
    return _TAG_RE.sub(" ", _INLINE_TAG_RE.sub("", text))


def clean_text(text: str) -> str:
    """One-line text of a JSON-LD string value: unescaped (at most twice), tags stripped, whitespace collapsed."""
    return collapse(strip_tags(unescape_html(text)))


def split_instruction_string(text: str, newlines: bool = True, glued: bool = False) -> list[str]:
    """Steps of a string ``recipeInstructions``: HTML-unescape (at most twice), split on newlines,
    ``<br>``, ``</p>``, ``</li>``, strip tags, collapse whitespace, drop empty pieces.

    ``newlines=False`` keeps raw line breaks inside a step (a string that is one item of an instruction list is one
    step, as recipe-scrapers reads it; only its HTML breaks split it). ``glued=True`` also splits where a sentence
    end runs into the next capitalised sentence without a space (``oil.Put the``): the trace of paragraph breaks that a
    page dropped when it flattened its steps into one string.
    """
    text = _BREAK_RE.sub("\x00", unescape_html(text))
    pieces = [line for piece in text.split("\x00") for line in (_LINES_RE.split(piece) if newlines else [piece])]
    if glued:
        pieces = [part for piece in pieces for part in _GLUED_SENTENCE_RE.split(piece)]
    cleaned = (collapse(strip_tags(piece)) for piece in pieces)
    return [piece for piece in cleaned if piece]


def split_numbered_steps(text: str) -> list[str]:
    """A step whose text runs several numbered steps together (``1. Mix. 2. Bake.3. Serve.``) -> one text per
    number, markers removed; any other text -> ``[text]``.

    Only a text that starts with ``1.`` / ``1)`` and then holds ``2.``, ``3.``, ... in order, each after a space or a
    sentence end and before a capital letter, is split (so ``1.5 cups`` or ``Bake 2. Then`` never split it).
    """
    first = _NUMBER_MARK_RE.match(text)
    if first is None or first.group(1) != "1":
        return [text]
    starts = [first]
    pos = first.end()
    while True:
        nxt = re.compile(rf"(?:(?<=[\s.!?;:)])|^){len(starts) + 1}[.)]\s*(?=[^\W\d_])").search(text, pos)
        if nxt is None:
            break
        starts.append(nxt)
        pos = nxt.end()
    if len(starts) < 2:
        return [text]
    bounds = [m.start() for m in starts[1:]] + [len(text)]
    pieces = [collapse(text[m.end():end]) for m, end in zip(starts, bounds)]
    return [piece for piece in pieces if piece]


def normalize_name(title: str) -> str:
    """The key under which Recipe nodes merge: NFKC, casefolded, whitespace collapsed."""
    return collapse(unicodedata.normalize("NFKC", title).casefold())
