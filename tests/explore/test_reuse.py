"""Items of the explorer page kept from an earlier page (``builders.explore.reuse``): with the parts a release was
written from, the page is the page made from scratch, and only the items whose rows sit in parts made since (or whose
parts are gone) are made again."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builders.explore import render_explorer
from builders.explore.reuse import ItemReuse
from builders.release.parts import PART_SPLIT, write_part

from .synthetic import vid, write_config, write_howtostep

CONFIGS = ("steps", "narrations", "dropped_steps")
N, PER_PART = 60, 20


def _parts(folder: Path, tag: str, configs=CONFIGS, without: dict | None = None) -> dict[str, list[Path]]:
    """Parts of ``PER_PART`` videos each for every config (their id column and split only: what ``ItemReuse``
    reads); ``tag`` names them, as a part key would; ``without`` leaves ids out of a config's parts."""
    out: dict[str, list[Path]] = {}
    for c in configs:
        out[c] = []
        for k in range(N // PER_PART):
            ids = [vid(i) for i in range(k * PER_PART, (k + 1) * PER_PART) if vid(i) not in (without or {}).get(c, ())]
            path = folder / c / f"{k:05d}-{tag if isinstance(tag, str) else tag[c][k]}.arrow"
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                write_part(path, pa.table({"video_id": ids, PART_SPLIT: ["train"] * len(ids)}))
            out[c].append(path)
    return out


def _ids(html: str) -> list[str]:
    return [i["id"] for i in json.loads(html.split('id="explorer-data">', 1)[1].split("</script>", 1)[0])["items"]]


@pytest.fixture
def release(tmp_path):
    return write_howtostep(tmp_path / "rel", N, seed=4, narrations=20, steps=6)


def _render(root: Path, reuse: ItemReuse | None = None) -> str:
    return render_explorer(root, corpus="howtostep", videos=30, seed=1, reuse=reuse)


def _kept(monkeypatch) -> list[int]:
    counts: list[int] = []
    real = ItemReuse.load

    def load(self, *a, **k):
        got = real(self, *a, **k)
        counts.append(len(got))
        return got

    monkeypatch.setattr(ItemReuse, "load", load)
    return counts


def _rewrite(root: Path, config: str, change) -> None:
    """Rewrite one config's shard of the synthetic release with ``change`` applied to its rows (a list)."""
    from loading_scripts.howtostep import FEATURES

    rows = pq.read_table(root / config).to_pylist()
    write_config(root, config, "train", FEATURES[config], change(rows))


def test_the_page_with_kept_items_is_the_page_made_from_scratch(release, tmp_path, monkeypatch):
    kept = _kept(monkeypatch)
    record, parts = tmp_path / "cache" / "explore-items.json", _parts(tmp_path / "parts", "a")
    page = _render(release)
    assert _render(release, ItemReuse(record, parts)) == page and kept == [0]  # nothing recorded yet
    assert _render(release, ItemReuse(record, parts)) == page and kept == [0, 30]  # every item kept

    edited = _ids(page)[3]  # a video the page shows; its narrations change, in a part made again
    k = int(edited[1:]) // PER_PART

    def edit(rows):
        for r in rows:
            if r["video_id"] == edited:
                r["narrations"][0]["text"] = "a new narration"
        return rows

    _rewrite(release, "narrations", edit)
    tags = {c: ["a"] * (N // PER_PART) for c in CONFIGS}
    tags["narrations"][k] = "b"
    parts = _parts(tmp_path / "parts", tags)
    fresh = _render(release)
    assert fresh != page and "a new narration" in fresh
    assert _render(release, ItemReuse(record, parts)) == fresh
    in_part = sum(1 for i in _ids(page) if int(i[1:]) // PER_PART == k)
    assert kept[-1] == 30 - in_part  # the items of the videos of the new part were made again


def test_an_item_whose_rows_left_a_part_that_is_gone_is_made_again(release, tmp_path, monkeypatch):
    record = tmp_path / "cache" / "explore-items.json"
    page = _render(release, ItemReuse(record, _parts(tmp_path / "parts", "a")))
    gone = _ids(page)[0]  # its dropped steps go; its dropped_steps part is made again without it
    _rewrite(release, "dropped_steps", lambda rows: [r for r in rows if r["video_id"] != gone])
    k = int(gone[1:]) // PER_PART
    tags = {c: ["a"] * (N // PER_PART) for c in CONFIGS}
    tags["dropped_steps"][k] = "c"
    parts = _parts(tmp_path / "parts", tags, without={"dropped_steps": {gone}})
    kept = _kept(monkeypatch)
    fresh = _render(release)
    assert fresh != page
    assert _render(release, ItemReuse(record, parts)) == fresh
    assert kept == [30 - sum(1 for i in _ids(page) if int(i[1:]) // PER_PART == k)]


def test_no_item_is_kept_across_another_layout_or_without_parts(release, tmp_path, monkeypatch):
    record = tmp_path / "cache" / "explore-items.json"
    parts = _parts(tmp_path / "parts", "a")
    _render(release, ItemReuse(record, parts))
    kept = _kept(monkeypatch)
    page = _render(release)
    # a config that was not written from parts: nothing is kept, and nothing recorded
    assert _render(release, ItemReuse(record, {c: parts[c] for c in ("steps", "narrations")})) == page
    record.write_bytes(b"not a pickle")
    assert _render(release, ItemReuse(record, parts)) == page
    assert kept == [0, 0]
