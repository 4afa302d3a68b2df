"""A SYNTHETIC grounding benchmark for the NaSVA trainer (docs/evaluation.md: on simulated features the loss must
fall and train R@1 must rise well above chance). Its numbers say nothing about real videos.

    python -m builders.nasva.synthetic --out DIR [--seed 0] [--videos 160] [--text-cache FILE]

How it is made (all randomness from ``--seed``; every setting is a field of SyntheticConfig and a --flag):
- Each video belongs to one of five how-to domains (cooking, home repair, gardening, sewing and crafts, car care) and
  lasts T ~ U{60..200} seconds. Its K texts are real-ish instruction sentences built from the domain's verbs, objects
  and endings ("Now whisk the eggs in a large bowl."), distinct (verb, object) pairs within the video; val videos use
  only sentences that no train video uses (same vocabulary, new combinations).
- Texts occupy consecutive, non-overlapping windows [start, end] (float seconds on a 0.1 s grid, 3-12 s long, gaps of
  1-12 s, at most 14 per video), stored in temporal order.
- Sentences are embedded by the repo's text encoder (MiniLM-L6 from its pip package by default; offline) through the
  trainer's text-feature cache, so training reads exactly the vectors that were planted.
- Features: frame t (second [t, t+1)) = L2norm(a_k·P·e_k + b_video + ε_t), where e_k is the embedding of the text whose
  window holds t (start <= t <= end, the NaSVA target rule) and a_k ~ U[0.5, 1] its amplitude; P is a fixed random
  [visual_dim × text_dim] Gaussian matrix with N(0, 1/visual_dim) entries (|P·e| ≈ 1; visual_dim 512 ≠ 384 on
  purpose), b_video a per-video constant offset of norm 1, ε_t Gaussian noise of norm ≈ 1. Half the gaps of at least
  4 s show an unnarrated action: P·e of a distractor sentence that is never a text. Nothing else marks the windows,
  so the model has to learn the unknown linear map P from text space to visual space.
- Files: ``features/<vid>.npy`` (float32 [T, visual_dim]), ``train.json`` and ``val.json`` (labels format
  ``{vid: [{"text", "start", "end"}]}``), ``val_htm_align.json`` (HTM-Align GT ``{vid: [[1, start, end, text], ...]}``,
  every text alignable), ``manifest.json`` (settings, counts, chance R@1) and ``README.txt``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from .checkpoint import atomic_write_bytes, atomic_write_json
from .data import log
from .text_features import default_text_cache, encode_texts, get_text_encoder

DOMAINS: dict[str, dict[str, list[str]]] = {
    "cooking": {
        "verbs": ["chop", "dice", "slice", "mince", "stir", "whisk", "pour", "add", "sprinkle", "season", "fry",
                  "bake", "boil", "simmer", "grate", "peel", "mix", "knead", "roll out", "spread", "drain", "rinse",
                  "marinate", "roast", "melt"],
        "objects": ["onions", "garlic", "tomatoes", "carrots", "potatoes", "chicken breasts", "ground beef", "eggs",
                    "butter", "flour", "sugar", "milk", "heavy cream", "cheddar cheese", "rice", "pasta",
                    "bell peppers", "mushrooms", "spinach", "zucchini", "lemon juice", "fresh ginger", "basil leaves",
                    "dough", "salmon fillets", "shrimp", "black beans", "chocolate chips", "walnuts", "bacon"],
        "tails": ["into small pieces", "for two minutes", "until golden brown", "in a large bowl",
                  "with a wooden spoon", "over medium heat", "on the cutting board", "in the hot pan",
                  "until it thickens", "with a pinch of salt", "in the preheated oven", "very gently"],
    },
    "home repair": {
        "verbs": ["sand", "drill", "screw in", "measure", "cut", "paint", "glue", "clamp", "tighten", "loosen",
                  "remove", "attach", "level", "nail down", "seal", "scrape off", "patch", "mark", "wipe", "replace",
                  "unscrew", "align", "caulk", "prime", "fasten"],
        "objects": ["the wooden board", "the shelf bracket", "the pipe joint", "the drywall patch", "the door hinge",
                    "the cabinet door", "the old paint", "the floor tiles", "the window frame", "the light fixture",
                    "the faucet handle", "the baseboard", "the wall anchor", "the metal bracket", "the fence post",
                    "the roof shingle", "the drawer slide", "the outlet cover", "the plywood sheet", "the grout lines",
                    "the screws", "the sink drain", "the ceiling fan", "the stair railing", "the deck boards"],
        "tails": ["with a power drill", "along the marked line", "using a level", "with fine sandpaper",
                  "with a putty knife", "until it is flush", "with two screws", "at a slight angle",
                  "before the glue dries", "with a damp cloth", "from the top down", "on both sides"],
    },
    "gardening": {
        "verbs": ["dig", "plant", "water", "prune", "mulch", "fertilize", "transplant", "weed", "rake", "trim",
                  "harvest", "loosen", "spread", "sow", "cover", "tie up", "repot", "compost", "mow", "stake"],
        "objects": ["the tomato seedlings", "the rose bushes", "the flower bed", "the soil", "the lawn",
                    "the herb garden", "the young trees", "the hedges", "the seeds", "the raised bed",
                    "the potted plants", "the compost pile", "the fallen leaves", "the vegetable patch",
                    "the strawberry plants", "the bulbs", "the garden path", "the climbing vines",
                    "the lettuce", "the root ball"],
        "tails": ["about six inches deep", "in full sun", "with a garden hose", "early in the morning",
                  "around the base", "with pruning shears", "in neat rows", "with a thin layer of mulch",
                  "before the first frost", "using a hand trowel", "every few days", "along the fence"],
    },
    "sewing and crafts": {
        "verbs": ["thread", "stitch", "pin", "fold", "iron", "cut out", "hem", "trace", "glue", "braid", "knit",
                  "crochet", "paint", "sew", "press", "tie", "wrap", "decorate", "punch", "fray"],
        "objects": ["the fabric", "the needle", "the pattern pieces", "the seam allowance", "the paper strips",
                    "the yarn", "the ribbon", "the felt shapes", "the buttons", "the lace trim", "the canvas",
                    "the beads", "the zipper", "the cardboard frame", "the quilt squares", "the embroidery hoop",
                    "the wool", "the stencil", "the denim pocket", "the elastic band"],
        "tails": ["along the edge", "with a running stitch", "with fabric scissors", "on the wrong side",
                  "with a hot glue gun", "into a neat bow", "using tailor's chalk", "at the corners",
                  "with a steam iron", "in a zigzag pattern", "twice for strength", "around the border"],
    },
    "car care": {
        "verbs": ["jack up", "loosen", "remove", "check", "drain", "refill", "wash", "wax", "polish", "inspect",
                  "replace", "tighten", "disconnect", "clean", "vacuum", "spray", "unscrew", "lower", "pump up",
                  "wipe down"],
        "objects": ["the front tire", "the lug nuts", "the oil filter", "the engine oil", "the air filter",
                    "the brake pads", "the car battery", "the windshield", "the wiper blades", "the spark plugs",
                    "the coolant", "the headlights", "the floor mats", "the dashboard", "the side mirrors",
                    "the spare wheel", "the radiator cap", "the hubcaps", "the car seats", "the tire pressure"],
        "tails": ["with a socket wrench", "in a star pattern", "with a microfiber cloth", "until it is snug",
                  "before driving off", "while the engine is cold", "with soapy water", "on both sides",
                  "using the car jack", "with a torque wrench", "in small circles", "under the hood"],
    },
}
PREFIXES = ["", "", "", "Now ", "Next, ", "Then ", "Carefully ", "Go ahead and "]


@dataclass
class SyntheticConfig:
    """Settings of the synthetic benchmark (defaults: the documented benchmark of the trainer's defaults)."""

    videos: int = 160  #: videos in all (train + val)
    val_fraction: float = 0.2
    seed: int = 0
    min_seconds: int = 60
    max_seconds: int = 200
    visual_dim: int = 512  #: differs from MiniLM's 384 on purpose (separate input projections)
    window_min: float = 3.0
    window_max: float = 12.0
    gap_min: float = 1.0
    gap_max: float = 12.0
    max_texts: int = 14
    signal: float = 1.0  #: largest amplitude of a planted text (each text draws U[signal_min, signal])
    signal_min: float = 0.5
    noise: float = 1.0
    background: float = 1.0
    distractor_rate: float = 0.5  #: share of gaps showing an unnarrated action
    text_encoder: str = "minilm"


def _sentence(rng: np.random.Generator, domain: str) -> tuple[str, tuple[str, str]]:
    d = DOMAINS[domain]
    verb = d["verbs"][rng.integers(len(d["verbs"]))]
    obj = d["objects"][rng.integers(len(d["objects"]))]
    tail = d["tails"][rng.integers(len(d["tails"]))]
    prefix = PREFIXES[rng.integers(len(PREFIXES))]
    text = f"{prefix}{verb} {'' if obj.startswith('the ') else 'the '}{obj} {tail}."
    return text[0].upper() + text[1:], (verb, obj)


def _windows(rng: np.random.Generator, T: int, cfg: SyntheticConfig) -> list[tuple[float, float]]:
    """Consecutive non-overlapping windows on a 0.1 s grid, each holding at least 3 integer seconds < T."""
    out: list[tuple[float, float]] = []
    cursor = float(np.round(rng.uniform(0.0, 8.0), 1))
    while len(out) < cfg.max_texts:
        w = float(np.round(rng.uniform(cfg.window_min, cfg.window_max), 1))
        start, end = cursor, round(cursor + w, 1)
        if end > T - 1:
            break
        out.append((start, end))
        cursor = round(end + float(np.round(rng.uniform(cfg.gap_min, cfg.gap_max), 1)), 1)
    return out


def generate(out_dir: str | Path, cfg: SyntheticConfig | None = None, text_cache: str | Path | None = None) -> dict:
    """Write the benchmark to ``out_dir``; return its manifest. Sentence vectors go through the trainer's text cache
    (``text_cache``, default :func:`default_text_cache`), so training reads the very vectors that were planted."""
    cfg = cfg or SyntheticConfig()
    out = Path(out_dir)
    (out / "features").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    domains = sorted(DOMAINS)
    n_val = max(1, round(cfg.videos * cfg.val_fraction)) if cfg.videos > 1 else 0
    n_train = cfg.videos - n_val
    plans = []  # (vid, split, domain, T, [(start, end, text)], [(start, end, distractor text)])
    used: dict[str, set[str]] = {"train": set(), "val": set()}
    for i in range(cfg.videos):
        split = "train" if i < n_train else "val"
        domain = domains[int(rng.integers(len(domains)))]
        T = int(rng.integers(cfg.min_seconds, cfg.max_seconds + 1))
        wins = _windows(rng, T, cfg)
        texts: list[str] = []
        pairs: set[tuple[str, str]] = set()
        for _ in range(len(wins)):
            for _attempt in range(200):
                text, pair = _sentence(rng, domain)
                other = used["train"] if split == "val" else used["val"]
                if pair not in pairs and text not in other:
                    break
            texts.append(text)
            pairs.add(pair)
            used[split].add(text)
        distractors = []
        for (s0, e0), (s1, _) in zip(wins, wins[1:] + [(float(T), float(T))]):
            if s1 - e0 >= 4 and rng.random() < cfg.distractor_rate:
                a = round(e0 + 1.0, 1)
                distractors.append((a, round(min(s1 - 1.0, a + rng.uniform(2.0, 8.0)), 1),
                                    _sentence(rng, domains[int(rng.integers(len(domains)))])[0]))
        plans.append((f"syn{i:05d}", split, domain, T, [(s, e, t) for (s, e), t in zip(wins, texts)], distractors))
    # distractor sentences must never be texts
    all_texts = used["train"] | used["val"]
    plans = [(v, sp, dm, T, items, [d for d in dis if d[2] not in all_texts]) for v, sp, dm, T, items, dis in plans]

    encoder = get_text_encoder(cfg.text_encoder)
    sentences = sorted(all_texts | {d[2] for p in plans for d in p[5]})
    log(f"[nasva.synthetic] embedding {len(sentences)} sentences with {encoder.model_id}")
    table, index = encode_texts(encoder, sentences, default_text_cache() if text_cache is None else text_cache)
    emb = table.astype(np.float64)
    P = np.random.default_rng([cfg.seed, 1]).standard_normal((cfg.visual_dim, emb.shape[1])) / np.sqrt(cfg.visual_dim)
    proj = emb @ P.T  # [n_sentences, visual_dim]

    labels: dict[str, dict[str, list]] = {"train": {}, "val": {}}
    htm: dict[str, list] = {}
    for vid, split, domain, T, items, distractors in plans:
        vrng = np.random.default_rng([cfg.seed, 2, int(vid[3:])])
        t = np.arange(T, dtype=np.float64)[:, None]
        frames = np.zeros((T, cfg.visual_dim))
        for s, e, text in items + distractors:
            active = ((s <= t) & (t <= e))[:, 0]
            frames[active] += vrng.uniform(cfg.signal_min, cfg.signal) * proj[index[text]]
        b = vrng.standard_normal(cfg.visual_dim)
        frames += cfg.background * b / np.linalg.norm(b)
        frames += cfg.noise * vrng.standard_normal((T, cfg.visual_dim)) / np.sqrt(cfg.visual_dim)
        frames /= np.linalg.norm(frames, axis=1, keepdims=True)
        feats = frames.astype(np.float32)
        atomic_write_bytes(out / "features" / f"{vid}.npy", lambda f, a=feats: np.save(f, a, allow_pickle=False))
        labels[split][vid] = [{"text": text, "start": s, "end": e} for s, e, text in items]
        if split == "val":
            htm[vid] = [[1, s, e, text] for s, e, text in items]
    atomic_write_json(out / "train.json", labels["train"])
    atomic_write_json(out / "val.json", labels["val"])
    atomic_write_json(out / "val_htm_align.json", htm)
    n_texts = {k: sum(len(v) for v in labels[k].values()) for k in labels}
    chance = float(np.mean([(min(T - 1, np.ceil(e)) - np.floor(s) + 1) / T
                            for vid, sp, _, T, items, _ in plans if sp == "val" for s, e, _ in items])) if htm else None
    manifest = {"synthetic": True, "config": asdict(cfg), "text_encoder": encoder.model_id,
                "text_dim": int(emb.shape[1]), "videos": {"train": n_train, "val": n_val}, "texts": n_texts,
                "distractor_segments": sum(len(p[5]) for p in plans),
                "val_chance_r1_tan": chance,
                "seconds": {"train": sum(p[3] for p in plans if p[1] == "train"),
                            "val": sum(p[3] for p in plans if p[1] == "val")}}
    atomic_write_json(out / "manifest.json", manifest)
    (out / "README.txt").write_text(_readme(cfg, manifest), encoding="utf-8")
    log(f"[nasva.synthetic] wrote {cfg.videos} videos ({n_train} train, {n_val} val), {n_texts['train']} + "
        f"{n_texts['val']} texts to {out}")
    return manifest


def _readme(cfg: SyntheticConfig, m: dict) -> str:
    doc = __doc__.split("How it is made", 1)[1]
    return (
        "SYNTHETIC NaSVA grounding benchmark -- NOT real video data.\n"
        "Written by `python -m builders.nasva.synthetic` (procvid-corpora). Its scores say nothing about real\n"
        "videos; it checks that the NaSVA trainer learns a text-to-video alignment that is planted in the features.\n\n"
        f"videos: {m['videos']['train']} train + {m['videos']['val']} val; texts: {m['texts']['train']} train + "
        f"{m['texts']['val']} val; text encoder: {m['text_encoder']} ({m['text_dim']}-d); visual dim "
        f"{cfg.visual_dim}; seed {cfg.seed}.\nChance R@1 on val (TAN rule, uniform random slot): "
        f"{m['val_chance_r1_tan']:.3f}.\n\nHow it was made" + doc +
        "\nUse:\n"
        "  python -m builders.nasva.train --features DIR/features --labels DIR/train.json --out CKPT\n"
        "  python -m builders.nasva.infer --ckpt CKPT --features DIR/features --texts DIR/val.json --out pred.json\n"
        "  python eval/run.py htm_align --gt DIR/val_htm_align.json --pred pred.json\n")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m builders.nasva.synthetic", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--text-cache", default=None, help="sqlite text-feature cache shared with the trainer "
                                                        "(default: user cache dir)")
    for f in fields(SyntheticConfig):
        ap.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(f.default), default=f.default,
                        help=f"default {f.default}")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = SyntheticConfig(**{f.name: getattr(args, f.name) for f in fields(SyntheticConfig)})
    if cfg.videos < 2 or cfg.min_seconds < 20 or cfg.max_seconds < cfg.min_seconds or cfg.max_seconds > 5000:
        print("error: need --videos >= 2 and 20 <= --min-seconds <= --max-seconds <= 5000", file=sys.stderr)
        return 2
    try:
        generate(args.out, cfg, args.text_cache)
    except RuntimeError as e:  # e.g. the text encoder's package is missing
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
