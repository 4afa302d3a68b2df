"""The ShowHowTo explorer finds the build's video files wherever the build ran: a build given absolute input paths
from another directory writes a page with the frames of the videos it read (its own resolved inputs, held in memory),
the release records the way back to them relative to itself (``manifest.json`` ``inputs_root``) and never an
absolute path, ``python -m builders.explore`` finds them again from any directory, ``--inputs DIR`` after a move, and
a recorded path that climbs out of its folder is not followed."""

from __future__ import annotations

import base64
import getpass
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from builders.explore import write_explorer
from builders.explore.__main__ import main as explore_main
from builders.explore.common import path_within
from builders.release.manifest import inputs_root

from .conftest import REPO

SAMPLE = REPO / "builders" / "samples" / "showhowto"
#: sample videos with transcripts and recorded LLM answers that the sample pipeline keeps (no ASR, no model)
KEPT = ("shwRoastVg1", "shwPancake1", "shwShelf001")
PLACEHOLDER = "were not found on this machine"


def _data(path: Path) -> dict[str, Any]:
    html = path.read_text(encoding="utf-8")
    return json.loads(html.split('id="explorer-data">', 1)[1].split("</script>", 1)[0])


def _inputs(folder: Path) -> Path:
    """A copy of the sample's inputs for the videos of ``KEPT`` (their manifest paths relative, as the sample's)."""
    folder.mkdir(parents=True)
    for name in ("videos", "transcripts"):
        shutil.copytree(SAMPLE / name, folder / name)
    for name in ("HowTo100M_v1.csv", "task_ids.csv", "llm_outputs.jsonl"):
        shutil.copy(SAMPLE / name, folder / name)
    lines = (SAMPLE / "manifest_reasons.csv").read_text(encoding="utf-8").splitlines()
    rows = [lines[0]] + [ln for ln in lines[1:] if ln.split(",", 1)[0] in KEPT and "(again)" not in ln]
    (folder / "manifest.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def _build(cwd: Path, out: Path, inputs: Path | str) -> Path:
    """``python -m builders.build showhowto`` run in ``cwd`` on ``inputs`` (a folder: absolute or relative to cwd)."""
    from builders.build import main

    i = Path(inputs)
    args = ["showhowto", "--manifest", str(i / "manifest.csv"), "--videos", str(i / "HowTo100M_v1.csv"),
            "--tasks", str(i / "task_ids.csv"), "--set", "llm=replay", "--set", f"llm_replay={i / 'llm_outputs.jsonl'}",
            "--test-tasks", "1", "--test-size", "1", "--min-task-seqs", "1", "--out", str(out),
            "--work-dir", str(out / ".work"), "--no-progress", "-q"]
    before = os.getcwd()
    os.chdir(cwd)
    try:
        assert main(args) == 0
    finally:
        os.chdir(before)
    return out / "showhowto"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The release of a build run from ``elsewhere/`` with absolute paths to ``inputs/``, written to ``out/``."""
    base = tmp_path_factory.mktemp("showhowto-media")
    inputs = _inputs(base / "inputs")
    (base / "elsewhere").mkdir()
    release = _build(base / "elsewhere", base / "out", inputs.resolve())
    return SimpleNamespace(base=base, inputs=inputs, release=release, page=(release / "explore.html").read_bytes())


def _frame_at(video: Path, t: float) -> Any:
    """The frame of the 5-fps sample ``video`` at ``t`` seconds, decoded here with PyAV (not by the explorer)."""
    import av

    with av.open(str(video)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    return frames[min(len(frames) - 1, round(t * 5))]


def _assert_frames(page: Path, inputs: Path) -> None:
    """Every sampled sequence of ``page`` shows a thumbnail for each step, and each is the video's frame at its
    keyframe time (mean colour within JPEG error), not a placeholder."""
    import numpy as np
    from PIL import Image

    videos = {ln.split(",")[0]: ln.split(",")[1] for ln in (inputs / "manifest.csv").read_text().splitlines()[1:]}
    items = _data(page)["items"]
    assert sorted(it["id"] for it in items) == sorted(KEPT)
    for it in items:
        assert it["image_source"] == "frames cut from the media", it["placeholder"]
        assert it["steps"] and all(s["img"] and s["img"].startswith("data:image/jpeg;base64,") for s in it["steps"])
        for s in it["steps"]:
            thumb = np.asarray(Image.open(io.BytesIO(base64.b64decode(s["img"].split(",", 1)[1]))).convert("RGB"))
            frame = _frame_at(inputs / videos[it["id"]], s["ft"])
            assert thumb.shape == frame.shape
            assert np.abs(thumb.astype(float).mean((0, 1)) - frame.astype(float).mean((0, 1))).max() < 12


def _no_local_path(text: str, *folders: Path) -> None:
    for f in folders:
        assert str(f) not in text and str(f.resolve()) not in text
    assert f"/{getpass.getuser()}/" not in text and "/home/" not in text


def test_the_build_page_shows_the_frames_of_the_videos_it_read(built):
    _assert_frames(built.release / "explore.html", built.inputs)
    man = json.loads((built.release / "manifest.json").read_text(encoding="utf-8"))
    assert man["config"]["manifest"] == "manifest.csv"
    assert man["inputs_root"] == "../../inputs"  # relative to the release folder
    assert (built.release / man["inputs_root"] / man["config"]["manifest"]).resolve() == \
        (built.inputs / "manifest.csv").resolve()
    for name in ("explore.html", "manifest.json", "build_config.yaml", "stats.json", "README.md", "report.html"):
        _no_local_path((built.release / name).read_text(encoding="utf-8"), built.base, built.inputs)


def test_the_build_page_in_the_browser(built, open_page, screens):
    page = open_page(built.release / "explore.html")
    rows = {r["sequence_id"]: r for r in pq.read_table(built.release / "sequences").to_pylist()}
    ids = page.page.locator("#items button.pick").evaluate_all("bs => bs.map(b => b.getAttribute('data-id'))")
    assert sorted(ids) == sorted(rows) == sorted(KEPT)
    for sid in ids:
        page.pick(sid)
        n = len(rows[sid]["steps"])
        assert page.count('figure[data-kind="frame"]') == n
        assert page.count('img[data-kind="thumb"]') == n
        assert page.count('[data-kind="placeholder"]') == 0 and page.count('[data-kind="no-images"]') == 0
        loaded = page.page.locator('img[data-kind="thumb"]').evaluate_all(
            "ims => ims.map(i => i.complete && i.naturalWidth > 0)")
        assert loaded == [True] * n
    page.shot(screens, "showhowto-absolute-inputs")
    assert page.errors == [] and page.dialogs == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in page.requests), page.requests


def test_the_explorer_rerun_from_another_directory_finds_the_media(built):
    """``python -m builders.explore <release>`` from a directory that is neither the build's nor the inputs': the
    recorded ``inputs_root`` leads to the files, and the page is the one the build wrote."""
    other = built.base / "other"
    other.mkdir(exist_ok=True)
    for target in (os.path.relpath(built.release, other), str(built.release)):
        (built.release / "explore.html").unlink()
        proc = subprocess.run([sys.executable, "-m", "builders.explore", target], cwd=other, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        _assert_frames(built.release / "explore.html", built.inputs)
        assert (built.release / "explore.html").read_bytes() == built.page
    assert not any(other.iterdir())


def test_a_copied_release_finds_the_media_with_inputs(built, tmp_path, monkeypatch, capsys):
    """A copy of the release elsewhere: its recorded way to the inputs leads nowhere (placeholders that say what to
    do); ``--inputs DIR`` names the folder the recorded paths are relative to."""
    copy = tmp_path / "deep" / "er" / "showhowto"
    shutil.copytree(built.release, copy)
    monkeypatch.chdir(tmp_path)
    assert explore_main([str(copy)]) == 0
    items = _data(copy / "explore.html")["items"]
    assert all(it["image_source"] == "none" and PLACEHOLDER in it["placeholder"] and "--inputs" in it["placeholder"]
               for it in items)
    assert explore_main([str(copy), "--inputs", str(built.inputs)]) == 0
    _assert_frames(copy / "explore.html", built.inputs)
    assert explore_main([str(copy), "--inputs", str(tmp_path / "absent")]) == 2
    assert "--inputs" in capsys.readouterr().err


def test_the_build_inputs_in_memory_come_first(built, tmp_path):
    """The release flow hands the explorer the build's own resolved paths: they find the media even when the
    release records no way to them (``inputs_root`` null)."""
    copy = tmp_path / "showhowto"
    shutil.copytree(built.release, copy)
    man = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    man["inputs_root"] = None
    (copy / "manifest.json").write_text(json.dumps(man), encoding="utf-8")
    write_explorer(copy)
    assert all(it["image_source"] == "none" for it in _data(copy / "explore.html")["items"])
    write_explorer(copy, inputs={"manifest": [str((built.inputs / "manifest.csv").resolve())]})
    _assert_frames(copy / "explore.html", built.inputs)
    _no_local_path((copy / "explore.html").read_text(encoding="utf-8"), built.base, built.inputs)


@pytest.mark.parametrize("recorded", [
    {"config_manifest": "../inputs/manifest.csv", "inputs_root": None},      # climbs out of --inputs / the cwd
    {"config_manifest": "manifest.csv", "inputs_root": "ABS"},               # an absolute recorded root
    {"config_manifest": "ABS", "inputs_root": None},                         # an absolute recorded manifest
])
def test_recorded_paths_that_escape_their_root_are_not_followed(built, tmp_path, monkeypatch, recorded):
    copy = tmp_path / "showhowto"
    shutil.copytree(built.release, copy)
    absolute = str((built.inputs / "manifest.csv").resolve())
    man = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    name = recorded["config_manifest"]
    man["config"]["manifest"] = absolute if name == "ABS" else name
    man["inputs_root"] = str(built.inputs.resolve()) if recorded["inputs_root"] == "ABS" else recorded["inputs_root"]
    (copy / "manifest.json").write_text(json.dumps(man), encoding="utf-8")
    # from the current directory and from --inputs, "../inputs/manifest.csv" is there: only its form keeps it out
    monkeypatch.chdir(built.base / "elsewhere")
    write_explorer(copy, inputs_root=built.base / "out")
    assert all(it["image_source"] == "none" for it in _data(copy / "explore.html")["items"])


def test_path_within():
    assert path_within("/r", "a/b.csv") == Path("/r/a/b.csv")
    for bad in ("", "../x.csv", "a/../../x.csv", "/etc/passwd", "C:/x.csv", "a\\..\\x.csv", "a\x00b"):
        assert path_within("/r", bad) is None, bad


def test_a_build_of_absolute_inputs_from_elsewhere_has_the_rows_of_one_from_the_inputs_folder(built):
    """Where the build ran and how the inputs were named change no row of the release (nor the recorded paths)."""
    again = _build(built.inputs, built.base / "out2", ".")
    for config in ("sequences",):
        assert pq.read_table(again / config).equals(pq.read_table(built.release / config))
    assert pq.read_table(again / "drops.parquet").equals(pq.read_table(built.release / "drops.parquet"))
    assert (again / "keyframes.json").read_bytes() == (built.release / "keyframes.json").read_bytes()
    a, b = (json.loads((r / "manifest.json").read_text(encoding="utf-8")) for r in (again, built.release))
    assert a["config"] == b["config"] and a["inputs"] == b["inputs"] and a["inputs_root"] == b["inputs_root"]
    assert (again / "explore.html").read_bytes() == built.page


def test_inputs_root_records_only_relative_names(tmp_path, monkeypatch):
    release = tmp_path / "out" / "showhowto"
    data = tmp_path / "data" / "sho"
    assert inputs_root(release, [str(data / "manifest.csv"), str(data / "lists" / "tasks.csv")]) == "../../data/sho"
    assert inputs_root(release, [str(data / "manifest.csv")]) == "../../data/sho"
    assert inputs_root(release, []) is None
    assert inputs_root(release, ["/no-such-top-folder/manifest.csv"]) is None  # only "/" in common
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    assert inputs_root(release, [str(tmp_path / "alice" / "manifest.csv")]) is None  # would name the user
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path / "homes" / "bob"))
    assert inputs_root(release, [str(tmp_path / "homes" / "carol" / "m.csv")]) is None  # above the home folder
    inside = tmp_path / "homes" / "bob"
    assert inputs_root(inside / "out" / "showhowto", [str(inside / "data" / "m.csv")]) == "../../data"
