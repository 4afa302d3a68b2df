"""The decode pipeline's overlap (issue 35 item 2; builders/models/frame_decode.py; tests/perf/README.md).

    python tests/perf/bench_decode_pipeline.py [--videos 8] [--seconds 20] [--size 224] [--batch 32] [--workers N]
                                               [--width 320 --height 240 --src-fps 25] [--repeat 2] [--out PATH]

Real H.264 files are generated (PyAV), every 5-fps grid frame of each lies inside a step window, and the keyframe
stage's decode path runs three ways on them: (1) decode only (one process, an encoder that costs nothing): the decode
time D and the number of batches; (2) in series (``workers=0``, the step's process decodes and "encodes") and
(3) through the pipeline (``workers`` decode processes, default cores minus one, started before the timing as the
step keeps them across shards), both with a stand-in encoder that sleeps ``D / batches`` a batch, so that encoding
takes as long as decoding (E ~ D). The target (issue 35, Done when): (3) takes at most 1.3 x max(D, E), not D + E.
D is reported twice: the separate decode-only run, and the workers' own decoding time inside run (3) (waits for a
free slot excluded), which on a shared machine is the fair one (both timed under the same load). The load average
is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builders.models.frame_decode import (  # noqa: E402
    DecodePool,
    VideoJob,
    chunk_frames,
    default_decode_workers,
    encode_videos,
)

FPS = 5  # the release's grid (Souček et al., CVPR 2025, App. A)


def make_videos(folder: Path, n: int, seconds: float, width: int, height: int, src_fps: int) -> list[Path]:
    """``n`` H.264 files (yuv420p, GOP 2 s): moving noise blocks over a colour ramp, so that decoding does real work."""
    import av

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = folder / f"v{i:03d}.mp4"
        with av.open(str(path), "w") as c:
            s = c.add_stream("libx264", rate=src_fps, options={"crf": "28", "preset": "ultrafast",
                                                               "g": str(2 * src_fps)})
            s.width, s.height, s.pix_fmt = width, height, "yuv420p"
            base = np.zeros((height, width, 3), np.uint8)
            base[..., 0] = np.linspace(0, 255, width, dtype=np.uint8)[None]
            base[..., 2] = (40 * i) % 256
            for k in range(round(seconds * src_fps)):
                img = base.copy()
                y, x = (7 * k) % (height - 32), (11 * k + 13 * i) % (width - 32)
                img[y:y + 32, x:x + 32] = rng.integers(0, 256, (32, 32, 3), np.uint8)
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                frame.pts = k
                c.mux(s.encode(frame))
            c.mux(s.encode())
        paths.append(path)
    return paths


class StandIn:
    """An encoder of fixed cost: sleeps ``cost_s`` a batch (a GPU forward leaves the CPU free as a sleep does) and
    returns one number a frame. ``cost_s=0``: decode only."""

    def __init__(self, size: int, cost_s: float):
        self.image_size, self.cost_s, self.batches = size, cost_s, 0

    def encode_images(self, pixels: np.ndarray) -> np.ndarray:
        self.batches += 1
        if self.cost_s:
            time.sleep(self.cost_s)
        return pixels[:, :, :2, :2].reshape(len(pixels), -1).mean(axis=1, keepdims=True)


def run_once(jobs: list[VideoJob], size: int, batch: int, cost_s: float, pool: DecodePool | None) -> dict[str, Any]:
    enc = StandIn(size, cost_s)
    busy0 = pool.busy_s if pool is not None else 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    frames = sum(len(f) for _, _, f in encode_videos(jobs, enc, batch, FPS, pool))
    out = {"wall_s": time.perf_counter() - t0, "cpu_s_main": time.process_time() - c0, "frames": frames,
           "batches": enc.batches, "encode_s": enc.batches * cost_s}
    if pool is not None:  # the workers' own decoding time in this run (waits for a free slot excluded)
        out["worker_decode_s"] = (pool.busy_s - busy0) / pool.workers
    return out


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "n/a"


def bench(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.tmp or tempfile.mkdtemp(prefix="bench-decode-"))
    t0 = time.perf_counter()
    paths = make_videos(work / "videos", args.videos, args.seconds, args.width, args.height, args.src_fps)
    gen_s = time.perf_counter() - t0
    jobs = [VideoJob(str(p), (0.0,), (args.seconds,)) for p in paths]
    workers = args.workers if args.workers is not None else default_decode_workers()
    load_before = loadavg()
    runs: list[dict[str, Any]] = []
    pool = DecodePool(workers, FPS, args.size, chunk=chunk_frames(workers, args.batch))
    t1 = time.perf_counter()
    pool.start()
    list(encode_videos(jobs[:1], StandIn(args.size, 0.0), args.batch, FPS, pool))  # workers imported and warm
    start_s = time.perf_counter() - t1
    try:
        for rep in range(args.repeat):
            decode = run_once(jobs, args.size, args.batch, 0.0, None)
            cost = decode["wall_s"] / decode["batches"]
            serial = run_once(jobs, args.size, args.batch, cost, None)
            piped = run_once(jobs, args.size, args.batch, cost, pool)
            longer = max(decode["wall_s"], piped["encode_s"])
            in_run = max(piped["worker_decode_s"], piped["encode_s"])
            runs.append({"repeat": rep, "decode_only": decode, "cost_per_batch_s": cost, "serial": serial,
                         "pipeline": piped, "max_decode_encode_s": longer,
                         "pipeline_over_max": piped["wall_s"] / longer,
                         "pipeline_over_max_in_run": piped["wall_s"] / in_run,
                         "serial_over_max": serial["wall_s"] / longer})
    finally:
        pool.close()
    best = min(runs, key=lambda r: r["pipeline_over_max"])
    in_run = sorted(r["pipeline_over_max_in_run"] for r in runs)
    return {"bench": "decode_pipeline", "issue": "35 item 2", "argv": sys.argv[1:], "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)), "workers": workers, "videos": args.videos,
            "seconds": args.seconds, "source": f"{args.width}x{args.height} H.264 at {args.src_fps} fps",
            "image_size": args.size, "batch": args.batch, "grid_fps": FPS, "generate_s": round(gen_s, 1),
            "pool_start_s": round(start_s, 2), "loadavg_before": load_before, "loadavg_after": loadavg(),
            "runs": runs, "best_pipeline_over_max": round(best["pipeline_over_max"], 3),
            "worst_pipeline_over_max": round(max(r["pipeline_over_max"] for r in runs), 3),
            "median_pipeline_over_max_in_run": round(in_run[len(in_run) // 2], 3),
            "target": "pipeline wall <= 1.3 x max(decode, encode)"}


def render(res: dict[str, Any]) -> str:
    lines = [f"decode pipeline: {res['videos']} videos x {res['seconds']} s ({res['source']}), {res['image_size']} px, "
             f"batch {res['batch']}, {res['workers']} decode worker(s), {res['cpus']} CPUs; "
             f"loadavg before {res['loadavg_before']!r}, after {res['loadavg_after']!r}",
             "rep  frames  batches  decode D s  encode E s  serial s (ratio)  pipeline s (ratio to max(D,E))  "
             "worker decode s in that run (ratio to max)"]
    for r in res["runs"]:
        d, s, p = r["decode_only"], r["serial"], r["pipeline"]
        lines.append(f"{r['repeat']:>3}  {d['frames']:>6}  {d['batches']:>7}  {d['wall_s']:>10.2f}  "
                     f"{p['encode_s']:>10.2f}  {s['wall_s']:>8.2f} ({r['serial_over_max']:.2f})  "
                     f"{p['wall_s']:>10.2f} ({r['pipeline_over_max']:.2f})  "
                     f"{p['worker_decode_s']:>10.2f} ({r['pipeline_over_max_in_run']:.2f})")
    lines.append(f"pool start (spawn, imports, one video) {res['pool_start_s']} s, not counted")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--src-fps", dest="src_fps", type=int, default=25)
    ap.add_argument("--size", type=int, default=224, help="encoder input side (224: ViT-L/14; 378: ViT-H-14-378)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=None, help="decode processes (default: cores minus one)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--out", default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    res = bench(parse_args(argv))
    text = json.dumps(res, indent=2)
    out = Path(parse_args(argv).out or Path(tempfile.gettempdir()) / "procvid-bench" /
               f"bench_decode_pipeline-{time.strftime('%Y%m%d-%H%M%S')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(render(res))
    print(f"JSON: {out}")
    return 0


def test_decode_pipeline_overlaps_decode_and_encode():
    """The issue's target on a small input: the pipeline's wall time is at most 1.3 x max(D, E), D the workers' own
    decoding time in the same run (on a shared machine a separate decode-only run is timed under another load)."""
    res = bench(parse_args(["--videos", "6", "--seconds", "16", "--repeat", "3"]))
    print(render(res))
    assert math.isfinite(res["median_pipeline_over_max_in_run"]) and res["median_pipeline_over_max_in_run"] <= 1.3
    assert min(r["serial"]["wall_s"] for r in res["runs"]) > min(r["pipeline"]["wall_s"] for r in res["runs"])


if __name__ == "__main__":
    sys.exit(main())
