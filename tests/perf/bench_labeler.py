"""Benchmark of the HowToStep NaSVA labeler on CPU (spec howtostep.md §3.7-§3.8; nasva.md §6), with an explicitly
labelled extrapolation to the HTM-370K labeler training set.

What runs, on HowToStep-shaped synthetic data (seeded):

1. ``videos`` videos (default 64) of ``frames`` seconds (default 400 = HTM-370K's 6.7 min mean, spec §8) with
   K ~ U{80..120} narrations ("around 100 sentences per video", paper 000 §4.1; starts sorted uniform, 1-8 s long)
   and L ~ U{20..40} LLM steps (≈30 raw steps: paper scale ≈7M raw steps / 370K videos ≈ 19, the bench is on the
   heavy side). Texts are distinct cooking sentences from word lists; each step is a short version of one of its
   video's narrations ("add the salt", from "now I add the salt to the pan ..."), so Stage 1 grounds most of them;
2. text features: the CPU preset's MiniLM-L6 (384-d, ``--text-encoder minilm``, default; ``hash:384`` runs without
   model weights), embedded once through the trainer's own text cache (not timed in the epochs);
3. labels from Stage 1: ``builders.ops.step_timestamps.stage1_timestamps`` (ν 0.07, ζ 0.7, ε1 0.20, spec §3.7) on
   those embeddings; the kept steps with their [start, end] windows are the labeler's training labels (§3.8.1);
4. visual features: ``builders.ops.simulated_features.simulated_features`` (spec §6 ``simulated``: 768-d, narration
   signal + noise), written as fp16 ``<vid>.npy``;
5. ``builders.nasva.train.train`` with the labeler's schedule (nasva.md defaults: batch 8, AdamW 1e-4, seed 2023),
   ``epochs`` epochs (default 2; the build runs 12), CPU. The trainer's own per-epoch wall time (``log[i].seconds``:
   the batches only, no checkpoint writing) is the figure; per iteration = epoch seconds / ceil(videos / 8).
6. Stage-2 style inference: ``predict_matrices`` in ``<step>`` mode on every video with all its raw steps
   (spec §3.8.2), seconds per video.

Extrapolation (**not measured**): HTM-370K's labeler set is ≈340K videos / ≈4M steps (spec §8), so one epoch is
ceil(340,000 / 8) = 42,500 iterations; the projection multiplies that by the measured seconds per iteration. It
assumes the same padded length (every video here is exactly ``frames`` long; real batches pad to their longest
video, up to ``max_vlen`` 1200, so real iterations cost more) and ignores data loading from disk.
``os.getloadavg()`` is recorded before and after every epoch.

    python tests/perf/bench_labeler.py [--videos 64] [--frames 400] [--epochs 2] [--text-encoder minilm|hash:384]
        [--threads N] [--json] [--keep DIR]
    python -m pytest tests/perf/bench_labeler.py -s -p no:cacheprovider --override-ini addopts=
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

HTM_VIDEOS = 340_000  # spec howtostep.md §8: ≈4M kept steps over ≈340K videos
HTM_STEPS = 4_000_000
BATCH = 8
EPOCHS_IN_BUILD = 12  # nasva.md §6 / spec §3.8.1

VERBS = ["add", "stir", "chop", "slice", "pour", "whisk", "fold", "season", "grate", "peel", "mix", "heat", "melt",
         "drain", "rinse", "mash", "knead", "roll", "bake", "fry", "boil", "simmer", "toast", "spread", "sprinkle",
         "cut", "dice", "mince", "beat", "blend", "squeeze", "strain", "cover", "flip", "roast", "grill", "steam"]
NOUNS = ["onion", "garlic", "tomatoes", "butter", "flour", "sugar", "eggs", "milk", "cream", "cheese", "potatoes",
         "carrots", "rice", "pasta", "chicken", "beef", "salmon", "lemon", "basil", "parsley", "pepper", "salt",
         "olive oil", "vinegar", "honey", "yeast", "dough", "batter", "sauce", "stock", "beans", "spinach", "mushrooms",
         "zucchini", "ginger", "chili", "cinnamon", "vanilla", "oats", "apples", "bread", "noodles", "tofu", "corn"]
PLACES = ["the pan", "the bowl", "the pot", "a baking tray", "the oven", "the blender", "a plate", "the skillet",
          "the cutting board", "a jar", "the wok", "the saucepan"]
LEADS = ["now I", "so next we", "then you", "okay, let's", "and now we", "at this point I", "after that you",
         "right, we", "first we", "and then I"]
TAILS = ["for about two minutes", "until it looks golden", "nice and slowly", "just like this", "really well",
         "until it's smooth", "for a little while", "so it doesn't burn", "the way my mum did", "and give it a taste"]
CHATTER = ["don't forget to subscribe to the channel", "I love this song by the way", "my kids always ask for this",
           "let me know in the comments what you think", "it's been a busy week here", "thanks for watching"]


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def synthetic_texts(rng: np.random.Generator, vid: int) -> tuple[list[str], list[str], list[int]]:
    """(narrations [K], steps [L], source narration of each step); every string is distinct (video number inside)."""
    K, L = int(rng.integers(80, 121)), int(rng.integers(20, 41))
    narr, actions = [], []
    for n in range(K):
        if rng.random() < 0.15:
            narr.append(f"{CHATTER[rng.integers(len(CHATTER))]}, that's clip {vid} part {n}")
            actions.append(None)
            continue
        v, a, p = VERBS[rng.integers(len(VERBS))], NOUNS[rng.integers(len(NOUNS))], PLACES[rng.integers(len(PLACES))]
        narr.append(f"{LEADS[rng.integers(len(LEADS))]} {v} the {a} in {p} {TAILS[rng.integers(len(TAILS))]} "
                    f"(take {vid}.{n})")
        actions.append((v, a, p))
    sources = [n for n, x in enumerate(actions) if x is not None]
    picked = sorted(rng.choice(sources, size=min(L, len(sources)), replace=False).tolist())
    steps = [f"{actions[n][0].capitalize()} the {actions[n][1]} in {actions[n][2]} ({vid}.{n})" for n in picked]
    return narr, steps, picked


def make_data(work: Path, n_videos: int, frames: int, text_encoder: str, seed: int) -> dict[str, Any]:
    """Features, Stage-1 labels and the text cache under ``work``; returns counts and timings."""
    from builders.nasva.data import encode_texts, get_text_encoder
    from builders.ops.simulated_features import simulated_features
    from builders.ops.step_timestamps import stage1_timestamps

    rng = np.random.default_rng(seed)
    feats = work / "features"
    feats.mkdir(parents=True, exist_ok=True)
    cache = work / "text.sqlite"
    videos = []
    for v in range(n_videos):
        narr, steps, _ = synthetic_texts(rng, v)
        starts = np.sort(rng.uniform(0, frames - 8, len(narr)))
        ends = starts + rng.uniform(1, 8, len(narr))
        videos.append((f"v{v:04d}", narr, steps, starts, ends))
    t0 = time.perf_counter()
    encoder = get_text_encoder(text_encoder)
    table, row = encode_texts(encoder, [t for _, n, s, _, _ in videos for t in n + s], cache)
    encode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    labels, raw, kept = {}, {}, 0
    for vid, narr, steps, starts, ends in videos:
        n_emb, s_emb = table[[row[t] for t in narr]], table[[row[t] for t in steps]]
        st1 = stage1_timestamps(s_emb, n_emb, starts, ends, frames)
        labels[vid] = [{"text": t, "start": float(a), "end": float(b)}
                       for t, a, b, k in zip(steps, st1.start, st1.end, st1.keep) if k]
        raw[vid] = steps
        kept += len(labels[vid])
        x = simulated_features(n_emb, starts, ends, frames, dim=768, seed=int(vid[1:]))
        np.save(feats / f"{vid}.npy", x.astype(np.float16))
    (work / "labels.json").write_text(json.dumps(labels), encoding="utf-8")
    return {"encode_seconds": encode_s, "stage1_and_features_seconds": time.perf_counter() - t0,
            "text_encoder": encoder.model_id, "text_dim": int(table.shape[1]), "raw": raw,
            "narrations": sum(len(n) for _, n, _, _, _ in videos), "raw_steps": sum(len(s) for s in raw.values()),
            "stage1_labels": kept}


def run(n_videos: int = 64, frames: int = 400, epochs: int = 2, text_encoder: str = "minilm", seed: int = 0,
        threads: int | None = None, keep: str | None = None) -> dict[str, Any]:
    import torch

    from builders.nasva.checkpoint import load_checkpoint
    from builders.nasva.data import encode_texts, get_text_encoder, load_feature_file
    from builders.nasva.infer import predict_matrices
    from builders.nasva.train import NasvaTrainConfig, train

    if threads:
        torch.set_num_threads(threads)
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-labeler-"))
    out: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                       "torch": torch.__version__, "torch_threads": torch.get_num_threads()},
                           "videos": n_videos, "frames": frames, "epochs": epochs, "batch_size": BATCH, "seed": seed}
    try:
        data = make_data(work, n_videos, frames, text_encoder, seed)
        raw = data.pop("raw")
        out["data"] = data
        loads = [_load()]
        cfg = NasvaTrainConfig(epochs=epochs, batch_size=BATCH, text_encoder=text_encoder, device="cpu")
        summary = train(work / "features", work / "ckpt", labels=work / "labels.json", cfg=cfg,
                        text_cache=work / "text.sqlite", visual_backbone="simulated-768", fresh=True,
                        progress=False, on_epoch_end=lambda e: loads.append(_load()))
        iters = math.ceil(n_videos / BATCH)
        out["iterations_per_epoch"] = iters
        out["epoch_log"] = [{"epoch": e["epoch"], "seconds": e["seconds"], "seconds_per_iteration": e["seconds"] / iters,
                             "loss": e["loss"], "loadavg_before_after": [loads[i], loads[i + 1]]}
                            for i, e in enumerate(summary["log"])]
        best = min(summary["log"], key=lambda e: e["seconds"])
        out["epoch_seconds"] = best["seconds"]
        out["seconds_per_iteration"] = best["seconds"] / iters
        out["train_wall_seconds"] = summary["seconds"]

        model, _, _ = load_checkpoint(work / "ckpt")
        encoder = get_text_encoder(text_encoder)
        table, row = encode_texts(encoder, [t for s in raw.values() for t in s], work / "text.sqlite")
        vids = sorted(raw)
        visuals = [load_feature_file(work / "features" / f"{v}.npy") for v in vids]
        tfeats = [table[[row[t] for t in raw[v]]] for v in vids]
        before = _load()
        t0 = time.perf_counter()
        with torch.inference_mode():
            predict_matrices(model, visuals, tfeats, narration=False, batch_size=BATCH)
        infer_s = time.perf_counter() - t0
        out["stage2_inference"] = {"seconds": infer_s, "seconds_per_video": infer_s / n_videos,
                                   "loadavg_before_after": [before, _load()]}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    htm_iters = math.ceil(HTM_VIDEOS / BATCH)
    out["extrapolation_htm370k"] = {
        "NOT_MEASURED": "measured s/iteration x HTM-370K iterations; same padded length assumed",
        "videos": HTM_VIDEOS, "steps": HTM_STEPS, "steps_per_video": HTM_STEPS / HTM_VIDEOS,
        "bench_labels_per_video": data["stage1_labels"] / n_videos,
        "iterations_per_epoch": htm_iters,
        "cpu_hours_per_epoch": htm_iters * out["seconds_per_iteration"] / 3600,
        "cpu_hours_12_epochs": EPOCHS_IN_BUILD * htm_iters * out["seconds_per_iteration"] / 3600,
        "stage2_cpu_hours_370k_videos": 370_000 * out["stage2_inference"]["seconds_per_video"] / 3600,
    }
    return out


def _print_table(out: dict[str, Any]) -> None:
    d, x = out["data"], out["extrapolation_htm370k"]
    print(f"\nNaSVA labeler on CPU (torch {out['machine']['torch']}, {out['machine']['torch_threads']} threads): "
          f"{out['videos']} videos x {out['frames']} s x 768-d simulated features, text {d['text_encoder']} "
          f"({d['text_dim']}-d), batch {out['batch_size']}")
    print(f"  data: {d['narrations']} narrations, {d['raw_steps']} raw steps, {d['stage1_labels']} Stage-1 labels "
          f"({d['stage1_labels'] / out['videos']:.1f}/video); text encoding {d['encode_seconds']:.1f} s, Stage 1 + "
          f"features {d['stage1_and_features_seconds']:.1f} s (not counted)")
    for e in out["epoch_log"]:
        print(f"  epoch {e['epoch']}: {e['seconds']:.1f} s = {e['seconds_per_iteration']:.2f} s/iteration "
              f"({out['iterations_per_epoch']} iterations), loss {e['loss']:.3f}; load avg "
              f"{e['loadavg_before_after'][0][0]:.2f} -> {e['loadavg_before_after'][1][0]:.2f}")
    s2 = out["stage2_inference"]
    print(f"  Stage-2 inference (<step>, all raw steps): {s2['seconds']:.1f} s = {s2['seconds_per_video'] * 1000:.0f} "
          f"ms/video; load avg {s2['loadavg_before_after'][0][0]:.2f} -> {s2['loadavg_before_after'][1][0]:.2f}")
    print(f"  EXTRAPOLATION (not measured) to HTM-370K ({x['videos']:,} videos, {x['steps']:,} steps): "
          f"{x['iterations_per_epoch']:,} iterations/epoch x {out['seconds_per_iteration']:.2f} s = "
          f"{x['cpu_hours_per_epoch']:.0f} h per epoch on this CPU, {x['cpu_hours_12_epochs']:.0f} h for 12 epochs; "
          f"Stage-2 inference on 370K videos {x['stage2_cpu_hours_370k_videos']:.0f} h")


def test_labeler_epoch_time():
    """Runs the labeler end to end; the training loss must fall between the two epochs."""
    out = run()
    _print_table(out)
    log = out["epoch_log"]
    assert out["data"]["stage1_labels"] > 0 and len(log) == 2
    assert log[1]["loss"] < log[0]["loss"], log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=64)
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--text-encoder", default="minilm", help="minilm (CPU preset) or hash:384 (no weights)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--keep", default=None, help="work in this folder and keep it")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    out = run(args.videos, args.frames, args.epochs, args.text_encoder, args.seed, args.threads, args.keep)
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
