"""The "Sieve" of Sieve & Swap: title matching (Eq. 5) and the content sieve (token-IoU / token-recall).

Paper: Batra et al., ECCV 2024, §4.2 "Sieving Videos" (Eq. 5, λ_iou = 0.1, λ_recall = 0.3,
validation iff IoU ≥ 0.2); docs/corpora/sieve_swap.md (inverted index with numpy posting
arrays; CSR binary matrices over the lemma vocabulary, union = |A| + |B| − ∩).

Everything here is pure: lemmas arrive as strings (from ``content_lemmas`` elsewhere), are mapped to int ids by
:class:`LemmaVocab`, and all per-video work is a handful of vectorised numpy calls.

State: the recipe lemma index is built once by a global stage and loaded by path in every worker (docs/architecture.md
"Global stages"). Each of :class:`LemmaVocab`, :class:`TitleIndex` and :class:`BodyMatrix` has ``to_state()``
(plain numeric arrays + JSON-serialisable metadata; no object arrays, so ``np.load(allow_pickle=False)`` works) and
``from_state(arrays, meta)``, which restores the built arrays as they are (no rebuild), so ``candidates()`` and
``scores()`` are bit-identical. Array names do not collide across the three classes, so one ``.npz`` can hold all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

__all__ = [
    "token_iou_recall",
    "LemmaVocab",
    "TitleIndex",
    "BodyMatrix",
    "content_sieve",
    "split_for",
]

TitleMatch = Literal["any", "recipe_subset"]

_VOCAB_FORMAT = "procvid.sieve.LemmaVocab/1"
_TITLE_FORMAT = "procvid.sieve.TitleIndex/1"
_BODY_FORMAT = "procvid.sieve.BodyMatrix/1"


def _check_format(meta: Mapping[str, Any], expected: str) -> None:
    if meta.get("format") != expected:
        raise ValueError(f"state format {meta.get('format')!r}, expected {expected!r}")


def token_iou_recall(a: set, b: set) -> tuple[float, float]:
    """Token-IoU and token-recall of a transcript set ``a`` and a recipe set ``b`` (Batra et al., ECCV 2024, §4.2).

    ``iou = |A∩B| / |A∪B|``, ``recall = |A∩B| / |B|`` (recall of the recipe's content words in the transcript);
    each is 0.0 when its denominator is 0. Reference (set-based) implementation of :meth:`BodyMatrix.scores`.
    """
    a, b = set(a), set(b)
    inter = len(a & b)
    union = len(a) + len(b) - inter
    iou = inter / union if union else 0.0
    recall = inter / len(b) if b else 0.0
    return iou, recall


class LemmaVocab:
    """Lemma string <-> int id, ids assigned in order of first insertion (for CSR over the lemma vocabulary).

    Deterministic: :meth:`encode` inserts the new lemmas of one call in sorted (code-point) order, so the ids never
    depend on set iteration order (string hashing is randomised per process).
    """

    def __init__(self, lemmas: Iterable[str] = ()) -> None:
        self._ids: dict[str, int] = {}
        self._lemmas: list[str] = []
        for lemma in lemmas:
            self.add(lemma)

    def add(self, lemma: str) -> int:
        """Id of ``lemma``, inserting it (next free id) when new."""
        i = self._ids.get(lemma)
        if i is None:
            i = len(self._lemmas)
            self._ids[lemma] = i
            self._lemmas.append(lemma)
        return i

    def get(self, lemma: str, default: int = -1) -> int:
        """Id of ``lemma`` or ``default`` when absent (never inserts)."""
        return self._ids.get(lemma, default)

    def encode(self, lemmas: Iterable[str], add: bool = True) -> np.ndarray:
        """Sorted unique int32 ids of ``lemmas``. New lemmas are inserted (in sorted order) when ``add``, else skipped.

        Keep ``add=True`` for a transcript whose ids feed :meth:`BodyMatrix.scores`: a skipped lemma would be
        missing from |A| and so inflate the IoU (or pass ``video_size`` there).
        """
        if isinstance(lemmas, str):
            raise TypeError("encode() takes an iterable of lemmas, not one string")
        unique = sorted(set(lemmas))
        if add:
            ids = [self.add(lemma) for lemma in unique]
        else:
            ids = [i for i in (self._ids.get(lemma, -1) for lemma in unique) if i >= 0]
        return np.unique(np.asarray(ids, dtype=np.int32))

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Lemma strings of ``ids`` (in the given order)."""
        return [self._lemmas[int(i)] for i in ids]

    def lemma(self, i: int) -> str:
        """Lemma string of id ``i``."""
        return self._lemmas[i]

    @property
    def lemmas(self) -> list[str]:
        """All lemmas, index = id (a copy)."""
        return list(self._lemmas)

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """No arrays; meta ``{"format", "lemmas"}`` with ``lemmas`` the lemma strings, index = id (JSON-exact)."""
        return {}, {"format": _VOCAB_FORMAT, "lemmas": list(self._lemmas)}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> LemmaVocab:
        """The vocabulary saved by :meth:`to_state` (same ids; later :meth:`add` calls continue after them)."""
        _check_format(meta, _VOCAB_FORMAT)
        lemmas = [str(x) for x in meta["lemmas"]]
        vocab = cls(lemmas)
        if len(vocab) != len(lemmas):
            raise ValueError("the saved lemma list repeats a lemma")
        return vocab

    def __len__(self) -> int:
        return len(self._lemmas)

    def __contains__(self, lemma: object) -> bool:
        return lemma in self._ids

    def __getitem__(self, lemma: str) -> int:
        return self._ids[lemma]


def _csr_from_pairs(row_of: np.ndarray, cols: np.ndarray, num_rows: int,
                    num_cols: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR (indptr int64, indices int64 sorted unique within each row, num_cols) of binary (row, col) pairs."""
    row_of = np.asarray(row_of, dtype=np.int64).ravel()
    cols = np.asarray(cols, dtype=np.int64).ravel()
    if cols.size and cols.min() < 0:
        raise ValueError("lemma ids must be >= 0")
    max_id = int(cols.max()) + 1 if cols.size else 0
    if num_cols is None:
        num_cols = max_id
    elif num_cols < max_id:
        raise ValueError(f"vocab_size={num_cols} but a lemma id {max_id - 1} occurs")
    width = max(num_cols, 1)
    key = row_of * width + cols
    if key.size > 1 and not np.all(key[1:] > key[:-1]):  # skip the sort when rows are already sorted unique
        key = np.unique(key)  # sorted by (row, col), duplicates removed
    row_of, cols = np.divmod(key, width)
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=num_rows), out=indptr[1:])
    return indptr, cols, num_cols


def _csr_from_rows(rows_of_ids: Sequence[np.ndarray], num_cols: int | None) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR of binary rows given as one id array per row (vectorised apart from the flattening)."""
    n = len(rows_of_ids)
    lens = np.fromiter((len(r) for r in rows_of_ids), dtype=np.int64, count=n)
    flat = (np.concatenate([np.asarray(r, dtype=np.int64).ravel() for r in rows_of_ids])
            if n and lens.sum() else np.zeros(0, dtype=np.int64))
    return _csr_from_pairs(np.repeat(np.arange(n, dtype=np.int64), lens), flat, n, num_cols)


def _rows_of_csr(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    indptr = np.asarray(indptr, dtype=np.int64).ravel()
    if indptr.size == 0 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices):
        raise ValueError("indptr must start at 0, be non-decreasing and end at len(indices)")
    n = indptr.size - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)), np.asarray(indices), n


