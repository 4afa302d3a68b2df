"""Synthetic HowTo100M-shaped inputs for scale measurements of the HowToStep builder (issue 19; ARCHITECTURE.md
"Scale": measure at 1,000 and 20,000 items).

:func:`make_howtostep_inputs` writes, under ``root``:

* ``HowTo100M_v1.csv`` (``video_id,category_1,category_2,rank,task_id``) and ``task_ids.csv`` (tab-separated
  ``task_id``, ``task_name``), the two HowTo100M metadata files (paper 000 §4.1 builds on HowTo100M);
* ``raw_caption.json``: ``{vid: {"start": [...], "end": [...], "text": [...]}}`` as HowTo100M's file, 100-200 lowercase,
  unpunctuated YouTube-ASR caption lines a video (2-10 words each, about 2.7 s apart, each line ending after the next
  one starts), made of instructional English with stop words (so the TAN language and length filters keep them);
* ``llm_replay.jsonl``: one recorded LLM answer per (video, chunk) as :class:`builders.models.llm.ReplayBackend` reads
  it (``{"video_id", "chunk_index", "raw_output", "prompt_id"}``): the chunks are cut exactly as the pipeline cuts
  them (``builders.ops.sentencify.narrations_from_transcript`` on the captions, then ``chunk_size``-sentence chunks),
  and each answer is a numbered list of 3-6 steps (paper 000 supp. Table 6, ``howtostep_v3``), each step a run of
  words of its chunk so that Stage 1 has something to match.

Everything is seeded (``seed``): the same call writes byte-identical files. It returns the paths and the CLI
arguments of a build on them (``args``: hash text encoders, a replayed LLM, simulated features, ``rounds=0``, so
that no model is loaded and the build measures the toolkit itself)::

    from tests.perf.scale_inputs import make_howtostep_inputs
    inputs = make_howtostep_inputs(Path("/tmp/in"), 1000)
    subprocess.run([sys.executable, "-m", "builders.build", "howtostep", "--out", "/tmp/out",
                    "--work-dir", "/tmp/work", *inputs["args"]], check=True)

or from a shell: ``python tests/perf/scale_inputs.py ROOT N [--seed S]`` (prints the build command).
"""

from __future__ import annotations

import argparse
import json
import shlex
import string
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]

__all__ = ["make_howtostep_inputs", "build_args", "video_ids", "caption_lines"]

#: the prompt whose answers the replay file holds (the two_stage labeler's, spec §3.4)
PROMPT_ID = "howtostep_v3"
CHUNK_SIZE = 10  # HowToStepConfig.chunk_size default
TASKS = [(11967, "Make Pancakes"), (16815, "Clean a Bathroom Sink"), (23256, "Change a Bike Tire"),
         (44047, "Plant Tomatoes"), (53193, "Bake Sourdough Bread"), (71001, "Paint a Wooden Chair"),
         (82230, "Fix a Leaking Tap"), (95512, "Make Guacamole"), (101022, "Knit a Scarf"),
         (120345, "Install a Ceiling Fan")]
CATEGORIES = [("Food and Entertaining", "Recipes"), ("Home and Garden", "Cleaning"),
              ("Cars & Other Vehicles", "Bicycles"), ("Home and Garden", "Gardening"),
              ("Food and Entertaining", "Baking"), ("Hobbies and Crafts", "Woodwork"),
              ("Home and Garden", "Plumbing"), ("Food and Entertaining", "Recipes"),
              ("Hobbies and Crafts", "Knitting"), ("Home and Garden", "Electrical")]

_VERBS = ["add", "take", "put", "cut", "mix", "pour", "turn", "place", "remove", "check", "hold", "press", "wipe",
          "stir", "fold", "tighten", "loosen", "spread", "measure", "slide", "pull", "push", "clean", "attach",
          "sprinkle", "whisk", "chop", "rinse", "screw", "sand", "paint", "water", "dig", "knead", "heat", "cover"]
