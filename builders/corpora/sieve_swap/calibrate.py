"""``calibrate_sim_threshold`` (docs/corpora/sieve_swap.md): the threshold for a smaller sentence encoder that keeps as
many segments as MPNet keeps at lambda_sim = 0.75 (Batra et al., ECCV 2024, §4.2, Eq. 6).

It takes the ``sample`` V² segments with the smallest sha1(``video_id:index``), computes each one's top-1 cosine to
the R² step pool with both models, and matches keep-rates (``builders.ops.swap.keep_rate_threshold``). A build uses
the threshold through ``--set embedding_model=minilm --set sim_threshold=<value>``; ``provenance`` records both.

    python -m builders.corpora.sieve_swap.calibrate --work-dir .work/sieve_swap
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from ...core.shards import StageData
from ...ops.swap import keep_rate_threshold, topk_search


def select_sample(segments: Iterable[tuple[str, int, str]], sample: int) -> list[tuple[str, int, str]]:
    """The ``sample`` segments with the smallest sha1(f"{video_id}:{index}") (deterministic, order-free)."""
    keyed = sorted(segments, key=lambda s: hashlib.sha1(f"{s[0]}:{s[1]}".encode()).hexdigest())
    return keyed[:sample]


def calibrate_sim_threshold(segments: Iterable[tuple[str, int, str]], pool_texts: Sequence[str], *,
                            reference: str = "mpnet", target: str = "minilm", sample: int = 20_000,
                            reference_threshold: float = 0.75, device: str = "cpu") -> dict[str, Any]:
    """``segments``: (video_id, ASR index, cleaned text) of V²; ``pool_texts``: the steps of R²."""
    from ...models.text_encoder import get_encoder

    chosen = select_sample(segments, sample)
    if not chosen or not pool_texts:
        raise ValueError("calibration needs at least one segment and one recipe step")
    texts = [t for _, _, t in chosen]
    top1 = {}
    ids = {}
    for name in (reference, target):
        enc = get_encoder(name, device)
        sims, _ = topk_search(enc.encode(texts), enc.encode(list(pool_texts)), 1)
        top1[name] = sims[:, 0]
        ids[name] = enc.model_id
    threshold, rate = keep_rate_threshold(top1[reference], top1[target], reference_threshold)
    return {"threshold": threshold, "keep_rate": rate, "segments": len(chosen), "pool": len(pool_texts),
            "reference": ids[reference], "reference_threshold": reference_threshold, "target": ids[target],
            "target_keep_rate": float((top1[target] >= threshold).mean())}


def _complete_stage(work_dir: Path, pattern: str) -> StageData:
    """The newest stage directory matching ``pattern`` whose shards are all finished."""
    for d in sorted(work_dir.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True):
        n = sum(1 for p in d.glob("part-*.parquet") if not p.name.endswith(".drops.parquet"))
        if n and len(list(d.glob("part-*.stats.json"))) == n:
            return StageData(d, n)
    raise FileNotFoundError(f"no finished {pattern} stage under {work_dir}: run the build first")


def inputs_from_work_dir(work_dir: str | Path) -> tuple[list[tuple[str, int, str]], list[str]]:
    """V² segments (the content sieve's output) and the R² step pool from a build's work directory."""
    work_dir = Path(work_dir)
    v2 = _complete_stage(work_dir, "videos/*_content_sieve-*")
    rows = list(v2.rows(["video_id", "asr_segments", "recipe_ids"]))
    r2 = {i for r in rows for i in r["recipe_ids"]}
    recipes = _complete_stage(work_dir, "recipes/*_recipe_lemmas-*")
    pool = [s for r in sorted((r for r in recipes.rows(["recipe_id", "directions"]) if r["recipe_id"] in r2),
                              key=lambda r: r["recipe_id"]) for s in r["directions"]]
    segments = [(r["video_id"], j, s["text"]) for r in rows for j, s in enumerate(r["asr_segments"])]
    return segments, pool


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m builders.corpora.sieve_swap.calibrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", required=True, help="work directory of a finished sieve_swap build")
    p.add_argument("--reference", default="mpnet")
    p.add_argument("--target", default="minilm")
    p.add_argument("--sample", type=int, default=20_000)
    p.add_argument("--reference-threshold", type=float, default=0.75)
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    try:
        segments, pool = inputs_from_work_dir(a.work_dir)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = calibrate_sim_threshold(segments, pool, reference=a.reference, target=a.target, sample=a.sample,
                                  reference_threshold=a.reference_threshold, device=a.device)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
