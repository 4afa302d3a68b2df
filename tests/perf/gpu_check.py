"""GPU check (issue 24 part 3): one script, one JSON, one table, on one GPU in a few minutes.

    make gpu-check                                     # = python tests/perf/gpu_check.py --json gpu_check.json
    python tests/perf/gpu_check.py [--parts nasva_train llm clip mpnet howtostep_200] [--device cuda|cpu] [--tiny]
                                   [--json PATH] [--budget-s 540] [--assets .whl/assets] [--work DIR] [--keep]

Parts (``tests/perf/gpu_check_parts.py``; each runs in its own process with a wall-time cap, so a part that fails
or hangs is recorded as ``{"status": "error" | "timeout", "error": ...}`` and the others still run):

1. ``nasva_train``: the project's NaSVA trainer (``builders.nasva.train``) on HTM-shaped random features (768-d,
   HowTo100M-like lengths cut at 1200 s, W + S samples, batch 8): s/iteration against the paper's **0.068 s on an
   RTX 3090** (Li et al., ECCV 2024, supp. §6.1: about 20 h for 12 epochs of ~710K samples; docs/scale.md).
2. ``llm``: the transformers backend (``SmolLM2Backend.generate``) with random-weight Llama models in bf16
   (SmolLM2-135M- and 1.7B-shaped), fixed 128 new tokens: output tokens/s.
3. ``clip``: open_clip ``ViT-H-14-378-quickgelu`` (DFN5B's shape) with random weights: images/s at 378 px, the
   tower under bf16 autocast and the project's ``OpenClipVisionEncoder``.
4. ``mpnet``: the project's ``SentenceEncoder`` on an all-mpnet-base-v2-shaped random-weight folder: sentences/s.
5. ``howtostep_200``: ``python -m builders.build howtostep`` on 200 HowTo100M-shaped videos with the NaSVA labeler
   (training and Stage 2) and its text encoder on the device: wall time and s/video.
6. ``keyframes``: ShowHowTo's keyframe stage (``KeyframeAlignment``) on generated videos through the decode pipeline
   (CPU workers decode, resize and normalise while ViT-H-14-378 with random weights embeds): images/s and the share
   of the stage's time the GPU was busy (issue 35).

Nothing is downloaded: every model is built from a config with random weights (throughput depends on shapes, not
weights), tokenizers come from ``.whl/assets`` (``tests/perf/gpu_check_wheels.sh``). ``--device cuda`` on a machine
without CUDA exits 2 with a message (no silent fallback); ``--device cpu --tiny`` shrinks every size for a smoke run
on a CPU. The JSON records the GPU, torch and CUDA versions, and per part its status, wall time, peak GPU memory
(``torch.cuda.max_memory_allocated`` in the part's process, and the device's used memory sampled with nvidia-smi)
and what is real and what is random or simulated.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PARTS_SCRIPT = Path(__file__).resolve().with_name("gpu_check_parts.py")
PARTS = ("nasva_train", "llm", "clip", "mpnet", "howtostep_200", "keyframes")
#: per-part wall-time caps in seconds on an H100 (expected: 30, 60, 60, 30, 120, 90 s); --tiny runs get TINY_CAP each
CAPS = {"nasva_train": 90, "llm": 120, "clip": 100, "mpnet": 60, "howtostep_200": 180, "keyframes": 150}
TINY_CAP = 240
DEFAULT_BUDGET_S = 540.0  # the whole run; a part gets min(its cap, what is left)
#: the headline figure of each part: (key in its result, unit)
HEADLINE = {"nasva_train": ("s_per_iteration", "s/iteration"), "llm": ("output_tok_s", "output tok/s"),
            "clip": ("images_s", "images/s"), "mpnet": ("sentences_s", "sentences/s"),
            "howtostep_200": ("s_per_video", "s/video"), "keyframes": ("images_s", "images/s")}
PAPER = {"nasva_train": "paper 0.068 s/it (RTX 3090)"}


class CheckError(Exception):
    """A refusal before any part runs (no CUDA for --device cuda): exit 2 with its message."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python tests/perf/gpu_check.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", nargs="+", default=list(PARTS), metavar="PART",
                    help=f"parts to run, in order (space- or comma-separated; default all): {', '.join(PARTS)}")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="default cuda (no fallback)")
    ap.add_argument("--tiny", action="store_true", help="shrink every size (a CPU smoke run)")
    ap.add_argument("--json", dest="json_path", default=None, help="also write the JSON here")
    ap.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="wall-time budget of the whole run")
    ap.add_argument("--assets", default=str(REPO / ".whl" / "assets"), help="tokenizer folders (gpu_check_wheels.sh)")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (logs, inputs, the release)")
    args = ap.parse_args(argv)
    parts = [p for item in args.parts for p in item.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        ap.error(f"unknown part(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(PARTS)}")
    args.parts = list(dict.fromkeys(parts))
    return args


def interpreter() -> list[str]:
    """This interpreter with its site flag, so that ``python -S`` runs keep their restricted path in the parts."""
    return [sys.executable, *(["-S"] if sys.flags.no_site else [])]


_PROBE = """
import json, platform, torch
info = {"python": platform.python_version(), "torch": torch.__version__, "cuda_build": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(), "cpus": __import__("os").cpu_count()}
if info["cuda_available"]:
    p = torch.cuda.get_device_properties(0)
    info.update(gpu=p.name, gpu_count=torch.cuda.device_count(), gpu_mem_gib=round(p.total_memory / 2**30, 1),
                capability=f"{p.major}.{p.minor}", cudnn=torch.backends.cudnn.version())
from importlib.metadata import PackageNotFoundError, version
for name in ("transformers", "sentence-transformers", "open_clip_torch", "datasets", "numpy", "timm", "torchvision",
             "pyarrow", "fsspec", "huggingface_hub"):
    try:
        info[name] = version(name)
    except PackageNotFoundError:
        info[name] = None
print(json.dumps(info))
"""


def probe_environment(device: str) -> dict[str, Any]:
    """Versions and the GPU, read in a child process (this one never initialises CUDA); raises CheckError when
    ``device`` is cuda and CUDA is not available."""
    res = subprocess.run([*interpreter(), "-c", _PROBE], capture_output=True, text=True, cwd=REPO, timeout=180,
                         env=part_env())
    if res.returncode != 0:
        raise CheckError(f"cannot import torch: {res.stderr.strip()[-500:]}")
    info = json.loads(res.stdout.strip().splitlines()[-1])
    if device == "cuda" and not info["cuda_available"]:
        raise CheckError(f"--device cuda but CUDA is not available (torch {info['torch']}, built for CUDA "
                         f"{info['cuda_build']}); use --device cpu --tiny for a CPU smoke run")
    return info


def part_env() -> dict[str, str]:
    """The parts' environment: the repository importable, nothing fetched from the Hub (no network there)."""
    path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


class GpuMemorySampler:
    """The device's used memory (MiB, nvidia-smi, every 0.5 s) while a part runs; ``peak`` is None without it."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and shutil.which("nvidia-smi") is not None
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                      "--id=0"], capture_output=True, text=True, timeout=5).stdout
                used = float(out.strip().splitlines()[0])
                self.peak = used if self.peak is None else max(self.peak, used)
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self._stop.wait(0.5)

    def __enter__(self) -> "GpuMemorySampler":
        if self.enabled:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def run_part(name: str, device: str, tiny: bool, work: Path, assets: str, timeout: float) -> dict[str, Any]:
    """One part in its own process group, killed (the group) after ``timeout`` s; never raises."""
    out_json, log_path = work / f"{name}.json", work / f"{name}.log"
    cmd = [*interpreter(), str(PARTS_SCRIPT), name, "--device", device, "--out", str(out_json),
           "--work", str(work / name), "--assets", assets, "--timeout", str(max(1.0, timeout - 15))]
    if tiny:
        cmd.append("--tiny")
    t0 = time.perf_counter()
    status, error, rc = "ok", None, None
    with GpuMemorySampler(device == "cuda") as mem, open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=part_env(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the part and whatever it started (a build), nothing else
            proc.wait()
            status, error = "timeout", f"killed after its cap of {timeout:.0f} s"
    wall = time.perf_counter() - t0
    result: dict[str, Any] = {}
    if status == "ok":
        try:
            result = json.loads(out_json.read_text())
        except (OSError, ValueError):
            status = "error"
            tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
            error = f"exit {rc}: " + " | ".join(tail)[-2000:]
    return {**result, "status": result.get("status", status) if status == "ok" else status,
            **({"error": error} if error else {}), "wall_s": round(wall, 1), "cap_s": round(timeout),
            "peak_gpu_mem_mib": result.get("peak_gpu_mem_mib"), "device_mem_used_peak_mib": mem.peak}


def run_check(args: argparse.Namespace) -> dict[str, Any]:
    env = probe_environment(args.device)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    parts: dict[str, Any] = {}
    for name in args.parts:
        left = args.budget_s - (time.perf_counter() - t0)
        if left < 10:
            parts[name] = {"status": "skipped", "error": f"the run's budget of {args.budget_s:.0f} s is spent",
                           "wall_s": 0.0}
            continue
        cap = TINY_CAP if args.tiny else CAPS[name]
        print(f"[gpu-check] {name} (cap {min(cap, left):.0f} s) ...", file=sys.stderr, flush=True)
        parts[name] = run_part(name, args.device, args.tiny, work, args.assets, min(cap, left))
        print(f"[gpu-check] {name}: {parts[name]['status']} in {parts[name]['wall_s']} s", file=sys.stderr,
              flush=True)
    if not (args.keep or args.work):
        shutil.rmtree(work, ignore_errors=True)
    return {"check": "gpu_check", "issue": "24 part 3", "when": _dt.datetime.now().isoformat(timespec="seconds"),
            "argv": sys.argv[1:], "device": args.device, "tiny": args.tiny, "environment": env,
            "work": str(work) if (args.keep or args.work) else None, "budget_s": args.budget_s,
            "total_wall_s": round(time.perf_counter() - t0, 1), "parts": parts,
            "ok": all(p["status"] == "ok" for p in parts.values())}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.4f}" if abs(v) < 1 else f"{v:,.1f}"
    return str(v)


def render_table(result: dict[str, Any]) -> str:
    """A plain-text table: one row per part (status, headline figure, wall time, peak GPU memory)."""
    env = result.get("environment", {})
    head = (f"GPU check ({result.get('device')}{', tiny' if result.get('tiny') else ''}): "
            f"{env.get('gpu', 'no GPU')}, torch {env.get('torch', '?')}, CUDA {env.get('cuda_build') or '-'}, "
            f"python {env.get('python', '?')}")
    rows = [("part", "status", "figure", "unit", "wall s", "peak GPU MiB (torch / device)", "note")]
    for name, p in result.get("parts", {}).items():
        key, unit = HEADLINE.get(name, ("", ""))
        note = p.get("error") or PAPER.get(name, "")
        if name == "nasva_train" and p.get("vs_paper"):
            note = f"{note}; x{p['vs_paper']} vs paper"
        if name == "keyframes" and p.get("gpu_busy_share") is not None:
            note = f"GPU busy {100 * p['gpu_busy_share']:.0f} % of the stage"
        rows.append((name, p.get("status", "?"), _fmt(p.get(key)), unit, _fmt(p.get("wall_s")),
                     f"{_fmt(p.get('peak_gpu_mem_mib'))} / {_fmt(p.get('device_mem_used_peak_mib'))}",
                     (note or "")[:90]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append(f"total {_fmt(result.get('total_wall_s'))} s of a {_fmt(result.get('budget_s'))} s budget")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = run_check(args)
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=2, default=str)
    if args.json_path:  # first: a closed stdout must not lose the result
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(text + "\n")
    print(text)
    print(render_table(result))  # last: the tail of a long log shows it
    if args.json_path:
        print(f"[gpu-check] JSON written to {args.json_path}", file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
