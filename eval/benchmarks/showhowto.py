"""ShowHowTo test sequences, generated images, real frames and precomputed embeddings (docs/corpora/showhowto.md;
docs/evaluation.md).

Ground truth (``--gt``), the test split of the release's ``sequences`` config, in one of:

- a release folder: ``DIR/sequences/test-*.parquet`` (``DIR`` may also be ``DIR/sequences`` itself or hold
  ``showhowto/sequences``); when ``DIR/images/test-*.parquet`` exists it is the source of the real frames;
- one Parquet file of that config (an ``images``-config file also gives the real frames);
- a JSONL file, one sequence per line;
- the upstream training-layout ``prompts.json`` ``{sequence_id: [instruction per step]}`` (no tasks: TF is null);
- the upstream inference file ``image|prompt_0|prompt_1|...`` (``.txt``; ``sequence_id`` = the image file's stem).

Parquet / JSONL rows carry ``sequence_id``, ``task`` (may be null or empty), ``task_id`` and ``steps`` (structs with
``instruction``; other fields ignored). Step 0 is the input image I_0 with prompt τ_0; a method generates
Î_1..Î_n, ``n = len(steps) - 1``, written as ``--pred DIR/<sequence_id>/<i>.png``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import MAX_INPUT_BYTES, parse_json_text
from eval.registry import EvalError, Warnings

__all__ = [
    "GroundTruth",
    "PrecomputedEmbeddings",
    "RealFrames",
    "Sequence",
    "find_generated",
    "load_embeddings",
    "load_rgb",
    "parse_frame_id",
    "read_ground_truth",
    "real_frames_from_folder",
]

#: caps on input sizes (the paper's test set: 3,964 sequences of at most 26 steps)
MAX_SEQUENCES = 1_000_000
MAX_STEPS = 512
MAX_IMAGE_BYTES = 64 * 1024**2
MAX_IMAGE_PIXELS = 100_000_000
MAX_NPZ_BYTES = 8 * 1024**3
#: file suffixes accepted for an image ``<i>.<ext>``, in order of preference
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_UNSAFE_ID = re.compile(r"[/\\\x00]")


@dataclass(frozen=True)
class Sequence:
    """One test sequence: prompts τ_0..τ_n (τ_0 = the input image's instruction) and the task name (or None)."""

    sequence_id: str
    instructions: tuple[str, ...]
    task: str | None = None

    @property
    def n(self) -> int:
        """Number of frames a method generates (Î_1..Î_n)."""
        return len(self.instructions) - 1


@dataclass(frozen=True)
class RealFrames:
    """Where the source frames I_i come from: the release's ``images`` config (Parquet) or a folder."""

    kind: str  # "images_config" | "folder"
    paths: tuple[Path, ...]

    def describe(self) -> str:
        return f"{self.kind}:{self.paths[0] if len(self.paths) == 1 else self.paths[0].parent}"


@dataclass
class GroundTruth:
    sequences: list[Sequence]
    format: str
    real_frames: RealFrames | None = None
    #: sequences dropped while reading (reason -> count), e.g. a single step (nothing to generate)
    dropped: dict[str, int] = field(default_factory=dict)


def _check_id(sid: Any, where: str) -> str:
    if not isinstance(sid, str) or not sid.strip():
        raise EvalError(f"{where}: sequence_id must be a non-empty string, got {sid!r}")
    if _UNSAFE_ID.search(sid) or sid in {".", ".."}:
        raise EvalError(f"{where}: sequence_id {sid!r} cannot name a folder of --pred (it holds '/' or '\\')")
    return sid


def _sequence(sid: Any, steps: Any, task: Any, where: str) -> Sequence:
    sid = _check_id(sid, where)
    where = f"{where}, sequence {sid}"
    if not isinstance(steps, (list, tuple)):
        raise EvalError(f"{where}: 'steps' must be a list, got {type(steps).__name__}")
    if len(steps) > MAX_STEPS:
        raise EvalError(f"{where}: {len(steps)} steps, above the cap of {MAX_STEPS}")
    texts = []
    for k, step in enumerate(steps):
        text = step.get("instruction") if isinstance(step, dict) else step
        if not isinstance(text, str):
            raise EvalError(f"{where}, step {k}: 'instruction' must be a string, got {text!r}")
        texts.append(text)
    if task is not None and not isinstance(task, str):
        raise EvalError(f"{where}: 'task' must be a string or null, got {task!r}")
    return Sequence(sid, tuple(texts), task.strip() if task and task.strip() else None)


def _finish(seqs: list[Sequence], fmt: str, source: Path, real: RealFrames | None = None) -> GroundTruth:
    if not seqs:
        raise EvalError(f"ground truth {source} holds no sequence")
    if len(seqs) > MAX_SEQUENCES:
        raise EvalError(f"ground truth {source}: {len(seqs)} sequences, above the cap of {MAX_SEQUENCES}")
    seen: set[str] = set()
    for s in seqs:
        if s.sequence_id in seen:
            raise EvalError(f"ground truth {source}: sequence_id {s.sequence_id!r} appears twice")
        seen.add(s.sequence_id)
    kept = [s for s in seqs if s.n >= 1]
    dropped = {"single_step": len(seqs) - len(kept)} if len(kept) < len(seqs) else {}
    if not kept:
        raise EvalError(f"ground truth {source}: no sequence has 2 or more steps (nothing to generate)")
    return GroundTruth(kept, fmt, real, dropped)


def _text_file(path: Path, what: str) -> str:
    if not path.is_file():
        raise EvalError(f"{what} file not found: {path}")
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise EvalError(f"{what} file {path} is {size} bytes, above the {MAX_INPUT_BYTES}-byte cap")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EvalError(f"{what} file {path} is not UTF-8 text: {exc}") from None


def _read_parquet(paths: list[Path], source: Path) -> tuple[list[Sequence], bool]:
    """Rows of one or more Parquet shards; the second value says whether they carry an ``images`` column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    seqs: list[Sequence] = []
    has_images = True
    for path in paths:
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowException) as exc:
            raise EvalError(f"ground-truth file {path} is not a readable Parquet file: {exc}") from None
        names = set(schema.names)
        missing = {"sequence_id", "steps"} - names
        if missing:
            raise EvalError(f"ground-truth file {path}: column(s) {sorted(missing)} missing "
                            f"(found {sorted(names)}; expected the ShowHowTo 'sequences' config)")
        has_images = has_images and "images" in names
        cols = ["sequence_id", "steps"] + (["task"] if "task" in names else [])
        try:
            pf = pq.ParquetFile(path)
            if pf.metadata.num_rows > MAX_SEQUENCES:
                raise EvalError(f"ground-truth file {path}: {pf.metadata.num_rows} rows, above the cap of "
                                f"{MAX_SEQUENCES}")
            for batch in pf.iter_batches(columns=cols, batch_size=4096):
                data = batch.to_pydict()
                tasks = data.get("task", [None] * batch.num_rows)
                for k in range(batch.num_rows):
                    seqs.append(_sequence(data["sequence_id"][k], data["steps"][k], tasks[k],
                                          f"ground-truth file {path}"))
        except (OSError, pa.ArrowException) as exc:
            raise EvalError(f"ground-truth file {path}: cannot read the Parquet rows: {exc}") from None
    return seqs, has_images


def _shards(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("test-*.parquet") if p.is_file())


def _read_release(path: Path) -> GroundTruth:
    candidates = [path, path / "sequences", path / "showhowto" / "sequences"]
    for folder in candidates:
        shards = _shards(folder)
        if shards:
            seqs, with_images = _read_parquet(shards, path)
            images_dir = folder.parent / "images"
            real = None
            if with_images:
                real = RealFrames("images_config", tuple(shards))
            elif _shards(images_dir):
                real = RealFrames("images_config", tuple(_shards(images_dir)))
            return _finish(seqs, "release", path, real)
    if (path / "prompts.json").is_file():
        return _read_prompts_json(path / "prompts.json")
    raise EvalError(f"ground-truth folder {path}: no test split found (looked for test-*.parquet in "
                    f"{', '.join(str(c) for c in candidates)}, and for prompts.json)")


def _read_jsonl(path: Path) -> GroundTruth:
    seqs = []
    for lineno, line in enumerate(_text_file(path, "ground-truth").splitlines(), 1):
        if not line.strip():
            continue
        where = f"ground-truth file {path}, line {lineno}"
        row = parse_json_text(line, where)
        if not isinstance(row, dict) or "sequence_id" not in row or "steps" not in row:
            raise EvalError(f"{where}: expected an object with 'sequence_id' and 'steps'")
        seqs.append(_sequence(row["sequence_id"], row["steps"], row.get("task"), where))
        if len(seqs) > MAX_SEQUENCES:
            raise EvalError(f"ground-truth file {path}: more than {MAX_SEQUENCES} sequences")
    return _finish(seqs, "jsonl", path)


def _read_prompts_json(path: Path) -> GroundTruth:
    data = parse_json_text(_text_file(path, "ground-truth"), f"ground-truth file {path}")
    if isinstance(data, list):  # a JSON array of sequence records, as in the JSONL layout
        seqs = []
        for k, row in enumerate(data):
            if not isinstance(row, dict) or "sequence_id" not in row or "steps" not in row:
                raise EvalError(f"ground-truth file {path}, record {k}: expected 'sequence_id' and 'steps'")
            seqs.append(_sequence(row["sequence_id"], row["steps"], row.get("task"), f"ground-truth file {path}"))
        return _finish(seqs, "json_records", path)
    if not isinstance(data, dict):
        raise EvalError(f"ground-truth file {path}: expected prompts.json {{sequence_id: [instruction per step]}}, "
                        f"got {type(data).__name__}")
    seqs = [_sequence(sid, steps, None, f"ground-truth file {path}") for sid, steps in data.items()]
    return _finish(seqs, "prompts_json", path)


def _read_inference_txt(path: Path) -> GroundTruth:
    """Upstream ``test_data/prompt_file.txt``: ``image|prompt_0|prompt_1|...`` per line, ``#`` comments."""
    seqs = []
    for lineno, line in enumerate(_text_file(path, "ground-truth").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("|")
        if len(parts) < 2 or not parts[0].strip():
            raise EvalError(f"ground-truth file {path}, line {lineno}: expected 'image|prompt_0|prompt_1|...'")
        sid = Path(parts[0].strip()).stem
        seqs.append(_sequence(sid, [p.strip() for p in parts[1:]], None, f"ground-truth file {path}"))
    return _finish(seqs, "inference_txt", path)


def read_ground_truth(path: Path) -> GroundTruth:
    """Detect the layout of ``--gt`` (module docstring) and read its test sequences (single-step ones dropped)."""
    path = Path(path)
    if path.is_dir():
        return _read_release(path)
    if not path.exists():
        raise EvalError(f"ground truth not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        seqs, with_images = _read_parquet([path], path)
        return _finish(seqs, "parquet", path, RealFrames("images_config", (path,)) if with_images else None)
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_prompts_json(path)
    if suffix == ".txt":
        return _read_inference_txt(path)
    raise EvalError(f"ground truth {path}: unknown layout (expected a release folder, .parquet, .jsonl, "
                    "prompts.json or the upstream image|prompt_0|... .txt file)")


def parse_frame_id(text: Any, where: str) -> tuple[str, int]:
    """``"<sequence_id>/<i>"`` -> ``(sequence_id, i)``; anything else is an :class:`EvalError`."""
    sid, sep, idx = str(text).rpartition("/")
    if not sep or not sid or not idx.isdigit():
        raise EvalError(f"{where}: id {text!r} is not '<sequence_id>/<i>'")
    return sid, int(idx)


def _image_file(folder: Path, i: int) -> Path | None:
    for suffix in IMAGE_SUFFIXES:
        p = folder / f"{i}{suffix}"
        if p.is_file():
            return p
    return None


def find_generated(pred: Path, sequences: list[Sequence], warnings: Warnings) -> dict[tuple[int, int], Path]:
    """Generated images ``pred/<sequence_id>/<i>.png`` (``.jpg``/``.jpeg`` accepted), ``i = 1..n``.

    Returns ``{(sequence index, i): path}``. Files or folders that match no expected image are counted
    (``unexpected_image`` / ``unknown_sequence`` warnings) and ignored; missing images are the caller's to count.
    """
    pred = Path(pred)
    if not pred.is_dir():
        raise EvalError(f"--pred must be a folder of <sequence_id>/<i>.png images: {pred}")
    found: dict[tuple[int, int], Path] = {}
    by_id = {s.sequence_id: k for k, s in enumerate(sequences)}
    for entry in sorted(pred.iterdir()):
        if not entry.is_dir():
            warnings.add("unexpected_image", f"{entry} is not inside a <sequence_id>/ folder (ignored)")
            continue
        k = by_id.get(entry.name)
        if k is None:
            warnings.add("unknown_sequence", f"{entry.name} is not a test sequence of the ground truth (ignored)")
            continue
        n = sequences[k].n
        expected = set()
        for i in range(1, n + 1):
            p = _image_file(entry, i)
            if p is not None:
                found[(k, i)] = p
                expected.add(p.name)
        extra = [p.name for p in entry.iterdir() if p.name not in expected]
        if extra:
            warnings.add("unexpected_image", f"{entry.name}: {len(extra)} file(s) not in 1..{n} "
                         f"(e.g. {min(extra)}; ignored)", n=len(extra))
    return found


def load_rgb(source: Path | bytes, where: str) -> np.ndarray:
    """Decode one image to uint8 RGB ``[H, W, 3]``; raises ``ValueError`` on an unreadable or oversized image."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        size = Path(source).stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise ValueError(f"{where}: {size} bytes, above the {MAX_IMAGE_BYTES}-byte cap")
        data = Path(source).read_bytes()
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"{where}: {len(data)} bytes, above the {MAX_IMAGE_BYTES}-byte cap")
    try:
        with Image.open(io.BytesIO(data)) as img:
            w, h = img.size
            if w * h > MAX_IMAGE_PIXELS or w < 1 or h < 1:
                raise ValueError(f"{where}: {w}x{h} pixels, outside 1..{MAX_IMAGE_PIXELS}")
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"{where}: not a readable image ({exc})") from None


def real_frames_from_folder(root: Path) -> RealFrames:
    """``--variant real=DIR``: ``DIR/<sequence_id>/<i>.jpg|png`` for i = 0..n (I_0 is never used)."""
    root = Path(root)
    if not root.is_dir():
        raise EvalError(f"--variant real={root}: not a folder of <sequence_id>/<i>.jpg images")
    return RealFrames("folder", (root,))


def iter_real_frames(real: RealFrames, sequences: list[Sequence]) -> Iterator[tuple[int, int, Path | bytes]]:
    """Yield ``(sequence index, i, file or bytes)`` for the source frames I_i, ``1 <= i <= n``, of ``sequences``.

    Input frames I_0 are never yielded (the SC gallery and FID exclude them). Frames that are absent
    are simply not yielded (the caller counts them).
    """
    by_id = {s.sequence_id: k for k, s in enumerate(sequences)}
    if real.kind == "folder":
        root = real.paths[0]
        for k, s in enumerate(sequences):
            folder = root / s.sequence_id
            if not folder.is_dir():
                continue
            for i in range(1, s.n + 1):
                p = _image_file(folder, i)
                if p is not None:
                    yield k, i, p
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in real.paths:
        try:
            pf = pq.ParquetFile(path)
            if "images" not in pf.schema_arrow.names or "sequence_id" not in pf.schema_arrow.names:
                raise EvalError(f"images config {path}: columns 'sequence_id' and 'images' required")
            for batch in pf.iter_batches(columns=["sequence_id", "images"], batch_size=16):
                data = batch.to_pydict()
                for sid, images in zip(data["sequence_id"], data["images"], strict=True):
                    k = by_id.get(sid)
                    if k is None or not images:
                        continue
                    for i in range(1, min(sequences[k].n, len(images) - 1) + 1):
                        img = images[i]
                        raw = img.get("bytes") if isinstance(img, dict) else None
                        if raw:
                            yield k, i, raw
        except (OSError, pa.ArrowException) as exc:
            raise EvalError(f"images config {path}: cannot read the Parquet rows: {exc}") from None


@dataclass
class PrecomputedEmbeddings:
    """The arrays of ``--variant embeddings=FILE.npz`` (the metrics' features, computed elsewhere); absent -> None."""

    gen_ids: np.ndarray
    arrays: dict[str, np.ndarray]

    def get(self, name: str) -> np.ndarray | None:
        return self.arrays.get(name)


#: array name -> kind: ids (strings) or features (2-D finite floats)
EMBEDDING_ARRAYS = {
    "gen_ids": "ids", "gen_clip": "features", "gen_dino": "features", "prompt_ids": "ids", "prompt_clip": "features",
    "task_names": "ids", "task_clip": "features", "gallery_ids": "ids", "gallery_dino": "features",
    "gen_inception": "features", "real_inception": "features",
}


def load_embeddings(path: Path, warnings: Warnings) -> PrecomputedEmbeddings:
    """Read and check the npz (no pickles: string arrays must be numpy unicode arrays); :class:`EvalError` if bad."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"--variant embeddings={path}: file not found")
    size = path.stat().st_size
    if size > MAX_NPZ_BYTES:
        raise EvalError(f"embeddings file {path} is {size} bytes, above the {MAX_NPZ_BYTES}-byte cap")
    with path.open("rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise EvalError(f"embeddings file {path} is not a readable .npz archive (np.savez writes a zip file)")
    arrays: dict[str, np.ndarray] = {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            names = list(npz.files)
            for name in names:
                if name not in EMBEDDING_ARRAYS:
                    warnings.add("unknown_array", f"embeddings file {path}: array {name!r} is not used")
                    continue
                arrays[name] = npz[name]
    except ValueError as exc:
        raise EvalError(f"embeddings file {path}: cannot read it without pickles (store ids as numpy string "
                        f"arrays, not object arrays): {exc}") from None
    except (OSError, EOFError, KeyError) as exc:
        raise EvalError(f"embeddings file {path} is not a readable .npz archive: {exc}") from None
    if "gen_ids" not in arrays:
        raise EvalError(f"embeddings file {path}: array 'gen_ids' is required (found {sorted(arrays)})")
    for name, arr in arrays.items():
        kind = EMBEDDING_ARRAYS[name]
        if kind == "ids":
            if arr.ndim != 1 or arr.dtype.kind not in "US":
                raise EvalError(f"embeddings file {path}: {name!r} must be a 1-D string array, got "
                                f"{arr.dtype} {arr.shape}")
            arrays[name] = arr.astype(str)
        else:
            if arr.ndim != 2 or arr.dtype.kind not in "fiu" or arr.shape[1] < 1:
                raise EvalError(f"embeddings file {path}: {name!r} must be a 2-D numeric array [rows, dim], got "
                                f"{arr.dtype} {arr.shape}")
            arr = arr.astype(np.float64)
            if not np.isfinite(arr).all():
                raise EvalError(f"embeddings file {path}: {name!r} holds NaN or infinite values")
            arrays[name] = arr
    pairs = [("gen_ids", "gen_clip"), ("gen_ids", "gen_dino"), ("gen_ids", "gen_inception"),
             ("prompt_ids", "prompt_clip"), ("task_names", "task_clip"), ("gallery_ids", "gallery_dino")]
    for ids, feats in pairs:
        if feats in arrays:
            if ids not in arrays:
                raise EvalError(f"embeddings file {path}: {feats!r} needs {ids!r}")
            if len(arrays[ids]) != len(arrays[feats]):
                raise EvalError(f"embeddings file {path}: {feats!r} has {len(arrays[feats])} rows for "
                                f"{len(arrays[ids])} {ids!r}")
    for a, b in [("gen_clip", "prompt_clip"), ("gen_clip", "task_clip"), ("gen_dino", "gallery_dino"),
                 ("gen_inception", "real_inception")]:
        if a in arrays and b in arrays and arrays[a].shape[1] != arrays[b].shape[1]:
            raise EvalError(f"embeddings file {path}: {a!r} is {arrays[a].shape[1]}-d but {b!r} is "
                            f"{arrays[b].shape[1]}-d")
    return PrecomputedEmbeddings(arrays.pop("gen_ids"), arrays)
