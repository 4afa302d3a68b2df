"""ShowHowTo's work directory and LLM engine calls at N videos (issue 35 items 1 and 5): files per video in the work
directory and the number of prompts in each call the LLM backend received, per stage.

Inputs (made once under ``--inputs``): N manifest rows naming 8 real small H.264 files (30 s, 2 fps, made with PyAV
as the ShowHowTo tests make them), one WhisperX-style transcript a video and recorded answers for both prompts
(``llm=replay``, every video kept), ``--aligner middle``. The backend's ``generate`` is wrapped to count prompts
a call. Not a timing benchmark: wall time is printed for orientation only.

    python tests/perf/bench_showhowto_shards.py --videos 1000 --inputs /tmp/shw1000 [--set llm_batch_size=512]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

STEPS = [("Mark the spot.", 0.5, 6.0), ("Drill the hole.", 7.0, 13.0), ("Fit the plug.", 14.0, 20.0),
         ("Screw it in.", 21.0, 28.0)]


def make_inputs(root: Path, n: int) -> None:
    from tests.corpora.showhowto.conftest import make_video

    (root / "t").mkdir(parents=True, exist_ok=True)
    for k in range(8):
        make_video(root / f"v{k}.mp4", seconds=30.0, fps=2, audio=False)
    keysteps = json.dumps([{"WikiHow Title": "How to Fix a Shelf"}, {"steps": [
        {"step": k + 1, "instruction": t, "start_timestamp": a, "end_timestamp": b}
        for k, (t, a, b) in enumerate(STEPS)]}])
    lines, answers = ["video_id,video_path,title,transcript_path"], []
    for i in range(n):
        vid = f"sc{i:09d}"
        segs = [{"start": a, "end": b, "text": f" {t} ({i})"} for t, a, b in STEPS]
        (root / "t" / f"{vid}.json").write_text(json.dumps(segs))
        lines.append(f"{vid},v{i % 8}.mp4,How to fix shelf {i},t/{vid}.json")
        answers += [{"video_id": vid, "stage": "filter", "raw_output": "Yes\nExplanation: a demonstration."},
                    {"video_id": vid, "stage": "keysteps", "raw_output": keysteps}]
    (root / "manifest.csv").write_text("\n".join(lines) + "\n")
    (root / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=1000)
    ap.add_argument("--inputs", type=Path, required=True)
    ap.add_argument("--set", action="append", default=[], help="extra --set KEY=VALUE for the build")
    ap.add_argument("--shard-size", type=int, default=None)
    a = ap.parse_args()
    from builders.build import main as build
    from builders.models.llm import replay

    if not (a.inputs / "manifest.csv").exists():
        make_inputs(a.inputs, a.videos)
    calls: Counter = Counter()
    generate = replay.ReplayBackend.generate

    def counting(self, requests):
        calls[(requests[0].stage, len(requests))] += 1
        return generate(self, requests)

    replay.ReplayBackend.generate = counting
    out = a.inputs / "out"
    shutil.rmtree(out, ignore_errors=True)
    extra = [x for s in a.set for x in ("--set", s)] + (["--shard-size", str(a.shard_size)] if a.shard_size else [])
    t0 = time.time()
    rc = build(["showhowto", "--out", str(out), "--no-progress", "-q", "--manifest", str(a.inputs / "manifest.csv"),
                "--set", "llm=replay", "--set", f"llm_replay={a.inputs / 'answers.jsonl'}", "--set", "aligner=middle",
                *extra])
    wall = time.time() - t0
    work = out / ".work" / "showhowto"
    per_folder = Counter()
    for d, _, files in os.walk(work):
        per_folder[str(Path(d).relative_to(work)).split(os.sep)[-1] if d != str(work) else "."] += len(files)
    n_files = sum(per_folder.values())
    stats = json.loads((out / "showhowto" / "stats.json").read_text())
    print(json.dumps({"rc": rc, "videos": a.videos, "wall_s": round(wall, 1), "work_files": n_files,
                      "files_per_video": round(n_files / a.videos, 3), "shards": stats["steps"]["probe"]["shards"],
                      "files_per_folder": dict(sorted(per_folder.items())),
                      "engine_calls": {f"{s} x{n}": c for (s, n), c in sorted(calls.items())},
                      "loadavg": Path("/proc/loadavg").read_text().strip()}, indent=1))


if __name__ == "__main__":
    main()
