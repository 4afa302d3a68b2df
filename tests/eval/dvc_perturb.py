"""A deterministic perturbed prediction file for a dense-captioning ground truth (tests and the reference cross-check).

Every ground-truth video but a few gets predictions derived from its own segments: boundaries shifted and stretched
(so that tIoUs fall on both sides of every threshold), sentences kept, truncated, swapped with another segment's or
replaced by another video's; some segments are missed, some predictions added at random places, and predictions are
written in shuffled order (SODA sorts them, densevid pairs them in file order). One prediction video is unknown to
the ground truth. The ids are written as they appear in the ground truth.
"""

from __future__ import annotations

import random
from typing import Any


def perturb_predictions(gt: dict[str, Any], seed: int = 0, drop_video_every: int = 23) -> dict[str, Any]:
    rng = random.Random(seed)
    vids = list(gt)
    all_sentences = [s for v in vids for s in gt[v]["sentences"]]
    results: dict[str, list[dict[str, Any]]] = {}
    for k, vid in enumerate(vids):
        if k % drop_video_every == drop_video_every - 1:
            continue  # a GT video without a prediction key
        entry = gt[vid]
        duration = float(entry.get("duration") or max(e for _, e in entry["timestamps"]) + 1.0)
        preds = []
        for (s, e), sentence in zip(entry["timestamps"], entry["sentences"]):
            r = rng.random()
            if r < 0.12:
                continue  # missed segment
            length = max(e - s, 0.5)
            shift = rng.uniform(-0.6, 0.6) * length
            stretch = rng.uniform(0.6, 1.5)
            ns = max(0.0, s + shift)
            ne = min(duration, ns + length * stretch)
            words = sentence.split()
            c = rng.random()
            if c < 0.35:
                text = sentence
            elif c < 0.6 and len(words) > 2:
                text = " ".join(words[: rng.randint(1, len(words) - 1)])
            elif c < 0.8:
                text = rng.choice(entry["sentences"])
            else:
                text = rng.choice(all_sentences)
            preds.append({"sentence": text, "timestamp": [round(ns, 3), round(ne, 3)]})
        for _ in range(rng.randint(0, 2)):
            a = rng.uniform(0, duration * 0.9)
            preds.append({"sentence": rng.choice(all_sentences),
                          "timestamp": [round(a, 3), round(min(duration, a + rng.uniform(1, 30)), 3)]})
        if not preds:  # never an empty list here (the reference crashes on it)
            s, e = entry["timestamps"][0]
            preds.append({"sentence": entry["sentences"][0], "timestamp": [s, e]})
        rng.shuffle(preds)
        results[vid] = preds
    results["not_a_ground_truth_video"] = [{"sentence": "stir the soup", "timestamp": [0.0, 5.0]}]
    return {"version": "VERSION 1.0", "results": results,
            "external_data": {"used": False, "details": "perturbed ground truth (tests/eval/dvc_perturb.py)"}}
