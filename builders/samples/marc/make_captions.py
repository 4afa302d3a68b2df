"""Write the sample's timed transcripts and YouCook2-format annotations from the hand-written lines of
``marc_caption_lines.py`` and ``youcook2_caption_lines.py`` (next to this script).

Usage (from anywhere)::

    python builders/samples/marc/make_captions.py            # rewrites the four files next to this script
    python builders/samples/marc/make_captions.py --out DIR  # writes them into DIR instead

Outputs (formats of spec ``marc.md`` §2.3 and §2.4):

- ``raw_caption.json``: HowTo100M raw captions ``{video_id: {"text": [...], "start": [...], "end": [...]}}`` of the
  candidate videos in ``video_candidates.jsonl`` (all but ``Wb0Ne6tJk5L``, which has no transcript);
- ``youcook2_annotations.json``: ``{"database": {video_id: {"duration", "subset", "recipe_type", "video_url",
  "annotations": [{"segment": [s, e], "id", "sentence"}]}}}`` with integer-second segments;
- ``youcook2_raw_caption.json``: raw captions of those YouCook2-format videos;
- ``youcook2_label_foodtype.csv``: ``code,name`` of the 8 made-up recipe types, no header (like YouCook2's
  ``label_foodtype.csv``).

Every line was written by hand for this project (CC0-1.0); none comes from YouTube, HowTo100M or YouCook2. Only
the timestamps are computed, deterministically, from each line's word count (about 2.7 words per second, at
least 1.5 s a line; 0.25 s after a chat line and 1.0-3.4 s after a content line, while the cook works; plus the
pauses written as ``[+N]``). In the source lists a line
starting with ``C|`` is chat (greeting, sponsor, tasting, subscribe); other lines are recipe content. The marker is
documentation only and is removed from the output. YouCook2 segments span their content lines plus 2 s before and
3 s after, rounded outwards to whole seconds, with at least 1 s of silence between a segment and the chat around it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

if __package__:  # imported as builders.samples.marc.make_captions
    from .marc_caption_lines import MARC_VIDEOS
    from .youcook2_caption_lines import RECIPE_TYPES, YOUCOOK2_VIDEOS
else:  # run as a script (its folder is sys.path[0])
    from marc_caption_lines import MARC_VIDEOS
    from youcook2_caption_lines import RECIPE_TYPES, YOUCOOK2_VIDEOS

HERE = Path(__file__).resolve().parent
WORDS_PER_SECOND = 2.7
MIN_LINE_SECONDS = 1.5
GAP_SECONDS = 0.25  # after a chat line (people chat without pausing)
SEGMENT_MARGIN = 1.0  # silence between a YouCook2 segment and a neighbouring chat line
SEGMENT_PAD = (2, 3)  # seconds of silent cooking a YouCook2 segment spans before its first / after its last line
EMPTY_LINE_SECONDS = 3.0
_PAUSE = re.compile(r"^\[\+(\d+(?:\.\d+)?)\]\s*")


def _parse(line: str) -> tuple[float, str, bool]:
    """``(pause before the line, text, is chat)``; the ``[+N]`` pause and the ``C|`` chat marker are removed."""
    pause = 0.0
    match = _PAUSE.match(line)
    if match:
        pause = float(match.group(1))
        line = line[match.end():]
    chat = line.startswith("C|")
    return pause, line[2:] if chat else line, chat


def _seconds(text: str) -> float:
    words = len(text.split())
    return EMPTY_LINE_SECONDS if words == 0 else max(MIN_LINE_SECONDS, words / WORDS_PER_SECOND)


class _Clock:
    """Lays lines out one after another from ``t``; content lines are followed by a working pause."""

    def __init__(self, t: float) -> None:
        self.t = t
        self.n = 0

    def line(self, text: str, pause: float = 0.0, chat: bool = False) -> tuple[float, float]:
        start = self.t + pause
        end = start + _seconds(text)
        self.t = end + (GAP_SECONDS if chat else 1.0 + (self.n * 37 % 5) * 0.6)
        self.n += 1
        return round(start, 2), round(end, 2)


def _caption(lines: list[tuple[float, float, str]]) -> dict[str, list]:
    return {"text": [t for _s, _e, t in lines], "start": [s for s, _e, _t in lines],
            "end": [e for _s, e, _t in lines]}


def marc_raw_captions() -> dict[str, dict[str, list]]:
    out = {}
    for video_id, source in MARC_VIDEOS.items():
        clock = _Clock(0.4)
        lines = []
        for raw in source:
            pause, text, chat = _parse(raw)
            start, end = clock.line(text, pause, chat or not text)
            lines.append((start, end, text))
        out[video_id] = _caption(lines)
    return out


def youcook2() -> tuple[dict[str, dict], dict[str, dict[str, list]]]:
    """``(annotation database, raw captions)`` of the YouCook2-format videos."""
    database: dict[str, dict] = {}
    captions: dict[str, dict[str, list]] = {}
    for video_id, (recipe_type, subset, items) in YOUCOOK2_VIDEOS.items():
        clock = _Clock(0.6)
        lines: list[tuple[float, float, str]] = []
        annotations = []
        for item in items:
            if isinstance(item, str):
                pause, text, chat = _parse(item)
                lines.append((*clock.line(text, pause, chat), text))
                continue
            sentence, content = item
            seg_start = math.ceil(clock.t + SEGMENT_MARGIN)
            clock.t = seg_start + SEGMENT_PAD[0]
            seg_lines = [(*clock.line(text), text) for text in content]
            lines.extend(seg_lines)
            segment = [seg_start, math.ceil(seg_lines[-1][1] + SEGMENT_PAD[1])]
            annotations.append({"segment": segment, "id": len(annotations), "sentence": sentence})
            clock.t = segment[1] + SEGMENT_MARGIN
        duration = round(lines[-1][1] + 6.0, 2)
        database[video_id] = {"duration": duration, "subset": subset, "recipe_type": recipe_type,
                              "video_url": f"https://www.youtube.com/watch?v={video_id}",
                              "annotations": annotations}
        captions[video_id] = _caption(lines)
    return {"database": database}, captions


def _dump(obj: dict, path: Path) -> None:
    """One JSON object, one top-level entry per line (YouCook2: one video per line inside ``database``)."""
    def body(d: dict) -> str:
        return ",\n".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in d.items())

    if list(obj) == ["database"]:
        text = '{"database": {\n' + body(obj["database"]) + "\n}}\n"
    else:
        text = "{\n" + body(obj) + "\n}\n"
    path.write_text(text, encoding="utf-8")


def write_all(out_dir: Path = HERE) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    annotations, yc_captions = youcook2()
    files = [(marc_raw_captions(), out_dir / "raw_caption.json"),
             (annotations, out_dir / "youcook2_annotations.json"),
             (yc_captions, out_dir / "youcook2_raw_caption.json")]
    for obj, path in files:
        _dump(obj, path)
    labels = out_dir / "youcook2_label_foodtype.csv"
    labels.write_text("".join(f"{code},{name}\n" for code, name in RECIPE_TYPES.items()), encoding="utf-8")
    return [path for _obj, path in files] + [labels]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help=f"output folder (default {HERE})")
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
