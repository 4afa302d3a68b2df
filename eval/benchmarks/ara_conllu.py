"""Reader of the ARA corpus: CoNLL-U recipes and crowdsourced action alignments (docs/corpora/marc.md).

ARA 1.1 (Donatelli et al., EMNLP 2021) holds real MARC text recipes (fixture ``marc_ara/<dish>/recipes/
<dish>_<k>.conllu``: CRLF, 10 tab-separated columns, no comments or blank lines, the whole recipe one token stream)
and per dish ``alignments.tsv`` (CRLF, header ``file1 token1 file2 token2``; ``token1``/``token2`` = first token of a
source / target action, ``token2 = 0`` = no counterpart).

This module:

- parses both formats and validates them (a malformed file raises :class:`AraFormatError` naming file and line);
- splits a token stream into *instructions* by the rule of docs/corpora/marc.md and maps every token to its
  instruction (:func:`split_instructions`);
- turns a recipe into a text-recipe row of the ``marc`` builder (:func:`to_text_recipe`, extraction ``conllu``);
- derives the sentence-level gold of one recipe pair from the action-level alignments (:func:`pair_gold`: majority
  target instruction, ties to the earliest source action, NONE = -1 when no action has a counterpart).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "NONE",
    "TERMINATORS",
    "AlignmentRow",
    "AraCorpus",
    "AraFormatError",
    "AraRecipe",
    "AraToken",
    "PairGold",
    "corpus_summary",
    "pair_gold",
    "parse_alignments",
    "parse_conllu",
    "read_alignments",
    "read_conllu",
    "read_corpus",
    "read_recipe",
    "split_instructions",
    "to_text_recipe",
]

#: gold label of a source instruction none of whose actions has a counterpart (docs/evaluation.md)
NONE = -1
#: tokens that always end an instruction (docs/corpora/marc.md)
TERMINATORS = frozenset({".", "!", "?", "..."})
#: closing tokens that join the instruction they directly follow
CLOSERS = frozenset({")", "]", '"', "'"})
_ALNUM = re.compile(r"[^\W_]")  # an alphanumeric character (letters or digits, any script)
_N_COLUMNS = 10
ALIGNMENT_HEADER = ("file1", "token1", "file2", "token2")


#: ``on_bad_row(row, message)``: told about an alignment row that points outside its recipe (then skipped)
BadRowHandler = Callable[["AlignmentRow", str], None]


class AraFormatError(ValueError):
    """A CoNLL-U or alignments file that does not follow the ARA format (file and line in the message)."""


@dataclass(frozen=True)
class AraToken:
    """One CoNLL-U row: token index (from 1), form, action tag (``B-A``/``I-A``/``O``), head action, relation."""

    index: int
    form: str
    tag: str
    head: int
    deprel: str


@dataclass
class AraRecipe:
    """A recipe file: its tokens and the instructions of docs/corpora/marc.md.

    ``instructions[i]`` is the list of 0-based token positions of instruction ``i``; ``token_to_instruction[k]`` the
    instruction of the token with CoNLL-U index ``k + 1``.
    """

    name: str
    dish: str
    tokens: list[AraToken]
    instructions: list[list[int]]
    token_to_instruction: np.ndarray

    @property
    def instruction_texts(self) -> list[str]:
        """Instructions as text: tokens joined by single spaces (the CoNLL-U forms, unchanged)."""
        return [" ".join(self.tokens[k].form for k in positions) for positions in self.instructions]

    @property
    def action_starts(self) -> list[int]:
        """CoNLL-U indices (from 1) of the first token of every action (tag ``B-A``)."""
        return [t.index for t in self.tokens if t.tag == "B-A"]

    def instruction_of(self, token_index: int) -> int:
        """The instruction holding the token with CoNLL-U index ``token_index`` (from 1)."""
        if not 1 <= token_index <= len(self.tokens):
            raise KeyError(f"{self.name}: token {token_index} outside 1..{len(self.tokens)}")
        return int(self.token_to_instruction[token_index - 1])


@dataclass(frozen=True)
class AlignmentRow:
    """One row of ``alignments.tsv``: source action (file1, token1) aligned to target action (file2, token2 or 0)."""

    file1: str
    token1: int
    file2: str
    token2: int
    line: int = 0


@dataclass
class PairGold:
    """Sentence-level gold of one ordered pair (source = ``file1``, target = ``file2``), docs/corpora/marc.md.

    ``gold[m]`` = majority target instruction of source instruction ``m`` (NONE = -1); ``hits[m]`` = every target
    instruction hit by one of its actions (sorted; the lenient "any" accuracy counts a prediction in it).
    """

    source: str
    target: str
    gold: list[int]
    hits: list[list[int]]

    @property
    def pair_id(self) -> str:
        return f"{self.source}|{self.target}"

    @property
    def multi_target(self) -> int:
        """Source instructions whose actions hit more than one target instruction."""
        return sum(1 for h in self.hits if len(h) > 1)


@dataclass
class AraCorpus:
    """All dishes of an ARA folder: recipes by file name, alignment rows per dish (file order)."""

    recipes: dict[str, AraRecipe] = field(default_factory=dict)
    alignments: dict[str, list[AlignmentRow]] = field(default_factory=dict)

    @property
    def dishes(self) -> list[str]:
        return sorted({r.dish for r in self.recipes.values()})

    def dish_recipes(self, dish: str) -> list[AraRecipe]:
        """The dish's recipes ordered by their number (``<dish>_0``, ``<dish>_1``, ..., ``<dish>_10``)."""
        return sorted((r for r in self.recipes.values() if r.dish == dish), key=lambda r: _recipe_number(r.name))

    def pairs(self) -> list[tuple[str, str]]:
        """The aligned ordered pairs (file1, file2) in file order, dishes sorted."""
        out: list[tuple[str, str]] = []
        for dish in sorted(self.alignments):
            for row in self.alignments[dish]:
                key = (row.file1, row.file2)
                if key not in out:
                    out.append(key)
        return out

    def gold(self, on_bad_row: BadRowHandler | None = None) -> list[PairGold]:
        """Gold of every aligned pair (:func:`pair_gold`), in :meth:`pairs` order.

        ``on_bad_row`` (see :func:`pair_gold`) skips alignment rows whose token lies outside its recipe instead of
        raising; the upstream ARA release has such rows.
        """
        by_pair: dict[tuple[str, str], list[AlignmentRow]] = {}
        for dish in sorted(self.alignments):
            for row in self.alignments[dish]:
                by_pair.setdefault((row.file1, row.file2), []).append(row)
        out = []
        for f1, f2 in self.pairs():
            if f1 not in self.recipes or f2 not in self.recipes:
                missing = f1 if f1 not in self.recipes else f2
                raise AraFormatError(f"alignments name recipe {missing!r}, which has no .conllu file")
            out.append(pair_gold(self.recipes[f1], self.recipes[f2], by_pair[(f1, f2)], on_bad_row))
        return out


