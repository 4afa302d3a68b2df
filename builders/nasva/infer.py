"""NaSVA inference (docs/evaluation.md) and its CLI.

    python -m builders.nasva.infer --ckpt CKPT_DIR --features DIR --texts FILE --out PRED.json
                                   [--mode narration|step] [--save-matrices DIR] [--batch-size 8] [--device cpu|cuda]

``--texts`` is a labels json (``{vid: [{"text", "start", "end"}]}``, times ignored; HTM-Align rows
``[alignable, start, end, text]`` accepted). ``PRED.json`` is the HTM-Align prediction format of docs/evaluation.md
(``htm_align``): ``{vid: {"pred_time": [seconds per text, input order], "align_score": [float per text]}}`` where
pred_time is the argmax slot t̂ of the text's row of A (last decoder layer, ties to the smallest t) written as
``float(t̂)`` seconds (slot t̂ = second [t̂, t̂+1), so ``floor`` gives the slot back) and align_score = A[k, t̂] (cosine
in [−1, 1]). ``--save-matrices DIR`` also writes ``DIR/<vid>.npy``: A as float32 ``[K, T]``. ``--format result`` writes
the official HT-Step ``result.json`` shape instead, ``{vid: [t̂ per text]}`` (integer slots).

Narration alignment (HTM-Align) uses ``<narration>`` mode on the whole video up to 5000 s (longer: cut, warned); step
grounding uses ``--mode step``. In ``<narration>`` mode more than 1024 texts are processed in consecutive blocks of 1024.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .checkpoint import atomic_write_bytes, atomic_write_json, load_checkpoint
from .data import SkipCounts, log, pad_by_last, parse_entry, read_labels
from .errors import FeatureError, NasvaInputError
from ..sources.feature_files import FeatureStore
from .model import NaSVA
from .text_features import default_text_cache, encode_texts, get_text_encoder


@dataclass
class InferConfig:
    """Inference settings."""

    mode: str = "narration"  #: narration (HTM-Align) | step (HT-Step, CrossTask, self-training)
    output_format: str = "htm_align"  #: htm_align {vid: {pred_time, align_score}} | result {vid: [t̂]}
    batch_size: int = 8  #: videos per forward pass (padding never changes A)
    max_rows: int = 5000  #: the sinusoidal table length; longer videos are cut with a warning
    device: str = "cpu"


@torch.no_grad()
def predict_matrices(model: NaSVA, visuals: Sequence[np.ndarray], text_feats: Sequence[np.ndarray], narration: bool,
                     batch_size: int = 8, device: str | torch.device = "cpu") -> list[np.ndarray]:
    """A (last decoder layer) per video, float32 ``[K_i, T_i]``, batched with padding masks.

    In ``<narration>`` mode a video with more texts than the text PE table is split into consecutive blocks."""
    model.eval()
    cap = model.cfg.max_text_pe
    jobs: list[tuple[int, int, int]] = []  # (video index, first text, last text + 1)
    for i, tf in enumerate(text_feats):
        K = tf.shape[0]
        step = cap if narration else max(K, 1)
        jobs += [(i, a, min(a + step, K)) for a in range(0, K, step)]
    rows: list[list[np.ndarray]] = [[] for _ in visuals]
    for j in range(0, len(jobs), max(1, batch_size)):
        chunk = jobs[j: j + batch_size]
        vis, vpad = pad_by_last([visuals[i] for i, _, _ in chunk])
        txt, tpad = pad_by_last([text_feats[i][a:b] for i, a, b in chunk])
        out = model(vis.to(device), vpad.to(device), txt.to(device), tpad.to(device), narration)
        sim = out.similarity().float().cpu().numpy()
        for n, (i, a, b) in enumerate(chunk):
            rows[i].append(sim[n, : b - a, : visuals[i].shape[0]])
    return [np.concatenate(r, axis=0) if r else np.zeros((0, v.shape[0]), np.float32) for r, v in zip(rows, visuals)]


def argmax_predictions(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t̂ per row, A[k, t̂]); ties go to the smallest t (numpy/torch argmax)."""
    slots = np.argmax(A, axis=1)
    return slots, A[np.arange(A.shape[0]), slots]


def recall_hits(slots: np.ndarray, start: np.ndarray, end: np.ndarray, rule: str = "tan") -> np.ndarray:
    """Per-text hit of HTM-Align R@1 (docs/evaluation.md, ``htm_align``): ``tan``: floor(s) <= t̂ <= ceil(e); ``nsva``:
    s <= t̂ <= e."""
    slots = np.asarray(slots, dtype=np.float64)
    if rule == "tan":
        return (np.floor(start) <= slots) & (slots <= np.ceil(end))
    if rule in ("nsva", "nasva"):
        return (start <= slots) & (slots <= end)
    raise ValueError(f"unknown rule {rule!r} (tan|nsva)")


