"""The recipe index of the two sieves (Batra et al., ECCV 2024, Eq. 5 and §4.2): every recipe's title and body content
lemmas as integer lemma ids, on disk and memory-mapped (docs/corpora/sieve_swap.md, "Recipe index").

One index per recipes pipeline output, keyed by its content alone (the digests of its shards), in
``<work_dir>/cache/recipe_index/<key>/``: the title sieve and the content sieve share it, editing a video never
rebuilds it, and an edited recipe builds a new one (from the recipe lemmas, no model). Its files are ``.npy`` arrays
(read with ``mmap_mode="r"``, so a worker's resident size grows with the rows a query touches, not the recipes) and a
checked manifest (``builders.core.checked``) holding each array's sha256 and the lemma vocabulary; a worker checks the
arrays once when it opens them, and a damaged index is rebuilt.

Besides the sieves' arrays (``builders.ops.sieve`` ``TitleIndex`` / ``BodyMatrix`` states) the index holds a digest per
title lemma: an order-free sum over the recipes whose title holds the lemma of each recipe's content digest (its id,
title and body lemmas, hashed as strings so that the digests do not depend on the vocabulary's ids). A video's
title candidates, and so its content sieve, depend on the recipes only through the digests of its title lemmas: they
are its per-item digest, and an edited recipe reruns only the videos whose title shares a lemma with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...core.atomic import atomic_path, atomic_write_text
from ...core.checked import checked_json, read_checked_json, sha256_file
from ...core.errors import DamagedCache
from ...core.fingerprint import hash_obj
from ...ops import sieve as sieve_ops

FORMAT = "procvid.sieve_swap.RecipeIndex/1"
MANIFEST = "manifest.json"
#: index folders kept in ``cache/recipe_index`` (the current one and the one before: an undone edit finds it)
KEEP = 2
#: how many times this process built an index, per key (the tests count builds: once per recipes content)
BUILDS: dict[str, int] = {}

def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser of uint64 values (wrapping arithmetic): spreads each value over all 64 bits."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.uint64).copy()
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _string_hashes(strings: list[str]) -> np.ndarray:
    return np.fromiter((int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")
                        for s in strings), dtype=np.uint64, count=len(strings))


def _segment_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Per-segment sums of uint64 ``values`` modulo 2^64 (segments ``indptr[i]:indptr[i+1]``, empty ones 0)."""
    csum = np.zeros(values.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        np.cumsum(values, out=csum[1:])
        return csum[indptr[1:]] - csum[indptr[:-1]]


def _reorder(lens: list[np.ndarray], flat: list[np.ndarray], order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr int64, indices int32) of rows given per shard as lengths and flat ids, rows taken in ``order``."""
    lens_a = np.concatenate(lens) if lens else np.zeros(0, np.int64)
    flat_a = np.concatenate(flat) if flat else np.zeros(0, np.int32)
    old_ptr = np.zeros(lens_a.size + 1, dtype=np.int64)
    np.cumsum(lens_a, out=old_ptr[1:])
    new_lens = lens_a[order]
    new_ptr = np.zeros(new_lens.size + 1, dtype=np.int64)
    np.cumsum(new_lens, out=new_ptr[1:])
    if np.array_equal(order, np.arange(order.size)):
        return new_ptr, flat_a
    gather = np.repeat(old_ptr[:-1][order] - new_ptr[:-1], new_lens) + np.arange(int(new_ptr[-1]), dtype=np.int64)
    return new_ptr, flat_a[gather]


def _body_matrix(indptr: np.ndarray, indices: np.ndarray, vocab_size: int) -> sieve_ops.BodyMatrix:
    """The ``BodyMatrix`` of CSR rows: taken as they are when each row is already sorted and unique (the recipe
    lemmas are written sorted and the vocabulary is sorted), else normalised by ``BodyMatrix.from_csr``."""
    inner = np.ones(indices.size, dtype=bool)
    inner[indptr[:-1][indptr[:-1] < indices.size]] = False   # the first element of each non-empty row
    if indices.size < 2 or bool(np.all(np.diff(indices)[inner[1:]] > 0)):
        arrays = {"body_indptr": indptr, "body_indices": indices.astype(np.int32, copy=False)}
        return sieve_ops.BodyMatrix.from_state(arrays, {"format": "procvid.sieve.BodyMatrix/1",
                                                        "vocab_size": vocab_size})
    return sieve_ops.BodyMatrix.from_csr(indptr, indices, vocab_size=vocab_size)


def index_key(recipes: Any) -> str:
    """The key of the index of a complete recipes pipeline output (``StageData``): its shards' digests."""
    from ...core.orchestrate import data_digest

    return hash_obj(FORMAT, data_digest(recipes))


def _read_lemma_tables(recipes: Any):
    """Each shard of the recipes output as an Arrow table (recipe_id, title_lemmas, body_lemmas), checked."""
    from ...core.checked import read_parquet_checked
    from ...core.shards import read_stats, work_shard_name

    for i in range(recipes.n):
        path = recipes.dir / f"{work_shard_name(i)}.parquet"
        table = read_parquet_checked(path, read_stats(recipes.dir, i).get("digest"),
                                     ["recipe_id", "title_lemmas", "body_lemmas"])
        if table.num_rows:
            yield table


def build(recipes: Any, out: Path) -> dict[str, Any]:
    """Write the index of ``recipes`` (the recipes pipeline's output) into the folder ``out``; returns the manifest.

    Two passes over the recipe shards with Arrow: the sorted vocabulary of every title and body lemma, then each
    shard's lemma lists as ids (``index_in`` the vocabulary); memory holds the id arrays, never lemma strings per
    recipe."""
    import pyarrow as pa
    import pyarrow.compute as pc

    uniques = []
    for t in _read_lemma_tables(recipes):
        for col in ("title_lemmas", "body_lemmas"):
            uniques.append(pc.unique(pc.list_flatten(t[col])))
    vocab_arr = pc.unique(pa.chunked_array(uniques, type=pa.string())) if uniques else pa.array([], pa.string())
    vocab_arr = pc.take(vocab_arr, pc.sort_indices(vocab_arr))  # byte order of UTF-8 = code-point order
    lemmas: list[str] = vocab_arr.to_pylist()
    lemma_hash = _string_hashes(lemmas)
    ids, parts = [], {"title_lemmas": ([], []), "body_lemmas": ([], [])}
    for t in _read_lemma_tables(recipes):
        ids.append(t["recipe_id"].to_numpy().astype(np.int64))
        for col, (lens, flat) in parts.items():
            arr = t[col].combine_chunks()
            lens.append(pc.list_value_length(arr).fill_null(0).to_numpy().astype(np.int64))
            flat.append(pc.index_in(pc.list_flatten(arr), value_set=vocab_arr).to_numpy().astype(np.int32))
    rid = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    order = np.argsort(rid, kind="stable")
    rid = rid[order]
    if rid.size > 1 and not np.all(np.diff(rid) > 0):
        raise ValueError("the recipes pipeline output repeats a recipe_id")
    csr = {col: _reorder(lens, flat, order) for col, (lens, flat) in parts.items()}
    v = len(lemmas)
    titles = sieve_ops.TitleIndex.from_csr(rid, *csr["title_lemmas"], vocab_size=v)
    bodies = _body_matrix(*csr["body_lemmas"], v)
    # a recipe's content digest: its id, its title lemmas and its body lemmas, each lemma by the hash of its string
    t_ptr, t_ids = csr["title_lemmas"]
    with np.errstate(over="ignore"):
        recipe_digest = (_mix(rid.astype(np.uint64))
                         + _segment_sums(_mix(lemma_hash[t_ids] ^ np.uint64(1)), t_ptr)
                         + _segment_sums(_mix(lemma_hash[bodies.indices.astype(np.int64)] ^ np.uint64(2)),
                                         bodies.indptr))
    lemma_digest = _segment_sums(_mix(recipe_digest[titles.postings]), titles.indptr)
    arrays: dict[str, np.ndarray] = {"lemma_digest": lemma_digest, "recipe_digest": recipe_digest}
    meta: dict[str, Any] = {}
    for key, obj in (("titles", titles), ("bodies", bodies)):
        a, m = obj.to_state()
        arrays.update(a)
        meta[key] = m
    out.mkdir(parents=True, exist_ok=True)
    shas = {}
    for name, a in arrays.items():
        with atomic_path(out / f"{name}.npy") as tmp, open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(a), allow_pickle=False)
        shas[name] = sha256_file(out / f"{name}.npy")
    manifest = {"format": FORMAT, "recipes": int(rid.size), "lemmas": lemmas, "meta": meta, "sha256": shas}
    atomic_write_text(out / MANIFEST, checked_json(manifest))   # last: a folder without it is not an index
    return manifest


