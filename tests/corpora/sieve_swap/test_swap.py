"""The Swap step's pool (builders/corpora/sieve_swap/swap.py): written once by the fit, memory-mapped by every worker
(two worker processes share one copy: neither loads it), checked when mapped, assembled again when damaged."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from builders.core.orchestrate import fit_locally
from builders.core.shards import StageData, write_shard
from builders.core.step import FitInputs
from builders.corpora.sieve_swap.config import SieveSwapConfig
from builders.corpora.sieve_swap.pipeline import pipelines
from builders.corpora.sieve_swap.swap import POOL, Swap
from builders.models import text_encoder

REPO = Path(__file__).resolve().parents[3]
DIM = 384


class Encoder:
    """Model-free: a unit vector a text from its sha256, the same whatever call it is in; counts calls."""

    model_id = "test/hash-encoder"
    dim = DIM

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.array([np.frombuffer(hashlib.sha256(t.encode()).digest() * (DIM // 32), dtype=np.uint8)
                        for t in texts], dtype=np.float32).reshape(len(texts), DIM) - 127.5
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def swap_step() -> Swap:
    return next(s for p in pipelines(SieveSwapConfig(embedding_model="minilm")) for s in p.steps
                if isinstance(s, Swap))


@pytest.fixture
def fitted(tmp_path, monkeypatch):
    """A fitted Swap stage over 3,000 recipes of 8 steps (a 35 MiB pool of 24,000 rows)."""
    enc = Encoder()
    monkeypatch.setattr(text_encoder, "get_encoder", lambda *a, **kw: enc)
    monkeypatch.setattr(text_encoder, "release_encoder", lambda *a, **kw: True)
    recipes = [{"recipe_id": 10 + r, "title": f"dish {r}", "directions": [f"step {j} of dish {r}" for j in range(8)]}
               for r in range(3000)]
    write_shard(tmp_path / "recipes", 0, recipes, [], {})
    videos = [{"video_id": f"v{v}", "recipe_ids": [10 + r for r in range(v, 3000, 4)],
               "asr_segments": [{"start": 0.0, "end": 2.0, "text": f"step {v} of dish {7 * v}"}]} for v in range(4)]
    write_shard(tmp_path / "videos", 0, videos, [], {})
    step = swap_step()
    state = fit_locally(step, FitInputs(data=StageData(tmp_path / "videos", 1),
                                        side={"recipes": StageData(tmp_path / "recipes", 1)},
                                        artefact_dir=tmp_path / "fit", cache_dir=tmp_path / "cache"))
    return step, state, enc


WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from builders.corpora.sieve_swap.config import SieveSwapConfig
    from builders.corpora.sieve_swap.pipeline import pipelines
    from builders.corpora.sieve_swap.swap import Swap

    def status():
        fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
        return {k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssFile")}

    state = json.loads(open(sys.argv[1]).read())
    step = next(s for p in pipelines(SieveSwapConfig(embedding_model="minilm")) for s in p.steps
                if isinstance(s, Swap))
    before = status()
    step.setup(state)  # the encoder is created, not loaded: a valid pool needs no encoding
    keys = step.state["keys"]
    total = float(keys.sum(dtype=np.float64))  # every page of the pool read
    after = status()
    print(json.dumps({"memmap": isinstance(keys, np.memmap), "filename": str(keys.filename), "total": total,
                      "anon": after["RssAnon"] - before["RssAnon"], "file": after["RssFile"] - before["RssFile"]}))
    sys.stdout.flush()
    sys.stdin.read()  # keep the pool mapped until the test is done
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_two_workers_map_the_one_pool_file_and_neither_loads_it(fitted, tmp_path):
    step, state, _ = fitted
    pool = Path(state["_artefacts"]) / POOL
    size = state["pool_steps"] * DIM * 4
    assert state["pool_steps"] == 24_000 and pool.stat().st_size >= size
    (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / "state.json")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        seen = [json.loads(w.stdout.readline()) for w in workers]  # the second maps while the first holds its map
    finally:
        for w in workers:
            w.communicate("", timeout=120)
    for s in seen:
        assert s["memmap"] and Path(s["filename"]) == pool.resolve()
        assert s["anon"] < size / 8, s   # no private copy of the 35 MiB pool in either worker
        assert s["file"] > size / 2, s   # the pages it read are the file's (the page cache's one copy)
        assert s["total"] == seen[0]["total"]


def test_a_damaged_pool_is_assembled_again_from_its_blocks(fitted, caplog):
    step, state, enc = fitted
    pool = Path(state["_artefacts"]) / POOL
    want = np.load(pool)
    data = bytearray(pool.read_bytes())
    data[len(data) // 2] ^= 0x04
    pool.write_bytes(bytes(data))
    calls = enc.calls
    with caplog.at_level(logging.WARNING, logger="builders.corpora.sieve_swap.swap"):
        step.setup(state)
    try:
        assert isinstance(step.state["keys"], np.memmap) and np.array_equal(step.state["keys"], want)
        assert enc.calls == calls  # from the cached blocks: nothing encoded again
        assert any("damaged" in r.getMessage() and str(pool) in r.getMessage() for r in caplog.records)
    finally:
        step.teardown()
    pool.unlink()
    step.setup(state)  # a missing pool likewise
    try:
        assert np.array_equal(step.state["keys"], want)
    finally:
        step.teardown()


def test_paired_pool_rows_are_the_rows_of_the_video_recipes(fitted):
    step, state, _ = fitted
    step.setup(state)
    try:
        ids = step.state["recipe_ids"]
        for recipe_ids in ([], [10], [11, 10, 11], [3009, 12, 99999], list(range(10, 3010, 7))):
            want = np.flatnonzero(np.isin(ids, np.asarray(recipe_ids, dtype=np.int64)))
            assert np.array_equal(step._rows_of(recipe_ids), want)
    finally:
        step.teardown()
