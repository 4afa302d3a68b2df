"""CSV quoting and headers (issue 20, docs/reason-codes.md): a quoted field holding a line break is data, read with
the csv module's own quoting (not an unterminated quote costing two junk drops a record); a header that names a
column twice is a one-line :class:`InputError` naming the column; a repeated manifest id keeps its first row; a
corrupt work shard's error names its file."""

from __future__ import annotations


import pytest

from builders.core import shards
from builders.core.errors import DamagedCache, InputError
from builders.sources import howto100m, video_manifest

from .conftest import check_conserved

MANIFEST_HEADER = "video_id,video_path,title,transcript_path\n"


def _vid(i: int) -> str:
    return f"vid{i:08d}"


def test_manifest_quoted_title_with_line_break_is_data(tmp_path):
    lines = [f'{_vid(i)},v{i}.mp4,"Toast, part {i}\nthe second line",t{i}.json\n' for i in range(15)]
    path = tmp_path / "manifest.csv"
    path.write_text(MANIFEST_HEADER + "".join(lines))
    rows, _, _ = check_conserved(video_manifest.read_manifest(path), 15, {}, kept=15)
    assert [r["video_id"] for r in rows] == [_vid(i) for i in range(15)]
    assert rows[3]["title"] == "Toast, part 3\nthe second line"


def test_manifest_unterminated_quote_costs_its_line_only(tmp_path):
    lines = [f"{_vid(i)},v{i}.mp4,Toast {i},\n" for i in range(10)]
    lines[4] = f'{_vid(4)},v4.mp4,"Toast 4,\n'
    path = tmp_path / "manifest.csv"
    path.write_text(MANIFEST_HEADER + "".join(lines))
    rows, _, _ = check_conserved(video_manifest.read_manifest(path), 10, {"malformed_manifest_row": 1}, kept=9)
    assert _vid(4) not in {r["video_id"] for r in rows}


def test_metadata_quoted_category_with_line_break_is_data(tmp_path):
    body = "".join(f'{_vid(i)},"Food and\nEntertaining",Recipes,{i},100\n' for i in range(15))
    path = tmp_path / "HowTo100M_v1.csv"
    path.write_text("video_id,category_1,category_2,rank,task_id\n" + body)
    rows, _, _ = check_conserved(howto100m.read_metadata(path), 15, {}, kept=15)
    assert rows[0]["category_1"] == "Food and\nEntertaining"


@pytest.mark.parametrize("reader", ["manifest", "metadata", "titles", "durations"])
def test_duplicate_header_column_is_an_input_error(tmp_path, reader):
    header, row = {"manifest": ("video_id,video_path,title,video_id", f"{_vid(1)},a.mp4,T,{_vid(2)}"),
                   "metadata": ("video_id,category_1,video_id,rank,task_id", f"{_vid(1)},Food,{_vid(2)},1,100"),
                   "titles": ("video_id,title,video_id", f"{_vid(1)},T,{_vid(2)}"),
                   "durations": ("video_id,duration,video_id", f"{_vid(1)},12,{_vid(2)}")}[reader]
    path = tmp_path / "in.csv"
    path.write_text(f"{header}\n{row}\n")
    call = {"manifest": lambda: list(video_manifest.read_manifest(path)),
            "metadata": lambda: howto100m.read_metadata(path), "titles": lambda: howto100m.read_titles(path),
            "durations": lambda: howto100m.read_durations(path)}[reader]
    with pytest.raises(InputError, match="'video_id' twice") as err:
        call()
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_showhowto_repeated_id_keeps_the_first_row(tmp_path):
    path = tmp_path / "manifest.csv"
    path.write_text(MANIFEST_HEADER + f"{_vid(1)},first.mp4,First,\n{_vid(2)},b.mp4,B,\n{_vid(1)},later.mp4,Later,\n")
    rows, drops, _ = check_conserved(video_manifest.read_manifest(path), 3, {"duplicate_video_id": 1}, kept=2)
    first = next(r for r in rows if r["video_id"] == _vid(1))
    assert first["title"] == "First" and first["video_path"].endswith("first.mp4")
    assert drops[0].item_id == _vid(1) and "line 4" in drops[0].detail


def test_corrupt_parquet_shard_error_names_the_file(tmp_path):
    """A shard that is not Parquet is a damaged cache naming the file (the build recomputes it: tests/core/
    test_repair.py), whether or not its stats record a digest; a shard that is not there is not found."""
    path = tmp_path / f"{shards.work_shard_name(3)}.parquet"
    path.write_bytes(b"PAR1 not really parquet")
    for digest in ("", "0" * 64):
        shards.write_json_file(tmp_path / f"{shards.work_shard_name(3)}.stats.json", {"digest": digest})
        for columns in (None, ["video_id"]):
            with pytest.raises(DamagedCache) as err:
                shards.read_rows(tmp_path, 3, columns)
            assert str(path) in str(err.value)
    with pytest.raises(FileNotFoundError):
        shards.read_rows(tmp_path, 4)