def ensure(recipes: Any, cache_dir: Path) -> tuple[Path, bool]:
    """The index folder of ``recipes`` under ``cache_dir/recipe_index``, built when missing or damaged (checked
    here); returns (folder, built). Older index folders beyond :data:`KEEP` are removed."""
    key = index_key(recipes)
    root = Path(cache_dir) / "recipe_index"
    out = root / key[:24]
    try:
        RecipeIndex.open(out)
        built = False
    except (FileNotFoundError, DamagedCache):
        if out.exists():
            shutil.rmtree(out)
        build(recipes, out)
        BUILDS[key] = BUILDS.get(key, 0) + 1
        built = True
    os.utime(out)
    others = sorted((d for d in root.iterdir() if d.is_dir() and d != out), key=lambda d: d.stat().st_mtime,
                    reverse=True)
    for d in others[KEEP - 1:]:
        shutil.rmtree(d, ignore_errors=True)
    return out, built


#: arrays checked by this process: (path, size, mtime_ns, inode) -> sha256 (a worker hashes each file once)
_CHECKED: dict[tuple[str, int, int, int], str] = {}


def _open_checked(path: Path, sha256: str) -> np.ndarray:
    st = path.stat()   # FileNotFoundError: a missing array, as a missing index
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if _CHECKED.get(key) != sha256:
        got = sha256_file(path)
        if got != sha256:
            raise DamagedCache(path, f"sha256 {got[:12]}... differs from the {sha256[:12]}... its manifest records")
        _CHECKED[key] = got
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DamagedCache(path, f"not a readable array ({type(err).__name__}: {err})") from err


