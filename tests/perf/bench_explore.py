"""Benchmark of the corpus explorer (``builders.explore``) on a 20,000-video release: time to write ``explore.html``
and its size.

A synthetic release folder is written directly with pyarrow in the declared schemas of ``loading_scripts``
(``tests/explore/synthetic.py``: 1,000-row row groups as the release writer makes them; no build runs): howtostep
with 100 narrations, 12 steps and 2 dropped steps a video; sieve_swap with 100 ASR segments a video (a quarter
kept); showhowto with 6 key steps and their JPEG keyframes (``images`` config); marc with 20,000 text-video pairs of
10 instructions. Writing the release is not timed; ``write_explorer`` (default sample of 200 items) is, in a fresh
process state per corpus (the Release object is new each time; imports are warm).

    python tests/perf/bench_explore.py                       # 20,000 items, every corpus
    python tests/perf/bench_explore.py --videos 2000 --corpus howtostep --keep
    python -m pytest tests/perf/bench_explore.py -s -p no:cacheprovider --override-ini addopts=

The pytest function asserts the issue's target: each page is written in under ``MAX_SECONDS`` and is under 5 MB.
Each page is then opened in headless Chromium (when installed) and the time to its first rendered item is printed.
Results go to ``<temp>/procvid-bench/bench_explore-<n>-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: the issue's targets: "takes seconds" and "a page under 5 MB" at 20,000 videos
MAX_SECONDS = 10.0
MAX_BYTES = 5_000_000
CORPORA = ("howtostep", "sieve_swap", "showhowto", "marc")


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "n/a"


def open_seconds(pages: list[Path]) -> dict[str, float]:
    """Seconds from navigation to the first item rendered (``body[data-ready]``) of each page in headless Chromium
    (the system browser, driven by Playwright); {} when either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {}
    if not Path("/usr/bin/chromium").is_file():
        return {}
    from tests.explore.conftest import CHROMIUM_ARGS

    out = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for page_path in pages:
            page = b.new_page()
            t0 = time.perf_counter()
            page.goto(page_path.resolve().as_uri())
            page.wait_for_selector('body[data-ready="1"]', timeout=30000)
            out[page_path.parent.name] = round(time.perf_counter() - t0, 3)
            page.close()
        b.close()
    return out


def run(n: int = 20_000, corpora: tuple[str, ...] = CORPORA, sample: int = 200, tmp: str | None = None,
        keep: bool = False) -> dict[str, Any]:
    """Write each corpus's synthetic release of ``n`` items, then time ``write_explorer`` on it."""
    from builders.explore import write_explorer
    from tests.explore.synthetic import WRITERS

    root = Path(tempfile.mkdtemp(prefix="bench_explore-", dir=tmp))
    results: dict[str, Any] = {"items": n, "sample": sample, "python": platform.python_version(),
                               "cpus": os.cpu_count(), "runs": {}}
    pages = []
    try:
        for corpus in corpora:
            t0 = time.perf_counter()
            release = WRITERS[corpus](root / corpus, n)
            gen = time.perf_counter() - t0
            parquet = sum(p.stat().st_size for p in release.rglob("*.parquet"))
            load_before = _loadavg()
            t0 = time.perf_counter()
            path = write_explorer(release, videos=sample)
            secs = time.perf_counter() - t0
            results["runs"][corpus] = {"seconds": round(secs, 3), "bytes": path.stat().st_size,
                                       "release_parquet_bytes": parquet, "generate_seconds": round(gen, 1),
                                       "loadavg_before": load_before, "loadavg_after": _loadavg()}
            pages.append(path)
            print(f"{corpus:<11} {n:>7,} items  release {parquet / 1e6:7.1f} MB  explore.html {secs:6.2f} s  "
                  f"{path.stat().st_size / 1e6:5.2f} MB   (load {_loadavg()})", flush=True)
        for corpus, secs in open_seconds(pages).items():
            results["runs"][corpus]["open_seconds"] = secs
            print(f"{corpus:<11} opens in Chromium in {secs:.2f} s")
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    out = Path(tempfile.gettempdir()) / "procvid-bench" / (
        f"bench_explore-{n}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"result: {out}")
    return results


def test_explore_20000_videos_in_seconds_under_5mb():
    res = run(20_000, tmp=os.environ.get("BENCH_TMP"))
    for corpus, r in res["runs"].items():
        assert r["seconds"] < MAX_SECONDS, (corpus, r)
        assert r["bytes"] < MAX_BYTES, (corpus, r)
        assert r.get("open_seconds", 0) < 3.0, (corpus, r)  # "opens in a second" (with slack for a loaded machine)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--videos", type=int, default=20_000, help="items in the synthetic release (default 20,000)")
    p.add_argument("--corpus", action="append", choices=CORPORA, help="repeatable; default every corpus")
    p.add_argument("--sample", type=int, default=200, help="items the page embeds (default 200)")
    p.add_argument("--tmp", help="folder for the synthetic releases (default: the system temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the synthetic releases and pages")
    a = p.parse_args(argv)
    run(a.videos, tuple(a.corpus or CORPORA), a.sample, a.tmp, a.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
