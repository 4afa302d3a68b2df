"""Engine batches of the LLM stages (issue 35 item 1; docs/corpora/showhowto.md, "Shards, batching and caching"): a
build of 256 videos with ``llm_batch_size=64`` calls the engine with 64 prompts a call (the last call of a stage holds
the rest) in both the filter and the key-step stage, whatever the shard size, and its release equals that of a build
sending one prompt a call. The engine is a counting stand-in ``vllm`` module (offline), the real ``vllm`` backend
code path in front of it (``builders/models/llm/vllm_engine.py``)."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from builders.build import main
from builders.corpora.showhowto.config import ShowHowToConfig
from builders.corpora.showhowto.pipeline import DEFAULT_SHARD_SIZE, is_boundary

from .conftest import make_video

pytestmark = pytest.mark.slow

#: the prompt caps tell the two stages' requests apart (config defaults)
FILTER_CAP, KEYSTEPS_CAP = ShowHowToConfig.filter_max_tokens, ShowHowToConfig.keysteps_max_tokens
N_VIDEOS = 256
IDS = [f"bat{i:08d}" for i in range(N_VIDEOS)]  # YouTube-shaped (11 characters)
#: four steps inside the 30-s test video and its transcript
STEPS = [("Mark the spot.", 0.5, 6.0), ("Drill the hole.", 7.0, 13.0), ("Fit the plug.", 14.0, 20.0),
         ("Screw it in.", 21.0, 28.0)]


@pytest.fixture
def counting_vllm(monkeypatch):
    """A stand-in ``vllm``: ``LLM.chat`` records the size of every call per stage and answers Yes to the filter and
    the same four steps to every key-step prompt (titles differ, so no two prompts are one cache key)."""
    mod = types.ModuleType("vllm")
    mod.__spec__ = importlib.machinery.ModuleSpec("vllm", None)  # importlib.util.find_spec finds it
    mod.__version__ = "0.0.counting"
    mod.calls = {"filter": [], "keysteps": []}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    def answer(stage: str) -> str:
        if stage == "filter":
            return "Yes\nExplanation: the presenter demonstrates each step."
        steps = [{"step": k + 1, "instruction": t, "start_timestamp": a, "end_timestamp": b}
                 for k, (t, a, b) in enumerate(STEPS)]
        return json.dumps([{"WikiHow Title": "How to Fix a Shelf"}, {"steps": steps}])

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def chat(self, conversations, params, use_tqdm=True):
            caps = {p.kwargs["max_tokens"] for p in params}
            assert len(caps) == 1 and len(params) == len(conversations)  # one stage a call, one params a prompt
            stage = {FILTER_CAP: "filter", KEYSTEPS_CAP: "keysteps"}[caps.pop()]
            mod.calls[stage].append(len(conversations))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=answer(stage), finish_reason="stop")])
                    for _ in conversations]

    class StructuredOutputsParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = StructuredOutputsParams
    mod.SamplingParams, mod.LLM, mod.sampling_params = SamplingParams, LLM, sampling
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return mod


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """256 manifest rows naming one 30-s video and one transcript, each with its own title."""
    root = tmp_path_factory.mktemp("batching")
    make_video(root / "v.mp4", seconds=30.0, fps=2, audio=False)
    segs = [{"start": a, "end": b, "text": f" {t}"} for t, a, b in STEPS]
    (root / "t.json").write_text(json.dumps(segs))
    lines = ["video_id,video_path,title,transcript_path"]
    lines += [f"{vid},v.mp4,How to fix shelf number {i},t.json" for i, vid in enumerate(IDS)]
    (root / "manifest.csv").write_text("\n".join(lines) + "\n")
    (root / "Llama-3.1-8B-Instruct").mkdir()
    return root


def _build(out: Path, root: Path, batch: int) -> None:
    assert main(["showhowto", "--out", str(out), "--no-progress", "-q", "--manifest", str(root / "manifest.csv"),
                 "--set", "llm=vllm", "--set", f"llm_model_path={root / 'Llama-3.1-8B-Instruct'}",
                 "--set", f"llm_batch_size={batch}", "--set", "aligner=middle"]) == 0


def _release(out: Path) -> dict[str, list[dict]]:
    root = out / "showhowto"
    files = [*sorted(root.glob("*/*.parquet")), root / "drops.parquet"]
    return {str(p.relative_to(root)): pq.read_table(p).to_pylist() for p in files if p.exists()}


def test_the_engine_gets_llm_batch_size_prompts_a_call_in_both_stages(tmp_path, inputs, counting_vllm):
    # the default shard holds the 256 videos (no id among them ends a shard), so a shard-capped batch would show
    assert not any(is_boundary(v, DEFAULT_SHARD_SIZE) for v in IDS)
    _build(tmp_path / "b64", inputs, 64)
    assert counting_vllm.calls == {"filter": [64, 64, 64, 64], "keysteps": [64, 64, 64, 64]}
    stats = json.loads((tmp_path / "b64" / "showhowto" / "stats.json").read_text())
    assert stats["this_build"]["counters"]["llm_requests"] == 2 * N_VIDEOS
    batched = _release(tmp_path / "b64")
    assert sum(len(v) for k, v in batched.items() if k.startswith("sequences/")) == N_VIDEOS  # every video kept

    counting_vllm.calls = {"filter": [], "keysteps": []}
    _build(tmp_path / "b1", inputs, 1)
    assert counting_vllm.calls == {"filter": [1] * N_VIDEOS, "keysteps": [1] * N_VIDEOS}
    assert _release(tmp_path / "b1") == batched


def test_a_batch_that_does_not_divide_the_stage_ends_with_the_rest(tmp_path, inputs, counting_vllm):
    """100 prompts a call: two full calls and the last with the 56 left, in each stage; a rerun asks nothing."""
    _build(tmp_path / "b100", inputs, 100)
    assert counting_vllm.calls == {"filter": [100, 100, 56], "keysteps": [100, 100, 56]}
    counting_vllm.calls = {"filter": [], "keysteps": []}
    _build(tmp_path / "b100", inputs, 100)  # everything cached (the batch size keys nothing)
    assert counting_vllm.calls == {"filter": [], "keysteps": []}
