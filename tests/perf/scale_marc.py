"""MARC inputs at scale for ``tests/perf/bench_scale.py --corpus marc`` (issue 37 item 6): the made-up recipe pages of
``bench_scale.make_marc_pages`` packed into gzipped WARC files (the Common Crawl layout: one gzip member a record, a
``response`` record a page), and a video side of one video per 3 pages (``video_candidates.jsonl`` and HowTo100M-style
``raw_caption.json`` transcripts), trained on the bundled sample's YouCook2-format annotations.

:func:`warc_inputs` turns the page generator's result into the inputs of a build (``args``) and two changes a rerun
measures: ``edit()`` (one word of one page's instruction, its WARC file written again) and ``add_warc()`` (a new WARC
file, a new crawl segment, holding one new page of an existing dish). Deterministic for a seed. Every page, URL, video
id and caption line is made up.
"""

from __future__ import annotations

import io
import json
import math
import random
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "builders" / "samples" / "marc"
PAGES_PER_WARC = 250
VIDEOS_PER_PAGE = 1 / 3
CRAWL_START = datetime(2024, 2, 20, 9, 30, 0, tzinfo=UTC)
_CANONICAL = re.compile(r'<link rel="canonical" href="([^"]+)">')
_TITLE = re.compile(r"<h1>([^<]*)</h1>")
_STEP = re.compile(r"<li>([^<]*)</li>")
_WORD = re.compile(r"\w+")
_CHAT = ["hey guys welcome back to my kitchen", "today we are making one of my favourite dinners",
         "if you are new here make sure to subscribe", "this video is sponsored by a made up meal kit",
         "let me know in the comments what you think", "mmm that smells so good already",
         "okay let's taste it oh wow that is delicious", "thanks so much for watching see you next time"]


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def page_url(html: str) -> str:
    m = _CANONICAL.search(html)
    if not m:
        raise ValueError("a generated page without a canonical link")
    return m.group(1)


def _record(writer: Any, url: str, body: bytes, when: datetime) -> None:
    from warcio.statusandheaders import StatusAndHeaders

    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                       ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
    rid = f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url + '#' + when.isoformat())}>"
    rec = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                    warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                                       "WARC-Record-ID": rid})
    writer.write_record(rec)


def write_warc(path: Path, pages: list[Path], start: int = 0) -> Path:
    """``pages`` as one ``.warc.gz`` (a gzip member a record), dated from ``start`` seconds after the crawl's start."""
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for k, p in enumerate(pages):
        html = p.read_text(encoding="utf-8")
        _record(writer, page_url(html), html.encode("utf-8"), CRAWL_START + timedelta(seconds=start + 7 * k))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    return path


def pack_warc(pages_dir: Path, out_dir: Path, per_file: int = PAGES_PER_WARC) -> dict[Path, list[Path]]:
    """The pages of ``pages_dir`` (name order) packed ``per_file`` a file into ``out_dir/segment-NNNNN.warc.gz``."""
    pages = sorted(pages_dir.glob("*.html"))
    files: dict[Path, list[Path]] = {}
    for i in range(0, len(pages), per_file):
        chunk = pages[i:i + per_file]
        files[write_warc(out_dir / f"segment-{i // per_file:05d}.warc.gz", chunk, start=60 * i)] = chunk
    return files


