"""``python -m builders.explore <release folder | org/name> [--videos N] [--seed S]``: write ``explore.html``.

A local release folder gets ``explore.html`` inside it. A ShowHowTo release finds the build's video files through
the paths it records (docs/explorer.md); ``--inputs DIR`` names the folder they are relative to on this machine,
``--media DIR`` a folder of video files by id. A Hub dataset id (``org/name``, optionally ``--revision
vX.Y.Z``) is downloaded first (``huggingface_hub.snapshot_download``: Parquet shards, ``*.json``, the card) and the
page is written to ``--out`` (default ``./<name>-explore.html``), linking to the snapshot's files.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from . import CORPORA, DEFAULT_VIDEOS, write_explorer

_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+\Z")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m builders.explore", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("release", help="a release folder (e.g. ./howtostep) or a Hub dataset id org/name")
    p.add_argument("--videos", type=int, default=DEFAULT_VIDEOS,
                   help=f"items to embed (videos, sequences or recipe pairs; default {DEFAULT_VIDEOS})")
    p.add_argument("--seed", type=int, default=0, help="seed of the deterministic sample (default 0)")
    p.add_argument("--corpus", choices=CORPORA, help="the corpus (default: the one the folder names)")
    p.add_argument("--media", help="showhowto: a folder of <video_id>.<mp4|webm|mkv> to cut keyframes from")
    p.add_argument("--inputs", metavar="DIR",
                   help="showhowto: the folder holding the build's inputs, which the paths in manifest.json are "
                        "relative to (default: the folder manifest.json records relative to the release, then the "
                        "current directory)")
    p.add_argument("--out", help="where to write the page (default: <release>/explore.html)")
    p.add_argument("--revision", help="Hub id only: the version (tag or commit) to download")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.videos < 0:
        print("error: --videos must be >= 0", file=sys.stderr)
        return 2
    src = Path(args.release)
    out = args.out
    if not src.is_dir():
        if not _REPO.match(args.release):
            print(f"error: {args.release} is neither a release folder nor a Hub dataset id org/name", file=sys.stderr)
            return 2
        from huggingface_hub import snapshot_download

        try:
            src = Path(snapshot_download(args.release, repo_type="dataset", revision=args.revision,
                                         allow_patterns=["*.parquet", "*.json", "README.md", "report.html"]))
        except Exception as e:  # noqa: BLE001 - any Hub/network error is the user's to read, exit 2
            print(f"error: could not download {args.release}: {e}", file=sys.stderr)
            return 2
        out = out or f"{args.release.split('/')[-1]}-explore.html"
    if args.inputs is not None and not Path(args.inputs).is_dir():
        print(f"error: --inputs {args.inputs} is not a folder", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        path = write_explorer(src, corpus=args.corpus, videos=args.videos, seed=args.seed, media=args.media, out=out,
                              inputs_root=args.inputs)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB in {time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
