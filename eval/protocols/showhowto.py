"""``showhowto``: ShowHowTo generation metrics SF, SC, TF and FID (Souček et al., CVPR 2025,
Sec. 5.1, App. D; docs/evaluation.md).

Two modes. **Encoders** (``--pred DIR`` of ``<sequence_id>/<i>.png``, i = 1..n, plus local model paths):
``clip=PATH`` (a transformers ``CLIPModel`` folder, or an open_clip checkpoint when open_clip is installed;
architecture ``clip_arch``) gives SF and TF; ``dino=PATH`` (a transformers DINOv2 folder, last-layer patch tokens
averaged, CLS and register tokens excluded) gives SC; ``inception=PATH`` (a TorchScript file or a ``module:function``
/ ``file.py:function`` callable, see :func:`load_inception`) gives FID. Nothing downloads (``local_files_only``).
**Precomputed** (``embeddings=FILE.npz``): every metric from the arrays of the npz, no model, no ``--pred``.

Missing generated images (an expected ``<sequence_id>/<i>.png`` absent or unreadable) are counted and named
(``missing_image`` / ``unreadable_image`` warnings) and score as misses: SF and SC keep ``n`` in each sequence's
denominator, TF averages the images that exist (a sequence with none is a miss), FID uses the images that exist.
Real frames (SC gallery, FID reference) come from ``real=DIR`` or, when ``--gt`` is a release with an ``images``
config, from that config; with neither, SC and FID are null (``no_real_frames``). A metric whose inputs are absent is
null with a named warning, never NaN.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.common import load_json
from eval.benchmarks.showhowto import (
    GroundTruth,
    PrecomputedEmbeddings,
    Sequence,
    find_generated,
    iter_real_frames,
    load_embeddings,
    load_rgb,
    parse_frame_id,
    read_ground_truth,
    real_frames_from_folder,
)
from eval.metrics.generation import (
    frechet_distance_from_features,
    scene_consistency,
    step_faithfulness,
    task_faithfulness,
)
from eval.registry import (
    EvalError,
    EvalInputs,
    EvalResult,
    Protocol,
    Variant,
    Warnings,
    register,
)

#: [unverified]: both image sets are centre-square-cropped and resized to the generation resolution before Inception
FID_IMAGE_SIZE = 256
#: DINOv2's eval transform (facebook/dinov2-* ``preprocessor_config.json``): shorter side 256, centre crop 224
DINO_RESIZE, DINO_CROP = 256, 224
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: paper encoder for SF/TF (DFN5B-CLIP-ViT-H-14-378) under open_clip
DEFAULT_CLIP_ARCH = "ViT-H-14-378-quickgelu"


# --------------------------------------------------------------------------------------------------- features


@dataclass
class Features:
    """Everything the metrics need, in one coding: sequence ``k`` = index into the ground truth's sequences."""

    gen_seq: np.ndarray  # int [M] sequence of each present generated image
    gen_step: np.ndarray  # int [M] its step i (1..n)
    gen_clip: np.ndarray | None = None
    gen_dino: np.ndarray | None = None
    gen_inception: np.ndarray | None = None
    prompt_clip: np.ndarray | None = None
    prompt_seq: np.ndarray | None = None
    prompt_step: np.ndarray | None = None
    task_names: list[str] | None = None
    task_clip: np.ndarray | None = None
    gallery_dino: np.ndarray | None = None
    gallery_label: np.ndarray | None = None  # int: sequence index, or >= S for test videos outside the ground truth
    real_inception: np.ndarray | None = None
    real_source: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def _index(seqs: list[Sequence]) -> dict[str, int]:
    return {s.sequence_id: k for k, s in enumerate(seqs)}


