"""Benchmark of HowToStep Stage 1 (``builders.ops.step_timestamps.stage1_timestamps``; spec howtostep.md §3.7).

What runs: Stage 1 (Y_NV from the narration times, T_SN = softmax_n(cos/ν), Y_SV = T_SN·Y_NV, centre, ζ-window,
ε1) on synthetic videos shaped like HTM-370K (paper 000 §4.1: "around 100 sentences per video", ≈10 LLM steps per
chunk of 10 sentences kept as ≈30 raw steps here, 6.7 min mean → ≈400 frames): per video K ~ U{80..120} narrations,
L ~ U{20..40} steps, T ~ U{300..500} frames, narration starts sorted uniform in [0, T) with 1-8 s durations (some
overlap, a few run past T), random unit embeddings of dimension 384 (MiniLM-L6, the CPU preset's g) **precomputed**:
text encoding is not timed. Each video is one ``stage1_timestamps`` call, in a Python loop over videos as the
pipeline does. Target: **≥ 1,000 videos/s** on one core.

Correctness: the first 12 videos are checked against a float64 brute-force reference written with loops (Y_NV,
softmax, window growth frame by frame): centres, windows and keep flags must be identical, scores within 1e-4.

BLAS threads: every call makes two small matrix products (L×384×K and L×K×T). With OpenBLAS's default of one
thread per core, on a machine where other processes hold the cores, its worker threads wait for each other and one
such product takes milliseconds instead of microseconds (measured below: ~50 videos/s). The timed figure runs with
BLAS limited to one thread (``threadpoolctl``, as a pipeline worker should: parallelise over videos/processes);
the default-threads figure is printed for information on 100 videos.

    python tests/perf/bench_stage1.py [--videos 1000] [--seed 0] [--json]
    python -m pytest tests/perf/bench_stage1.py -s -p no:cacheprovider --override-ini addopts=
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builders.ops.step_timestamps import stage1_timestamps

TARGET_VIDEOS_PER_S = 1000.0
DIM = 384
CHECKED = 12

Video = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]


def synthetic_videos(n: int, seed: int = 0) -> list[Video]:
    """``n`` videos: (step_emb [L,384], narr_emb [K,384], starts [K], ends [K], T), unit float32 embeddings."""
    rng = np.random.default_rng(seed)
    videos = []
    for _ in range(n):
        K, L, T = int(rng.integers(80, 121)), int(rng.integers(20, 41)), int(rng.integers(300, 501))
        starts = np.sort(rng.uniform(0, T, K))
        ends = starts + rng.uniform(1, 8, K)
        emb = rng.standard_normal((L + K, DIM), dtype=np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        videos.append((emb[:L].copy(), emb[L:].copy(), starts, ends, T))
    return videos


def reference_stage1(step_emb, narr_emb, starts, ends, T, nu=0.07, zeta=0.7, eps1=0.20):
    """Float64 loop implementation of spec §3.7, for the correctness check."""
    S = step_emb.astype(np.float64)
    N = narr_emb.astype(np.float64)
    S /= np.linalg.norm(S, axis=1, keepdims=True)
    N /= np.linalg.norm(N, axis=1, keepdims=True)
    Y = np.zeros((len(starts), T))
    for n, (s, e) in enumerate(zip(starts, ends, strict=True)):
        lo = math.floor(s)
        hi = max(lo, math.ceil(e) - 1)
        for t in range(max(lo, 0), min(hi, T - 1) + 1):
            Y[n, t] = 1.0
    centres, wins, scores, keeps = [], [], [], []
    for k in range(len(S)):
        logits = [float(S[k] @ N[n]) / nu for n in range(len(N))]
        m = max(logits)
        w = [math.exp(x - m) for x in logits]
        z = sum(w)
        row = [sum(w[n] / z * Y[n, t] for n in range(len(N))) for t in range(T)]
        c = max(range(T), key=lambda t: (row[t], -t))
        thr = zeta * row[c]
        s = c
        while s > 0 and row[s - 1] >= thr:
            s -= 1
        e = c
        while e < T - 1 and row[e + 1] >= thr:
            e += 1
        centres.append(c)
        wins.append((s, e))
        scores.append(row[c])
        keeps.append(row[c] >= eps1)
    return centres, wins, scores, keeps


def check(videos: list[Video]) -> dict[str, Any]:
    mismatches, max_score_diff, steps = 0, 0.0, 0
    for v in videos:
        r = stage1_timestamps(*v)
        c, w, s, k = reference_stage1(*v)
        steps += len(c)
        mismatches += int(np.sum(r.centre != np.array(c)))
        mismatches += int(np.sum((r.start != [a for a, _ in w]) | (r.end != [b for _, b in w])))
        mismatches += int(np.sum(r.keep != np.array(k)))
        max_score_diff = max(max_score_diff, float(np.max(np.abs(r.score - np.array(s)))))
    return {"checked_videos": len(videos), "checked_steps": steps, "mismatches": mismatches,
            "max_score_difference": max_score_diff}


def _blas_single_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn (test extra)
        return contextlib.nullcontext(), False
    return threadpool_limits(limits=1, user_api="blas"), True


def time_videos(videos: list[Video], repeats: int) -> float:
    """Best wall time over ``repeats`` passes of one ``stage1_timestamps`` call per video."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for v in videos:
            stage1_timestamps(*v)
        best = min(best, time.perf_counter() - start)
    return best