def _caption_line(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def make_video_side(root: Path, pages_dir: Path, seed: int = 0,
                    per_page: float = VIDEOS_PER_PAGE) -> dict[str, Path]:
    """``video_candidates.jsonl`` and ``raw_caption.json`` for one video per 3 pages: each dish (casefolded title
    words, as the builder names it) gets ``ceil(pages / 3)`` candidates in rank order, each a transcript of chat lines
    around the content lines of one of the dish's recipes (spoken: lowercase, no punctuation, 2.7 words a second).
    Dishes of one page get candidates too (the builder finds no such dish: they are unused, as searches are)."""
    rng = random.Random(seed + 37)
    by_dish: dict[str, list[tuple[str, list[str]]]] = {}
    for p in sorted(pages_dir.glob("*.html")):
        html = p.read_text(encoding="utf-8")
        m = _TITLE.search(html)
        if not m or 'lang="en"' not in html:
            continue
        title = _unescape(m.group(1))
        steps = [_unescape(s) for s in _STEP.findall(html.split("<h2>Instructions</h2>", 1)[-1])]
        by_dish.setdefault("_".join(_WORD.findall(title.casefold())), []).append((title, steps))
    candidates, captions = [], {}
    n = 0
    for dish, recipes in sorted(by_dish.items()):
        for rank in range(1, max(1, math.ceil(len(recipes) * per_page)) + 1):
            n += 1
            vid = f"v{seed % 100:02d}{n:08d}"[:11]
            title, steps = recipes[(rank - 1) % len(recipes)]
            candidates.append({"dish_id": dish, "query": f"{title} recipe", "rank": rank, "video_id": vid,
                               "title": f"{title} | easy weeknight recipe"})
            lines = [rng.choice(_CHAT[:3])]
            for s in steps:
                lines.append(_caption_line(s))
                if rng.random() < 0.25:
                    lines.append(rng.choice(_CHAT[3:6]))
            lines += [rng.choice(_CHAT[5:7]), _CHAT[7]]
            t, start, end = 0.4, [], []
            for line in lines:
                d = max(1.5, len(line.split()) / 2.7)
                start.append(round(t, 2))
                end.append(round(t + d, 2))
                t += d + rng.uniform(0.25, 2.0)
            captions[vid] = {"text": lines, "start": start, "end": end}
    videos, transcripts = root / "video_candidates.jsonl", root / "raw_caption.json"
    videos.write_text("".join(json.dumps(c) + "\n" for c in candidates), encoding="utf-8")
    transcripts.write_text(json.dumps(captions), encoding="utf-8")
    return {"videos": videos, "transcripts": transcripts, "n_videos": len(captions)}


def warc_inputs(gen: dict[str, Any], root: Path, seed: int = 0, per_file: int = PAGES_PER_WARC,
                apply_edit: Callable[[dict[str, Any]], str] | None = None) -> dict[str, Any]:
    """The page generator's result ``gen`` (``bench_scale.make_marc_pages``) as WARC input with a video side.

    Returns ``{"args", "warc", "files", "n_videos", "edit", "add_warc"}``: ``edit()`` applies ``gen["edit"]`` to its
    page (``apply_edit``) and writes that page's WARC file again; ``add_warc()`` writes a new segment holding one new
    page (a copy of a page of the largest dish under a new URL, one instruction changed)."""
    root = Path(root)
    warc_dir = root / "warc"
    files = pack_warc(gen["pages"], warc_dir, per_file)
    side = make_video_side(root, gen["pages"], seed)
    args = ["--warc", str(warc_dir), "--videos", str(side["videos"]), "--transcripts", str(side["transcripts"]),
            "--youcook2", str(SAMPLE / "youcook2_annotations.json"),
            "--youcook2-transcripts", str(SAMPLE / "youcook2_raw_caption.json")]

    def edit() -> str:
        page = Path(gen["edit"]["file"])
        what = apply_edit(gen["edit"]) if apply_edit else ""
        for path, pages in files.items():
            if page in pages:
                write_warc(path, pages, start=60 * per_file * int(path.name[8:13]))
                return f"{what}; {path.name} written again"
        raise RuntimeError(f"{page} is in no WARC file")

    def add_warc() -> str:
        source = Path(gen["edit"]["file"])
        html = source.read_text(encoding="utf-8")
        url = page_url(html)
        new_url = url.rstrip("/") + "-new-segment/"
        new_html = html.replace(url, new_url).replace(" minutes", " minutes at most")
        new_page = root / "segment_pages" / "new-segment-page.html"
        new_page.parent.mkdir(parents=True, exist_ok=True)
        new_page.write_text(new_html, encoding="utf-8")
        path = write_warc(warc_dir / f"segment-{len(files):05d}.warc.gz", [new_page], start=86400)
        return f"{path.name}: one new page ({new_url})"

    return {"args": args, "warc": warc_dir, "files": len(files), "n_videos": side["n_videos"], "edit": edit,
            "add_warc": add_warc}