def _features_from_npz(emb: PrecomputedEmbeddings, seqs: list[Sequence], include_input: bool, path: Path,
                       w: Warnings) -> Features:
    """Map the npz rows onto the ground truth (``prompt_ids``/``gallery_ids``/``gen_ids`` = ``"<sequence_id>/<i>"``)."""
    by_id = _index(seqs)
    gen_keep, gen_seq, gen_step = [], [], []
    seen: set[tuple[int, int]] = set()
    for row, gid in enumerate(emb.gen_ids):
        sid, i = parse_frame_id(gid, f"embeddings file {path}, gen_ids[{row}]")
        k = by_id.get(sid)
        if k is None or not 1 <= i <= seqs[k].n:
            w.add("unexpected_image", f"gen_ids[{row}] = {gid!r} is not a generated frame 1..n of a test sequence "
                  "(ignored)")
            continue
        if (k, i) in seen:
            raise EvalError(f"embeddings file {path}: gen_ids holds {gid!r} twice")
        seen.add((k, i))
        gen_keep.append(row)
        gen_seq.append(k)
        gen_step.append(i)
    keep = np.asarray(gen_keep, dtype=np.int64)
    f = Features(np.asarray(gen_seq, dtype=np.int64), np.asarray(gen_step, dtype=np.int64))
    for name in ("gen_clip", "gen_dino", "gen_inception"):
        arr = emb.get(name)
        setattr(f, name, None if arr is None else arr[keep])

    if emb.get("prompt_clip") is not None:
        lookup: dict[tuple[int, int], int] = {}
        for row, pid in enumerate(emb.arrays["prompt_ids"]):
            sid, j = parse_frame_id(pid, f"embeddings file {path}, prompt_ids[{row}]")
            k = by_id.get(sid)
            if k is not None and j <= seqs[k].n:
                if (k, j) in lookup:
                    raise EvalError(f"embeddings file {path}: prompt_ids holds {pid!r} twice")
                lookup[(k, j)] = row
        rows, pseq, pstep = [], [], []
        lowest = 0 if include_input else 1
        for k, s in enumerate(seqs):
            for j in range(lowest, s.n + 1):
                if (k, j) not in lookup:
                    raise EvalError(f"embeddings file {path}: no prompt_clip row for '{s.sequence_id}/{j}' "
                                    f"(prompt_ids are '<sequence_id>/<j>' for the prompt τ_j of step j)")
                rows.append(lookup[(k, j)])
                pseq.append(k)
                pstep.append(j)
        f.prompt_clip = emb.arrays["prompt_clip"][np.asarray(rows, dtype=np.int64)]
        f.prompt_seq, f.prompt_step = np.asarray(pseq, np.int64), np.asarray(pstep, np.int64)

    if emb.get("task_clip") is not None:
        names = [str(t) for t in emb.arrays["task_names"]]
        if len(set(names)) != len(names):
            raise EvalError(f"embeddings file {path}: task_names holds a name twice")
        f.task_names, f.task_clip = names, emb.arrays["task_clip"]

    if emb.get("gallery_dino") is not None:
        labels, rows = [], []
        outside: dict[str, int] = {}
        inputs = 0
        for row, gid in enumerate(emb.arrays["gallery_ids"]):
            sid, i = parse_frame_id(gid, f"embeddings file {path}, gallery_ids[{row}]")
            if i == 0:
                inputs += 1  # input frames I_0 never enter the gallery [unverified]
                continue
            k = by_id.get(sid)
            if k is None:
                k = len(seqs) + outside.setdefault(sid, len(outside))
            rows.append(row)
            labels.append(k)
        f.gallery_dino = emb.arrays["gallery_dino"][np.asarray(rows, dtype=np.int64)]
        f.gallery_label = np.asarray(labels, dtype=np.int64)
        f.counts["gallery_input_frames_excluded"] = inputs
        f.counts["gallery_videos_outside_gt"] = len(outside)
    f.real_inception = emb.get("real_inception")
    return f


# --------------------------------------------------------------------------------------------------- encoders


def _square_resize(frame: np.ndarray, size: int) -> np.ndarray:
    """Centre-square crop (torchvision ``CenterCrop`` rounding) then bicubic resize to ``size`` ([unverified] FID
    preprocessing)."""
    from PIL import Image

    h, w = frame.shape[:2]
    side = min(h, w)
    top, left = round((h - side) / 2.0), round((w - side) / 2.0)
    img = Image.fromarray(np.ascontiguousarray(frame[top:top + side, left:left + side]), "RGB")
    if img.size != (size, size):
        img = img.resize((size, size), Image.Resampling.BICUBIC)
    return np.asarray(img, dtype=np.uint8)