def run(n_videos: int = 1000, seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    t0 = time.perf_counter()
    videos = synthetic_videos(n_videos, seed)
    gen_s = time.perf_counter() - t0
    out: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "load_average_before": list(os.getloadavg())},
        "videos": n_videos, "seed": seed, "dim": DIM, "generate_seconds": gen_s,
        "mean_narrations": float(np.mean([len(v[2]) for v in videos])),
        "mean_steps": float(np.mean([len(v[0]) for v in videos])),
        "mean_frames": float(np.mean([v[4] for v in videos])),
    }
    limit, limited = _blas_single_thread()
    with limit:
        out["check"] = check(videos[:CHECKED])
        stage1_timestamps(*videos[0])  # warm-up
        seconds = time_videos(videos, repeats)
    out["blas_threads_limited_to_1"] = limited
    out["seconds"] = seconds
    out["videos_per_s"] = n_videos / seconds
    out["ms_per_video"] = 1000.0 * seconds / n_videos
    sample = videos[:100]
    default_s = time_videos(sample, 1)
    out["default_blas_threads_videos_per_s"] = len(sample) / default_s
    out["machine"]["load_average_after"] = list(os.getloadavg())
    return out


def _print_table(out: dict[str, Any]) -> None:
    m, c = out["machine"], out["check"]
    print(f"\nStage 1 on {out['videos']:,} synthetic videos (mean K={out['mean_narrations']:.0f} narrations, "
          f"L={out['mean_steps']:.0f} steps, T={out['mean_frames']:.0f} frames, dim {out['dim']}; embeddings "
          f"precomputed in {out['generate_seconds']:.1f} s, not timed)")
    print(f"  BLAS limited to 1 thread: {out['blas_threads_limited_to_1']}; best of 3 passes: {out['seconds']:.3f} s "
          f"-> {out['videos_per_s']:,.0f} videos/s ({out['ms_per_video']:.3f} ms/video; target "
          f">= {TARGET_VIDEOS_PER_S:,.0f})")
    print(f"  default BLAS threads (100 videos, information): {out['default_blas_threads_videos_per_s']:,.0f} videos/s")
    print(f"  reference check: {c['checked_videos']} videos / {c['checked_steps']} steps, {c['mismatches']} "
          f"mismatches, max |score diff| {c['max_score_difference']:.1e}")
    print(f"  machine: Python {m['python']}, numpy {m['numpy']}, {m['cpus']} cpus, load average "
          f"{m['load_average_before'][0]:.2f} -> {m['load_average_after'][0]:.2f}")


def test_stage1_throughput():
    """Target: >= 1,000 videos/s (embeddings precomputed), identical to the loop reference."""
    out = run(1000)
    _print_table(out)
    assert out["check"]["mismatches"] == 0 and out["check"]["max_score_difference"] < 1e-4, out["check"]
    assert out["videos_per_s"] >= TARGET_VIDEOS_PER_S, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    out = run(args.videos, args.seed)
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