_NOUNS = ["bowl", "pan", "flour", "water", "sugar", "butter", "dough", "brush", "screw", "bolt", "wheel", "tire",
          "soil", "seed", "pot", "chair", "paint", "tap", "valve", "wrench", "sink", "towel", "needle", "yarn",
          "blade", "board", "oven", "lid", "tray", "salt", "onion", "garlic", "lemon", "avocado", "wire", "bracket",
          "edge", "corner", "handle", "surface", "mixture", "layer", "side", "top", "bottom", "piece", "hole"]
_ADJS = ["little", "big", "small", "hot", "warm", "cold", "dry", "wet", "clean", "nice", "whole", "same", "other",
         "next", "first", "last", "good", "fresh", "thin", "thick", "soft", "right", "left", "new", "old"]
_FILLERS = ["so", "okay", "now", "and then", "alright", "you know", "basically", "so now", "just", "really",
            "so what we're going to do is", "as you can see", "like this", "there you go", "and", "right"]
_TEMPLATES = [
    "{f} we are going to {v} the {a} {n}",
    "{f} {v} the {n} into the {n2}",
    "you want to {v} it with the {n}",
    "make sure the {n} is {a} before you {v} it",
    "{f} i'm just going to {v} a {a} {n} on the {n2}",
    "this is the {n} that we {v} first",
    "{v} it all the way around the {n}",
    "{f} let it sit there for about a minute or so",
    "then you {v} the {n} on top of the {n2}",
    "{f} that is how you {v} the {n}",
    "and you have to {v} the {n} with your hands",
    "it should look {a} like this {f}",
    "i like to use a {a} {n} for this",
    "{f} we'll {v} the {n} and the {n2} together",
    "thanks for watching and don't forget to subscribe",
    "{f} the {n} should be {a} enough now",
]


def video_ids(n_videos: int, seed: int = 0) -> list[str]:
    """``n_videos`` distinct 11-character YouTube-style ids (``[A-Za-z0-9_-]``), in generation order."""
    rng = np.random.default_rng([seed, 1])
    alphabet = np.array(list(string.ascii_letters + string.digits + "-_"))
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n_videos:
        vid = "".join(alphabet[rng.integers(0, len(alphabet), 11)])
        if vid not in seen and not vid.startswith("-"):  # a leading dash reads as an option on some command lines
            seen.add(vid)
            out.append(vid)
    return out


def _sentence(rng: np.random.Generator) -> list[str]:
    t = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]

    def pick(xs: list[str]) -> str:
        return xs[int(rng.integers(len(xs)))]

    text = t.format(f=pick(_FILLERS), f2=pick(_FILLERS), v=pick(_VERBS), n=pick(_NOUNS), n2=pick(_NOUNS),
                    a=pick(_ADJS))
    return text.split()


def caption_lines(rng: np.random.Generator, n_lines: int) -> dict[str, list[Any]]:
    """One video's raw captions (HowTo100M ``raw_caption.json`` value): ``n_lines`` lines of 6-14 words cut from a
    stream of spoken sentences, lowercase and unpunctuated; line i starts about 2.7 s after line i-1 and ends after
    line i+1 starts (YouTube auto-captions overlap), times rounded to 0.01 s as in the released file."""
    words: list[str] = []
    sizes = rng.integers(6, 15, n_lines)
    while len(words) < int(sizes.sum()):
        words += _sentence(rng)
    texts, pos = [], 0
    for k in sizes:
        texts.append(" ".join(words[pos:pos + int(k)]))
        pos += int(k)
    gaps = rng.uniform(1.5, 4.0, n_lines)
    starts = np.round(np.concatenate([[rng.uniform(0.0, 5.0)], gaps[:-1]]).cumsum(), 2)
    ends = np.round(np.append(starts[1:], starts[-1] + gaps[-1]) + rng.uniform(0.3, 2.0, n_lines), 2)
    return {"start": [float(s) for s in starts], "end": [float(e) for e in ends], "text": texts}


def _answer(rng: np.random.Generator, chunk_words: list[str]) -> str:
    """A ``howtostep_v3``-style answer: 3-6 numbered steps, each 4-9 consecutive words of the chunk (capitalised)."""
    n = int(rng.integers(3, 7))
    lines = ["Here are the steps:"]
    for k in range(n):
        size = int(rng.integers(4, 10))
        a = int(rng.integers(0, max(1, len(chunk_words) - size)))
        step = " ".join(chunk_words[a:a + size]) or "mix the flour"
        lines.append(f"{k + 1}. {step[:1].upper()}{step[1:]}")
    return "\n".join(lines)