def _device(name: str) -> str:
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class ClipEncoder:
    """SF/TF encoder: :class:`builders.models.vision_encoder.HFClipVisionEncoder` for a transformers folder, else
    :class:`~builders.models.vision_encoder.OpenClipVisionEncoder` (needs open_clip). Pixels: ``clip_preprocess``
    (centre square, bicubic resize to the model's size, OpenAI mean/std)."""

    def __init__(self, path: str, arch: str, device: str, batch_size: int) -> None:
        from builders.models import vision_encoder as ve

        p = Path(path)
        self._preprocess = ve.clip_preprocess
        if p.is_dir() and (p / "config.json").is_file():
            self.encoder: Any = ve.HFClipVisionEncoder(p, device=_device(device), batch_size=batch_size)
        elif p.exists():
            if importlib.util.find_spec("open_clip") is None:
                raise EvalError(f"--variant clip={path}: not a transformers CLIPModel folder (no config.json) and "
                                "open_clip is not installed to read it as an open_clip checkpoint")
            self.encoder = ve.OpenClipVisionEncoder(arch, weights_path=p, device=_device(device),
                                                    batch_size=batch_size)
        else:
            raise EvalError(f"--variant clip={path}: no such file or folder (nothing is downloaded)")
        self.model_id = self.encoder.model_id

    def images(self, frames: list[np.ndarray]) -> np.ndarray:
        return self.encoder.encode_images(self._preprocess(np.stack([_square_resize(f, self.encoder.image_size)
                                                                     for f in frames]), self.encoder.image_size))

    def texts(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.encoder.dim), np.float32)
        return self.encoder.encode_texts(list(texts))


class DinoEncoder:
    """SC encoder: a local DINOv2 folder (transformers ``AutoModel``; paper: ``dinov2_vitb14_reg``) whose last-layer
    patch tokens (after the final norm, = torch hub's ``x_norm_patchtokens``) are averaged; the CLS token and the
    ``num_register_tokens`` register tokens are excluded (Souček et al., CVPR 2025, App. D). Pixels follow the folder's
    ``preprocessor_config.json`` (default: shorter side 256 bicubic, centre crop 224, ImageNet mean/std)."""

    def __init__(self, path: str, device: str, batch_size: int) -> None:

        p = Path(path)
        if not (p.is_dir() and (p / "config.json").is_file()):
            raise EvalError(f"--variant dino={path}: not a transformers DINOv2 folder (config.json); nothing is "
                            "downloaded")
        import torch
        from transformers import AutoModel

        self._torch = torch
        model = AutoModel.from_pretrained(str(p), local_files_only=True)
        mtype = getattr(model.config, "model_type", "")
        if not str(mtype).startswith("dinov2"):
            raise EvalError(f"--variant dino={path}: model_type {mtype!r} is not DINOv2")
        self.registers = int(getattr(model.config, "num_register_tokens", 0) or 0)
        device = _device(device)
        self.model = model.to(device).eval()
        self.device, self.batch_size = device, batch_size
        self.model_id = f"transformers {mtype} {p.name}"
        cfg: dict[str, Any] = {}
        if (p / "preprocessor_config.json").is_file():
            cfg = load_json(p / "preprocessor_config.json", "DINOv2 preprocessor config")
        size = cfg.get("size", {})
        crop = cfg.get("crop_size", {})
        self.resize = int(size.get("shortest_edge", DINO_RESIZE) if isinstance(size, dict) else size)
        self.crop = int(crop.get("height", DINO_CROP) if isinstance(crop, dict) else crop)
        self.mean = np.asarray(cfg.get("image_mean", IMAGENET_MEAN), np.float32)
        self.std = np.asarray(cfg.get("image_std", IMAGENET_STD), np.float32)

    def _pixels(self, frame: np.ndarray) -> np.ndarray:
        from PIL import Image

        img = Image.fromarray(frame, "RGB")
        w, h = img.size
        scale = self.resize / min(w, h)
        img = img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BICUBIC)
        w, h = img.size
        left, top = round((w - self.crop) / 2.0), round((h - self.crop) / 2.0)
        img = img.crop((left, top, left + self.crop, top + self.crop))
        x = np.asarray(img, np.float32) / 255.0
        return ((x - self.mean) / self.std).transpose(2, 0, 1)

    def images(self, frames: list[np.ndarray]) -> np.ndarray:
        torch = self._torch
        pixels = np.stack([self._pixels(f) for f in frames]).astype(np.float32)
        out = []
        with torch.inference_mode():
            for lo in range(0, len(pixels), self.batch_size):
                x = torch.from_numpy(pixels[lo:lo + self.batch_size]).to(self.device)
                hidden = self.model(pixel_values=x).last_hidden_state
                out.append(hidden[:, 1 + self.registers:, :].float().mean(dim=1).cpu().numpy())
        return np.concatenate(out)


