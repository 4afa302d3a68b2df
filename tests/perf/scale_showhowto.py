"""ShowHowTo in the scale benchmark (issue 35 item 6): ``python tests/perf/bench_scale.py --corpus showhowto``.

Inputs (:func:`make_showhowto_inputs`), HowTo100M-shaped and seeded, under ``root``:

* ``videos/``: real H.264 files that PyAV probes and decodes (64x48, 5 fps, 60 s, no audio): a few distinct ones
  made with PyAV once (``DISTINCT``), and one hard link per video to one of them (each video has its own path, so one
  can be replaced without touching the others);
* ``transcripts/<video_id>.json``: WhisperX-style transcripts (``{"language": "en", "segments": [{"start", "end",
  "text"}]}``), 8-14 instructional sentences in the 60 s;
* ``manifest.csv`` (``video_id,video_path,title,transcript_path``), ``HowTo100M_v1.csv`` and ``task_ids.csv`` (about
  40 videos a task, 12 categories);
* ``llm_outputs.jsonl``: the replayed answers of both prompts (``--set llm=replay``): the filter answers "Yes" for 90 %
  of the videos and "No" for the rest (``filtered_non_instructional``); the key steps are 3-9 ordered steps inside
  the video. The answers of the video that the "inserted row" edit adds are in the file from the start (the file keys
  the LLM stages as a whole: editing it would redo them all).

The split is scaled down: ``--test-tasks`` n/100 (at least 2) of the n/40 tasks, ``--test-size`` the paper's 3,964 / 200
sequences a test task. The build runs with ``--set aligner=middle`` (no CLIP model: the keyframes are the grid frames nearest each step's
midpoint, which still decodes every video on the 5-fps grid), so that no model is loaded.

Measured, each as a subprocess (``bench_scale.run_build``): the fresh build, a cached rerun, and four reruns after
one change each: one word of one transcript (``edit_one``), one video file replaced by another (``replace_video``:
the link is removed and a different video written in its place, same duration), one manifest row inserted in the
middle (``insert_row``). The toolkit's own CPU is the build's CPU less the decode of the keyframe stage
(``keyframe_alignment``: PyAV decodes every grid frame) and less the model steps (none here: transcripts are supplied
and the answers replayed), estimated from the steps' wall seconds as ``bench_scale`` does.

Targets (issue 35 "Done when"), as pass/fail columns: peak RSS at the largest size within 25 % of the smallest; CPU
per video within 20 %; cached rerun under 5 % and each edit under 10 % of the fresh build's wall time; toolkit CPU at
most 50 ms a video; work directory at most 0.5 files a video; projected to 1.24M videos (Souček et al., CVPR 2025,
Sec. 3.2) under 20 CPU-hours of toolkit work and under 4 GB of memory.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VIDEOS_1_24M = 1_240_000  # Souček et al., CVPR 2025, Sec. 3.2: HowTo100M videos in
DISTINCT = 4              # distinct generated videos, linked to by every video
SECONDS, FPS, WIDTH, HEIGHT = 60, 5, 64, 48

# ---- issue 35 targets (peak RSS growth and CPU drift across sizes: bench_scale.across_sizes)
TARGET_CACHED_SHARE = 0.05
TARGET_EDIT_SHARE = 0.10
TARGET_TOOLKIT_MS = 50.0
TARGET_WORK_FILES = 0.5
TARGET_CPU_HOURS = 20.0
TARGET_GB = 4.0
#: the reruns after one change, in run order (the result keys)
EDITS = ("edit_one", "replace_video", "insert_row")
#: steps whose time is decoding (not the toolkit's own): the keyframe stage decodes every grid frame
DECODE_STEPS = ("keyframe_alignment", "extract_images")

_CATEGORIES = ["Food and Entertaining", "Home and Garden", "Hobbies and Crafts", "Cars & Other Vehicles",
               "Health", "Sports and Fitness", "Pets and Animals", "Computers and Electronics", "Arts and Entertainment",
               "Personal Care and Style", "Education and Communications", "Holidays and Traditions"]
_VERBS = ["add", "cut", "mix", "pour", "place", "remove", "check", "press", "wipe", "stir", "fold", "tighten",
          "spread", "measure", "slide", "clean", "attach", "sprinkle", "whisk", "chop", "rinse", "sand", "paint",
          "knead", "heat", "cover", "trim", "glue", "sew", "water"]
_OBJECTS = ["the flour", "the board", "the bowl", "the screws", "the dough", "the paint", "the fabric", "the pan",
            "the soil", "the cable", "the lid", "the sauce", "the edges", "the handle", "the seeds", "the frame",
            "the butter", "the brush", "the filter", "the tiles"]
_TAILS = ["until it is smooth", "for two minutes", "on both sides", "with a clean cloth", "very carefully",
          "so it does not stick", "one more time", "before the next step", "and let it rest", "from the middle out"]


def _bench_scale() -> Any:
    """``bench_scale``'s measuring functions (``run_build``, ``_rerun``, ``dir_usage`` ...): the module that loaded
    this one (as a script or under pytest), else loaded from this folder."""
    for name in ("__main__", "tests.perf.bench_scale", "procvid_bench_scale"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "run_build") and hasattr(mod, "_rerun"):
            return mod
    spec = importlib.util.spec_from_file_location("procvid_bench_scale", HERE / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# ============================================================================================ inputs
def write_video(path: Path, variant: int) -> Path:
    """A real H.264 file (PyAV, libx264): ``SECONDS`` s at ``FPS`` fps, ``WIDTH`` x ``HEIGHT``, one colour per 6-s
    scene (shifted by ``variant``) and a moving square; no audio (the transcripts are supplied)."""
    import av
    import numpy as np

    rng = np.random.default_rng(variant)
    colours = rng.integers(30, 230, size=(SECONDS // 6 + 1, 3)).astype(np.uint8)
    with av.open(str(path), "w") as c:
        v = c.add_stream("libx264", rate=FPS, options={"crf": "35", "preset": "ultrafast", "g": str(2 * FPS)})
        v.width, v.height, v.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for i in range(SECONDS * FPS):
            img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            img[:] = colours[(i // FPS) // 6]
            x0 = (i * 3 + variant * 7) % (WIDTH - 12)
            img[18:30, x0:x0 + 12] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            c.mux(v.encode(frame))
        c.mux(v.encode())
    return path


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS).capitalize()} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def _transcript(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(8, 14)
    edges = sorted(rng.sample(range(1, SECONDS - 1), n))
    segs, start = [], 0.4
    for e in edges:
        end = max(start + 0.8, float(e))
        segs.append({"start": round(start, 2), "end": round(min(end, SECONDS - 0.5), 2),
                     "text": " " + " ".join(_sentence(rng) for _ in range(rng.randint(1, 2)))})
        start = end + 0.3
        if start >= SECONDS - 1.5:
            break
    return {"language": "en", "segments": segs}


def _keysteps(rng: random.Random, task: str) -> str:
    k = rng.randint(3, 9)
    cuts = sorted(rng.sample(range(2, SECONDS - 2), 2 * k))
    steps = [{"step": i + 1, "instruction": _sentence(rng), "start_timestamp": float(cuts[2 * i]),
              "end_timestamp": float(cuts[2 * i + 1])} for i in range(k)]
    return json.dumps([{"WikiHow Title": f"How to {task}"}, {"steps": steps}])


def make_showhowto_inputs(root: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """The inputs of a ShowHowTo build of ``n`` videos under ``root`` (module docstring); returns the CLI arguments
    (``args``) and what the edits need (``edits``)."""
    rng = random.Random(seed)
    root = Path(root)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    (root / "transcripts").mkdir(exist_ok=True)
    bases = [write_video(root / f"base-{k}.mp4", k) for k in range(DISTINCT)]
    n_tasks = max(2, n // 40)
    tasks = [(1000 + t, f"Task Number {t} At Home") for t in range(n_tasks)]
    ids = [f"v{seed % 10}{i:09d}" for i in range(n)]
    inserted = f"x{seed % 10}{n // 2:09d}"  # the video the insert_row edit adds (its files exist from the start)
    rows, meta, replay = [], [], []
    for vid in [*ids, inserted]:
        video = root / "videos" / f"{vid}.mp4"
        os.link(bases[rng.randrange(DISTINCT)], video)
        (root / "transcripts" / f"{vid}.json").write_text(json.dumps(_transcript(rng), indent=1))
        task_id, task = tasks[rng.randrange(n_tasks)]
        rows.append([vid, f"videos/{vid}.mp4", f"{task} the easy way", f"transcripts/{vid}.json"])
        meta.append([vid, _CATEGORIES[task_id % len(_CATEGORIES)], "", 1, task_id])
        answer = "Yes" if rng.random() < 0.9 else "No"
        replay.append({"video_id": vid, "stage": "filter",
                       "raw_output": f"{answer}\nExplanation: the presenter shows each step."})
        replay.append({"video_id": vid, "stage": "keysteps", "raw_output": _keysteps(rng, task)})
    inserted_row = rows.pop()
    with open(root / "manifest.csv", "w", newline="") as f:
        csv.writer(f).writerows([["video_id", "video_path", "title", "transcript_path"], *rows])
    with open(root / "HowTo100M_v1.csv", "w", newline="") as f:
        csv.writer(f).writerows([["video_id", "category_1", "category_2", "rank", "task_id"], *meta])
    (root / "task_ids.csv").write_text("".join(f"{t}\t{name}\n" for t, name in tasks))
    with open(root / "llm_outputs.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in replay)
    for b in bases:  # only the links stay
        b.unlink()
    # the split at a small scale: as many test tasks as leave most candidates unchosen (the draw of step 3 runs),
    # and the paper's 3,964 / 200 sequences a task
    test_tasks = max(2, n // 100)
    args = ["--manifest", str(root / "manifest.csv"), "--videos", str(root / "HowTo100M_v1.csv"),
            "--tasks", str(root / "task_ids.csv"), "--set", "llm=replay",
            "--set", f"llm_replay={root / 'llm_outputs.jsonl'}", "--set", "aligner=middle",
            "--test-tasks", str(test_tasks), "--test-size", str(round(3964 / 200 * test_tasks))]
    middle = ids[len(ids) // 2]
    return {"args": args, "edits": {"transcript": root / "transcripts" / f"{ids[len(ids) // 3]}.json",
                                    "video": root / "videos" / f"{middle}.mp4", "manifest": root / "manifest.csv",
                                    "row": inserted_row, "at": len(ids) // 2}}


def edit_transcript(path: Path) -> str:
    """One word of one segment of one transcript, changed in place."""
    data = json.loads(path.read_text())
    seg = data["segments"][len(data["segments"]) // 2]
    words = seg["text"].split(" ")
    k = next(i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha())
    old, words[k] = words[k], ("spatula" if words[k] != "spatula" else "whisk")
    seg["text"] = " ".join(words)
    path.write_text(json.dumps(data, indent=1))
    return f"{path.name}: {old!r} -> {words[k]!r}"


def replace_video(path: Path) -> str:
    """The video file replaced by another one (the link removed first: the other videos keep their bytes)."""
    path.unlink()
    write_video(path, DISTINCT + 1)
    return f"{path.name}: replaced by another {SECONDS}-s video"


def insert_row(manifest: Path, row: list[str], at: int) -> str:
    """One manifest row inserted after data row ``at`` (the middle)."""
    with open(manifest, newline="") as f:
        rows = list(csv.reader(f))
    rows.insert(1 + at, row)
    with open(manifest, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return f"{row[0]} inserted as data row {at + 1} of {len(rows) - 1}"


# ============================================================================================ one size
def bench_one(corpus: str, n: int, root: Path, seed: int = 0, extra: list[str] | None = None,
              sample_s: float = 0.5, timeout: float | None = None, edit: bool = True, rerun: bool = True,
              log=print) -> dict[str, Any]:
    """``bench_scale.bench_one`` for ShowHowTo: fresh build, cached rerun, and the three one-change reruns."""
    bs = _bench_scale()
    root.mkdir(parents=True, exist_ok=True)
    inputs_dir, out, work = root / "inputs", root / "out", root / "work"
    t0 = time.perf_counter()
    load0 = bs._loadavg()
    gen = make_showhowto_inputs(inputs_dir, n, seed)
    gen_s = time.perf_counter() - t0
    cmd = [sys.executable, "-m", "builders.build", corpus, "--out", str(out), "--work-dir", str(work),
           *gen["args"], *(extra or []), "--workers", "1", "--no-progress"]
    usage = bs.dir_usage(inputs_dir)
    log(f"[{corpus} n={n}] inputs in {gen_s:.1f} s ({usage['bytes'] / 1e6:.1f} MB, load {load0:.2f})")
    log("  " + " ".join(cmd))
    release = out / corpus
    res: dict[str, Any] = {"corpus": corpus, "n": n, "seed": seed, "command": cmd, "generate_s": round(gen_s, 2),
                           "inputs": usage, "root": str(root), "loadavg_start": Path("/proc/loadavg").read_text().strip()}
    fresh = bs.run_build(cmd, root, root / "fresh.log", sample_s, timeout)
    fresh["summary"] = bs.recomputed_from_log(root / "fresh.log")
    res["fresh"] = fresh
    log(f"  fresh: rc {fresh['rc']}, {fresh['wall_s']:.1f} s wall, {fresh['cpu_s']:.1f} s CPU, "
        f"peak {fresh['peak_rss'] / 2**20:.0f} MiB, load {fresh['load_before']:.2f}->{fresh['load_after']:.2f} "
        f"(max {fresh['load_max']:.2f})")
    if fresh["rc"] != 0:
        res["error"] = f"fresh build exited {fresh['rc']}: see {fresh['log']}"
        log("  " + res["error"] + "\n" + Path(fresh["log"]).read_text(errors="replace")[-3000:])
        return res
    steps = bs.read_stats(release).get("steps") or {}
    res["steps"] = {k: {"seconds": s.get("seconds"), "wall_seconds": s.get("wall_seconds"), "kept": s.get("kept"),
                        "shards": s.get("shards"), "cached_shards": s.get("cached_shards"), "fit": s.get("fit", "")}
                    for k, s in steps.items()}
    res["work"], res["release"] = bs.dir_usage(work), bs.dir_usage(release)
    share = min(1.0, fresh["cpu_s"] / max(fresh["wall_s"], 1e-9))
    decode = [k for k in steps if k in DECODE_STEPS]
    decode_s = share * sum(float(steps[k].get("wall_seconds") or 0) for k in decode)
    res["cpu_share"], res["decode_steps"], res["decode_s"] = round(share, 3), decode, round(decode_s, 3)
    res["toolkit_cpu_s"] = round(max(0.0, fresh["cpu_s"] - decode_s), 3)
    res["per_video"] = {"wall_s": fresh["wall_s"] / n, "cpu_s": fresh["cpu_s"] / n,
                        "toolkit_cpu_ms": 1000 * res["toolkit_cpu_s"] / n, "decode_ms": 1000 * decode_s / n,
                        "work_mb": res["work"]["bytes"] / n / 1e6, "work_files": res["work"]["files"] / n,
                        "release_kb": res["release"]["bytes"] / n / 1e3}
    log(f"  work {res['work']['bytes'] / 1e6:.1f} MB / {res['work']['files']} files; rows kept per step "
        f"{ {k: s.get('kept') for k, s in steps.items()} }")
    if rerun:
        res["cached"] = bs._rerun(cmd, root, "cached", release, sample_s, timeout, log)
        log(f"  cached rerun: {res['cached']['wall_s']:.1f} s ({res['cached']['wall_s'] / fresh['wall_s']:.1%} of "
            f"fresh); {bs._what(res['cached'])}")
    if edit:
        e = gen["edits"]
        changes = {"edit_one": lambda: edit_transcript(e["transcript"]), "replace_video": lambda: replace_video(e["video"]),
                   "insert_row": lambda: insert_row(e["manifest"], e["row"], e["at"])}
        for tag in EDITS:
            what = changes[tag]()
            got = bs._rerun(cmd, root, tag, release, sample_s, timeout, log)
            got["edit"] = what
            res[tag] = got
            log(f"  {tag} ({what}): rc {got['rc']}, {got['wall_s']:.1f} s ({got['wall_s'] / fresh['wall_s']:.1%} of "
                f"fresh), {got['cpu_s']:.1f} s CPU; {bs._what(got)}")
    res["loadavg_end"] = Path("/proc/loadavg").read_text().strip()
    return res


# ============================================================================================ targets
def _ok(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def evaluate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Targets per size and across sizes, and the projection to 1.24M videos."""
    rs = sorted((r for r in results if "per_video" in r), key=lambda r: r["n"])
    if not rs:
        return {}
    sizes = {}
    for r in rs:
        wall, pv = r["fresh"]["wall_s"], r["per_video"]
        t: dict[str, Any] = {"cached_share": r["cached"]["wall_s"] / wall if r.get("cached", {}).get("rc") == 0 else None}
        for tag in EDITS:
            t[f"{tag}_share"] = r[tag]["wall_s"] / wall if r.get(tag, {}).get("rc") == 0 else None
            t[f"{tag}_cpu_share"] = r[tag]["cpu_s"] / r["fresh"]["cpu_s"] if tag in r else None
        t["toolkit_cpu_ms"], t["work_files_per_video"] = pv["toolkit_cpu_ms"], pv["work_files"]
        t["pass"] = {"cached_rerun_lt_5pct": _ok(t["cached_share"], TARGET_CACHED_SHARE),
                     **{f"{tag}_lt_10pct": _ok(t[f"{tag}_share"], TARGET_EDIT_SHARE) for tag in EDITS},
                     "toolkit_cpu_le_50ms": _ok(pv["toolkit_cpu_ms"], TARGET_TOOLKIT_MS),
                     "work_files_le_0.5": _ok(pv["work_files"], TARGET_WORK_FILES)}
        sizes[r["n"]] = t
    small, large = rs[0], rs[-1]
    cross = _bench_scale().across_sizes(small, large)
    toolkit_h = large["per_video"]["toolkit_cpu_ms"] / 1000 * VIDEOS_1_24M / 3600
    if len(rs) >= 2 and rs[-1]["n"] > rs[-2]["n"]:
        a, b = rs[-2], rs[-1]
        slope = (b["fresh"]["peak_rss"] - a["fresh"]["peak_rss"]) / (b["n"] - a["n"])
        mem = b["fresh"]["peak_rss"] + max(0.0, slope) * (VIDEOS_1_24M - b["n"])
        note = f"linear from n={a['n']} and n={b['n']} ({slope / 1024:.1f} KiB/video)"
    else:
        mem, note = large["fresh"]["peak_rss"], f"one size (n={large['n']}): taken as flat"
    proj = {"from_n": large["n"], "videos": VIDEOS_1_24M, "toolkit_cpu_hours": toolkit_h,
            "cpu_hours_with_decode": large["per_video"]["cpu_s"] * VIDEOS_1_24M / 3600, "memory_gb": mem / 1e9,
            "memory_note": note, "work_dir_files": large["per_video"]["work_files"] * VIDEOS_1_24M,
            "work_dir_gb": large["per_video"]["work_mb"] * VIDEOS_1_24M / 1e3}
    proj["pass"] = {"toolkit_cpu_lt_20h": _ok(toolkit_h, TARGET_CPU_HOURS), "memory_lt_4gb": _ok(mem / 1e9, TARGET_GB)}
    return {"showhowto": {"sizes": sizes, "across_sizes": cross, "projection_1_24m": proj}}


