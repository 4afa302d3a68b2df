"""Tiny planted grounding data for the NaSVA tests: hash text features (no model), features = P·e + noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from builders.nasva.data import HashTextEncoder

#: a small architecture so that training tests take seconds (the default architecture is tested in test_model.py)
TINY = {"d_model": 32, "d_proj": 16, "nhead": 4, "enc_layers": 1, "dec_layers": 2, "dim_feedforward": 64}

VERBS = ["cut", "stir", "pour", "fold", "bake", "peel", "rinse", "press", "glue", "sand", "paint", "drill"]
NOUNS = ["apples", "dough", "board", "fabric", "paper", "onions", "pipe", "milk", "rice", "wall", "tile", "seeds"]


def write_toy(root: Path, n_videos: int = 8, visual_dim: int = 16, text_dim: int = 32, seed: int = 0,
              t_range: tuple[int, int] = (20, 36), noise: float = 0.3) -> dict:
    """Write ``root/features/<vid>.npy`` and ``root/labels.json``; return the labels."""
    rng = np.random.default_rng(seed)
    enc = HashTextEncoder(text_dim)
    P = np.random.default_rng(99).standard_normal((visual_dim, text_dim)) / np.sqrt(visual_dim)
    (root / "features").mkdir(parents=True, exist_ok=True)
    labels: dict[str, list] = {}
    for i in range(n_videos):
        T = int(rng.integers(*t_range))
        items, cursor = [], 1.0
        while cursor + 4 < T - 1 and len(items) < 5:
            w = float(np.round(rng.uniform(2.5, 5.0), 1))
            text = f"{VERBS[rng.integers(len(VERBS))]} the {NOUNS[rng.integers(len(NOUNS))]}"
            if text not in [t for _, _, t in items]:
                items.append((cursor, round(cursor + w, 1), text))
            cursor = round(cursor + w + float(rng.uniform(1.0, 3.0)), 1)
        emb = enc.encode([t for _, _, t in items]) @ P.T
        t = np.arange(T)[:, None]
        x = noise * rng.standard_normal((T, visual_dim))
        for (s, e, _), v in zip(items, emb):
            x[((s <= t) & (t <= e))[:, 0]] += v
        vid = f"toy{i:02d}"
        np.save(root / "features" / f"{vid}.npy", x.astype(np.float32))
        labels[vid] = [{"text": text, "start": s, "end": e} for s, e, text in items]
    (root / "labels.json").write_text(json.dumps(labels))
    return labels
