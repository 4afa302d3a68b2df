"""Benchmark of the ShowHowTo keyframe DP (``builders.ops.keyframe_alignment.align_keyframes``; spec showhowto.md §6).

What runs: the order-preserving DP on the largest case the spec names, a 10-minute video at 5 fps (N = 3,000 frames,
``t_last`` = 599.8 s) with K = 26 steps (the paper's longest sequence). Step intervals are realistic: 26 sorted
starts spread over the video (about one every 23 s, jittered by ±8 s), 2-20 s long, expanded by ε = 15 s and clipped
(``frame_windows``), so the windows overlap and their union covers all 3,000 frames (~5,000-6,000 candidate cells). Scores are random cosines in [-0.2, 0.5] over the full
grid (embedding is not timed: the CLIP encoder is the pipeline's cost, not the DP). Timed calls:

- ``clip``: ``align_keyframes(S[K, N], mask[K, N])`` (full-grid layout, restriction to the union included);
- ``clip_union``: ``align_keyframes(S[:, U], mask[:, U], columns=U)`` (the layout of an aligner that embeds only U);
- ``middle``: the whole middle-frame aligner, ``middle_scores`` + ``candidate_mask`` + ``align_keyframes``;
- ``clip_all``: the upper bound, every frame a candidate of every step (26 x 3,000 candidate cells).

Each is run ``--repeats`` times (default 200) per case over ``--cases`` random cases (default 5); the figure is the
median wall time per call in ms. Target: **well under 10 ms** per call (asserted for all four). Correctness: each case's result is compared
with a plain-Python loop of the spec's recurrence (running prefix maximum, strict ``>`` update).

    python tests/perf/bench_keyframe_dp.py [--cases 5] [--repeats 200] [--seed 0] [--json]
    python -m pytest tests/perf/bench_keyframe_dp.py -s -p no:cacheprovider --override-ini addopts=
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builders.ops.keyframe_alignment import (
    align_keyframes,
    candidate_mask,
    frame_windows,
    middle_scores,
    union_frames,
)

K_STEPS = 26
N_FRAMES = 3000
FPS = 5.0
TARGET_MS = 10.0


def make_case(rng: np.random.Generator) -> dict[str, Any]:
    t_last = (N_FRAMES - 1) / FPS
    # steps spread over the whole video (one every ~23 s, jittered): windows overlap, their union covers the grid
    starts = np.sort(np.linspace(2.0, t_last - 22.0, K_STEPS) + rng.uniform(-8.0, 8.0, K_STEPS)).clip(0.0)
    ends = np.maximum.accumulate(starts + rng.uniform(2.0, 20.0, K_STEPS))
    a, b = frame_windows(starts, ends, t_last)
    mask = candidate_mask(a, b, N_FRAMES)
    scores = rng.uniform(-0.2, 0.5, (K_STEPS, N_FRAMES))
    return {"starts": starts, "ends": ends, "a": a, "b": b, "mask": mask, "scores": scores, "t_last": t_last}


def loop_reference(S: np.ndarray, m: np.ndarray) -> tuple[list[int] | None, float]:
    """Spec §6 recurrence as plain loops over U."""
    K = S.shape[0]
    U = [g for g in range(S.shape[1]) if m[:, g].any()]
    V = [[-math.inf] * len(U) for _ in range(K)]
    P = [[-1] * len(U) for _ in range(K)]
    for j, g in enumerate(U):
        if m[0, g]:
            V[0][j] = float(S[0, g])
    for k in range(1, K):
        run, arg = -math.inf, -1
        for j, g in enumerate(U):
            if m[k, g] and run > -math.inf:
                V[k][j], P[k][j] = float(S[k, g]) + run, arg
            if V[k - 1][j] > run:
                run, arg = V[k - 1][j], j
    best = max(V[K - 1])
    if best == -math.inf:
        return None, best
    j, path = V[K - 1].index(best), []
    for k in range(K - 1, -1, -1):
        path.append(U[j])
        j = P[k][j]
    return path[::-1], best


def _middle(case: dict[str, Any]):
    a, b = frame_windows(case["starts"], case["ends"], case["t_last"])
    return align_keyframes(middle_scores(case["starts"], case["ends"], N_FRAMES), candidate_mask(a, b, N_FRAMES))


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(times)


def run(cases: int = 5, repeats: int = 200, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    data = [make_case(rng) for _ in range(cases)]
    out: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "load_average_before": list(os.getloadavg())},
        "steps": K_STEPS, "frames": N_FRAMES, "cases": cases, "repeats": repeats, "seed": seed,
        "union_sizes": [int(union_frames(c["mask"]).size) for c in data],
        "candidate_cells": [int(c["mask"].sum()) for c in data],
    }
    mismatches = 0
    for c in data:
        U = union_frames(c["mask"])
        full = align_keyframes(c["scores"], c["mask"])
        sub = align_keyframes(c["scores"][:, U], c["mask"][:, U], columns=U)
        ref_frames, ref_total = loop_reference(c["scores"], c["mask"])
        mismatches += int(full.frames.tolist() != ref_frames or full.total != ref_total)
        mismatches += int(sub.frames.tolist() != ref_frames or sub.total != ref_total)
        mid = _middle(c)
        ref_frames, ref_total = loop_reference(middle_scores(c["starts"], c["ends"], N_FRAMES), c["mask"])
        mismatches += int(mid.frames.tolist() != ref_frames or mid.total != ref_total)
    everything = np.ones((K_STEPS, N_FRAMES), dtype=bool)
    allc = align_keyframes(data[0]["scores"], everything)
    ref_frames, ref_total = loop_reference(data[0]["scores"], everything)
    mismatches += int(allc.frames.tolist() != ref_frames or allc.total != ref_total)
    out["reference_mismatches"] = mismatches
    per: dict[str, list[float]] = {"clip": [], "clip_union": [], "middle": [], "clip_all": []}
    everything = np.ones((K_STEPS, N_FRAMES), dtype=bool)
    for c in data:
        U = union_frames(c["mask"])
        Su, mu = c["scores"][:, U].copy(), c["mask"][:, U].copy()
        per["clip"].append(_median_ms(lambda c=c: align_keyframes(c["scores"], c["mask"]), repeats))
        per["clip_union"].append(_median_ms(lambda Su=Su, mu=mu, U=U: align_keyframes(Su, mu, columns=U), repeats))
        per["middle"].append(_median_ms(lambda c=c: _middle(c), repeats))
        per["clip_all"].append(_median_ms(lambda c=c: align_keyframes(c["scores"], everything), repeats))
    out["median_ms"] = {k: float(statistics.median(v)) for k, v in per.items()}
    out["per_case_median_ms"] = per
    out["machine"]["load_average_after"] = list(os.getloadavg())
    return out


def _print_table(out: dict[str, Any]) -> None:
    m = out["machine"]
    print(f"\nKeyframe DP: K={out['steps']} steps x N={out['frames']:,} frames (5 fps, 10 min), {out['cases']} cases, "
          f"{out['repeats']} calls each; union |U| = {min(out['union_sizes'])}-{max(out['union_sizes'])}, "
          f"candidate cells {min(out['candidate_cells']):,}-{max(out['candidate_cells']):,}")
    for name, label in [("clip", "align_keyframes(S[K,N], mask[K,N])"),
                        ("clip_union", "align_keyframes(S[:,U], mask[:,U], columns=U)"),
                        ("middle", "middle aligner (scores + mask + DP)"),
                        ("clip_all", "every frame a candidate of every step")]:
        print(f"  {label:<48} median {out['median_ms'][name]:7.3f} ms  (target < {TARGET_MS:g} ms)")
    print(f"  loop-reference check: {out['reference_mismatches']} mismatches")
    print(f"  machine: Python {m['python']}, numpy {m['numpy']}, {m['cpus']} cpus, load average "
          f"{m['load_average_before'][0]:.2f} -> {m['load_average_after'][0]:.2f}")


def test_keyframe_dp_26_steps_3000_frames():
    """Target: well under 10 ms per DP call; identical to the loop reference."""
    out = run(cases=3, repeats=100)
    _print_table(out)
    assert out["reference_mismatches"] == 0, out
    assert max(out["median_ms"].values()) < TARGET_MS, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    out = run(args.cases, args.repeats, args.seed)
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
