"""NaSVA trainer (Li et al., ECCV 2024, §3.3, supp. §6.1; docs/evaluation.md) and its CLI.

    python -m builders.nasva.train --features DIR --labels FILE [--narrations FILE] --out CKPT_DIR
        [--epochs 12] [--batch-size 8] [--lr 1e-4] [--seed 2023] [--device cpu|cuda] [--val-labels FILE]
        [--text-encoder minilm|mpnet] [--fresh] ...            (every NasvaTrainConfig field is a --flag)

Recipe (paper/official defaults in :class:`NasvaTrainConfig`): AdamW lr 1e-4, betas (0.9, 0.999), eps 1e-8, weight decay
5e-5 except parameters named ``*.bias``; cosine annealing to 0 over all iterations, stepped per iteration, no warm-up;
12 epochs of batch 8 (``drop_last=False``), gradient-norm clipping at 1.0, fp32; features cut at 1200 s and texts ending
at or after 1200 s dropped; type token per batch: with probability 0.5 the whole batch is ``<step>`` (each sample's
texts shuffled, no text PE), else ``<narration>`` (stored order, learned text PE).

Determinism and resume: the model is initialised under ``seed``; epoch e draws its sample order, type tokens, text
shuffles and dropout from generators seeded by (seed, e). After every epoch the full training state (weights,
optimizer, scheduler, log) goes atomically to ``CKPT_DIR/resume.pt``; rerunning the same command after an
interruption continues from the last finished epoch and ends with the same weights as an uninterrupted run.
``model.pt`` + ``config.json`` are written when training ends (``resume.pt`` is then removed);
``train_log.jsonl`` after every epoch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .checkpoint import (
    CONFIG_FILE,
    LOG_FILE,
    MODEL_FILE,
    RESUME_FILE,
    atomic_torch_save,
    atomic_write_bytes,
    atomic_write_json,
    base_config,
    safe_load,
    save_checkpoint,
)
from .data import Sample, SkipCounts, build_samples, collate, log, read_labels, samples_fingerprint
from .errors import FeatureError, NasvaInputError
from ..sources.feature_files import FeatureStore
from .infer import argmax_predictions, predict_matrices, recall_hits
from .loss import grounding_loss
from .model import NaSVA, NasvaModelConfig, count_parameters
from .text_features import default_text_cache, encode_texts, get_text_encoder


@dataclass
class NasvaTrainConfig:
    """Training hyper-parameters with the paper's / released code's defaults (Li et al., ECCV 2024, supp. §6.1;
    ``Lzq5/Video-Text-Alignment``)."""

    epochs: int = 12  #: paper (the released yaml variant says 20)
    batch_size: int = 8  #: Li et al., ECCV 2024, supp. §6.1
    lr: float = 1e-4
    weight_decay: float = 5e-5  #: released config; 0 for ``*.bias`` parameters
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    grad_clip: float = 1.0  #: clip_grad_norm_ over all parameters
    seed: int = 2023
    temperature: float = 0.07  #: τ of the InfoNCE loss
    max_vlen: int = 1200  #: training truncation in seconds (Li et al., ECCV 2024, supp. §6.1)
    step_prob: float = 0.5  #: probability that a batch is <step> (texts shuffled, no text PE)
    mode_policy: str = "per_batch"  #: per_batch (released) | by_source (W batches <narration>, S batches <step>)
    negatives: str = "batch"  #: batch (released: every frame of the batch) | video (paper equation)
    loss: str = "nasva"  #: nasva | tan (symmetric TAN loss, Han et al., CVPR 2022)
    target_rule: str = "nasva"  #: nasva: start <= t <= end | tan: start <= t < end
    text_encoder: str = "minilm"  #: CPU preset; mpnet, a local folder, or hash:DIM (tests)
    val_mode: str = "narration"  #: type token used for validation (HTM-Align: narration)
    eval_every: int = 1  #: validate every N epochs (and after the last)
    save_every: int = 0  #: also keep CKPT_DIR/epoch-N.pt every N epochs (0: final only, as released)
    device: str = "cpu"


#: settings that may change between an interrupted run and its continuation
_RESUME_FREE = {"device", "eval_every", "save_every", "val_mode"}


def derive_seed(seed: int, epoch: int, tag: str) -> int:
    """A 63-bit seed for (run seed, epoch, purpose): independent streams that a resumed run reproduces."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{epoch}:{tag}".encode()).digest()[:8], "little") >> 1


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Official policy (the authors' code): no decay for names containing ``.bias`` (or ``.ln_``, which matches nothing
    here), so LayerNorm weights, ``in_proj_bias`` and the text PE are decayed."""
    no_decay, decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if (".bias" in name or ".ln_" in name) else decay).append(p)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def epoch_plan(samples: Sequence[Sample], cfg: NasvaTrainConfig, epoch: int) -> list[tuple[list[int], bool | None]]:
    """The batches of one epoch: (sample indices, forced type token or None = draw it). Shuffled every epoch."""
    g = torch.Generator().manual_seed(derive_seed(cfg.seed, epoch, "order"))
    B = cfg.batch_size
    if cfg.mode_policy == "per_batch":
        perm = torch.randperm(len(samples), generator=g).tolist()
        return [(perm[i: i + B], None) for i in range(0, len(perm), B)]
    if cfg.mode_policy == "by_source":
        plan = []
        for source in ("steps", "narrations"):
            idx = [i for i, s in enumerate(samples) if s.source == source]
            perm = [idx[j] for j in torch.randperm(len(idx), generator=g).tolist()]
            plan += [(perm[i: i + B], source == "narrations") for i in range(0, len(perm), B)]
        return [plan[j] for j in torch.randperm(len(plan), generator=g).tolist()]
    raise NasvaInputError(f"unknown mode_policy {cfg.mode_policy!r} (per_batch|by_source)")


def iterations_per_epoch(samples: Sequence[Sample], cfg: NasvaTrainConfig) -> int:
    if cfg.mode_policy == "by_source":
        return sum(math.ceil(sum(s.source == src for s in samples) / cfg.batch_size) for src in ("steps", "narrations"))
    return math.ceil(len(samples) / cfg.batch_size)


@torch.no_grad()
def evaluate(model: NaSVA, samples: Sequence[Sample], store: FeatureStore, text_feats: Sequence[np.ndarray],
             narration: bool, batch_size: int, device: str) -> dict[str, float]:
    """HTM-Align-style R@1 (docs/evaluation.md, micro average, TAN and NaSVA rules) on labelled samples."""
    hits_tan, hits_nsva = [], []
    for j in range(0, len(samples), batch_size):
        chunk = list(range(j, min(j + batch_size, len(samples))))
        mats = predict_matrices(model, [store.get(samples[i].video_id) for i in chunk],
                                [text_feats[i] for i in chunk], narration, batch_size, device)
        for i, A in zip(chunk, mats):
            slots, _ = argmax_predictions(A)
            hits_tan.append(recall_hits(slots, samples[i].start, samples[i].end, "tan"))
            hits_nsva.append(recall_hits(slots, samples[i].start, samples[i].end, "nsva"))
    n = sum(len(h) for h in hits_tan)
    return {"r1_tan": float(np.concatenate(hits_tan).mean()) if n else float("nan"),
            "r1_nsva": float(np.concatenate(hits_nsva).mean()) if n else float("nan"), "texts": n}


def _file_sha256(path: str | Path | None) -> str | None:
    if path is None:
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _resume_view(train_cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in train_cfg.items() if k not in _RESUME_FREE}


def train(features: str | Path, out_dir: str | Path, labels: str | Path | None = None,
          narrations: str | Path | None = None, cfg: NasvaTrainConfig | None = None,
          model_overrides: dict[str, Any] | None = None, val_labels: str | Path | None = None,
          val_features: str | Path | None = None, text_cache: str | Path | None = None,
          visual_backbone: str | None = None, fresh: bool = False, progress: bool = True,
          on_epoch_end: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train NaSVA; return a summary (``log``: one dict per epoch, ``skips``, ``ckpt``, ``resumed_from``).

    ``on_epoch_end(epoch)`` runs after each epoch's state is saved (tests use it to simulate an interruption).
    """
    cfg = cfg or NasvaTrainConfig()
    out = Path(out_dir)
    overrides = dict(model_overrides or {})
    for key, allowed in (("mode_policy", ("per_batch", "by_source")), ("negatives", ("batch", "video")),
                         ("loss", ("nasva", "tan")), ("target_rule", ("nasva", "tan")),
                         ("val_mode", ("narration", "step"))):
        if getattr(cfg, key) not in allowed:
            raise NasvaInputError(f"{key} must be one of {allowed}, not {getattr(cfg, key)!r}")
    if cfg.epochs < 0 or cfg.batch_size < 1 or cfg.max_vlen < 1 or cfg.max_vlen > 5000:
        raise NasvaInputError("epochs >= 0, batch_size >= 1 and 1 <= max_vlen <= 5000 are required")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NasvaInputError("--device cuda but CUDA is not available")
    if out.exists() and not out.is_dir():
        raise NasvaInputError(f"--out {out} exists and is not a directory")
    sources = [(n, p) for n, p in (("steps", labels), ("narrations", narrations)) if p is not None]
    if not sources:
        raise NasvaInputError("nothing to train on: give --labels (steps) and/or --narrations")
    train_text = "both" if len(sources) == 2 else sources[0][0]
    t_start = time.time()

    # ---- data: validate everything before the first step; bad rows are named skips
    max_text_pe = int(overrides.get("max_text_pe", NasvaModelConfig.max_text_pe))
    store = FeatureStore(features, expected_dim=overrides.get("d_visual_in"), max_rows=cfg.max_vlen)
    skips = SkipCounts()
    samples: list[Sample] = []
    for source, path in sources:
        samples += build_samples(read_labels(path), source, store, skips, cfg.max_vlen, max_texts=max_text_pe)
    log(skips.summary("train"))
    if not samples:
        raise NasvaInputError("no usable training sample (see the counts above)")
    n_by_source = {s: sum(x.source == s for x in samples) for s, _ in sources}
    log(f"[nasva] train: {len(samples)} samples ({', '.join(f'{k} {v}' for k, v in n_by_source.items())}), "
        f"{sum(len(s.texts) for s in samples)} texts, visual dim {store.expected_dim}")
    val_samples: list[Sample] = []
    val_store = None
    if val_labels is not None:
        val_store = FeatureStore(val_features or features, expected_dim=store.expected_dim, max_rows=5000)
        vskips = SkipCounts()
        val_samples = build_samples(read_labels(val_labels), "val", val_store, vskips, max_vlen=None)
        log(vskips.summary("val"))
        if not val_samples:
            log("[nasva] val: no usable validation sample; validation is off")
    encoder = get_text_encoder(cfg.text_encoder, device=cfg.device)
    table, row = encode_texts(encoder, [t for s in samples + val_samples for t in s.texts],
                              default_text_cache() if text_cache is None else text_cache)
    train_tf = [table[[row[t] for t in s.texts]] for s in samples]
    val_tf = [table[[row[t] for t in s.texts]] for s in val_samples]

    model_cfg = NasvaModelConfig(**{**overrides, "d_visual_in": int(store.expected_dim),
                                    "d_text_in": int(table.shape[1])})
    iters = iterations_per_epoch(samples, cfg)
    train_cfg = {**asdict(cfg), "train_text": train_text}
    data_info = {"labels_sha256": _file_sha256(labels), "narrations_sha256": _file_sha256(narrations),
                 "num_samples": len(samples), "num_samples_by_source": n_by_source,
                 "samples_sha256": samples_fingerprint(samples, [encoder.model_id, store.expected_dim])}
    config = base_config(model_cfg, temperature=cfg.temperature, max_vlen=cfg.max_vlen, feature_fps=1,
                         visual_backbone=visual_backbone, text_encoder=encoder.model_id,
                         text_encoder_name=cfg.text_encoder, train=train_cfg, data=data_info, metrics={},
                         status="training")

    # ---- model, optimiser, schedule; resume
    seed_everything(cfg.seed)
    device = torch.device(cfg.device)
    model = NaSVA(model_cfg).to(device)
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                            eps=cfg.eps)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, cfg.epochs * iters), eta_min=0.0)
    start_epoch, history = 0, []
    resumed_from = None
    if fresh and out.exists():
        for name in (MODEL_FILE, CONFIG_FILE, LOG_FILE, RESUME_FILE):
            (out / name).unlink(missing_ok=True)
        for p in out.glob("epoch-*.pt"):
            p.unlink()
    old_cfg = _read_json(out / CONFIG_FILE)
    if old_cfg is not None:
        mismatch = _compare_runs(old_cfg, config)
        if mismatch:
            raise NasvaInputError(f"{out} holds another training run ({mismatch}); pass --fresh to overwrite it or "
                                  "choose another --out")
        if old_cfg.get("status") == "complete" and (out / MODEL_FILE).exists():
            log(f"[nasva] {out} already holds the finished run ({cfg.epochs} epochs): nothing to do (--fresh retrains)")
            return {"ckpt": str(out), "log": old_cfg.get("metrics", {}).get("log", []), "skips": skips.to_dict(),
                    "resumed_from": cfg.epochs, "seconds": 0.0}
    if (out / RESUME_FILE).exists():
        state = safe_load(out / RESUME_FILE)
        if state.get("fingerprint") != data_info["samples_sha256"]:
            raise NasvaInputError(f"{out / RESUME_FILE} was saved for other data; pass --fresh to start over")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start_epoch, history = int(state["epoch"]), list(state["log"])
        resumed_from = start_epoch
        log(f"[nasva] resuming {out} after epoch {start_epoch}/{cfg.epochs}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / CONFIG_FILE, config)
    log(f"[nasva] model: {count_parameters(model) / 1e6:.2f} M parameters; {iters} iterations/epoch x "
        f"{cfg.epochs} epochs; device {cfg.device}")

    from tqdm import tqdm

    for epoch in range(start_epoch, cfg.epochs):
        t0 = time.time()
        torch.manual_seed(derive_seed(cfg.seed, epoch, "torch"))  # dropout stream of this epoch
        rng = random.Random(derive_seed(cfg.seed, epoch, "text"))  # type tokens and text shuffles
        model.train()
        loss_sum, n_seen, hits, n_texts, skipped_steps = 0.0, 0, 0, 0, 0
        plan = epoch_plan(samples, cfg, epoch)
        bar = tqdm(plan, desc=f"nasva epoch {epoch + 1}/{cfg.epochs}", unit="batch", file=sys.stderr,
                   disable=not progress, mininterval=1.0, leave=False)
        for idx, forced in bar:
            narration = forced if forced is not None else not (rng.random() < cfg.step_prob)
            try:
                vis = [store.get(samples[i].video_id) for i in idx]
            except FeatureError as e:  # a file changed or vanished after validation: skip the batch, keep going
                skips.video("read_error_in_training", samples[idx[0]].video_id, str(e))
                sched.step()
                skipped_steps += 1
                continue
            batch = collate(vis, [train_tf[i] for i in idx], [samples[i].start for i in idx],
                            [samples[i].end for i in idx], [samples[i].texts for i in idx],
                            [samples[i].video_id for i in idx], narration, rng, cfg.target_rule).to(device)
            out_m = model(batch.visual, batch.visual_padding_mask, batch.text, batch.text_padding_mask, narration)
            loss = grounding_loss(cfg.loss, out_m, batch.time_mask, batch.visual_padding_mask,
                                  batch.text_padding_mask, cfg.temperature, cfg.negatives)
            opt.zero_grad(set_to_none=True)
            if not torch.isfinite(loss):
                skips.note("nonfinite_loss_batch", batch.video_ids[0])
                sched.step()
                skipped_steps += 1
                continue
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            with torch.no_grad():
                A = out_m.similarity().masked_fill(batch.visual_padding_mask[:, None, :], float("-inf"))
                hit = torch.gather(batch.time_mask, 2, A.argmax(-1, keepdim=True))[..., 0] & ~batch.text_padding_mask
                hits += int(hit.sum())
                n_texts += int((~batch.text_padding_mask).sum())
            loss_sum += float(loss.detach()) * len(idx)
            n_seen += len(idx)
            bar.set_postfix(loss=f"{loss_sum / max(n_seen, 1):.4f}", refresh=False)
        bar.close()
        entry: dict[str, Any] = {"epoch": epoch + 1, "loss": loss_sum / n_seen if n_seen else None,
                                 "lr": sched.get_last_lr()[0], "train_r1": hits / n_texts if n_texts else None,
                                 "skipped_steps": skipped_steps, "seconds": round(time.time() - t0, 3)}
        if val_samples and ((epoch + 1) % max(1, cfg.eval_every) == 0 or epoch + 1 == cfg.epochs):
            v = evaluate(model, val_samples, val_store, val_tf, cfg.val_mode == "narration", cfg.batch_size,
                         cfg.device)
            entry.update({"val_r1_tan": v["r1_tan"], "val_r1_nsva": v["r1_nsva"], "val_texts": v["texts"]})
        history.append(entry)
        log("[nasva] " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in entry.items()))
        _write_log(out / LOG_FILE, history)
        atomic_torch_save(out / RESUME_FILE, {
            "epoch": epoch + 1, "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "log": history,
            "fingerprint": data_info["samples_sha256"]})
        if cfg.save_every and (epoch + 1) % cfg.save_every == 0:
            atomic_torch_save(out / f"epoch-{epoch + 1}.pt", {k: v.detach().cpu() for k, v in model.state_dict().items()})
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1)

    if cfg.epochs == 0:  # an untrained (initialised) model, e.g. a chance baseline
        _write_log(out / LOG_FILE, history)
    final = history[-1] if history else {}
    config["status"] = "complete"
    config["metrics"] = {k: final.get(k) for k in ("loss", "train_r1", "val_r1_tan", "val_r1_nsva") if k in final}
    config["metrics"]["log"] = history
    config["created"] = _read_json(out / CONFIG_FILE, {}).get("created", config["created"])
    save_checkpoint(out, model, config)
    (out / RESUME_FILE).unlink(missing_ok=True)  # the finished run needs no training state (~3x the weights)
    seconds = time.time() - t_start
    log(f"[nasva] saved {out / MODEL_FILE} ({seconds:.1f} s)")
    return {"ckpt": str(out), "log": history, "skips": skips.to_dict(), "resumed_from": resumed_from,
            "seconds": seconds}