class RecipeIndex:
    """An opened index: the vocabulary (lemma -> id), the sieves' ``TitleIndex`` and ``BodyMatrix`` over
    memory-mapped arrays, and the per-lemma digests."""

    def __init__(self, folder: Path, manifest: dict[str, Any], arrays: dict[str, np.ndarray]):
        self.folder = folder
        self.lemma_ids = {lemma: i for i, lemma in enumerate(manifest["lemmas"])}
        self.size = int(manifest["recipes"])
        self.lemma_digest = arrays["lemma_digest"]
        self.recipe_digest = arrays["recipe_digest"]
        self.titles = sieve_ops.TitleIndex.from_state(arrays, manifest["meta"]["titles"])
        self.bodies = sieve_ops.BodyMatrix.from_state(arrays, manifest["meta"]["bodies"])
        self.recipe_ids = self.titles.recipe_ids
        if self.lemma_digest.shape != (len(self.lemma_ids),) or self.recipe_ids.shape != (self.size,):
            raise DamagedCache(folder / MANIFEST, "its arrays do not match its vocabulary or recipe count")

    @classmethod
    def open(cls, folder: Path, only: tuple[str, ...] | None = None) -> RecipeIndex | dict[str, Any]:
        """The index in ``folder``, every array checked against the manifest (``FileNotFoundError`` when there is
        none; :class:`DamagedCache` when a file is not what was written). With ``only``: the manifest and just those
        arrays, as a dict (the per-item digests need the vocabulary and ``lemma_digest`` alone)."""
        folder = Path(folder)
        manifest = read_checked_json(folder / MANIFEST)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise DamagedCache(folder / MANIFEST, f"not an index manifest of format {FORMAT}")
        names = list(manifest["sha256"]) if only is None else list(only)
        arrays = {n: _open_checked(folder / f"{n}.npy", manifest["sha256"][n]) for n in names}
        if only is not None:
            return {"manifest": manifest, **arrays}
        try:
            return cls(folder, manifest, arrays)
        except (KeyError, ValueError) as err:
            raise DamagedCache(folder / MANIFEST, f"inconsistent index ({err})") from err

    def encode(self, lemmas: list[str] | set[str]) -> np.ndarray:
        """Sorted ids of the ``lemmas`` the vocabulary holds (the others occur in no recipe)."""
        return np.unique(np.asarray([i for i in map(self.lemma_ids.get, lemmas) if i is not None], dtype=np.int64))

    def title_candidates(self, title_lemmas: list[str], mode: str, min_shared: int,
                         max_candidates: int | None) -> tuple[np.ndarray, np.ndarray, bool]:
        """``TitleIndex.candidates`` of a video's title lemmas (Batra et al., ECCV 2024, Eq. 5)."""
        return self.titles.candidates(self.encode(title_lemmas), mode=mode, min_shared=min_shared,
                                      max_candidates=max_candidates)


#: digest tables opened by this process (the driver computes per-item digests shard by shard): folder -> tables
_DIGESTS: dict[str, tuple[dict[str, int], np.ndarray, int]] = {}


def title_digests(folder: Path | str, rows: list[dict[str, Any]], with_size: bool) -> str:
    """The per-item digest of ``rows`` (``video_id``, ``title_lemmas``): for each video, each title lemma with the
    digest of the recipes whose title holds it (``None`` for a lemma no recipe title holds), and the number of
    recipes when ``with_size`` (a capped candidate list ranks by idf, which depends on it)."""
    key = str(folder)
    if key not in _DIGESTS:
        opened = RecipeIndex.open(Path(folder), only=("lemma_digest",))
        manifest = opened["manifest"]
        _DIGESTS.clear()
        _DIGESTS[key] = ({lemma: i for i, lemma in enumerate(manifest["lemmas"])},
                         np.asarray(opened["lemma_digest"]), int(manifest["recipes"]))
    ids, digests, n = _DIGESTS[key]
    out = []
    for r in rows:
        lemmas = r.get("title_lemmas") or []
        out.append([r.get("video_id"), [[lemma, None if (i := ids.get(lemma)) is None else int(digests[i])]
                                        for lemma in lemmas]])
    return hash_obj(out, n if with_size else None)


def read_pointer(artefacts: Path) -> Path:
    """The index folder a fitted sieve state names (``index.json`` in its artefact folder)."""
    return Path(json.loads((Path(artefacts) / "index.json").read_text(encoding="utf-8"))["folder"])


def write_pointer(artefacts: Path, folder: Path) -> None:
    atomic_write_text(Path(artefacts) / "index.json", json.dumps({"folder": str(folder)}))