def _chunks(caps: dict[str, list[Any]], chunk_size: int) -> list[list[str]]:
    """The words of each ``chunk_size``-sentence chunk of a video, cut as the pipeline cuts them (spec §3.2-§3.3)."""
    from builders.ops.sentencify import narrations_from_transcript

    segs = list(zip(caps["text"], caps["start"], caps["end"]))
    res = narrations_from_transcript("htm_raw", segs)
    sents = [t for t, _, _ in res.sentences]
    return [" ".join(sents[i:i + chunk_size]).split() for i in range(0, len(sents), chunk_size)]


def build_args(paths: dict[str, Path]) -> list[str]:
    """CLI arguments of a model-free HowToStep build on the generated inputs (the work of the toolkit itself)."""
    return ["--videos", str(paths["videos"]), "--tasks", str(paths["tasks"]),
            "--transcripts", str(paths["transcripts"]), "--transcript-format", "htm_raw",
            "--set", "llm=replay", "--set", f"llm_replay={paths['llm_replay']}",
            "--set", "visual_features=simulated", "--set", "rounds=0",
            "--set", "text_encoder=hash:64", "--set", "nasva_text_encoder=hash:64"]


def make_howtostep_inputs(root: Path, n_videos: int, seed: int = 0, chunk_size: int = CHUNK_SIZE
                          ) -> dict[str, Any]:
    """Write ``n_videos`` synthetic HowTo100M videos under ``root`` (see the module docstring).

    Returns ``{"videos", "tasks", "transcripts", "llm_replay": Path, "args": list[str], "video_ids": list[str]}``;
    ``args`` are the ``python -m builders.build howtostep`` arguments (add ``--out``, ``--work-dir``).
    """
    if n_videos < 1:
        raise ValueError("n_videos must be >= 1")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    ids = video_ids(n_videos, seed)
    rng = np.random.default_rng([seed, 2])
    paths = {"videos": root / "HowTo100M_v1.csv", "tasks": root / "task_ids.csv",
             "transcripts": root / "raw_caption.json", "llm_replay": root / "llm_replay.jsonl"}
    with open(paths["tasks"], "w", encoding="utf-8") as f:
        f.write("".join(f"{tid}\t{name}\n" for tid, name in TASKS))
    with open(paths["videos"], "w", encoding="utf-8") as f:
        f.write("video_id,category_1,category_2,rank,task_id\n")
        for rank, vid in enumerate(ids):
            k = int(rng.integers(len(TASKS)))
            c1, c2 = CATEGORIES[k]
            f.write(f"{vid},{c1},{c2},{rank % 50 + 1},{TASKS[k][0]}\n")
    with open(paths["transcripts"], "w", encoding="utf-8") as cf, \
            open(paths["llm_replay"], "w", encoding="utf-8") as rf:
        cf.write("{")
        for i, vid in enumerate(ids):
            caps = caption_lines(rng, int(rng.integers(100, 201)))
            cf.write(("" if i == 0 else ", ") + json.dumps(vid) + ": " + json.dumps(caps))
            for ci, words in enumerate(_chunks(caps, chunk_size)):
                rec = {"video_id": vid, "chunk_index": ci, "raw_output": _answer(rng, words), "prompt_id": PROMPT_ID}
                rf.write(json.dumps(rec) + "\n")
        cf.write("}")
    return {**paths, "args": build_args(paths), "video_ids": ids}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("root", type=Path)
    p.add_argument("n_videos", type=int)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    inputs = make_howtostep_inputs(a.root, a.n_videos, a.seed)
    cmd = [sys.executable, "-m", "builders.build", "howtostep", "--out", str(a.root / "out"), "--work-dir",
           str(a.root / "work"), *inputs["args"]]
    print(shlex.join(cmd))
    return 0


if __name__ == "__main__":
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    sys.exit(main())