class TitleIndex:
    """Inverted index title lemma -> sorted recipe ROW positions, with idf over recipe titles (Batra et al., ECCV 2024,
    Eq. 5).

    Built from ``recipe_ids`` (int64, one per row) and each row's title lemma ids (``title_lemmas(r)`` after
    removing generic words, encoded by :class:`LemmaVocab`). ``idf[l] = log(N / df[l])`` with N = number of rows and
    df = number of rows whose title holds ``l`` (0.0 where df = 0). Rows are positions ``0..N-1``; map them to
    recipe ids with ``index.recipe_ids[rows]``.
    """

    def __init__(self, recipe_ids: np.ndarray, title_lemma_ids: Sequence[np.ndarray],
                 vocab_size: int | None = None) -> None:
        recipe_ids = np.asarray(recipe_ids, dtype=np.int64).ravel()
        if len(title_lemma_ids) != recipe_ids.size:
            raise ValueError(f"{recipe_ids.size} recipe ids but {len(title_lemma_ids)} title lemma arrays")
        self._build(recipe_ids, *_csr_from_rows(title_lemma_ids, vocab_size))

    @classmethod
    def from_csr(cls, recipe_ids: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                 vocab_size: int | None = None) -> TitleIndex:
        """Same index from row-major CSR arrays of the titles (row ``i`` = ``indices[indptr[i]:indptr[i+1]]``)."""
        recipe_ids = np.asarray(recipe_ids, dtype=np.int64).ravel()
        row_of, cols, n = _rows_of_csr(indptr, indices)
        if n != recipe_ids.size:
            raise ValueError(f"{recipe_ids.size} recipe ids but {n} CSR rows")
        self = cls.__new__(cls)
        self._build(recipe_ids, *_csr_from_pairs(row_of, cols, n, vocab_size))
        return self

    def _build(self, recipe_ids: np.ndarray, row_ptr: np.ndarray, cols: np.ndarray, vocab_size: int) -> None:
        self.recipe_ids = recipe_ids
        self.vocab_size = vocab_size
        n = recipe_ids.size
        # Row-major CSR of the titles, transposed: a stable sort by lemma keeps rows ascending per posting list.
        self.title_sizes = np.diff(row_ptr)  # |title_lemmas(r)| per row
        rows = np.repeat(np.arange(n, dtype=np.int64), self.title_sizes)
        order = np.argsort(cols, kind="stable")
        self.postings = rows[order]
        self.indptr = np.zeros(self.vocab_size + 1, dtype=np.int64)
        np.cumsum(np.bincount(cols, minlength=self.vocab_size), out=self.indptr[1:])
        self.df = np.diff(self.indptr)
        with np.errstate(divide="ignore"):
            self.idf = np.where(self.df > 0, np.log(n / np.maximum(self.df, 1)), 0.0)
        self._ids_ascending = bool(n < 2 or np.all(np.diff(self.recipe_ids) > 0))

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The built index as arrays (the index's own, not copies) and JSON-serialisable meta.

        arrays: ``title_recipe_ids`` (int64, (N,)), ``title_sizes`` (int64, (N,) lemmas per title),
        ``title_postings`` (int64, rows grouped by lemma), ``title_indptr`` (int64, (vocab_size + 1,)),
        ``title_idf`` (float64, (vocab_size,)). meta: ``format``, ``vocab_size``.
        """
        arrays = {"title_recipe_ids": self.recipe_ids, "title_sizes": self.title_sizes,
                  "title_postings": self.postings, "title_indptr": self.indptr, "title_idf": self.idf}
        return arrays, {"format": _TITLE_FORMAT, "vocab_size": int(self.vocab_size)}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> TitleIndex:
        """The index saved by :meth:`to_state`, arrays taken as they are (``np.load`` results or memory maps)."""
        _check_format(meta, _TITLE_FORMAT)
        self = cls.__new__(cls)
        self.recipe_ids = np.asarray(arrays["title_recipe_ids"], dtype=np.int64)
        self.title_sizes = np.asarray(arrays["title_sizes"], dtype=np.int64)
        self.postings = np.asarray(arrays["title_postings"], dtype=np.int64)
        self.indptr = np.asarray(arrays["title_indptr"], dtype=np.int64)
        self.idf = np.asarray(arrays["title_idf"], dtype=np.float64)
        self.vocab_size = int(meta["vocab_size"])
        n, v = self.recipe_ids.size, self.vocab_size
        if (self.recipe_ids.ndim != 1 or self.title_sizes.shape != (n,) or self.indptr.shape != (v + 1,)
                or self.idf.shape != (v,) or self.postings.shape != (int(self.indptr[-1]),)
                or int(self.title_sizes.sum()) != self.postings.size):
            raise ValueError("inconsistent TitleIndex state")
        self.df = np.diff(self.indptr)
        self._ids_ascending = bool(n < 2 or np.all(np.diff(self.recipe_ids) > 0))
        return self

    def __len__(self) -> int:
        return int(self.recipe_ids.size)

    def posting(self, lemma_id: int) -> np.ndarray:
        """Sorted row positions of the recipes whose title holds ``lemma_id`` (empty when unknown)."""
        if not 0 <= lemma_id < self.vocab_size:
            return self.postings[:0]
        return self.postings[self.indptr[lemma_id]:self.indptr[lemma_id + 1]]

    def candidates(self, video_lemma_ids: np.ndarray, mode: TitleMatch = "any", min_shared: int = 1,
                   max_candidates: int | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
        """Candidate recipe rows of one video title (Batra et al., ECCV 2024, Eq. 5; ``title_match``).

        ``mode="any"`` (literal Eq. 5): ``|T_v ∩ T_r| ≥ min_shared``. ``mode="recipe_subset"``: ``T_r ⊆ T_v`` and
        ``T_r`` non-empty (``min_shared`` must hold too; with the default 1 that adds nothing). Lemma ids of the
        video that the index does not know are ignored.

        Returns ``(rows, shared_counts, truncated)``. Not truncated: ``rows`` sorted by recipe id ascending.
        With ``max_candidates`` and more candidates than that: the candidates are ranked by shared count desc, then
        Σ idf of the shared lemmas desc (rounded to 1e-9 so that equal sums computed in another order tie), then
        recipe id asc; the first ``max_candidates`` are returned **in that rank order** and ``truncated`` is True.
        """
        if mode not in ("any", "recipe_subset"):
            raise ValueError(f"unknown title match mode {mode!r}")
        if max_candidates is not None and max_candidates < 0:
            raise ValueError("max_candidates must be >= 0 or None")
        v = np.unique(np.asarray(video_lemma_ids, dtype=np.int64).ravel())
        v = v[(v >= 0) & (v < self.vocab_size)]
        starts, ends = self.indptr[v], self.indptr[v + 1]
        if v.size == 0 or not np.any(ends > starts):
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), False
        posts = np.concatenate([self.postings[s:e] for s, e in zip(starts.tolist(), ends.tolist())])
        weights = np.repeat(self.idf[v], ends - starts)  # idf of the lemma behind each posting entry
        dense = 16 * posts.size >= len(self)  # many postings (a common lemma): a dense count beats sorting them
        if dense:
            counts_all = np.bincount(posts, minlength=len(self))
            rows = np.flatnonzero(counts_all)
            counts = counts_all[rows]
        else:
            rows, inverse, counts = np.unique(posts, return_inverse=True, return_counts=True)
        keep = counts >= min_shared
        if mode == "recipe_subset":
            keep &= counts == self.title_sizes[rows]
        ids = self.recipe_ids[rows[keep]]
        if max_candidates is not None and ids.size > max_candidates:
            # Σ idf per candidate, summed in posting order (lemma id asc) on both paths, then rounded
            if dense:
                idf_sum = np.bincount(posts, weights=weights, minlength=len(self))[rows]
            else:
                idf_sum = np.bincount(inverse.ravel(), weights=weights, minlength=rows.size)
            idf_sum = np.round(idf_sum[keep], 9)
            rows, counts = rows[keep], counts[keep].astype(np.int64)
            order = np.lexsort((ids, -idf_sum, -counts))[:max_candidates]
            return rows[order], counts[order], True
        rows, counts = rows[keep], counts[keep].astype(np.int64)
        if not self._ids_ascending:
            order = np.argsort(ids, kind="stable")
            rows, counts = rows[order], counts[order]
        return rows, counts, False


class BodyMatrix:
    """Binary CSR matrix recipe row x lemma id of ``body_lemmas(r)`` (Batra et al., ECCV 2024, §4.2), numpy
    ``indptr``/``indices``.

    Row ``i`` holds the sorted unique lemma ids of recipe row ``i`` (same row order as :class:`TitleIndex`).
    """

    def __init__(self, body_lemma_ids: Sequence[np.ndarray], vocab_size: int | None = None) -> None:
        self._build(*_csr_from_rows(body_lemma_ids, vocab_size))

    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray, vocab_size: int | None = None) -> BodyMatrix:
        """Same matrix from CSR arrays (rows may be unsorted or hold duplicates; they are normalised)."""
        row_of, cols, n = _rows_of_csr(indptr, indices)
        self = cls.__new__(cls)
        self._build(*_csr_from_pairs(row_of, cols, n, vocab_size))
        return self

    def _build(self, indptr: np.ndarray, indices: np.ndarray, vocab_size: int) -> None:
        self.indptr, self.vocab_size = indptr, vocab_size
        self.indices = indices.astype(np.int32 if vocab_size < 2**31 else np.int64)
        self.row_sizes = np.diff(self.indptr)  # |B| per row

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """arrays: ``body_indptr`` (int64, (rows + 1,)), ``body_indices`` (int32, or int64 past 2^31 lemmas; sorted
        unique per row), the matrix's own; meta: ``format``, ``vocab_size``."""
        arrays = {"body_indptr": self.indptr, "body_indices": self.indices}
        return arrays, {"format": _BODY_FORMAT, "vocab_size": int(self.vocab_size)}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> BodyMatrix:
        """The matrix saved by :meth:`to_state`, arrays taken as they are (no re-normalisation of the rows)."""
        _check_format(meta, _BODY_FORMAT)
        indptr = np.asarray(arrays["body_indptr"], dtype=np.int64)
        indices = np.asarray(arrays["body_indices"])
        if (indices.dtype not in (np.int32, np.int64) or indptr.ndim != 1 or indptr.size == 0
                or indptr[0] != 0 or int(indptr[-1]) != indices.size):
            raise ValueError("inconsistent BodyMatrix state")
        self = cls.__new__(cls)
        self.indptr, self.indices, self.vocab_size = indptr, indices, int(meta["vocab_size"])
        self.row_sizes = np.diff(self.indptr)
        return self

    @property
    def shape(self) -> tuple[int, int]:
        return (self.row_sizes.size, self.vocab_size)

    def row(self, i: int) -> np.ndarray:
        """Sorted lemma ids of row ``i``."""
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def scores(self, rows: np.ndarray, video_lemma_ids: np.ndarray,
               video_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Token-IoU and token-recall of one transcript against recipe ``rows`` (Batra et al., ECCV 2024, §4.2).

        A = the video's lemma ids (deduplicated; ``|A|`` = their count unless ``video_size`` is given, e.g. when
        lemmas unknown to the vocabulary were dropped), B = row's lemmas. All intersections at once: the candidate
        rows' indices are gathered into one array, tested for membership in A (a boolean table over the vocabulary,
        i.e. ``np.isin(kind="table")``), and summed per row by a cumulative-sum difference (exact for empty rows,
        unlike a bare ``np.add.reduceat``). ``union = |A| + |B| − ∩``; iou / recall are 0.0 where union / |B| is 0.
        Returns two float64 arrays aligned with ``rows``.
        """
        rows = np.asarray(rows, dtype=np.int64).ravel()
        a = np.unique(np.asarray(video_lemma_ids, dtype=np.int64).ravel())
        size_a = a.size if video_size is None else int(video_size)
        starts = self.indptr[rows]
        lens = self.row_sizes[rows]
        bounds = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lens, out=bounds[1:])
        total = int(bounds[-1])
        # positions in self.indices of every element of every candidate row, concatenated
        gather = np.arange(total, dtype=np.int64) + np.repeat(starts - bounds[:-1], lens)
        # membership in A through a boolean lookup table over the vocabulary (np.isin's "table" method, without
        # its per-call range scan); ids of A outside the vocabulary occur in no row and only count in |A|
        in_a = np.zeros(self.vocab_size, dtype=bool)
        in_a[a[(a >= 0) & (a < self.vocab_size)]] = True
        hits = in_a[self.indices[gather]]
        csum = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(hits, out=csum[1:])
        inter = (csum[bounds[1:]] - csum[bounds[:-1]]).astype(np.float64)
        union = size_a + lens - inter
        iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        recall = np.divide(inter, lens, out=np.zeros_like(inter), where=lens > 0)
        return iou, recall


def content_sieve(iou: np.ndarray, recall: np.ndarray, iou_threshold: float = 0.1,
                  recall_threshold: float = 0.3) -> np.ndarray:
    """Keep mask of (video, recipe) pairs: ``iou ≥ λ_iou`` and ``recall ≥ λ_recall`` (Batra et al., ECCV 2024, §4.2: λ_iou = 0.1,
    λ_recall = 0.3). Both bounds inclusive."""
    return (np.asarray(iou) >= iou_threshold) & (np.asarray(recall) >= recall_threshold)


def split_for(max_token_iou: float, val_iou_threshold: float = 0.2) -> str:
    """``"validation"`` iff the video's max token-IoU over its kept pairs is ≥ 0.2, else ``"train"`` (Batra et al., ECCV 2024
    §4.2: validation ≈3K videos with IoU ≥ 0.2, train ≈48K with 0.1 ≤ IoU < 0.2)."""
    return "validation" if max_token_iou >= val_iou_threshold else "train"
