"""Benchmark of the NaSVA trainer on the synthetic grounding benchmark (spec nasva.md §10; issue 4 item 7).

What runs, with the project's real CLIs and their defaults:

    python -m builders.nasva.synthetic --out DIR                      (160 videos of 60-200 s: 128 train, 32 val)
    python -m builders.nasva.train --features DIR/features --labels DIR/train.json --out CKPT           (defaults)
    python -m builders.nasva.infer --ckpt CKPT --features DIR/features --texts DIR/val.json --out PRED.json

and the same with ``--epochs 0`` (the initialised, untrained model). Reports the training wall time (text encoding
included, model loading of the text encoder included) and HTM-Align R@1 on the val videos (evaluation.md §1, rule
"tan": hit iff floor(start) <= slot <= ceil(end), micro average), for the trained and the untrained model, next to
chance (a uniform random slot). The target of the issue: trained R@1 >= 0.8 after a run of a few minutes on 2 CPU
cores, untrained near chance.

    python tests/perf/bench_nasva.py [--videos 160] [--seed 0] [--threads N] [--out result.json] [--keep DIR]
    python -m pytest tests/perf -k nasva -s -p no:cacheprovider --override-ini addopts=

Measured 2026-11-21 on the 2-core dev machine (AMD EPYC, torch 2.13 CPU), default synthetic set (seed 0: 128 train /
32 val videos, 312 val texts, chance R@1 0.065): untrained R@1 0.067; trained (12 epochs, 192 iterations) R@1 0.962,
training wall time 109 s with torch's 2 threads on a quiet machine (load ~1), 158 s with --threads 1. Seed 1: 0.962
vs 0.065 untrained, 106.5 s. With 2 threads on a busy machine (load 2-4 from other jobs) the same run took 858 s:
torch's threads wait for each other when another process holds a core; use --threads 1 on a shared machine.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

R1_TARGET = 0.8
REPO = Path(__file__).resolve().parents[2]


def htm_align_r1(gt: dict, pred: dict) -> float:
    """evaluation.md §1 rule "tan", micro average over alignable texts; a missing video counts as misses."""
    hits = []
    for vid, rows in gt.items():
        times = pred.get(vid, {}).get("pred_time")
        for i, (alignable, s, e, _) in enumerate(rows):
            if alignable == 1:
                t = math.floor(times[i]) if times is not None else -1
                hits.append(math.floor(s) <= t <= math.ceil(e))
    return sum(hits) / len(hits)


def _run(args: list[str], threads: int | None, quiet: bool = True) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    extra = (["--threads", str(threads)] if threads else []) + (["--no-progress"] if quiet else [])
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", *args, *extra], check=False, cwd=REPO, env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:1])} failed:\n{res.stderr[-3000:]}")
    return time.time() - t0


def _loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return float("nan")


def run(videos: int = 160, seed: int = 0, threads: int | None = None, out: str | None = None,
        keep: str | None = None) -> dict:
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-nasva-"))
    data, cache = work / "syn", work / "text.sqlite"
    t0 = time.time()
    if not (data / "manifest.json").exists():
        _run(["builders.nasva.synthetic", "--out", str(data), "--videos", str(videos), "--seed", str(seed),
              "--text-cache", str(cache)], None, quiet=False)
    gen_s = time.time() - t0
    manifest = json.loads((data / "manifest.json").read_text())
    gt = json.loads((data / "val_htm_align.json").read_text())
    result = {"bench": "nasva_synthetic", "when": _dt.datetime.now().isoformat(timespec="seconds"),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
              "threads": threads or "torch default", "videos": manifest["videos"], "texts": manifest["texts"],
              "chance_r1": manifest["val_chance_r1_tan"], "generate_seconds": round(gen_s, 1)}
    for name, epochs in (("untrained", 0), ("trained", None)):
        ckpt = work / f"ckpt-{name}"
        shutil.rmtree(ckpt, ignore_errors=True)
        load0 = _loadavg()
        cmd = ["builders.nasva.train", "--features", str(data / "features"), "--labels", str(data / "train.json"),
               "--out", str(ckpt), "--text-cache", str(cache)]
        secs = _run(cmd + (["--epochs", str(epochs)] if epochs is not None else []), threads)
        load1 = _loadavg()
        pred = work / f"pred-{name}.json"
        infer_s = _run(["builders.nasva.infer", "--ckpt", str(ckpt), "--features", str(data / "features"), "--texts",
                        str(data / "val.json"), "--out", str(pred), "--text-cache", str(cache)], threads)
        log = json.loads((ckpt / "config.json").read_text())["metrics"].get("log", [])
        result[name] = {"train_seconds": round(secs, 1), "infer_seconds": round(infer_s, 1),
                        "r1_tan": htm_align_r1(gt, json.loads(pred.read_text())),
                        "final_loss": log[-1]["loss"] if log else None,
                        "final_train_r1": log[-1]["train_r1"] if log else None,
                        "loadavg_1min_before_after": [round(load0, 2), round(load1, 2)]}
    print(f"\nNaSVA synthetic benchmark ({result['videos']['train']} train / {result['videos']['val']} val videos, "
          f"{result['texts']['val']} val texts, threads: {result['threads']})")
    print(f"{'':12s}{'train s':>10s}{'infer s':>10s}{'R@1 (tan)':>12s}")
    for name in ("untrained", "trained"):
        r = result[name]
        print(f"{name:12s}{r['train_seconds']:>10.1f}{r['infer_seconds']:>10.1f}{r['r1_tan']:>12.3f}")
    print(f"{'chance':12s}{'':>20s}{result['chance_r1']:>12.3f}")
    dest = Path(out) if out else Path(tempfile.gettempdir()) / "procvid-bench" / (
        f"bench_nasva-{videos}-{_dt.datetime.now():%Y%m%d-%H%M%S}.json")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, indent=2))
    print(f"result: {dest}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def test_nasva_synthetic_r1_target():
    r = run()
    assert r["trained"]["r1_tan"] >= R1_TARGET
    assert r["untrained"]["r1_tan"] < r["chance_r1"] + 0.15


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads of train/infer (default: torch's)")
    ap.add_argument("--out", default=None, help="result json (default: <tmp>/procvid-bench/...)")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (data reused if present)")
    args = ap.parse_args(argv)
    r = run(args.videos, args.seed, args.threads, args.out, args.keep)
    return 0 if r["trained"]["r1_tan"] >= R1_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
