"""Scale benchmark of whole builds (issue 19 item 5): the real CLI at several sizes, with generated inputs.

For each size in ``--sizes`` (default 1,000 and 20,000) and each corpus in ``--corpus`` (default ``howtostep marc``):

1. inputs are generated into a temporary folder: HowTo100M-shaped ``HowTo100M_v1.csv``, ``task_ids.csv``,
   ``raw_caption.json`` and replayed LLM answers for ``howtostep`` (``tests/perf/scale_inputs.py``,
   ``make_howtostep_inputs``; features are simulated by the build), and a directory of ``<key>.html`` recipe pages with
   Schema.org Recipe JSON-LD for ``marc`` (:func:`make_marc_pages`), packed into gzipped WARC files with a video side
   of one video per 3 pages (``tests/perf/scale_marc.py``; ``--marc-input pages``: the page folder, text only);
2. **fresh build**: ``python -m builders.build <corpus> --out OUT --work-dir WORK <inputs> --workers 1
   --no-progress`` as a subprocess, in an empty work directory. Measured: wall time; CPU time (user + sys of the child
   and every descendant it waited for, from ``os.wait4``); peak RSS (the sum over the child's process tree sampled
   every ``--sample`` s with psutil, and the largest single process from ``wait4``'s ``ru_maxrss``; the larger is
   reported); the 1-minute load average before, after and the highest seen during the run (other jobs may share the
   machine); per-step seconds from the release's ``stats.json`` (``steps.<name>.seconds``: compute time recorded in
   the shards, and ``wall_seconds``: time in this run); work-directory bytes and files per video (``os.walk``);
   release bytes and files;
3. **cached rerun**: the same command again (everything cached: expected to write the release only);
4. **edit one**: one word of one video's caption (``howtostep``: in ``raw_caption.json``, edited in place byte for
   byte, every other video's bytes unchanged) or of one page's instruction (``marc``) is changed, and the same command
   runs again. What each rerun recomputed is read from its own log (the CLI's summary: ``cached/shards`` per step and
   "this build: N shard(s) computed, M reused; global stages fitted: ..."), not from ``stats.json``: a release found
   up to date is not rewritten, so its ``stats.json`` is then the earlier build's (both are kept in the JSON);
   ``marc`` also measures one added WARC file (a new segment with one new page) and the seconds of the EM
   (``hmm_ibm1``) in each rerun, against issue 37's targets (:func:`marc_targets`);
5. **projection to HTM-370K** (370,000 videos): CPU-hours = CPU s/video at the largest size x 370,000; memory =
   peak RSS extrapolated linearly in N from the two largest sizes (one size: taken as flat).

Targets (issue 19 "done when"), reported as pass/fail columns:

- peak RSS at the largest size within 25 % of that at the smallest (1,000 vs 20,000);
- CPU s/video within 20 % between the smallest and largest size;
- a cached rerun under 5 % of the fresh build's wall time;
- editing one word of one video reruns in under 10 % of the fresh build's wall time;
- work directory per video at most a third of before the issue (0.70 MB and 5.7 files per video): 0.233 MB, 1.9 files;
- the toolkit's own CPU per video at most 50 ms at 20,000 videos: the child's CPU minus the seconds of the model
  steps (ASR, a non-replay LLM, a learned text encoder in Stage 1/2, labeler training, the chat classifier) and minus
  the simulated-feature step (``visual_features``), which is reported apart. Step seconds are wall-clock inside the
  build process; a step's CPU is estimated as its wall seconds x the build's CPU/wall share, so under load this
  split is approximate (the totals are measured);
- projected to HTM-370K under 6 CPU-hours and 4 GB.

Usage::

    python tests/perf/bench_scale.py                                  # 1,000 and 20,000, both corpora
    python tests/perf/bench_scale.py --sizes 100 300 --corpus howtostep --keep --tmp /scratch
    python tests/perf/bench_scale.py --sizes 1000 --corpus howtostep --code /tmp/old   # an export of an old commit
    python tests/perf/bench_scale.py --help                           # --seed, --timeout, --set, --json, ...
    python -m pytest tests/perf/bench_scale.py -s -p no:cacheprovider --override-ini addopts=   # test_scale_1000

The JSON result goes to ``<tmp>/procvid-bench/bench_scale-<timestamp>.json`` (``--out`` to choose); the path is
printed. ``BENCH_TMP=dir`` moves the pytest run's folders.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
HTM_370K = 370_000
DEFAULT_SIZES = (1000, 20000)
DEFAULT_CORPORA = ("howtostep", "marc")
#: ``marc`` input layout: ``warc`` (issue 37: the pages packed into gzipped WARC files, a video side of one video per 3
#: pages, tests/perf/scale_marc.py) or ``pages`` (a folder of HTML pages, text only); ``--marc-input``
MARC_INPUT = "warc"

#: corpora whose inputs, edits, targets and table live in a module of their own in this folder (its ``bench_one``,
#: ``evaluate`` and ``print_table`` stand in for this module's)
OWN_MODULES = {"showhowto": "scale_showhowto"}  # issue 35: tests/perf/scale_showhowto.py


def _own_module(corpus: str):
    name = OWN_MODULES[corpus]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


#: corpora whose generator lives in its own module of tests/perf: name -> (file, function(root, n, seed) -> dict with
#: "args" and "edits", a list of (result key, function applying one edit and returning what it did)); issue 36
MODULE_GENERATORS = {"sieve_swap": ("scale_sieve_swap.py", "make_sieve_swap_inputs")}


# ---- issue 19 targets
TODAY_WORK_MB_PER_VIDEO = 0.70
TODAY_WORK_FILES_PER_VIDEO = 5.7
TARGET_RSS_GROWTH = 0.25        # peak RSS at 20,000 within 25 % of that at 1,000
TARGET_CPU_DRIFT = 0.20         # CPU s/video within 20 %
TARGET_CACHED_SHARE = 0.05      # cached rerun < 5 % of the fresh build
TARGET_EDIT_SHARE = 0.10        # edit-one rerun < 10 % of the fresh build
TARGET_TOOLKIT_MS = 50.0        # toolkit CPU per video at 20,000
TARGET_CPU_HOURS_370K = 6.0
TARGET_GB_370K = 4.0

#: steps that run a model (their time is not the toolkit's own); some only under a config (see ``model_steps``)
ALWAYS_MODEL_PREFIXES = ("train_labeler", "mptva_long_model", "chat_filter", "asr")
FEATURE_STEPS = ("visual_features",)


# ============================================================================================ marc pages generator
# Made-up cooking vocabulary (no real page, site or recipe is copied). Titles are "<flavour> <main> <kind>" dishes of
# a core vocabulary sized by N, plus a long tail of one-page titles with a unique first word: the tail keeps the
# "top 50 % most common title words" cut (spec marc.md §3.3 step 4) at frequency 1, so the core dishes all pass it.
_FLAVOURS = ["lemon", "garlic", "spicy", "honey", "smoky", "creamy", "herb", "ginger", "chili", "maple", "coconut",
             "sesame", "pesto", "cajun", "balsamic", "mustard", "basil", "teriyaki", "buttery", "zesty"]
_MAINS = ["chicken", "beef", "pork", "salmon", "shrimp", "tofu", "lentil", "mushroom", "potato", "pasta", "rice",
          "cauliflower", "turkey", "bean", "egg", "noodle", "spinach", "tomato", "pumpkin", "carrot"]
_KINDS = ["soup", "salad", "stew", "curry", "tacos", "skillet", "bake", "casserole", "bowl", "burgers", "pie",
          "wraps", "risotto", "kebabs", "chowder", "frittata", "sandwich", "chili", "gratin", "sliders"]
_PANTRY = ["olive oil", "butter", "onion", "garlic", "carrot", "celery", "bell pepper", "tomato paste", "chicken stock",
           "heavy cream", "parmesan cheese", "cheddar cheese", "flour", "sugar", "brown sugar", "soy sauce", "honey",
           "lemon juice", "lime juice", "cumin", "paprika", "oregano", "thyme", "rosemary", "parsley", "cilantro",
           "black pepper", "salt", "red pepper flakes", "green onion", "spinach", "zucchini", "mushroom", "potato",
           "sour cream", "yogurt", "milk", "egg", "breadcrumbs", "rice", "coconut milk", "ginger", "sesame oil",
           "vinegar", "mustard", "mayonnaise", "corn", "black beans", "chickpeas", "feta cheese"]
_UNITS = ["1 cup", "2 cups", "1/2 cup", "1 tablespoon", "2 tablespoons", "1 teaspoon", "1/2 teaspoon", "3 cloves",
          "1 pound", "1 can", "a pinch of", "2 large", "1 medium", "4 ounces"]
_PANS = ["skillet", "saucepan", "dutch oven", "baking dish", "wok", "sheet pan", "stock pot"]
_SIDES = ["crusty bread", "steamed rice", "a green salad", "warm tortillas", "mashed potatoes", "fresh herbs"]
_STEP_TEMPLATES = [
    "Preheat the oven to {temp} degrees and grease a {pan}.",
    "Chop the {a} and the {b} into small pieces.",
    "Heat {n} tablespoons of {fat} in a large {pan} over medium heat.",
    "Add the {main} and cook for {k} minutes, stirring often.",
    "Season with salt, pepper and {spice}. Taste and adjust.",
    "Stir in the {a} and simmer for {k} minutes until thickened.",
    "Whisk the {a} with the {b} in a small bowl until smooth.",
    "Pour the sauce over the {main} and toss to coat evenly.",
    "Transfer everything to the {pan} and bake for {k2} minutes.",
    "Cook the {main} in batches so the pan is not crowded.",
    "Fold in the {a} gently with a spatula.",
    "Let it rest for {k} minutes before slicing.",
    "Garnish with {b} and a squeeze of lemon.",
    "Serve warm with {side}.",
    "Bring a pot of salted water to a boil and cook the {main} until tender. Drain well.",
    "Reduce the heat to low, cover and cook for another {k} minutes.",
]
_TAIL_SYLLABLES = ["ka", "lo", "mi", "ran", "tu", "vel", "zor", "bi", "nes", "qua", "dor", "fen", "gil", "hap"]
_GERMAN_STEPS = ["Den Ofen auf 180 Grad vorheizen und eine Form einfetten.",
                 "Die Zwiebeln fein hacken und in Butter glasig dünsten.",
                 "Alle Zutaten gut verrühren und mit Salz und Pfeffer abschmecken.",
                 "Im Ofen etwa 30 Minuten backen und warm servieren."]
_STORY = ["This is one of those recipes I come back to every single week.",
          "My family asks for it on busy weeknights, and it never takes more than half an hour.",
          "You can make it ahead and keep it in the fridge for up to three days.",
          "The secret is to let the pan get really hot before anything goes in.",
          "If you do not have every ingredient, swap in whatever vegetables you have on hand.",
          "Leftovers reheat beautifully, so I always make a double batch.",
          "Scroll down for the printable recipe card and a few tips from the comments."]


def _tail_word(i: int) -> str:
    a, b = divmod(i, len(_TAIL_SYLLABLES))
    return _TAIL_SYLLABLES[b] + _TAIL_SYLLABLES[a % len(_TAIL_SYLLABLES)] + "ish" + (str(a // 14) if a >= 14 else "")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _marc_recipe(rng: random.Random, title: str, main: str, core: list[str]) -> tuple[list[str], list[str]]:
    extras = rng.sample(_PANTRY, 2)
    ingredients = [f"{rng.choice(_UNITS)} {ing}" for ing in [main, *core, *extras[: rng.randint(0, 2)]]]
    words = {"main": main, "pan": rng.choice(_PANS), "fat": rng.choice(["olive oil", "butter", "sesame oil"]),
             "side": rng.choice(_SIDES), "spice": rng.choice(["cumin", "paprika", "oregano", "thyme"])}
    steps = []
    for t in rng.sample(_STEP_TEMPLATES, rng.randint(5, 10)):
        a, b = rng.sample(core, 2)
        steps.append(t.format(a=a, b=b, temp=rng.choice([350, 375, 400, 425]), n=rng.randint(1, 3),
                              k=rng.randint(2, 20), k2=rng.randint(15, 45), **words))
    return ingredients, steps


def _marc_page(rng: random.Random, key: str, url: str, title: str, ingredients: list[str], steps: list[str],
               lang: str = "en", schema: bool = True) -> str:
    layout = rng.random()
    if layout < 0.70:
        instructions: Any = [{"@type": "HowToStep", "text": s, "url": f"{url}#step-{i + 1}"}
                             for i, s in enumerate(steps)]
    elif layout < 0.85:
        instructions = list(steps)
    elif layout < 0.95:
        instructions = "\n".join(steps)
    else:
        half = max(1, len(steps) // 2)
        instructions = [{"@type": "HowToSection", "name": "Prepare",
                         "itemListElement": [{"@type": "HowToStep", "text": s} for s in steps[:half]]},
                        {"@type": "HowToSection", "name": "Cook",
                         "itemListElement": [{"@type": "HowToStep", "text": s} for s in steps[half:]]}]
    recipe = {"@context": "https://schema.org/", "@type": "Recipe", "name": title,
              "author": {"@type": "Person", "name": f"Cook {rng.randint(1, 999)}"},
              "datePublished": f"20{rng.randint(15, 24)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
              "recipeYield": [str(rng.randint(2, 8))], "prepTime": f"PT{rng.randint(5, 30)}M",
              "recipeIngredient": ingredients, "recipeInstructions": instructions, "inLanguage": lang}
    if rng.random() < 0.3:  # Yoast-style @graph
        ld: Any = {"@context": "https://schema.org", "@graph": [
            {"@type": "WebSite", "name": key.split("__")[0]},
            {"@type": "WebPage", "url": url, "name": title}, recipe]}
    else:
        ld = recipe
    story = " ".join(rng.choice(_STORY) for _ in range(rng.randint(6, 18)))
    head = [f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">',
            f"<title>{_esc(title)} | {key.split('__')[0]}</title>",
            f'<link rel="canonical" href="{url}">']
    if schema:
        head.append('<script type="application/ld+json">' + json.dumps(ld, ensure_ascii=False) + "</script>")
    body = ["</head>\n<body>\n<header><nav><a href=\"/\">Home</a> <a href=\"/recipes\">Recipes</a></nav></header>",
            f"<article>\n<h1>{_esc(title)}</h1>\n<p>{_esc(story)}</p>", '<div class="recipe-card">',
            "<h2>Ingredients</h2>\n<ul>" + "".join(f"<li>{_esc(i)}</li>" for i in ingredients) + "</ul>",
            "<h2>Instructions</h2>\n<ol>" + "".join(f"<li>{_esc(s)}</li>" for s in steps) + "</ol>",
            "</div>\n</article>\n<footer>&copy; made-up site for a benchmark</footer>\n</body>\n</html>\n"]
    return "\n".join(head + body)


def make_marc_pages(root: Path, n_pages: int, seed: int = 0) -> dict[str, Any]:
    """A directory ``root/pages`` of ``n_pages`` made-up ``<key>.html`` recipe pages with Schema.org Recipe JSON-LD
    (HowToStep lists, string lists, plain strings, HowToSections; some in an ``@graph``), the shape of spec
    ``marc.md`` §2.1-§2.2. About 11 pages a dish (the paper's 48,852 recipes / 4,262 dishes); 2 % German pages
    (``non_english``), 1 % without a Recipe (``no_schema_recipe``), 1 % with a 7-word title (``title_too_long``), and
    a tail of single-page dishes (``dish_too_small``). Deterministic for a seed.

    Returns ``{"pages": Path, "args": [...CLI args...], "edit": {"file", "old", "new"}}``: ``edit`` changes one word
    of one page's instruction (in the JSON-LD and the HTML card alike)."""
    rng = random.Random(seed)
    pages = Path(root) / "pages"
    pages.mkdir(parents=True, exist_ok=True)
    n_special = {"de": max(1, n_pages // 50), "noschema": max(1, n_pages // 100), "long": max(1, n_pages // 100)}
    n_regular = max(3, n_pages - sum(n_special.values()))
    # core vocabulary: k words per slot, k^3 distinct dishes >= the dishes needed; tail longer than the core
    n_dishes = max(1, round(n_regular / 11))
    k = min(len(_MAINS), max(2, math.ceil(n_dishes ** (1 / 3)) + 1))
    n_tail = min(3 * k + 1, max(0, n_regular - 3 * n_dishes))
    n_core = n_regular - n_tail
    n_dishes = max(1, min(n_dishes, n_core // 3))
    combos = [(f, m, c) for f in _FLAVOURS[:k] for m in _MAINS[:k] for c in _KINDS[:k]]
    rng.shuffle(combos)
    dishes = []
    for f, m, c in combos[:n_dishes]:
        core = rng.sample([p for p in _PANTRY if p != m], 6)
        dishes.append((f"{f.title()} {m.title()} {c.title()}", m, core))
    specs: list[tuple[str, str, list[str], str, bool]] = []  # (title, main, core, lang, schema)
    for i in range(n_core):
        title, main, core = dishes[i % n_dishes]
        specs.append((title, main, core, "en", True))
    for i in range(n_tail):
        title, main, core = dishes[i % n_dishes]
        specs.append((f"{_tail_word(i).title()} {title.split(' ', 1)[1]}", main, core, "en", True))
    for i in range(n_special["long"]):
        title, main, core = dishes[i % n_dishes]
        specs.append((f"The Best Ever Homemade {title} Tonight", main, core, "en", True))
    for i in range(n_special["noschema"]):
        title, main, core = dishes[i % n_dishes]
        specs.append((title, main, core, "en", False))
    for _ in range(n_special["de"]):
        specs.append(("Saftiger Kartoffel Auflauf", "potato", ["butter", "onion", "salt", "milk", "egg", "flour"],
                      "de", True))
    specs = specs[:n_pages]
    rng.shuffle(specs)
    edit: dict[str, Any] = {}
    for j, (title, main, core, lang, schema) in enumerate(specs):
        site = f"site{rng.randint(0, max(1, n_pages // 7)):05d}"
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        key = f"{site}.example__{slug}-{j:06d}"
        url = f"https://{site}.example/{slug}-{j}/"
        ingredients, steps = _marc_recipe(rng, title, main, core)
        if lang == "de":
            steps = rng.sample(_GERMAN_STEPS, 4)
        path = pages / f"{key}.html"
        path.write_text(_marc_page(rng, key, url, title, ingredients, steps, lang, schema), encoding="utf-8")
        if not edit and lang == "en" and schema and j >= len(specs) // 2 and " minutes" in steps[0]:
            edit = {"file": path, "old": " minutes", "new": " minutes more"}
    if not edit:  # tiny sizes: any English page with a Recipe
        for path in sorted(pages.iterdir()):
            text = path.read_text(encoding="utf-8")
            if 'lang="en"' in text and "application/ld+json" in text:
                word = (re.search(r'"text": "([A-Z][a-z]+) ', text)
                        or re.search(r'"recipeInstructions": \["([A-Z][a-z]+) ', text))
                if word:
                    edit = {"file": path, "old": word.group(1) + " ", "new": word.group(1) + " then "}
                    break
    return {"pages": pages, "args": ["--pages", str(pages)], "edit": edit}


def _apply_marc_edit(edit: dict[str, Any]) -> str:
    path = Path(edit["file"])
    text = path.read_text(encoding="utf-8")
    if edit["old"] not in text:
        raise RuntimeError(f"marc edit: {edit['old']!r} not in {path}")
    path.write_text(text.replace(edit["old"], edit["new"]), encoding="utf-8")
    return f"{path.name}: {edit['old']!r} -> {edit['new']!r} (every occurrence in the page)"


# ============================================================================================ howtostep inputs
def _load_scale_inputs(name: str = "scale_inputs.py"):
    path = HERE / name
    if not path.exists():
        raise RuntimeError(f"{path} not found: the HowToStep input generator (make_howtostep_inputs) is needed")
    spec = importlib.util.spec_from_file_location("procvid_" + path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


_FLAG_OF_KEY = {"videos": "--videos", "tasks": "--tasks", "transcripts": "--transcripts",
                "raw_caption": "--transcripts", "video_ids": "--video-ids", "exclude": "--exclude"}


def make_howtostep(root: Path, n: int, seed: int) -> dict[str, Any]:
    """``make_howtostep_inputs`` of ``tests/perf/scale_inputs.py``, and the CLI args of the build."""
    mod = _load_scale_inputs()
    got = mod.make_howtostep_inputs(Path(root), n, seed=seed)
    args = got.get("args")
    if args is None:  # no ready-made args: the documented keys
        args = []
        for key, flag in _FLAG_OF_KEY.items():
            if got.get(key):
                args += [flag, str(got[key])]
        args += ["--transcript-format", "htm_raw", "--set", "visual_features=simulated", "--set", "rounds=0"]
        replay = got.get("llm_replay") or got.get("replay")
        if replay:
            args += ["--set", "llm=replay", "--set", f"llm_replay={replay}"]
    args = [str(a) for a in args]
    captions = got.get("raw_caption") or got.get("transcripts") or _arg_value(args, "--transcripts")
    generated = {k: str(v) for k, v in got.items() if k not in ("video_ids", "args")}
    return {"args": args, "raw_caption": Path(captions), "generated": generated}


def _arg_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def edit_one_caption(raw_caption: Path, seed: int = 0) -> str:
    """Change one word of one caption line of one video of ``raw_caption.json`` **in place**: the bytes of every
    other video stay identical (the JSON string of that line is found after the video's key and replaced)."""
    raw = raw_caption.read_bytes()
    data = json.loads(raw)
    vids = sorted(data)
    rng = random.Random(seed)
    for vid in [vids[len(vids) // 2]] + rng.sample(vids, min(len(vids), 50)):
        texts = data[vid].get("text") or []
        for line in texts:
            words = str(line).split(" ")
            for w_i, w in enumerate(words):
                if len(w) >= 4 and w.isalpha():
                    new_words = list(words)
                    new_words[w_i] = "spatula" if w != "spatula" else "whisk"
                    new_line = " ".join(new_words)
                    start = raw.find(json.dumps(vid).encode())
                    if start < 0:
                        continue
                    for ensure_ascii in (False, True):
                        old_b = json.dumps(line, ensure_ascii=ensure_ascii).encode("utf-8")
                        pos = raw.find(old_b, start)
                        if pos >= 0:
                            new_b = json.dumps(new_line, ensure_ascii=ensure_ascii).encode("utf-8")
                            out = raw[:pos] + new_b + raw[pos + len(old_b):]
                            json.loads(out)  # still valid
                            raw_caption.write_bytes(out)
                            return f"{vid}: {line!r} -> {new_line!r}"
    raise RuntimeError(f"no caption word to edit in {raw_caption}")


# ============================================================================================ measuring a run
def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def _tree_rss(proc) -> int:
    import psutil

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_build(cmd: list[str], cwd: Path, log_path: Path, sample_s: float = 0.5,
              timeout: float | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall, CPU (user + sys from ``os.wait4``), peak RSS (tree sum sampled, and ``ru_maxrss``), load."""
    import psutil

    load_before = _loadavg()
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        ps = psutil.Process(p.pid)
        peak = {"rss": 0, "load": load_before}
        done = threading.Event()

        timeline: list[tuple[float, int]] = []

        def sampler() -> None:
            while not done.is_set():
                rss = _tree_rss(ps)
                timeline.append((round(time.perf_counter() - t0, 2), rss >> 20))
                peak["rss"] = max(peak["rss"], rss)
                peak["load"] = max(peak["load"], _loadavg())
                done.wait(sample_s)

        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        killer = None
        if timeout:
            killer = threading.Timer(timeout, p.kill)
            killer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        th.join()
        if killer:
            killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
    maxrss = ru.ru_maxrss * 1024  # KiB on Linux
    return {"rc": p.returncode, "wall_s": wall, "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime,
            "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_tree_sampled": peak["rss"], "maxrss_one_process": maxrss,
            "peak_rss": max(peak["rss"], maxrss), "load_before": load_before, "load_after": _loadavg(),
            "load_max": peak["load"], "log": str(log_path),
            # (seconds, MiB) of the process tree, at most ~300 points: where in the build the memory goes
            "rss_timeline_mib": timeline[:: max(1, len(timeline) // 300)]}


def dir_usage(path: Path) -> dict[str, int]:
    files = size = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
            files += 1
    return {"bytes": size, "files": files}


def read_stats(release: Path) -> dict[str, Any]:
    try:
        return json.loads((release / "stats.json").read_text())
    except (OSError, ValueError):
        return {}


def _build_config(release: Path) -> dict[str, Any]:
    try:
        import yaml

        data = yaml.safe_load((release / "build_config.yaml").read_text()) or {}
        return data.get("config", data) if isinstance(data, dict) else {}
    except Exception:  # noqa: BLE001 - informational only
        return {}


def model_steps(step_names: list[str], cfg: dict[str, Any]) -> list[str]:
    """The steps whose time is model inference under this build's config (not the toolkit's own CPU)."""
    prefixes = list(ALWAYS_MODEL_PREFIXES)
    if cfg.get("transcript_format") == "asr" or cfg.get("media"):  # else ``transcribe`` only reads transcripts
        prefixes.append("transcribe")
    if str(cfg.get("llm", "")) not in ("replay",):
        prefixes.append("llm_steps")
    encoder = str(cfg.get("text_encoder", "minilm"))
    if not encoder.startswith("hash"):
        prefixes += ["stage1", "stage2"]
    return [n for n in step_names if n.startswith(tuple(prefixes)) and n not in ("stage1_labels",)]


_ROW_RE = re.compile(r"^(\S+)/(\S+)\s.*?\s(\d+(?:\.\d+)?)\s+(\d+)/(\d+)( \+fit)?\s*$")
_THIS_BUILD_RE = re.compile(r"^this build: (\d+) shard\(s\) computed(?: \((\d+) of their rows reused\))?, (\d+) reused"
                            r"(?:; global stages fitted: ([^;]+))?")
_WRITTEN_RE = re.compile(r"^written to .* in ([\d.]+) s \(pipelines ([\d.]+) s, release ([\d.]+) s\)")


def parse_summary(text: str) -> dict[str, Any]:
    """The end-of-build summary of the CLI's log (``builders.core.driver.format_summary``): per step the wall seconds
    of this run and ``cached/shards`` (``+fit``: a global stage's fit was reused), the "this build: N shard(s)
    computed, M reused; global stages fitted: ..." line, the pipelines / release seconds, and whether the release
    was found up to date (then it is not rewritten and its ``stats.json`` is the earlier build's)."""
    out: dict[str, Any] = {"steps": {}, "release_up_to_date": "is up to date" in text}
    for line in text.splitlines():
        m = _ROW_RE.match(line)
        if m:
            out["steps"][m.group(2)] = {"wall_s": float(m.group(3)), "cached_shards": int(m.group(4)),
                                        "shards": int(m.group(5)), "fit_cached": bool(m.group(6))}
            continue
        m = _THIS_BUILD_RE.match(line)
        if m:
            out["shards_computed"], out["shards_reused"] = int(m.group(1)), int(m.group(3))
            out["rows_reused"] = int(m.group(2) or 0)
            out["fits_ran"] = [x.strip() for x in (m.group(4) or "").split(",") if x.strip()]
            continue
        m = _WRITTEN_RE.match(line)
        if m:
            out["total_s"], out["pipelines_s"], out["release_s"] = map(float, m.groups())
    return out


def recomputed_from_log(log_path: Path) -> dict[str, Any]:
    """What a run recomputed, from its own log (stats.json may be an earlier build's: see :func:`parse_summary`)."""
    summ = parse_summary(Path(log_path).read_text(errors="replace"))
    steps = summ["steps"]
    if not steps:
        return {"source": "log (no summary found)", **summ}
    per = {n: s["shards"] - s["cached_shards"] for n, s in steps.items()}
    wall = {n: s["wall_s"] for n, s in steps.items()}
    shards = summ.get("shards_computed", sum(per.values()))
    return {"source": "log", "shards": shards, "total_shards": sum(s["shards"] for s in steps.values()),
            "per_step": {n: v for n, v in per.items() if v}, "fits_ran": summ.get("fits_ran", []),
            "rows_reused": summ.get("rows_reused", 0), "steps_wall_s": round(sum(wall.values()), 3),
            "slowest_steps": {n: round(w, 2) for n, w in sorted(wall.items(), key=lambda x: -x[1])[:4]},
            "pipelines_s": summ.get("pipelines_s"), "release_s": summ.get("release_s"),
            "release_up_to_date": summ["release_up_to_date"]}


def recomputed(stats: dict[str, Any]) -> dict[str, Any]:
    """What a rerun recomputed (``shards - cached_shards`` per step, the global stages whose fit ran) and the wall
    seconds of each step in this run (``wall_seconds``)."""
    steps = stats.get("steps") or {}
    per = {n: int(s.get("shards", 0)) - int(s.get("cached_shards", 0)) for n, s in steps.items()}
    fits = [n for n, s in steps.items() if s.get("fit") == "ran"]
    wall = {n: float(s.get("wall_seconds") or 0) for n, s in steps.items()}
    return {"shards": sum(per.values()), "total_shards": sum(int(s.get("shards", 0)) for s in steps.values()),
            "per_step": {n: v for n, v in per.items() if v}, "fits_ran": fits,
            "steps_wall_s": round(sum(wall.values()), 3),
            "slowest_steps": {n: round(w, 2) for n, w in sorted(wall.items(), key=lambda x: -x[1])[:4]},
            "pipelines_s": None, "release_s": None, "release_up_to_date": None}


def _note_failure(run: dict[str, Any], what: str, log) -> None:
    """A rerun that failed: keep the end of its log in the result (its stats.json is the previous build's)."""
    if run["rc"] != 0:
        run["error_tail"] = Path(run["log"]).read_text(errors="replace")[-3000:]
        log(f"  {what} exited {run['rc']}; the end of its log:\n{run['error_tail']}")


def _rerun(cmd: list[str], root: Path, tag: str, release: Path, sample_s: float, timeout: float | None,
           log) -> dict[str, Any]:
    """A rerun of ``cmd``: its measures, what it recomputed (from its own log), and whether it rewrote stats.json."""
    stats_path = release / "stats.json"
    before = stats_path.stat().st_mtime_ns if stats_path.exists() else None
    got = run_build(cmd, root, root / f"{tag}.log", sample_s, timeout)
    _note_failure(got, f"{tag} rerun", log)
    after = stats_path.stat().st_mtime_ns if stats_path.exists() else None
    got["stats_json_rewritten"] = after != before
    got["recomputed"] = recomputed_from_log(root / f"{tag}.log")
    if got["recomputed"]["source"] != "log":  # no summary in the log (-q, or a failed run): stats.json
        got["recomputed"] = {**recomputed(read_stats(release)),
                             "source": f"stats.json (rewritten by this run: {got['stats_json_rewritten']})"}
    got["recomputed_stats_json"] = recomputed(read_stats(release))  # for comparison: may be an earlier build's
    return got


def _secs(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f} s"


def _what(run: dict[str, Any]) -> str:
    rc = run["recomputed"]
    fmt = _secs
    rows = f" ({rc['rows_reused']} of their rows reused)" if rc.get("rows_reused") else ""
    return (f"recomputed {rc['shards']}/{rc['total_shards']} shards{rows} {rc['per_step']}, fits ran {rc['fits_ran']}; "
            f"pipelines {fmt(rc['pipelines_s'])}, release {fmt(rc['release_s'])}"
            + (" (up to date: not rewritten)" if rc["release_up_to_date"] else "")
            + f"; slowest steps {rc['slowest_steps']} [from {rc['source']}]")


# ============================================================================================ one size
def bench_one(corpus: str, n: int, root: Path, seed: int = 0, extra: list[str] | None = None,
              sample_s: float = 0.5, timeout: float | None = None, edit: bool = True, rerun: bool = True,
              log=print) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    inputs_dir, out, work = root / "inputs", root / "out", root / "work"
    t0 = time.perf_counter()
    load0 = _loadavg()
    if corpus == "howtostep":
        gen = make_howtostep(inputs_dir, n, seed)
    elif corpus == "marc":
        gen = make_marc_pages(inputs_dir, n, seed)
        if MARC_INPUT == "warc":  # issue 37: pages packed into WARC files, and a video side (tests/perf/scale_marc.py)
            gen = _scale_marc().warc_inputs(gen, inputs_dir, seed, apply_edit=_apply_marc_edit)
    elif corpus in MODULE_GENERATORS:
        file, func = MODULE_GENERATORS[corpus]
        gen = getattr(_load_scale_inputs(file), func)(inputs_dir, n, seed)
    else:
        raise ValueError(f"no generator for corpus {corpus!r}")
    gen_s = time.perf_counter() - t0
    input_usage = dir_usage(inputs_dir)
    cmd = [sys.executable, "-m", "builders.build", corpus, "--out", str(out), "--work-dir", str(work),
           *gen["args"], *(extra or []), "--workers", "1", "--no-progress"]
    log(f"[{corpus} n={n}] inputs in {gen_s:.1f} s ({input_usage['bytes'] / 1e6:.1f} MB, load {load0:.2f})")
    log("  " + " ".join(cmd))
    release = out / corpus
    res: dict[str, Any] = {"corpus": corpus, "n": n, "seed": seed, "command": cmd, "generate_s": round(gen_s, 2),
                           "inputs": input_usage, "root": str(root)}
    # the floor of any rerun: the CLI's start-up (imports, argument parsing) without a build
    res["cli_startup"] = run_build([sys.executable, "-m", "builders.build", corpus, "--help"], root,
                                   root / "startup.log", sample_s, timeout)
    log(f"  CLI start-up (--help): {res['cli_startup']['wall_s']:.1f} s wall, {res['cli_startup']['cpu_s']:.1f} s CPU")
    fresh = run_build(cmd, root, root / "fresh.log", sample_s, timeout)
    stats = read_stats(release)
    fresh["summary"] = recomputed_from_log(root / "fresh.log")
    res["fresh"] = fresh
    log(f"  fresh: rc {fresh['rc']}, {fresh['wall_s']:.1f} s wall, {fresh['cpu_s']:.1f} s CPU, "
        f"peak {fresh['peak_rss'] / 2**20:.0f} MiB, load {fresh['load_before']:.2f}->{fresh['load_after']:.2f} "
        f"(max {fresh['load_max']:.2f})")
    if fresh["rc"] != 0:
        res["error"] = f"fresh build exited {fresh['rc']}: see {fresh['log']}"
        log("  " + res["error"])
        log(Path(fresh["log"]).read_text(errors="replace")[-3000:])
        return res
    steps = stats.get("steps") or {}
    if corpus == "marc":
        res["em_fresh_s"] = _em_seconds(release, fresh)
    cfg = _build_config(release)
    res["config"] = {k: cfg.get(k) for k in ("llm", "text_encoder", "visual_features", "rounds", "labeler", "media",
                                                "transcript_format", "classifier", "aligner") if k in cfg}
    res["steps"] = {name: {"seconds": s.get("seconds"), "wall_seconds": s.get("wall_seconds"),
                           "rows_in": s.get("rows_in"), "kept": s.get("kept"), "shards": s.get("shards"),
                           "cached_shards": s.get("cached_shards"), "fit": s.get("fit", "")}
                    for name, s in steps.items()}
    res["work"] = dir_usage(work)
    res["release"] = dir_usage(release)
    mods = model_steps(list(steps), cfg)
    feat = [n for n in steps if n in FEATURE_STEPS]
    # stats.json times are wall-clock inside the build; on a shared machine the build gets only part of a core, so a
    # step's CPU is estimated as its wall seconds x the build's CPU share (CPU / wall, at most 1)
    share = min(1.0, fresh["cpu_s"] / max(fresh["wall_s"], 1e-9))
    model_s = share * sum(float(steps[k].get("wall_seconds") or 0) for k in mods)
    feat_s = share * sum(float(steps[k].get("wall_seconds") or 0) for k in feat)
    res["cpu_share"] = round(share, 3)
    res["model_steps"], res["feature_steps"] = mods, feat
    res["model_s"], res["features_s"] = round(model_s, 3), round(feat_s, 3)
    res["toolkit_cpu_s"] = round(max(0.0, fresh["cpu_s"] - model_s - feat_s), 3)
    res["per_video"] = {
        "wall_s": fresh["wall_s"] / n, "cpu_s": fresh["cpu_s"] / n, "toolkit_cpu_ms": 1000 * res["toolkit_cpu_s"] / n,
        "features_ms": 1000 * feat_s / n, "model_ms": 1000 * model_s / n,
        "work_mb": res["work"]["bytes"] / n / 1e6, "work_files": res["work"]["files"] / n,
        "release_kb": res["release"]["bytes"] / n / 1e3,
        "steps_ms": {k: 1000 * float(s.get("seconds") or 0) / n for k, s in steps.items()}}
    rows_out = {k: s.get("kept") for k, s in steps.items()}
    log(f"  work {res['work']['bytes'] / 1e6:.1f} MB / {res['work']['files']} files, release "
        f"{res['release']['bytes'] / 1e6:.2f} MB; rows kept per step {rows_out}")
    if rerun:
        cached = _rerun(cmd, root, "cached", release, sample_s, timeout, log)
        res["cached"] = cached
        log(f"  cached rerun: rc {cached['rc']}, {cached['wall_s']:.1f} s wall "
            f"({cached['wall_s'] / fresh['wall_s']:.1%} of fresh), {cached['cpu_s']:.1f} s CPU; {_what(cached)}")
    for key, apply in (gen.get("edits") or []) if edit else []:   # a module generator's edits, one rerun each
        what = apply()
        res[key] = _rerun(cmd, root, key, release, sample_s, timeout, log)
        res[key]["edit"] = what
        log(f"  {key} ({what}): rc {res[key]['rc']}, {res[key]['wall_s']:.1f} s wall "
            f"({res[key]['wall_s'] / fresh['wall_s']:.1%} of fresh), {res[key]['cpu_s']:.1f} s CPU; {_what(res[key])}")
    if edit and "edits" not in gen:
        if corpus == "howtostep":
            what = edit_one_caption(gen["raw_caption"], seed)
        elif callable(gen["edit"]):
            what = gen["edit"]()
        else:
            what = _apply_marc_edit(gen["edit"])
        edited = _rerun(cmd, root, "edit", release, sample_s, timeout, log)
        edited["edit"] = what
        res["edit_one"] = edited
        res["work_after_edit"] = dir_usage(work)
        log(f"  edit one ({what}): rc {edited['rc']}, {edited['wall_s']:.1f} s wall "
            f"({edited['wall_s'] / fresh['wall_s']:.1%} of fresh), {edited['cpu_s']:.1f} s CPU; {_what(edited)}")
        edited["em_s"] = _em_seconds(release, edited)
    if corpus == "marc" and "add_warc" in gen:
        res["marc"] = {"warc_files": gen["files"], "videos": gen["n_videos"], "em_fresh_s": res.get("em_fresh_s")}
        if edit:
            what = gen["add_warc"]()
            added = _rerun(cmd, root, "add_warc", release, sample_s, timeout, log)
            added["edit"] = what
            added["em_s"] = _em_seconds(release, added)
            res["add_warc"] = added
            log(f"  add one WARC file ({what}): rc {added['rc']}, {added['wall_s']:.1f} s wall "
                f"({added['wall_s'] / fresh['wall_s']:.1%} of fresh), {added['cpu_s']:.1f} s CPU, EM "
                f"{_secs(added['em_s'])}; {_what(added)}")
    return res


def _scale_marc():
    """tests/perf/scale_marc.py (WARC input and the video side of ``marc``), loaded beside this script."""
    spec = importlib.util.spec_from_file_location("procvid_scale_marc", HERE / "scale_marc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _em_seconds(release: Path, run: dict[str, Any]) -> float | None:
    """The seconds of the HMM+IBM1 EM fit in the build that just ran (``marc``: ``hmm_ibm1``'s fit, from the
    release's stats.json when this run wrote it), else None."""
    if run.get("stats_json_rewritten") is False:
        return None
    st = (read_stats(release).get("steps") or {}).get("hmm_ibm1") or {}
    return float(st.get("wall_seconds") or 0) if st.get("fit") == "ran" else None


# ============================================================================================ targets and projection
def _ok(value: float | None, limit: float, below: bool = True) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value <= limit if below else value >= limit


def across_sizes(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """Peak RSS growth and CPU-per-video drift from the smallest to the largest size, with their pass marks (none
    for one size)."""
    cross: dict[str, Any] = {"small": small["n"], "large": large["n"]}
    if large["n"] > small["n"]:
        cross["rss_growth"] = large["fresh"]["peak_rss"] / small["fresh"]["peak_rss"] - 1
        cross["cpu_per_video_drift"] = large["per_video"]["cpu_s"] / small["per_video"]["cpu_s"] - 1
        cross["pass"] = {"rss_within_25pct": _ok(cross["rss_growth"], TARGET_RSS_GROWTH),
                         "cpu_per_video_within_20pct": _ok(abs(cross["cpu_per_video_drift"]), TARGET_CPU_DRIFT)}
    return cross


def evaluate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Targets per (corpus, size) and across sizes, and the projection to HTM-370K."""
    out: dict[str, Any] = {}
    by_corpus: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "per_video" in r:
            by_corpus.setdefault(r["corpus"], []).append(r)
    for corpus, rs in by_corpus.items():
        rs = sorted(rs, key=lambda r: r["n"])
        sizes = {}
        for r in rs:
            fresh_wall = r["fresh"]["wall_s"]
            pv = r["per_video"]
            t = {
                "cached_share": r["cached"]["wall_s"] / fresh_wall if r.get("cached", {}).get("rc") == 0 else None,
                "edit_share": r["edit_one"]["wall_s"] / fresh_wall if r.get("edit_one", {}).get("rc") == 0 else None,
                # the same ratios in CPU seconds (less sensitive to other jobs on the machine; informative only)
                "cached_cpu_share": r["cached"]["cpu_s"] / r["fresh"]["cpu_s"] if "cached" in r else None,
                "edit_cpu_share": r["edit_one"]["cpu_s"] / r["fresh"]["cpu_s"] if "edit_one" in r else None,
                "work_mb_per_video": pv["work_mb"], "work_files_per_video": pv["work_files"],
                "toolkit_cpu_ms": pv["toolkit_cpu_ms"],
            }
            t["pass"] = {
                "cached_rerun_lt_5pct": _ok(t["cached_share"], TARGET_CACHED_SHARE),
                "edit_one_lt_10pct": _ok(t["edit_share"], TARGET_EDIT_SHARE),
                "work_mb_le_third": _ok(pv["work_mb"], TODAY_WORK_MB_PER_VIDEO / 3),
                "work_files_le_third": _ok(pv["work_files"], TODAY_WORK_FILES_PER_VIDEO / 3),
                "toolkit_cpu_le_50ms": _ok(pv["toolkit_cpu_ms"], TARGET_TOOLKIT_MS),
            }
            if corpus == "marc":
                m = marc_targets(r)
                t["pass"].update(m.pop("pass"))
                t.update(m)
            for key in ("edit_recipe",):   # a module generator's other edits (sieve_swap: one recipe step)
                if r.get(key, {}).get("rc") == 0:
                    t[f"{key}_share"] = r[key]["wall_s"] / fresh_wall
                    t["pass"][f"{key}_lt_10pct"] = _ok(t[f"{key}_share"], TARGET_EDIT_SHARE)
            sizes[r["n"]] = t
        small, large = rs[0], rs[-1]
        cross = across_sizes(small, large)
        # projection: CPU linear in N from the largest size; memory linear in N from the two largest sizes
        cpu_h = large["per_video"]["cpu_s"] * HTM_370K / 3600
        toolkit_h = large["per_video"]["toolkit_cpu_ms"] / 1000 * HTM_370K / 3600
        feat_h = large["per_video"]["features_ms"] / 1000 * HTM_370K / 3600
        if len(rs) >= 2 and rs[-1]["n"] > rs[-2]["n"]:
            a, b = rs[-2], rs[-1]
            slope = (b["fresh"]["peak_rss"] - a["fresh"]["peak_rss"]) / (b["n"] - a["n"])
            mem = b["fresh"]["peak_rss"] + max(0.0, slope) * (HTM_370K - b["n"])
            mem_note = f"linear from n={a['n']} and n={b['n']} ({slope / 1024:.1f} KiB/video)"
        else:
            mem = large["fresh"]["peak_rss"]
            mem_note = f"one size (n={large['n']}): taken as flat"
        work_gb = large["per_video"]["work_mb"] * HTM_370K / 1e3
        proj = {"from_n": large["n"], "cpu_hours": cpu_h, "toolkit_cpu_hours": toolkit_h, "features_cpu_hours": feat_h,
                "memory_gb": mem / 1e9, "memory_note": mem_note, "work_dir_gb": work_gb,
                "work_dir_files": large["per_video"]["work_files"] * HTM_370K,
                "release_gb": large["per_video"]["release_kb"] * HTM_370K / 1e6}
        proj["pass"] = {"cpu_lt_6h": _ok(cpu_h, TARGET_CPU_HOURS_370K), "memory_lt_4gb": _ok(mem / 1e9, TARGET_GB_370K)}
        out[corpus] = {"sizes": sizes, "across_sizes": cross, "projection_htm370k": proj}
        if corpus in MODULE_GENERATORS and hasattr(_load_scale_inputs(MODULE_GENERATORS[corpus][0]), "project"):
            out[corpus]["projection_paper"] = _load_scale_inputs(MODULE_GENERATORS[corpus][0]).project(rs)
    return out


def _mark(v: bool | None) -> str:
    return "-" if v is None else ("PASS" if v else "FAIL")


#: issue 37: the paper's crawl (3.2M recipes in Common Crawl pages), kept text recipes and videos
MARC_CRAWLED, MARC_KEPT_TEXT, MARC_VIDEOS = 3_200_000, 48_852, 77_550
MARC_PAGE_STEPS = ("list_recipe_pages", "read_recipe_pages", "recipe_instructions", "select_text_recipes",
                   "ingredient_terms")
MARC_VIDEO_STEPS = ("read_video_candidates", "dish_videos", "load_transcript", "chat_filter", "pick_videos",
                    "video_terms", "video_recipe")


def marc_targets(r: dict[str, Any]) -> dict[str, Any]:
    """Issue 37's targets of one ``marc`` size: one edited page and one added WARC file each cost at most the EM
    retraining (``hmm_ibm1`` in that rerun) plus 10 % of the fresh build (wall; CPU alongside); and the projection to
    the paper's 3.2M crawled recipes, 48,852 kept and 77,550 videos: page-side steps scale with pages, video-side steps
    with videos, the rest (pairs, EM, dish graphs, release, start-up) with kept text recipes."""
    f = r["fresh"]
    out: dict[str, Any] = {"pass": {}}
    for name in ("edit_one", "add_warc"):
        run = r.get(name)
        if not run or run.get("rc") != 0:
            continue
        em = run.get("em_s") or 0.0
        out[f"{name}_em_s"] = run.get("em_s")
        out[f"{name}_share"] = run["wall_s"] / f["wall_s"]
        out[f"{name}_beyond_em_share"] = (run["wall_s"] - em) / f["wall_s"]
        out["pass"][f"{name}_le_em_plus_10pct"] = _ok(out[f"{name}_beyond_em_share"], TARGET_EDIT_SHARE)
    steps = r.get("steps") or {}
    share = r.get("cpu_share") or 1.0
    sec = {k: share * float(s.get("seconds") or 0) for k, s in steps.items()}
    pages = r["n"]
    videos = (steps.get("video_recipe") or {}).get("kept") or 0
    kept = (steps.get("select_text_recipes") or {}).get("kept") or 0
    page_s = sum(v for k, v in sec.items() if k in MARC_PAGE_STEPS)
    video_s = sum(v for k, v in sec.items() if k in MARC_VIDEO_STEPS)
    rest_s = max(0.0, f["cpu_s"] - page_s - video_s)
    proj = page_s / pages * MARC_CRAWLED + (video_s / videos * MARC_VIDEOS if videos else 0.0) \
        + (rest_s / kept * MARC_KEPT_TEXT if kept else 0.0)
    out["projection_paper"] = {"cpu_hours": proj / 3600, "page_side_cpu_s_per_page": page_s / pages,
                               "video_side_cpu_s_per_video": video_s / videos if videos else None,
                               "rest_cpu_s_per_kept_text_recipe": rest_s / kept if kept else None,
                               "videos": videos, "kept_text": kept}
    return out


def print_table(results: list[dict[str, Any]], targets: dict[str, Any], log=print) -> None:
    for r in results:
        if "per_video" not in r:
            log(f"\n{r['corpus']} n={r['n']}: {r.get('error', 'no result')}")
            continue
        pv, f = r["per_video"], r["fresh"]
        t = targets[r["corpus"]]["sizes"][r["n"]]
        log(f"\n== {r['corpus']}  n={r['n']}  (load 1-min before {f['load_before']:.2f}, after {f['load_after']:.2f}, "
            f"max {f['load_max']:.2f})")
        rows = [
            ("fresh build wall", f"{f['wall_s']:.1f} s", f"{1000 * pv['wall_s']:.1f} ms/video", ""),
            ("  in the pipelines | writing the release", f"{_secs(f['summary'].get('pipelines_s'))}",
             f"{_secs(f['summary'].get('release_s'))}", "(the CLI's own summary)"),
            ("fresh build CPU (user+sys)", f"{f['cpu_s']:.1f} s", f"{1000 * pv['cpu_s']:.1f} ms/video", ""),
            ("  toolkit CPU (minus models, features)", f"{r['toolkit_cpu_s']:.1f} s",
             f"{pv['toolkit_cpu_ms']:.1f} ms/video", _mark(t["pass"]["toolkit_cpu_le_50ms"]) + " (<= 50 ms at 20k)"),
            ("  simulated features", f"{r['features_s']:.1f} s", f"{pv['features_ms']:.1f} ms/video", ""),
            ("  model steps " + ",".join(r["model_steps"]), f"{r['model_s']:.1f} s", f"{pv['model_ms']:.1f} ms/video",
             ""),
            ("peak RSS (tree, sampled | one process)", f"{f['peak_rss'] / 2**20:.0f} MiB",
             f"{f['peak_rss_tree_sampled'] / 2**20:.0f} | {f['maxrss_one_process'] / 2**20:.0f} MiB", ""),
            ("work dir", f"{r['work']['bytes'] / 1e6:.1f} MB, {r['work']['files']} files",
             f"{pv['work_mb']:.3f} MB, {pv['work_files']:.2f} files/video",
             _mark(t["pass"]["work_mb_le_third"]) + "/" + _mark(t["pass"]["work_files_le_third"])
             + " (<= 0.233 MB, 1.9 files)"),
            ("release", f"{r['release']['bytes'] / 1e6:.2f} MB, {r['release']['files']} files",
             f"{pv['release_kb']:.2f} kB/video", ""),
        ]
        if "cli_startup" in r:
            u = r["cli_startup"]
            rows.append(("CLI start-up alone (--help)", f"{u['wall_s']:.1f} s wall, {u['cpu_s']:.1f} s CPU",
                         f"{u['wall_s'] / f['wall_s']:.1%} of fresh", "(floor of any rerun)"))
        if "cached" in r:
            c = r["cached"]
            rows.append(("cached rerun" + (f" (EXIT {c['rc']})" if c["rc"] else ""),
                         f"{c['wall_s']:.1f} s wall, {c['cpu_s']:.1f} s CPU",
                         (f"{c['wall_s'] / f['wall_s']:.1%} of fresh (CPU {c['cpu_s'] / f['cpu_s']:.1%}), "
                          f"{c['recomputed']['shards']} shards, "
                          f"release {_secs(c['recomputed']['release_s'])}"),
                         _mark(t["pass"]["cached_rerun_lt_5pct"]) + " (< 5 %)"))
        if "edit_one" in r:
            e = r["edit_one"]
            rows.append(("edit one word" + (f" (EXIT {e['rc']})" if e["rc"] else ""),
                         f"{e['wall_s']:.1f} s wall, {e['cpu_s']:.1f} s CPU",
                         (f"{e['wall_s'] / f['wall_s']:.1%} of fresh (CPU {e['cpu_s'] / f['cpu_s']:.1%}), "
                          f"{e['recomputed']['shards']}/"
                          f"{e['recomputed']['total_shards']} shards, pipelines {_secs(e['recomputed']['pipelines_s'])}"
                          f", release {_secs(e['recomputed']['release_s'])}"),
                         _mark(t["pass"]["edit_one_lt_10pct"]) + " (< 10 %)"))
        for name, label in (("edit_one", "  edit one: EM (hmm_ibm1) | beyond EM"),
                            ("add_warc", "add one WARC file (one new page)")):
            if name not in r or f"{name}_share" not in t:
                continue
            e = r[name]
            rows.append((label, f"{e['wall_s']:.1f} s wall, {e['cpu_s']:.1f} s CPU",
                         f"{t[name + '_share']:.1%} of fresh; EM {_secs(t[name + '_em_s'])}, beyond EM "
                         f"{t[name + '_beyond_em_share']:.1%}; {e['recomputed']['shards']}/"
                         f"{e['recomputed']['total_shards']} shards",
                         _mark(t["pass"][f"{name}_le_em_plus_10pct"]) + " (<= EM + 10 %)"))
        if "projection_paper" in t:
            pp = t["projection_paper"]
            rows.append(("projected to 3.2M crawled / 48,852 kept / 77,550 videos", f"{pp['cpu_hours']:.1f} CPU-h",
                         f"{1000 * pp['page_side_cpu_s_per_page']:.1f} ms/page, "
                         f"{_secs(pp['video_side_cpu_s_per_video'])}/video, "
                         f"{_secs(pp['rest_cpu_s_per_kept_text_recipe'])}/kept recipe", ""))
        w0 = max(len(x[0]) for x in rows)
        w1 = max(len(x[1]) for x in rows)
        w2 = max(len(x[2]) for x in rows)
        for a, b, c, d in rows:
            log(f"  {a:<{w0}}  {b:>{w1}}  {c:<{w2}}  {d}")
        log("  per step (stats.json seconds, ms/video; wall this run):")
        for name, s in r["steps"].items():
            log(f"    {name:<28} {1000 * float(s['seconds'] or 0) / r['n']:9.2f} ms/video   "
                f"{float(s['wall_seconds'] or 0):8.2f} s   shards {s['shards']}"
                + (f"   fit {s['fit']}" if s["fit"] else ""))
    for corpus, t in targets.items():
        if t.get("projection_paper"):
            log(f"\n== {corpus}: " + "\n  ".join(t["projection_paper"]["lines"]))
        cross, proj = t["across_sizes"], t["projection_htm370k"]
        log(f"\n== {corpus}: across sizes and projection to HTM-370K ({HTM_370K:,} videos)")
        if "rss_growth" in cross:
            log(f"  peak RSS n={cross['large']} vs n={cross['small']}: {cross['rss_growth']:+.1%}  "
                f"{_mark(cross['pass']['rss_within_25pct'])} (within 25 %)")
            log(f"  CPU s/video n={cross['large']} vs n={cross['small']}: {cross['cpu_per_video_drift']:+.1%}  "
                f"{_mark(cross['pass']['cpu_per_video_within_20pct'])} (within 20 %)")
        else:
            log("  one size only: no growth figures")
        log(f"  projected from n={proj['from_n']}: {proj['cpu_hours']:.1f} CPU-hours "
            f"{_mark(proj['pass']['cpu_lt_6h'])} (< 6), of which toolkit {proj['toolkit_cpu_hours']:.1f} h and "
            f"simulated features {proj['features_cpu_hours']:.1f} h; memory {proj['memory_gb']:.2f} GB "
            f"{_mark(proj['pass']['memory_lt_4gb'])} (< 4; {proj['memory_note']}); work dir "
            f"{proj['work_dir_gb']:.0f} GB / {proj['work_dir_files']:,.0f} files; release {proj['release_gb']:.1f} GB")


# ============================================================================================ CLI and pytest
def default_tmp() -> Path:
    return Path(os.environ.get("BENCH_TMP") or tempfile.gettempdir())


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _dirty() -> list[str]:
    """Uncommitted changes of the code a build runs (the tree may be edited while the bench runs)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "builders", "loading_scripts", "cards"],
                             check=False, cwd=REPO, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines()]


def run(sizes: list[int], corpora: list[str], tmp: Path, seed: int = 0, keep: bool = False,
        extra: list[str] | None = None, sample_s: float = 0.5, timeout: float | None = None, edit: bool = True,
        rerun: bool = True, out: Path | None = None, log=print, bytecode: bool = True) -> dict[str, Any]:
    """Every size and corpus (:func:`bench_one`), the targets, the JSON result. ``bytecode``: the builds write and
    read Python's bytecode cache as an installed toolkit does (``PYTHONDONTWRITEBYTECODE`` is unset for them: with
    it, every build compiles the toolkit's ~150 modules again, 0.15 s of each rerun)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dirty_at_start = _dirty()
    base = Path(tempfile.mkdtemp(prefix=f"bench_scale-{stamp}-", dir=tmp))
    results = []
    no_bytecode = os.environ.get("PYTHONDONTWRITEBYTECODE")
    if bytecode:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        for n in sizes:
            for corpus in corpora:
                root = base / f"{corpus}-{n}"
                try:
                    bench = _own_module(corpus).bench_one if corpus in OWN_MODULES else bench_one
                    results.append(bench(corpus, n, root, seed, extra, sample_s, timeout, edit, rerun, log))
                finally:
                    if not keep:
                        shutil.rmtree(root, ignore_errors=True)
    finally:
        if no_bytecode is not None:
            os.environ["PYTHONDONTWRITEBYTECODE"] = no_bytecode
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            log(f"kept: {base}")
    targets = evaluate([r for r in results if r["corpus"] not in OWN_MODULES])
    print_table([r for r in results if r["corpus"] not in OWN_MODULES], targets, log)
    for corpus in dict.fromkeys(r["corpus"] for r in results if r["corpus"] in OWN_MODULES):
        own = [r for r in results if r["corpus"] == corpus]
        targets.update(_own_module(corpus).evaluate(own))
        _own_module(corpus).print_table(own, targets, log)
    doc = {"bench": "bench_scale", "timestamp": stamp, "commit": _git_commit(), "uncommitted": dirty_at_start,
           "pythonpath": os.environ.get("PYTHONPATH", ""),
           "python": sys.version.split()[0],
           "bytecode_cache": "written and read" if bytecode or no_bytecode is None else
                             "off (PYTHONDONTWRITEBYTECODE)",
           "cpus": os.cpu_count(), "sizes": sizes, "corpora": corpora, "seed": seed, "extra_args": extra or [],
           "results": results, "targets": targets}
    if out is None:
        out = tmp / "procvid-bench" / f"bench_scale-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    log(f"\nresult: {out}")
    doc["path"] = str(out)
    return doc


def test_scale_1000():
    """HowToStep at 1,000 videos: a cached rerun under 5 % and one edited caption word under 10 % of the fresh
    build (issue 19)."""
    doc = run([1000], ["howtostep"], default_tmp())
    r = doc["results"][0]
    assert "per_video" in r, r.get("error")
    t = doc["targets"]["howtostep"]["sizes"][1000]
    assert t["cached_share"] < TARGET_CACHED_SHARE, t
    assert t["edit_share"] < TARGET_EDIT_SHARE, t


def main(argv: list[str] | None = None) -> int:
    global MARC_INPUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="videos (marc: pages)")
    ap.add_argument("--corpus", nargs="+", default=list(DEFAULT_CORPORA),
                    choices=[*DEFAULT_CORPORA, *OWN_MODULES, *MODULE_GENERATORS])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", type=Path, default=None, help="where the folders go (default $BENCH_TMP or the temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep inputs, work directories, releases and logs")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="extra --set for every build (repeatable)")
    ap.add_argument("--sample", type=float, default=0.5, help="RSS/load sampling interval, seconds")
    ap.add_argument("--timeout", type=float, default=None, help="kill a build after this many seconds")
    ap.add_argument("--no-edit", action="store_true", help="skip the edit-one rerun")
    ap.add_argument("--no-rerun", action="store_true", help="skip the cached rerun")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE for the builds (default: unset, as in an installed toolkit)")
    ap.add_argument("--out", type=Path, default=None, help="JSON result path")
    ap.add_argument("--marc-input", choices=("warc", "pages"), default=MARC_INPUT,
                    help="marc: pages packed into WARC files with a video side (default), or a folder of pages")
    ap.add_argument("--json", action="store_true", help="print the JSON result at the end")
    ap.add_argument("--code", type=Path, default=None,
                    help="run the builds on the builders package of this folder (PYTHONPATH), e.g. an export of an "
                         "earlier commit: git archive <commit> | tar -x -C DIR (the generators use this tree)")
    args = ap.parse_args(argv)
    MARC_INPUT = args.marc_input
    tmp = args.tmp or default_tmp()
    if args.code:
        code = args.code.resolve()
        if not (code / "builders" / "build.py").exists():
            ap.error(f"--code {code}: no builders/build.py there")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
    tmp.mkdir(parents=True, exist_ok=True)
    extra = [x for s in args.sets for x in ("--set", s)]
    doc = run(args.sizes, args.corpus, tmp, args.seed, args.keep, extra, args.sample, args.timeout,
              not args.no_edit, not args.no_rerun, args.out, log=(lambda *a: print(*a, file=sys.stderr))
              if args.json else print, bytecode=not args.no_bytecode)
    if args.json:
        print(json.dumps(doc, default=str))
    ok = all("per_video" in r for r in doc["results"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