def _mark(v: bool | None) -> str:
    return "-" if v is None else ("PASS" if v else "FAIL")


def print_table(results: list[dict[str, Any]], targets: dict[str, Any], log=print) -> None:
    t_all = targets.get("showhowto", {})
    for r in sorted(results, key=lambda r: r["n"]):
        if "per_video" not in r:
            log(f"\nshowhowto n={r['n']}: {r.get('error', 'no result')}")
            continue
        f, pv, t = r["fresh"], r["per_video"], t_all["sizes"][r["n"]]
        log(f"\n== showhowto  n={r['n']}  (/proc/loadavg at start: {r['loadavg_start']}; 1-min load during the "
            f"fresh build max {f['load_max']:.2f})")
        rows = [("fresh build", f"{f['wall_s']:.1f} s wall, {f['cpu_s']:.1f} s CPU",
                 f"{1000 * pv['cpu_s']:.1f} ms CPU/video", ""),
                ("  toolkit CPU (less decode " + ",".join(r["decode_steps"]) + ")", f"{r['toolkit_cpu_s']:.1f} s",
                 f"{pv['toolkit_cpu_ms']:.1f} ms/video", _mark(t["pass"]["toolkit_cpu_le_50ms"]) + " (<= 50 ms)"),
                ("  decode", f"{r['decode_s']:.1f} s", f"{pv['decode_ms']:.1f} ms/video", ""),
                ("peak RSS", f"{f['peak_rss'] / 2**20:.0f} MiB", "", ""),
                ("work dir", f"{r['work']['bytes'] / 1e6:.1f} MB, {r['work']['files']} files",
                 f"{pv['work_files']:.2f} files/video", _mark(t["pass"]["work_files_le_0.5"]) + " (<= 0.5)")]
        if "cached" in r:
            c = r["cached"]
            rows.append(("cached rerun", f"{c['wall_s']:.1f} s wall", f"{t['cached_share']:.1%} of fresh" if
                         t["cached_share"] is not None else f"EXIT {c['rc']}",
                         _mark(t["pass"]["cached_rerun_lt_5pct"]) + " (< 5 %)"))
        for tag in EDITS:
            if tag in r:
                e, share = r[tag], t[f"{tag}_share"]
                rows.append((tag, f"{e['wall_s']:.1f} s wall",
                             (f"{share:.1%} of fresh, {e['recomputed'].get('shards')}/"
                              f"{e['recomputed'].get('total_shards')} shards" if share is not None
                              else f"EXIT {e['rc']}"), _mark(t["pass"][f"{tag}_lt_10pct"]) + " (< 10 %)"))
        w = [max(len(x[i]) for x in rows) for i in range(3)]
        for a, b, c, d in rows:
            log(f"  {a:<{w[0]}}  {b:>{w[1]}}  {c:<{w[2]}}  {d}")
    if not t_all:
        return
    cross, proj = t_all["across_sizes"], t_all["projection_1_24m"]
    log(f"\n== showhowto: across sizes and projection to {VIDEOS_1_24M:,} videos")
    if "rss_growth" in cross:
        log(f"  peak RSS n={cross['large']} vs n={cross['small']}: {cross['rss_growth']:+.1%} "
            f"{_mark(cross['pass']['rss_within_25pct'])} (within 25 %)")
        log(f"  CPU/video n={cross['large']} vs n={cross['small']}: {cross['cpu_per_video_drift']:+.1%} "
            f"{_mark(cross['pass']['cpu_per_video_within_20pct'])} (within 20 %)")
    log(f"  projected from n={proj['from_n']}: toolkit {proj['toolkit_cpu_hours']:.1f} CPU-hours "
        f"{_mark(proj['pass']['toolkit_cpu_lt_20h'])} (< 20; with decode {proj['cpu_hours_with_decode']:.1f} h), "
        f"memory {proj['memory_gb']:.2f} GB {_mark(proj['pass']['memory_lt_4gb'])} (< 4; {proj['memory_note']}), "
        f"work dir {proj['work_dir_files']:,.0f} files / {proj['work_dir_gb']:.0f} GB")
