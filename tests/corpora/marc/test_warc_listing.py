"""builders.corpora.marc.extraction: WARC input listed file by file (docs/corpora/marc.md, Inputs): a file whose size,
mtime and inode are unchanged is not read again, a new file (a new crawl segment) is listed alone, a damaged listing
is made again, and the rows are those of a listing without any cache."""

from __future__ import annotations

import shutil

from builders.corpora.marc import extraction
from builders.corpora.marc.extraction import RecipePagesSource
from builders.core.records import Count
from tests.corpora.marc.test_invalidation import SAMPLE_INPUTS


def _read(src: RecipePagesSource) -> list:
    return [x for x in src.read() if not isinstance(x, Count)]


def test_a_new_warc_file_is_listed_alone(tmp_path, monkeypatch):
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    shutil.copy(SAMPLE_INPUTS["warc"][0], crawl / "a.warc.gz")
    listed = []
    real = extraction._list_warc_file
    monkeypatch.setattr(extraction, "_list_warc_file", lambda path, name: listed.append(name) or real(path, name))
    cached = RecipePagesSource(warc=[str(crawl)])
    cached.cache_dir = tmp_path / "cache"
    first = _read(cached)
    assert listed == ["a.warc.gz"] and len(first) == 30
    assert _read(cached) == first and listed == ["a.warc.gz"]       # unchanged: from its listing

    shutil.copy(SAMPLE_INPUTS["warc"][0], crawl / "b.warc.gz")     # a new segment
    both = _read(cached)
    assert listed == ["a.warc.gz", "b.warc.gz"]
    assert both == _read(RecipePagesSource(warc=[str(crawl)]))      # the same rows as without a cache
    names = [r["warc_filename"] for r in both if isinstance(r, dict)]
    assert names.count("b.warc.gz") == names.count("a.warc.gz") == sum(isinstance(r, dict) for r in first) == 26
    assert all(r["_sha"] and not r["_sha"].startswith("!") for r in both if isinstance(r, dict))

    # a damaged listing is made again, and said
    listing = next(p for p in (tmp_path / "cache" / "warc_listing").glob("*.json") if not p.name.endswith(".key.json")
                   and b"a.warc.gz" in p.read_bytes())
    listing.write_bytes(listing.read_bytes().replace(b"https", b"httpz", 1))
    listed.clear()
    items = list(cached.read())
    assert listed == ["a.warc.gz"] and Count("warc_listing_damaged") in items
    assert [x for x in items if not isinstance(x, Count)] == both