class Grounder:
    """A loaded checkpoint for in-process use (e.g. HowToStep Stage 2, MPTVA S-V-long): sentence features
    through the checkpoint's own text encoder and cache, A matrices per video.

        g = Grounder("ckpt_dir")
        A = g.matrices([(features_TxC, ["chop the onions", ...])], mode="step", max_rows=1200)[0]   # [K, T]
    """

    def __init__(self, ckpt: str | Path, device: str = "cpu", text_cache: str | Path | None = None,
                 text_encoder: str | None = None):
        self.model, self.config, self.ignored = load_checkpoint(ckpt, device)
        self.device = device
        self.encoder = resolve_text_encoder(self.config, text_encoder, device)
        self.text_cache = default_text_cache() if text_cache is None else text_cache

    def matrices(self, videos: Sequence[tuple[np.ndarray, Sequence[str]]], mode: str = "step",
                 max_rows: int | None = None, batch_size: int = 8) -> list[np.ndarray]:
        """A (cosines, last decoder layer) ``[K_i, T_i]`` per (features ``[T, C_v]``, texts) pair; features are cut at
        ``max_rows`` (self-training: 1200) or at the visual PE table."""
        if mode not in ("narration", "step"):
            raise ValueError(f"mode must be narration or step, not {mode!r}")
        cap = min(max_rows or self.model.cfg.max_visual_pe, self.model.cfg.max_visual_pe)
        table, row = encode_texts(self.encoder, [t for _, ts in videos for t in ts], self.text_cache)
        vis = [np.ascontiguousarray(np.asarray(v, dtype=np.float32)[:cap]) for v, _ in videos]
        for v in vis:
            if v.ndim != 2 or v.shape[1] != self.model.cfg.d_visual_in or v.shape[0] == 0:
                raise NasvaInputError(f"features of shape {v.shape} do not fit the checkpoint "
                                      f"([T>0, {self.model.cfg.d_visual_in}])")
        txt = [table[[row[t] for t in ts]] if ts else np.zeros((0, table.shape[1]), np.float32) for _, ts in videos]
        return predict_matrices(self.model, vis, txt, mode == "narration", batch_size, self.device)


def resolve_text_encoder(config: dict, override: str | None, device: str = "cpu"):
    """The text encoder the checkpoint was trained with (or ``override``, which must be the same model)."""
    name = override or config.get("text_encoder_name")
    if not name:
        raise NasvaInputError("the checkpoint does not name its text encoder (official checkpoints): pass "
                              "--text-encoder")
    enc = get_text_encoder(name, device=device)
    want = config.get("text_encoder")
    if want and enc.model_id != want:
        raise NasvaInputError(f"text encoder {name!r} ({enc.model_id}) differs from the checkpoint's ({want}): "
                              "sentence features from different encoders are not interchangeable")
    return enc