def load_inception(spec: str, device: str) -> Callable[[np.ndarray], np.ndarray]:
    """The FID feature extractor plug-in (pytorch-fid's InceptionV3 needs torchvision; weights download).

    ``spec`` is either

    - a **TorchScript file** (``torch.jit.save`` of e.g. pytorch-fid's ``InceptionV3([3])`` traced where torchvision
      exists): called on float32 ``[N, 3, 256, 256]`` RGB in [0, 1] (pytorch-fid's input convention; its module
      resizes to 299 and rescales itself); the output is flattened to ``[N, D]`` (pool3: 2048-d);
    - a **callable** ``module:function`` or ``path/to/file.py:function``: called on uint8 ``[N, 256, 256, 3]`` RGB,
      returns ``[N, D]`` features (wrap clean-fid, NVIDIA's TorchScript Inception, ... this way).

    Both receive images already centre-square-cropped and resized to 256 (bicubic) [unverified preprocessing].
    TorchScript archives are loaded by ``torch.jit.load`` (no pickle); nothing downloads.
    """
    path = Path(spec)
    if path.is_file() and not spec.endswith(".py"):
        import torch

        device = _device(device)
        try:
            module = torch.jit.load(str(path), map_location=device).eval()
        except (RuntimeError, ValueError) as exc:
            raise EvalError(f"--variant inception={spec}: not a TorchScript archive ({exc}); give a TorchScript "
                            "file or module:function") from None

        def run(batch: np.ndarray) -> np.ndarray:
            x = torch.from_numpy(batch.transpose(0, 3, 1, 2).astype(np.float32) / 255.0).to(device)
            with torch.inference_mode():
                out = module(x)
            if isinstance(out, (list, tuple)):
                out = out[0]
            return out.float().reshape(out.shape[0], -1).cpu().numpy()

        return run
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise EvalError(f"--variant inception={spec}: neither a TorchScript file nor 'module:function'")
    try:
        if target.endswith(".py"):
            file = Path(target)
            if not file.is_file():
                raise EvalError(f"--variant inception={spec}: {file} not found")
            mod_spec = importlib.util.spec_from_file_location(f"_showhowto_inception_{file.stem}", file)
            if mod_spec is None or mod_spec.loader is None:
                raise EvalError(f"--variant inception={spec}: cannot import {file}")
            module_obj = importlib.util.module_from_spec(mod_spec)
            sys.modules[mod_spec.name] = module_obj
            mod_spec.loader.exec_module(module_obj)
        else:
            module_obj = importlib.import_module(target)
    except ImportError as exc:
        raise EvalError(f"--variant inception={spec}: cannot import {target}: {exc}") from None
    fn = getattr(module_obj, name, None)
    if not callable(fn):
        raise EvalError(f"--variant inception={spec}: {target} has no callable {name!r}")
    return lambda batch: np.asarray(fn(batch), dtype=np.float64).reshape(len(batch), -1)