def _read_json(path: Path, default: Any = None) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def _write_log(path: Path, history: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in history)
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


def _compare_runs(old: dict[str, Any], new: dict[str, Any]) -> str:
    """'' if ``old`` is the same run as ``new`` (same architecture, data and schedule), else what differs."""
    diffs = []
    for key in ("d_visual_in", "d_text_in", "d_model", "d_proj", "nhead", "enc_layers", "dec_layers",
                "dim_feedforward", "dropout", "max_text_pe", "max_visual_pe", "text_encoder"):
        if old.get(key) != new.get(key):
            diffs.append(f"{key}: {old.get(key)!r} != {new.get(key)!r}")
    ot, nt = _resume_view(old.get("train", {})), _resume_view(new.get("train", {}))
    diffs += [f"train.{k}: {ot.get(k)!r} != {nt.get(k)!r}" for k in sorted(set(ot) | set(nt)) if ot.get(k) != nt.get(k)]
    if old.get("data", {}).get("samples_sha256") != new["data"]["samples_sha256"]:
        diffs.append("the training data differ")
    return "; ".join(diffs)


# ---------------------------------------------------------------------------------------------- CLI
_MODEL_FLAGS = ("d_model", "d_proj", "nhead", "enc_layers", "dec_layers", "dim_feedforward", "dropout")
_CHOICES = {"mode_policy": ("per_batch", "by_source"), "negatives": ("batch", "video"), "loss": ("nasva", "tan"),
            "target_rule": ("nasva", "tan"), "val_mode": ("narration", "step"), "device": ("cpu", "cuda")}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m builders.nasva.train", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", required=True, help="directory of per-second feature files (<vid>.npy, ...)")
    ap.add_argument("--labels", default=None, help="steps labels json {vid: [{text, start, end}]}")
    ap.add_argument("--narrations", default=None, help="narrations labels json (same format)")
    ap.add_argument("--out", required=True, help="checkpoint directory (resumed if it holds an unfinished run)")
    ap.add_argument("--val-labels", default=None, help="validation labels json (R@1 every --eval-every epochs)")
    ap.add_argument("--val-features", default=None, help="features of the validation videos (default: --features)")
    ap.add_argument("--text-cache", default=None, help="sqlite text-feature cache (default: user cache dir)")
    ap.add_argument("--visual-backbone", default=None, help="name of the visual feature extractor (recorded)")
    ap.add_argument("--fresh", action="store_true", help="discard what --out holds and start over")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    for f in fields(NasvaTrainConfig):
        flag = "--" + f.name.replace("_", "-")
        ap.add_argument(flag, dest=f.name, type=type(f.default), default=f.default, choices=_CHOICES.get(f.name),
                        help=f"default {f.default}")
    for name in _MODEL_FLAGS:
        default = getattr(NasvaModelConfig, name)
        ap.add_argument("--" + name.replace("_", "-"), dest="model_" + name, type=type(default), default=default,
                        help=f"model: default {default}")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = NasvaTrainConfig(**{f.name: getattr(args, f.name) for f in fields(NasvaTrainConfig)})
    overrides = {n: getattr(args, "model_" + n) for n in _MODEL_FLAGS}
    try:
        train(args.features, args.out, args.labels, args.narrations, cfg, overrides, args.val_labels,
              args.val_features, args.text_cache, args.visual_backbone, args.fresh, progress=not args.no_progress)
    except NasvaInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