def run_inference(ckpt: str | Path, features_dir: str | Path, texts_path: str | Path, out_path: str | Path,
                  cfg: InferConfig | None = None, save_matrices: str | Path | None = None,
                  text_encoder: str | None = None, text_cache: str | Path | None = None,
                  visual_backbone: str | None = None, progress: bool = True) -> dict:
    """Predict every video of ``texts_path``; write ``out_path``; return ``{"videos", "texts", "skips"}``."""
    cfg = cfg or InferConfig()
    if cfg.mode not in ("narration", "step"):
        raise NasvaInputError(f"--mode must be narration or step, not {cfg.mode!r}")
    model, config, ignored = load_checkpoint(ckpt, cfg.device)
    if ignored:
        log(f"[nasva] ignored {len(ignored)} unused checkpoint keys ({', '.join(sorted({k.split('.')[0] for k in ignored}))})")
    want_backbone = config.get("visual_backbone")
    if visual_backbone and want_backbone and visual_backbone != want_backbone:
        raise NasvaInputError(f"visual backbone {visual_backbone!r} differs from the checkpoint's {want_backbone!r}: "
                              "features from different encoders are not interchangeable")
    labels = read_labels(texts_path)
    max_rows = min(cfg.max_rows, model.cfg.max_visual_pe)
    store = FeatureStore(features_dir, expected_dim=model.cfg.d_visual_in, max_rows=max_rows)
    skips = SkipCounts()
    vids, texts = [], []
    for vid in sorted(labels):
        entries = labels[vid]
        if not isinstance(entries, list) or not entries:
            skips.video("no_texts" if isinstance(entries, list) else "bad_labels", vid)
            continue
        parsed = [parse_entry(e, need_times=False) for e in entries]
        bad = [p for p in parsed if isinstance(p, str)]
        if bad:  # predictions must keep the input order: one unusable text drops the video
            skips.video("bad_label", vid, f"{len(bad)} malformed entries")
            continue
        try:
            store.probe(vid)
        except FeatureError as e:
            if e.reason == "feature_dim_mismatch":
                raise NasvaInputError(f"{e}: the checkpoint expects {model.cfg.d_visual_in}-d visual features "
                                      "(features from different backbones are not interchangeable)") from e
            skips.video(e.reason, vid, str(e))
            continue
        if store.full_rows[vid] > max_rows:
            skips.note("video_cut_at_max_rows", vid)
        vids.append(vid)
        texts.append([p[0] for p in parsed])
    log(skips.summary("infer"))
    if not vids:
        raise NasvaInputError(f"no video of {texts_path} could be predicted (see the counts above)")
    encoder = resolve_text_encoder(config, text_encoder, cfg.device)
    table, row = encode_texts(encoder, [t for ts in texts for t in ts],
                              default_text_cache() if text_cache is None else text_cache)
    if table.shape[1] != model.cfg.d_text_in:
        raise NasvaInputError(f"text features are {table.shape[1]}-d but the checkpoint expects {model.cfg.d_text_in}")
    if cfg.output_format not in ("htm_align", "result"):
        raise NasvaInputError(f"--format must be htm_align or result, not {cfg.output_format!r}")
    preds: dict[str, object] = {}
    if save_matrices is not None:
        Path(save_matrices).mkdir(parents=True, exist_ok=True)
    from tqdm import tqdm

    bs = max(1, cfg.batch_size)
    bar = tqdm(total=len(vids), desc="nasva infer", unit="video", file=sys.stderr, disable=not progress,
               mininterval=1.0)
    for j in range(0, len(vids), bs):
        chunk = list(range(j, min(j + bs, len(vids))))
        mats = predict_matrices(model, [store.get(vids[i]) for i in chunk],
                                [table[[row[t] for t in texts[i]]] for i in chunk],
                                cfg.mode == "narration", bs, cfg.device)
        for i, A in zip(chunk, mats):
            slots, scores = argmax_predictions(A)
            if cfg.output_format == "result":
                preds[vids[i]] = [int(s) for s in slots]
            else:
                preds[vids[i]] = {"pred_time": [float(s) for s in slots], "align_score": [float(s) for s in scores]}
            if save_matrices is not None:
                atomic_write_bytes(Path(save_matrices) / f"{vids[i]}.npy",
                                   lambda f, A=A: np.save(f, A.astype(np.float32), allow_pickle=False))
        bar.update(len(chunk))
    bar.close()
    atomic_write_json(Path(out_path), preds)
    n_texts = sum(len(t) for t in texts)
    log(f"[nasva] predicted {len(vids)} videos, {n_texts} texts -> {out_path}")
    return {"videos": len(vids), "texts": n_texts, "skips": skips.to_dict()}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m builders.nasva.infer", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    d = InferConfig()
    ap.add_argument("--ckpt", required=True, help="checkpoint directory (or an official .pth file)")
    ap.add_argument("--features", required=True, help="directory of per-second feature files")
    ap.add_argument("--texts", required=True, help="labels json {vid: [{text, start, end}]} (times ignored)")
    ap.add_argument("--out", required=True, help="prediction json (HTM-Align format)")
    ap.add_argument("--mode", choices=("narration", "step"), default=d.mode)
    ap.add_argument("--format", dest="output_format", choices=("htm_align", "result"), default=d.output_format,
                    help="htm_align: {vid: {pred_time, align_score}}; result: {vid: [slot per text]} (HT-Step)")
    ap.add_argument("--save-matrices", default=None, metavar="DIR", help="also write DIR/<vid>.npy [K, T] matrices")
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--max-rows", type=int, default=d.max_rows)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=d.device)
    ap.add_argument("--text-encoder", default=None, help="default: the checkpoint's")
    ap.add_argument("--text-cache", default=None, help="sqlite text-feature cache (default: user cache dir)")
    ap.add_argument("--visual-backbone", default=None, help="checked against the checkpoint's when both are known")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--no-progress", action="store_true")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but CUDA is not available", file=sys.stderr)
        return 2
    if args.max_rows > 5000 or args.max_rows < 1:
        print("error: --max-rows must be in 1..5000 (the visual PE table)", file=sys.stderr)
        return 2
    cfg = InferConfig(mode=args.mode, output_format=args.output_format, batch_size=args.batch_size,
                      max_rows=args.max_rows, device=args.device)
    try:
        run_inference(args.ckpt, args.features, args.texts, args.out, cfg, args.save_matrices, args.text_encoder,
                      args.text_cache, args.visual_backbone, progress=not args.no_progress)
    except NasvaInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