def _recipe_number(name: str) -> tuple[int, str]:
    tail = name.rsplit("_", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


# ------------------------------------------------------------------------------------------------ parsing


def _lines(text: str) -> list[str]:
    """Lines of a CRLF (or LF) file; a final line break does not make an empty last line."""
    text = text.removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse_conllu(text: str, name: str = "<string>") -> list[AraToken]:
    """Tokens of one ARA CoNLL-U recipe (docs/corpora/marc.md): 10 tab-separated columns, indices 1, 2, 3, ...

    Raises :class:`AraFormatError` on a wrong column count, a non-integer or out-of-sequence index, an empty form, a
    non-integer head or an unknown action tag. Blank lines and ``#`` comments (absent in ARA) are tolerated.
    """
    tokens: list[AraToken] = []
    for line_no, line in enumerate(_lines(text), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != _N_COLUMNS:
            raise AraFormatError(f"{name}:{line_no}: {len(cols)} columns, expected {_N_COLUMNS}")
        try:
            index = int(cols[0])
        except ValueError:
            raise AraFormatError(f"{name}:{line_no}: token index {cols[0]!r} is not an integer") from None
        if index != len(tokens) + 1:
            raise AraFormatError(f"{name}:{line_no}: token index {index}, expected {len(tokens) + 1}")
        form = cols[1]
        if not form.strip():
            raise AraFormatError(f"{name}:{line_no}: empty token")
        tag = cols[4]
        if tag not in {"B-A", "I-A", "O"}:
            raise AraFormatError(f"{name}:{line_no}: action tag {tag!r} (expected B-A, I-A or O)")
        try:
            head = int(cols[6]) if cols[6] != "_" else 0
        except ValueError:
            raise AraFormatError(f"{name}:{line_no}: head {cols[6]!r} is not an integer") from None
        tokens.append(AraToken(index, form, tag, head, cols[7]))
    if not tokens:
        raise AraFormatError(f"{name}: no tokens")
    return tokens


def _read_utf8(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise AraFormatError(f"{path}: not UTF-8 text ({exc})") from None


def read_conllu(path: Path | str) -> list[AraToken]:
    """:func:`parse_conllu` of a file (UTF-8, CRLF)."""
    path = Path(path)
    text = _read_utf8(path)
    return parse_conllu(text, str(path))


def parse_alignments(text: str, name: str = "<string>") -> list[AlignmentRow]:
    """Rows of an ARA ``alignments.tsv`` (header ``file1 token1 file2 token2``; token indices from 1, token2 may be 0)."""
    lines = _lines(text)
    if not lines or tuple(c.strip() for c in lines[0].split("\t")) != ALIGNMENT_HEADER:
        got = lines[0] if lines else ""
        raise AraFormatError(f"{name}:1: header {got!r}, expected {' '.join(ALIGNMENT_HEADER)} (tab-separated)")
    rows: list[AlignmentRow] = []
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 4:
            raise AraFormatError(f"{name}:{line_no}: {len(cols)} columns, expected 4")
        try:
            token1, token2 = int(cols[1]), int(cols[3])
        except ValueError:
            raise AraFormatError(f"{name}:{line_no}: token ids {cols[1]!r}, {cols[3]!r} are not integers") from None
        if token1 < 1 or token2 < 0 or not cols[0] or not cols[2]:
            raise AraFormatError(f"{name}:{line_no}: bad row {line!r}")
        rows.append(AlignmentRow(cols[0], token1, cols[2], token2, line_no))
    return rows


def read_alignments(path: Path | str) -> list[AlignmentRow]:
    """:func:`parse_alignments` of a file."""
    path = Path(path)
    text = _read_utf8(path)
    return parse_alignments(text, str(path))


# --------------------------------------------------------------------------------------- instructions


def _is_end(forms: Sequence[str], k: int) -> bool:
    form = forms[k]
    if form in TERMINATORS:
        return True
    if len(form) >= 2 and form.endswith(".") and k + 1 < len(forms):
        nxt = forms[k + 1]
        return nxt[:1].isupper()
    return False


def split_instructions(forms: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
    """Split a recipe's token stream into instructions (docs/corpora/marc.md); returns (positions per instruction, map).

    A token ends an instruction if it is one of ``.``, ``!``, ``?``, ``...``, or has length >= 2, ends in ``.`` and the
    next token starts with an uppercase letter (``350 F.`` + ``Cooked`` splits; ``i.`` + ``e.`` and ``Drain.3`` do not).
    Closing ``)``, ``]``, ``"``, ``'`` right after an end token join that instruction; the last instruction ends at the
    last token. A recipe with none of the four terminators is instead split before every token whose first character
    is uppercase while its predecessor's is not. An instruction without an alphanumeric character joins the previous
    one; a *first* instruction has none to join and stays (``homemade_pizza_dough_9`` starts with a lone ``.``: the
    fixture counts of docs/evaluation.md, 631 instructions and 134 NONE, include it). ``map[k]`` = instruction of token
    position ``k``.
    """
    n = len(forms)
    if n == 0:
        return [], np.zeros(0, dtype=np.int64)
    starts: list[int] = [0]
    if any(f in TERMINATORS for f in forms):
        k = 0
        while k < n:
            if _is_end(forms, k):
                k += 1
                while k < n and forms[k] in CLOSERS:
                    k += 1
                if k < n:
                    starts.append(k)
                continue
            k += 1
    else:
        for k in range(1, n):
            if forms[k][:1].isupper() and not forms[k - 1][:1].isupper():
                starts.append(k)
    bounds = starts + [n]
    groups = [list(range(bounds[i], bounds[i + 1])) for i in range(len(starts))]
    merged: list[list[int]] = []
    for group in groups:
        if merged and not any(_ALNUM.search(forms[k]) for k in group):
            merged[-1].extend(group)
        else:
            merged.append(group)
    token_map = np.empty(n, dtype=np.int64)
    for i, group in enumerate(merged):
        token_map[group] = i
    return merged, token_map


def read_recipe(path: Path | str, dish: str | None = None) -> AraRecipe:
    """One ``.conllu`` recipe with its instructions; ``dish`` defaults to the folder above ``recipes/``."""
    path = Path(path)
    tokens = read_conllu(path)
    if dish is None:
        dish = path.parent.parent.name if path.parent.name == "recipes" else path.parent.name
    instructions, token_map = split_instructions([t.form for t in tokens])
    return AraRecipe(path.stem, dish, tokens, instructions, token_map)


def read_corpus(root: Path | str) -> AraCorpus:
    """Every ``<dish>/recipes/*.conllu`` and ``<dish>/alignments.tsv`` under ``root`` (dishes sorted).

    A dish folder without ``recipes/`` is ignored; a missing ``alignments.tsv`` gives a dish without pairs.
    """
    root = Path(root)
    if not root.is_dir():
        raise AraFormatError(f"ARA folder not found: {root}")
    corpus = AraCorpus()
    for dish_dir in sorted(p for p in root.iterdir() if p.is_dir() and (p / "recipes").is_dir()):
        for path in sorted((dish_dir / "recipes").glob("*.conllu")):
            recipe = read_recipe(path, dish_dir.name)
            if recipe.name in corpus.recipes:
                raise AraFormatError(f"{path}: recipe name {recipe.name!r} appears twice")
            corpus.recipes[recipe.name] = recipe
        tsv = dish_dir / "alignments.tsv"
        if tsv.is_file():
            corpus.alignments[dish_dir.name] = read_alignments(tsv)
    if not corpus.recipes:
        raise AraFormatError(f"{root}: no <dish>/recipes/*.conllu files")
    return corpus


# ------------------------------------------------------------------------------------------------ gold


def pair_gold(source: AraRecipe, target: AraRecipe, rows: Iterable[AlignmentRow],
              on_bad_row: BadRowHandler | None = None) -> PairGold:
    """Sentence-level gold of one pair from its action alignments (docs/corpora/marc.md).

    For each source instruction, collect the target instructions of its aligned actions (``token2 = 0`` ignored);
    the gold label is the most frequent one, ties going to the target aligned to the earliest source action (smallest
    ``token1``, then file order); no aligned action gives NONE (-1). ``hits`` keeps every target hit.

    A row whose ``token1`` / ``token2`` lies past the end of its recipe raises :class:`AraFormatError`, unless
    ``on_bad_row(row, message)`` is given: then the row is reported to it and skipped (issue 14: the upstream ARA
    release holds such rows, and one of them must not abort the evaluation).
    """
    votes: dict[int, list[tuple[int, int, int]]] = {}  # source instr -> [(token1, order, target instr)]
    for order, row in enumerate(rows):
        if row.file1 != source.name or row.file2 != target.name:
            raise AraFormatError(f"line {row.line}: row of pair {row.file1}|{row.file2} given for "
                                 f"{source.name}|{target.name}")
        try:
            m = source.instruction_of(row.token1)
            if row.token2 == 0:
                continue
            n = target.instruction_of(row.token2)
        except KeyError as exc:
            message = f"{source.dish}/alignments.tsv:{row.line}: {exc.args[0]}"
            if on_bad_row is None:
                raise AraFormatError(message) from None
            on_bad_row(row, message)
            continue
        votes.setdefault(m, []).append((row.token1, order, n))
    gold: list[int] = []
    hits: list[list[int]] = []
    for m in range(len(source.instructions)):
        cast = votes.get(m, [])
        if not cast:
            gold.append(NONE)
            hits.append([])
            continue
        counts = Counter(n for _, _, n in cast)
        first_seen: dict[int, tuple[int, int]] = {}
        for token1, order, n in cast:
            key = (token1, order)
            if n not in first_seen or key < first_seen[n]:
                first_seen[n] = key
        best = max(counts.values())
        tied = [n for n, c in counts.items() if c == best]
        gold.append(min(tied, key=lambda n: first_seen[n]))
        hits.append(sorted(counts))
    return PairGold(source.name, target.name, gold, hits)


# ------------------------------------------------------------------------------------------ builder adapter


def to_text_recipe(recipe: AraRecipe, source_path: str = "") -> dict[str, Any]:
    """The recipe as a ``marc`` text-recipe row (docs/corpora/marc.md: dish = folder, no ingredients, instructions as above)."""
    return {
        "recipe_id": f"t:{recipe.name}",
        "dish_id": recipe.dish,
        "dish_name": recipe.dish.replace("_", " "),
        "modality": "text",
        "title": recipe.dish.replace("_", " "),
        "url": "",
        "language": "en",
        "ingredients": [],
        "ingredient_terms": [],
        "instructions": recipe.instruction_texts,
        "step_index": list(range(len(recipe.instructions))),
        "section": [""] * len(recipe.instructions),
        "start": [],
        "end": [],
        "num_chat_removed": 0,
        "source": {"extraction": "conllu", "warc_filename": source_path, "warc_record_offset": -1,
                   "warc_record_id": "", "recipe_index_in_page": 0, "asr_source": "", "chat_classifier": ""},
    }


def corpus_summary(corpus: AraCorpus, gold: Sequence[PairGold] | None = None) -> Mapping[str, Any]:
    """The fixture counts (docs/evaluation.md, ``marc_ara``): recipes, instructions (mean/min/max), pairs, source
    instructions, labelled, NONE, multi."""
    gold = corpus.gold() if gold is None else gold
    lengths = [len(r.instructions) for r in corpus.recipes.values()]
    labels = [g for pg in gold for g in pg.gold]
    return {
        "recipes": len(corpus.recipes),
        "instructions": int(sum(lengths)),
        "instructions_mean": float(np.mean(lengths)) if lengths else 0.0,
        "instructions_min": int(min(lengths)) if lengths else 0,
        "instructions_max": int(max(lengths)) if lengths else 0,
        "pairs": len(gold),
        "source_instructions": len(labels),
        "labelled": sum(1 for g in labels if g != NONE),
        "none": sum(1 for g in labels if g == NONE),
        "multi_target": sum(pg.multi_target for pg in gold),
    }
