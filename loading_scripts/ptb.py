"""Penn Treebank word tokenisation for the Sieve & Swap YouCook2-format export (docs/corpora/sieve_swap.md).

Used by :func:`loading_scripts.sieve_swap.to_yc2_format` (captions lowercased and PTB-tokenised, as the upstream
``*_yc2format_clean.json`` files of Batra et al., ECCV 2024, §6-7). It lives in
``loading_scripts`` because that is its only user and loading_scripts import no builders. Pure, stdlib only.
"""

from __future__ import annotations

import re

__all__ = ["ptb_tokenize"]

# ------------------------------------------------------------------------------------------------ ptb_tokenize
# A re-implementation of the Penn Treebank word tokeniser rules (the same rules as NLTK's TreebankWordTokenizer,
# written here so that no NLTK data is needed), applied to lowercased text, plus one extension: PTB only splits
# the period at the very end of its input (it expects one sentence); a recipe step often holds several sentences,
# so every token-final period is split off (``"350°f."`` -> ``"350°f ."``), except ellipses and initialisms
# (``"a.m."``, ``"u.s."``). Brackets stay as they are (no ``-LRB-`` conversion); double quotes become the PTB
# opening/closing quotes ``` `` ``` / ``''``; curly quotes are first mapped to their ASCII forms.

_QUOTE_MAP = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                            "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"'})

_STARTING_QUOTES = [
    (re.compile(r'^"'), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|'{2})"), r"\1 `` "),
]
_PUNCTUATION = [
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.\.\."), r" ... "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"([^\.])(\.)([\]\)}>\"']*)\s*$"), r"\1 \2\3 "),  # the final period
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
]
_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}<>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_ENDING_QUOTES = [
    (re.compile(r'"'), " '' "),
    (re.compile(r"(\S)('')"), r"\1 \2 "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_CONTRACTIONS = [re.compile(p) for p in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b", r"(?i)\b(gon)(?#X)(na)\b",
    r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b", r"(?i)\b(more)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)(?=\s)",
    r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b",
)]
_INITIALISM = re.compile(r"(?:[^\W\d_]\.){2,}")  # a.m.  u.s.  e.g.


def _split_final_period(token: str) -> list[str]:
    if len(token) > 1 and token.endswith(".") and not token.endswith("..") and not _INITIALISM.fullmatch(token):
        return [token[:-1], "."]
    return [token]


def ptb_tokenize(text: str) -> str:
    """Lowercase and Penn-Treebank-tokenise ``text``; tokens joined by single spaces (the ``yc2format/`` export of
    docs/corpora/sieve_swap.md).

    The export matches the upstream ``*_yc2format_clean.json`` files of Batra et al., ECCV 2024 (PDVC/YouCook2 format, §6-7).
    Punctuation becomes separate tokens, contractions split as in PTB (``"don't"`` -> ``"do n't"``, ``"it's"`` ->
    ``"it 's"``, ``"cannot"`` -> ``"can not"``), hyphenated words, decimals (``3.5``) and fractions (``1/2``) stay
    whole. Example: ``"Preheat the oven to 350°F. Don't burn it!"`` -> ``"preheat the oven to 350°f . do n't burn
    it !"``.
    """
    text = text.translate(_QUOTE_MAP).lower()
    for regexp, repl in _STARTING_QUOTES:
        text = regexp.sub(repl, text)
    for regexp, repl in _PUNCTUATION:
        text = regexp.sub(repl, text)
    text = _PARENS_BRACKETS[0].sub(_PARENS_BRACKETS[1], text)
    text = _DOUBLE_DASHES[0].sub(_DOUBLE_DASHES[1], text)
    text = " " + text + " "
    for regexp, repl in _ENDING_QUOTES:
        text = regexp.sub(repl, text)
    for regexp in _CONTRACTIONS:
        text = regexp.sub(r" \1 \2 ", text)
    return " ".join(piece for token in text.split() for piece in _split_final_period(token))
