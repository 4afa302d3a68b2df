"""Inputs of ``tests/perf/bench_scale.py --corpus sieve_swap``: HowTo100M-shaped cooking videos and a RecipeNLG-shaped
recipes CSV (issue 36, item 6), and the two edits the benchmark reruns (one caption word, one recipe step).

Made-up data, no real video, title or recipe: ``n`` videos (metadata in ``HowTo100M_v1.csv`` form, ``task_ids.csv``,
titles, durations, ``raw_caption.json``) and ``20 n`` recipes (RecipeNLG ``full_dataset.csv`` columns). Shapes:

- recipe titles are "<flavour> <main> <dish>" over vocabularies that grow with the recipes (one word of each about
  every 150 recipes), so a title lemma is held by about 150 recipe titles and a matching video has a few hundred
  title candidates at every size (real RecipeNLG titles are Zipfian: "chicken" is in 5 % of them, so there the
  candidates a video grow with the recipes, see tests/perf/README.md);
- recipe steps are 6-10 sentences of a cooking verb and three of ~3,000 made-up ingredient words (12 a recipe), so
  two recipes share few content lemmas and a narrated recipe is about the only one its video keeps;
- one video in three has a title of dish words (it passes the title sieve, Eq. 5); the others a title of words no
  recipe title holds (``no_title_match``). Of the matching videos, every other one narrates the steps of a recipe it
  matches (its content sieve keeps the pair, §4.2), the rest chat about other things (``content_sieve_failed``);
- 40-70 caption lines a video, 6-14 words a line, the HowTo100M ``raw_caption.json`` layout.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any, Callable

#: recipes per video (issue 36: 20 a video, 20,000 at 1,000 videos)
RECIPES_PER_VIDEO = 20
#: recipe titles per title word (each of flavour, main and dish)
TITLES_PER_WORD = 150
_SYL = ["ka", "lo", "mi", "ran", "tu", "vel", "zor", "bi", "nes", "qua", "dor", "fen", "gil", "hap", "sor", "pim",
        "tel", "mur", "dak", "wen"]
_VERBS = ["chop", "slice", "dice", "mince", "whisk", "stir", "fold", "simmer", "boil", "fry", "roast", "grill",
          "bake", "saute", "season", "marinate", "drain", "rinse", "peel", "grate", "knead", "toast", "blend", "pour",
          "sprinkle", "toss", "coat", "melt", "reduce", "steam"]
_CHAT = ["welcome", "channel", "subscribe", "comment", "weekend", "family", "friend", "camera", "music", "morning",
         "holiday", "garden", "weather", "story", "school", "office", "traffic", "football", "movie", "phone"]
_FILL = ["so", "okay", "now", "and then", "alright", "you know", "basically", "just", "really", "right"]
CATEGORY = ("Food and Entertaining", "Recipes")


def _word(i: int, prefix: str = "") -> str:
    """A made-up word for number ``i`` (three syllables, distinct for distinct ``i`` below 8,000)."""
    n = len(_SYL)
    return prefix + _SYL[i % n] + _SYL[(i // n) % n] + _SYL[(i // n // n) % n]


def _recipe_steps(rng: random.Random, ingredients: list[str]) -> list[str]:
    steps = []
    for _ in range(rng.randint(6, 10)):
        a, b, c = rng.sample(ingredients, 3)
        steps.append(f"{rng.choice(_VERBS).capitalize()} the {a} with the {b} and {c}.")
    return steps


def _caption_lines(rng: random.Random, sentences: list[str], n_lines: int) -> dict[str, list[Any]]:
    text, start, end = [], [], []
    t = rng.uniform(0.5, 3.0)
    for k in range(n_lines):
        words = sentences[k % len(sentences)].lower().rstrip(".").split()
        line = " ".join([rng.choice(_FILL), *words][:14])
        dur = rng.uniform(2.0, 4.5)
        text.append(line)
        start.append(round(t, 2))
        end.append(round(t + dur, 2))
        t += dur + rng.uniform(0.0, 0.8)
    return {"text": text, "start": start, "end": end}


def make_sieve_swap_inputs(root: Path, n_videos: int, seed: int = 0) -> dict[str, Any]:
    """Write the inputs under ``root``; returns the build's CLI args, the paths and the edits (label, function)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    n_recipes = RECIPES_PER_VIDEO * n_videos
    n_words = max(4, n_recipes // TITLES_PER_WORD)
    flavours = [_word(i, "fla") for i in range(n_words)]
    mains = [_word(i, "mai") for i in range(n_words)]
    dishes = [_word(i, "dis") for i in range(n_words)]
    ingredients = [_word(i) for i in range(3000)]
    recipes = []
    with open(root / "full_dataset.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["", "title", "ingredients", "directions", "link", "source", "NER"])
        for rid in range(n_recipes):
            title = (rng.choice(flavours), rng.choice(mains), rng.choice(dishes))
            ings = rng.sample(ingredients, 12)
            steps = _recipe_steps(rng, ings)
            recipes.append((rid, title, steps))
            w.writerow([rid, " ".join(title).title(), json.dumps([f"1 cup {x}" for x in ings[:8]]),
                        json.dumps(steps), f"www.example.com/recipe/{rid}", "Gathered", json.dumps(ings[:8])])
    n_tasks = max(1, n_videos // 10)
    vids = [f"v{seed:02d}{i:08d}"[-11:] for i in range(n_videos)]
    meta, titles, durations, captions = [], [], [], {}
    for i, vid in enumerate(vids):
        task = 100000 + i % n_tasks
        lines = rng.randint(40, 70)
        if i % 3 == 0:   # title matches recipes
            rid, title, steps = recipes[rng.randrange(n_recipes)]
            vtitle = f"How to cook {title[1]} {title[2]} at home"
            if i % 6 == 0:   # narrates that recipe: the content sieve keeps it
                sentences = steps
            else:           # chats about other things
                sentences = [f"{rng.choice(_CHAT)} {rng.choice(_CHAT)} {_word(rng.randrange(3000, 7000))}"
                             for _ in range(12)]
        else:
            vtitle = f"My {_word(rng.randrange(3000, 7000), 'zu')} {_word(rng.randrange(3000, 7000), 'xo')} vlog"
            sentences = [f"{rng.choice(_CHAT)} {rng.choice(_CHAT)} {rng.choice(_CHAT)}" for _ in range(12)]
        caps = _caption_lines(rng, sentences, lines)
        captions[vid] = caps
        meta.append([vid, *CATEGORY, rng.randint(1, 200), task])
        titles.append([vid, vtitle])
        durations.append([vid, round(caps["end"][-1] + rng.uniform(1, 20), 2)])
    _csv(root / "HowTo100M_v1.csv", ["video_id", "category_1", "category_2", "rank", "task_id"], meta)
    _csv(root / "video_titles.csv", ["video_id", "title"], titles)
    _csv(root / "video_durations.csv", ["video_id", "duration"], durations)
    with open(root / "task_ids.csv", "w", encoding="utf-8") as f:
        for t in range(n_tasks):
            f.write(f"{100000 + t}\tCook dish {t}\n")
    (root / "raw_caption.json").write_text(json.dumps(captions), encoding="utf-8")
    paths = {"videos": root / "HowTo100M_v1.csv", "tasks": root / "task_ids.csv", "titles": root / "video_titles.csv",
             "durations": root / "video_durations.csv", "transcripts": root / "raw_caption.json",
             "recipes": root / "full_dataset.csv"}
    args = [f"--{k}={v}" for k, v in paths.items()] + ["--set", "embedding_model=minilm"]
    kept_video = vids[0]   # i = 0: narrates its recipe
    edits: list[tuple[str, Callable[[], str]]] = [
        ("edit_one", lambda: edit_caption_word(paths["transcripts"], kept_video)),
        ("edit_recipe", lambda: edit_recipe_step(paths["recipes"], n_recipes // 2)),
    ]
    return {"args": args, "paths": {k: str(v) for k, v in paths.items()}, "edits": edits,
            "recipes": n_recipes, "generated": {k: str(v) for k, v in paths.items()}}


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def edit_caption_word(raw_caption: Path, video_id: str) -> str:
    """Replace one word of one caption line of ``video_id`` (a kept video)."""
    data = json.loads(raw_caption.read_text(encoding="utf-8"))
    words = data[video_id]["text"][3].split()
    words[-1] = "gently"
    data[video_id]["text"][3] = " ".join(words)
    raw_caption.write_text(json.dumps(data), encoding="utf-8")
    return f"one word of caption line 3 of {video_id}"


def edit_recipe_step(recipes_csv: Path, recipe_id: int) -> str:
    """Replace one word of the first step of recipe ``recipe_id`` in the CSV (rewritten in place)."""
    with open(recipes_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    row = rows[recipe_id + 1]
    assert int(row[0]) == recipe_id
    steps = json.loads(row[3])
    steps[0] = steps[0].replace(" the ", " the warm ", 1)
    row[3] = json.dumps(steps)
    with open(recipes_csv, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return f"one word added to step 1 of recipe {recipe_id}"


#: HowTo100M rows and RecipeNLG recipes of the paper's build (Batra et al., ECCV 2024, §4.2)
HTM_ROWS = 1_240_000
RECIPENLG = 2_231_142
#: videos of the paper's corpus V (after the cooking, duration and task-size filters), the videos a build lemmatises
PAPER_V = 241_000
TARGET_GB = 8.0


def project(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The Done-when figures of issue 36 from ``bench_scale`` results of one corpus (sorted by size): the edited
    recipe's share, and the projection to the paper's build (1.24M HowTo100M rows, of which V = 241K videos reach the
    transcripts, and 2.2M recipes): CPU linear in the videos of V and in the recipes (each term from the largest
    size), peak memory linear in the size from the two largest sizes."""
    big = results[-1]
    n, recipes = big["n"], RECIPES_PER_VIDEO * big["n"]
    steps = big.get("steps") or {}
    share = big.get("cpu_share", 1.0)
    recipe_s = share * sum(float(steps.get(k, {}).get("wall_seconds") or 0)
                           for k in ("read_recipes", "recipe_clean", "recipe_dedup", "recipe_lemmas"))
    # the swap step: its MiniLM encoder (a model) and its search (helper 36b's part of issue 36), counted apart
    model_s = share * float(steps.get("swap", {}).get("wall_seconds") or 0)
    video_s = max(0.0, big["fresh"]["cpu_s"] - recipe_s)
    toolkit_video_s = max(0.0, video_s - model_s)
    cpu_h = (video_s / n * PAPER_V + recipe_s / recipes * RECIPENLG) / 3600
    toolkit_h = (toolkit_video_s / n * PAPER_V + recipe_s / recipes * RECIPENLG) / 3600
    if len(results) >= 2 and results[-1]["n"] > results[-2]["n"]:
        a, b = results[-2], results[-1]
        slope = (b["fresh"]["peak_rss"] - a["fresh"]["peak_rss"]) / (b["n"] - a["n"])
        mem = b["fresh"]["peak_rss"] + max(0.0, slope) * (PAPER_V - b["n"])
        note = f"linear from n={a['n']} and n={b['n']} ({slope / 1024:.1f} KiB a video with its 20 recipes)"
    else:
        mem, note = big["fresh"]["peak_rss"], f"one size (n={n}): taken as flat"
    edit = {r["n"]: {k: (r[k]["wall_s"] / r["fresh"]["wall_s"] if r.get(k, {}).get("rc") == 0 else None)
                     for k in ("cached", "edit_one", "edit_recipe")} for r in results}
    lines = [f"projection to the paper's build ({HTM_ROWS:,} HowTo100M rows, V = {PAPER_V:,} videos, "
             f"{RECIPENLG:,} recipes) from n={n} ({recipes:,} recipes):",
             f"CPU {cpu_h:.0f} h, of which the toolkit's own without the swap step (MiniLM and search) {toolkit_h:.0f} h; "
             f"recipes pipeline {recipe_s / recipes * 1000:.1f} ms a recipe, videos {video_s / n * 1000:.0f} ms a video",
             f"peak memory {mem / 1e9:.2f} GB {'PASS' if mem / 1e9 < TARGET_GB else 'FAIL'} (< {TARGET_GB:g}; {note})"]
    for size, e in edit.items():
        lines.append(f"n={size}: share of the fresh build's wall time: "
                     + ", ".join(f"{k} {'-' if v is None else f'{v:.1%}'} "
                                 f"{'-' if v is None else ('PASS' if v < (0.05 if k == 'cached' else 0.10) else 'FAIL')}"
                                 for k, v in e.items()))
    return {"cpu_hours": cpu_h, "toolkit_cpu_hours": toolkit_h, "memory_gb": mem / 1e9, "memory_note": note,
            "shares": edit, "lines": lines}


# ============================================================================================ the recipe index alone
def _rss() -> dict[str, int]:
    """This process's resident memory from /proc/self/status (kB): anonymous (its own) and file-backed (maps)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def index_figures(n_recipes: int, root: Path, seed: int = 0, queries: int = 200) -> dict[str, Any]:
    """Build the recipe index of ``n_recipes`` recipe lemma rows shaped as the generator's (titles of three words of
    vocabularies of n/150 words, bodies of a verb set and ~20 of 3,000 ingredient words; lemmas given, no spaCy),
    then open it and score ``queries`` videos' title candidates as the content sieve does. Figures: build seconds,
    size on disk, and this process's resident memory (anonymous and file-backed) after opening and after the
    queries."""
    import time

    import numpy as np

    from builders.core.shards import StageData, write_shard
    from builders.corpora.sieve_swap import recipe_index

    rng = random.Random(seed)
    n_words = max(4, n_recipes // TITLES_PER_WORD)
    stage = root / "recipes"
    per_shard, shard = 16384, 0
    for start in range(0, n_recipes, per_shard):
        rows = []
        for rid in range(start, min(n_recipes, start + per_shard)):
            title = sorted({_word(rng.randrange(n_words), p) for p in ("fla", "mai", "dis")})
            body = sorted({*rng.sample(_VERBS, 6), *(_word(rng.randrange(3000)) for _ in range(20))})
            rows.append({"recipe_id": rid, "title_lemmas": title, "body_lemmas": body})
        write_shard(stage, shard, rows, [], {"rows_in": len(rows), "kept": len(rows)})
        shard += 1
    data = StageData(stage, shard)
    t0 = time.perf_counter()
    folder, _ = recipe_index.ensure(data, root / "cache")
    build_s = time.perf_counter() - t0
    disk = sum(p.stat().st_size for p in folder.iterdir())
    before = _rss()
    t0 = time.perf_counter()
    index = recipe_index.RecipeIndex.open(folder)
    open_s = time.perf_counter() - t0
    opened = _rss()
    t0 = time.perf_counter()
    pairs = 0
    for _ in range(queries):
        title = [_word(rng.randrange(n_words), "mai"), _word(rng.randrange(n_words), "dis")]
        transcript = {*rng.sample(_VERBS, 10), *(_word(rng.randrange(3000)) for _ in range(40))}
        rows, _, _ = index.title_candidates(title, "any", 1, None)
        iou, _ = index.bodies.scores(rows, index.encode(transcript), video_size=len(transcript))
        pairs += int(np.asarray(iou).size)
    query_s = time.perf_counter() - t0
    after = _rss()
    return {"recipes": n_recipes, "build_s": round(build_s, 2), "disk_mb": round(disk / 1e6, 1),
            "open_s": round(open_s, 2), "query_ms_per_video": round(1000 * query_s / queries, 2),
            "candidates_per_video": pairs / queries,
            "rss_anon_mb_opened": round((opened["RssAnon"] - before["RssAnon"]) / 1e3, 1),
            "rss_file_mb_opened": round((opened["RssFile"] - before["RssFile"]) / 1e3, 1),
            "rss_anon_mb_after_queries": round((after["RssAnon"] - before["RssAnon"]) / 1e3, 1),
            "rss_file_mb_after_queries": round((after["RssFile"] - before["RssFile"]) / 1e3, 1)}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import tempfile

    ap = argparse.ArgumentParser(description="the sieves' recipe index alone: build time, size, resident memory")
    ap.add_argument("--index", type=int, nargs="+", required=True, metavar="RECIPES")
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args(argv)
    for n in args.index:   # resident figures are differences from just before each index is opened
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            print(json.dumps(index_figures(n, Path(tmp))), flush=True)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