def _batched(items: Iterator[tuple[int, int, Any]], size: int) -> Iterator[list[tuple[int, int, Any]]]:
    batch: list[tuple[int, int, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _encode_frames(items: Iterator[tuple[int, int, Any]], encoders: dict[str, Any], batch_size: int,
                   w: Warnings, reason: str) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Decode images batch by batch (each decoded once) and run every given encoder; unreadable -> ``reason``."""
    seq, step = [], []
    out: dict[str, list[np.ndarray]] = {name: [] for name in encoders}
    for batch in _batched(items, batch_size):
        frames = []
        for k, i, src in batch:
            try:
                frames.append((k, i, load_rgb(src, str(src) if isinstance(src, Path) else f"frame {i}")))
            except ValueError as exc:
                w.add(reason, str(exc))
        if not frames:
            continue
        seq += [k for k, _, _ in frames]
        step += [i for _, i, _ in frames]
        rgb = [f for _, _, f in frames]
        for name, enc in encoders.items():
            if name == "inception":
                out[name].append(enc(np.stack([_square_resize(f, FID_IMAGE_SIZE) for f in rgb])))
            else:
                out[name].append(enc.images(rgb))
    feats = {n: np.concatenate(v).astype(np.float64) if v else np.zeros((0, 1)) for n, v in out.items()}
    return np.asarray(seq, np.int64), np.asarray(step, np.int64), feats


def _features_from_encoders(inputs: EvalInputs, gt: GroundTruth, include_input: bool, w: Warnings) -> Features:
    v = inputs.variant
    seqs = gt.sequences
    assert inputs.pred is not None
    device = v["device"]  # resolved by each encoder after its path checks (a bad path fails before torch loads)
    bs = int(v["batch_size"])
    generated = find_generated(inputs.pred, seqs, w)
    real = real_frames_from_folder(Path(v["real"])) if v["real"] else gt.real_frames
    clip = ClipEncoder(v["clip"], v["clip_arch"], device, bs) if v["clip"] else None
    dino = DinoEncoder(v["dino"], device, bs) if v["dino"] else None
    inception = load_inception(v["inception"], device) if v["inception"] else None

    gen_enc: dict[str, Any] = {k: e for k, e in (("clip", clip), ("dino", dino), ("inception", inception)) if e}
    items = ((k, i, generated[(k, i)]) for k, i in sorted(generated))
    gen_seq, gen_step, gen = _encode_frames(items, gen_enc, bs, w, "unreadable_image")
    f = Features(gen_seq, gen_step, gen.get("clip"), gen.get("dino"), gen.get("inception"))
    f.counts["images_found"] = len(generated)

    if clip is not None:
        lowest = 0 if include_input else 1
        pairs = [(k, j) for k, s in enumerate(seqs) for j in range(lowest, s.n + 1)]
        f.prompt_clip = clip.texts([seqs[k].instructions[j] for k, j in pairs]).astype(np.float64)
        f.prompt_seq = np.asarray([k for k, _ in pairs], np.int64)
        f.prompt_step = np.asarray([j for _, j in pairs], np.int64)
        names = sorted({s.task for s in seqs if s.task})
        if names:
            f.task_names, f.task_clip = names, clip.texts(names).astype(np.float64)

    real_enc: dict[str, Any] = {k: e for k, e in (("dino", dino), ("inception", inception)) if e}
    if real is not None and real_enc:
        r_seq, _, r_feats = _encode_frames(iter_real_frames(real, seqs), real_enc, bs, w, "unreadable_real_frame")
        expected = sum(s.n for s in seqs)
        if len(r_seq) < expected:
            w.add("missing_real_frame", f"{expected - len(r_seq)} of {expected} source frames I_i (i >= 1) are "
                  f"absent from {real.describe()}", n=expected - len(r_seq))
        if dino is not None:
            f.gallery_dino, f.gallery_label = r_feats["dino"], r_seq
        if inception is not None:
            f.real_inception = r_feats["inception"]
    f.real_source = real.describe() if real is not None else None
    return f


# --------------------------------------------------------------------------------------------------- protocol


def _evaluate(inputs: EvalInputs) -> EvalResult:
    """Score generated sequences (Souček et al., CVPR 2025, Sec. 5.1 definitions; module docstring for missing
    inputs)."""
    v = inputs.variant
    w = inputs.warnings
    gt = read_ground_truth(inputs.gt[0])
    seqs = gt.sequences
    n_steps = np.asarray([s.n for s in seqs], dtype=np.int64)
    include_input = v["sf_classes"] == "with_input"
    pooled = bool(v["pooled"])
    encoders = [k for k in ("clip", "dino", "inception", "real") if v[k]]
    if int(v["batch_size"]) < 1:
        raise EvalError(f"--variant batch_size={v['batch_size']}: must be at least 1")
    if v["embeddings"]:
        if inputs.pred is not None:
            raise EvalError("--variant embeddings=FILE.npz computes every metric from the npz: drop --pred")
        if encoders:
            raise EvalError(f"--variant embeddings=FILE.npz cannot be combined with {', '.join(encoders)}=PATH")
        npz = Path(v["embeddings"])
        f = _features_from_npz(load_embeddings(npz, w), seqs, include_input, npz, w)
        mode = "embeddings"
        if f.gen_inception is None or f.real_inception is None:
            w.add("no_inception_features", "the npz has no gen_inception/real_inception arrays: FID is null")
    else:
        if inputs.pred is None:
            raise EvalError("showhowto needs --pred DIR of <sequence_id>/<i>.png images, or "
                            "--variant embeddings=FILE.npz")
        if not any(v[k] for k in ("clip", "dino", "inception")):
            raise EvalError("no encoder given: pass --variant clip=PATH dino=PATH inception=PATH (local models) "
                            "or --variant embeddings=FILE.npz")
        f = _features_from_encoders(inputs, gt, include_input, w)
        mode = "encoders"
        for key, metrics in (("clip", "SF and TF"), ("dino", "SC"), ("inception", "FID")):
            if not v[key]:
                w.add(f"no_{key}_encoder", f"no --variant {key}=PATH: {metrics} null")
        if (v["dino"] or v["inception"]) and f.gallery_dino is None and f.real_inception is None:
            w.add("no_real_frames", "no source frames (neither --variant real=DIR nor an 'images' config next to "
                  "the ground truth): SC and FID are null")

    expected = int(n_steps.sum())
    present = int(f.gen_seq.size)
    if present == 0:
        where = f"--variant embeddings={v['embeddings']}" if mode == "embeddings" else f"--pred {inputs.pred}"
        raise EvalError(f"no generated image of any test sequence in {where} (expected <sequence_id>/<i>.png, "
                        f"i = 1..n, e.g. {seqs[0].sequence_id}/1.png)")
    if present < expected:
        have = set(zip(f.gen_seq.tolist(), f.gen_step.tolist(), strict=True))
        first = next(f"{s.sequence_id}/{i}" for k, s in enumerate(seqs) for i in range(1, s.n + 1)
                     if (k, i) not in have)
        w.add("missing_image", f"{expected - present} of {expected} generated images are missing (e.g. {first}); "
              "they score as misses in SF and SC and leave FID", n=expected - present)

    metrics: dict[str, Any] = {"sf": None, "sc": None, "tf": None, "fid": None}
    if f.gen_clip is not None and f.prompt_clip is not None:
        assert f.prompt_seq is not None and f.prompt_step is not None
        metrics["sf"] = step_faithfulness(f.gen_clip, f.gen_seq, f.gen_step, f.prompt_clip, f.prompt_seq,
                                          f.prompt_step, n_steps, include_input, pooled).value
    elif mode == "embeddings":
        w.add("no_clip_features", "the npz lacks gen_clip or prompt_clip/prompt_ids: SF is null")

    with_task = [s.task is not None for s in seqs]
    if not any(with_task):
        w.add("no_task", f"the ground truth ({gt.format}) names no task: TF is null")
    elif f.gen_clip is not None and f.task_clip is not None and f.task_names is not None:
        if not all(with_task):
            w.add("missing_task", f"{with_task.count(False)} sequence(s) without a task leave TF",
                  n=with_task.count(False))
        cls = {name: c for c, name in enumerate(f.task_names)}
        absent = sorted({s.task for s in seqs if s.task and s.task not in cls})
        if absent:
            raise EvalError(f"task_names has no row for the task {absent[0]!r} of the ground truth")
        seq_task = np.asarray([cls[s.task] if s.task else -1 for s in seqs], dtype=np.int64)
        metrics["tf"] = task_faithfulness(f.gen_clip, f.gen_seq, len(seqs), seq_task, f.task_clip).value
    elif mode == "embeddings":
        w.add("no_task_features", "the npz lacks gen_clip or task_names/task_clip: TF is null")

    if f.gen_dino is not None and f.gallery_dino is not None and f.gallery_label is not None:
        if f.gallery_dino.shape[0] == 0:
            w.add("empty_gallery", "the SC gallery (source frames I_i, i >= 1) is empty: SC is null")
        else:
            metrics["sc"] = scene_consistency(f.gen_dino, f.gen_seq, f.gallery_dino, f.gallery_label, n_steps,
                                              pooled).value
    elif mode == "embeddings":
        w.add("no_dino_features", "the npz lacks gen_dino or gallery_ids/gallery_dino: SC is null")

    if f.gen_inception is not None and f.real_inception is not None:
        if f.gen_inception.shape[0] < 2 or f.real_inception.shape[0] < 2:
            w.add("fid_too_few_images", f"FID needs 2+ images per side (generated {f.gen_inception.shape[0]}, "
                  f"real {f.real_inception.shape[0]}): FID is null")
        elif f.gen_inception.shape[1] != f.real_inception.shape[1]:
            raise EvalError(f"Inception features disagree in width: generated {f.gen_inception.shape[1]}, "
                            f"real {f.real_inception.shape[1]}")
        else:
            try:
                metrics["fid"] = frechet_distance_from_features(f.gen_inception, f.real_inception)
            except ValueError as exc:
                w.add("fid_imaginary_component", f"{exc}: FID is null")

    extra: dict[str, Any] = {
        "sequences": len(seqs),
        "images": present,
        "images_expected": expected,
        "images_missing": expected - present,
        "mean_n": float(n_steps.mean()),
        "sf_chance": float(np.mean(1.0 / (n_steps + (1 if include_input else 0)))),
        "tasks": len(f.task_names) if f.task_names is not None else 0,
        "sequences_with_task": int(sum(with_task)),
        "gallery": int(f.gallery_dino.shape[0]) if f.gallery_dino is not None else 0,
        "real_images": int(f.real_inception.shape[0]) if f.real_inception is not None else 0,
    }
    extra.update({k: val for k, val in f.counts.items() if k != "images_found"})
    resolved: dict[str, Any] = {"gt_format": gt.format, "mode": mode}
    if mode == "encoders":
        resolved["real_frames"] = f.real_source
    return EvalResult(metrics=metrics, items=len(seqs), skipped=sum(gt.dropped.values()),
                      skip_reasons=dict(gt.dropped), resolved=resolved, extra_counts=extra)


PROTOCOL = register(
    Protocol(
        name="showhowto",
        summary="ShowHowTo generated visual instructions: step/scene/task faithfulness (SF, SC, TF) and FID",
        evaluate=_evaluate,
        variants=(
            Variant("sf_classes", "generated", "SF classes: the n prompts of the generated frames, or with_input "
                    "(adds the input prompt τ_0) [unverified]", choices=("generated", "with_input")),
            Variant("pooled", False, "image-level mean instead of the per-sequence mean (paper App. D)"),
            Variant("embeddings", "", "precomputed features FILE.npz (gen_ids, gen_clip, gen_dino, prompt_ids, "
                    "prompt_clip, task_names, task_clip, gallery_ids, gallery_dino[, gen_inception, real_inception])"),
            Variant("clip", "", "local CLIP: transformers CLIPModel folder or open_clip checkpoint (SF, TF)"),
            Variant("clip_arch", DEFAULT_CLIP_ARCH, "open_clip architecture of an open_clip checkpoint"),
            Variant("dino", "", "local DINOv2 folder (transformers) for SC"),
            Variant("inception", "", "FID features: TorchScript file or module:function / file.py:function"),
            Variant("real", "", "folder of source frames <sequence_id>/<i>.jpg|png (SC gallery, FID reference); "
                    "default: the release's images config"),
            Variant("device", "auto", "torch device for the encoders (auto = cuda when available)"),
            Variant("batch_size", 32, "images per encoder batch"),
        ),
        needs_pred=False,
        # FID is not a fraction: the readable table (x100) leaves it out; it is in the JSON output
        table_keys=("sf", "sc", "tf"),
    )
)
