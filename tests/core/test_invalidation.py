"""Per-item invalidation (issue 19 item 2): an edit of one item's input reruns only the shards holding that item;
a refitted global stage redoes its shards; superseded stage folders are garbage-collected; the statistics tell the
work of this build apart from what it reused."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

import pytest

from builders.core.fingerprint import item_file_sha
from builders.core.orchestrate import run_pipelines
from builders.core.records import Out
from builders.core.runners import LocalRunner
from builders.core.step import FitInputs, Pipeline, Source, Step, input_path


@dataclass(frozen=True)
class Cfg:
    ids_file: str = ""
    texts: str = ""          # a directory of <id>.txt, one file an item
    scale: int = 1


@dataclass(eq=False)
class Ids(Source):
    """One row an id, read from a text file (one id a line)."""

    name = "read_ids"
    rows_carry_content = True
    ids_file: Path = input_path()

    def read(self) -> Iterator[dict[str, Any]]:
        for line in self.ids_file.read_text().split():
            yield {"id": line}


@dataclass(eq=False)
class ReadText(Step):
    """Reads each item's own file: a per-item input."""

    name = "read_text"
    texts: Path = input_path(per_item=True)
    calls: ClassVar[list[str]] = []

    def item_digest(self, rows, state, memo) -> str:
        h = hashlib.sha256()
        for r in rows:
            h.update(item_file_sha(self.texts / f"{r['id']}.txt", memo).encode())
        return h.hexdigest()

    def process(self, rows, out: Out) -> None:
        for r in rows:
            ReadText.calls.append(r["id"])
            p = self.texts / f"{r['id']}.txt"
            if not p.exists():
                out.drop(r["id"], "no_text")
                continue
            out.keep({**r, "words": len(p.read_text().split())})
            out.count("texts_read")


@dataclass(eq=False)
class Longest(Step):
    """A global stage: the largest word count over all items, times ``scale``."""

    name = "longest"
    scale: int = 1
    calls: ClassVar[list[str]] = []

    def fit(self, inputs: FitInputs) -> int:
        return max((r["words"] for r in inputs.data.rows(["words"])), default=0) * self.scale

    def process(self, rows, out: Out) -> None:
        for r in rows:
            Longest.calls.append(r["id"])
            out.keep({**r, "longest": self.state})


@dataclass(eq=False)
class Double(Step):
    name = "double"
    calls: ClassVar[list[str]] = []

    def process(self, rows, out: Out) -> None:
        for r in rows:
            Double.calls.append(r["id"])
            out.keep({**r, "double": 2 * r["words"]})


def _setup(tmp_path: Path, n: int = 12) -> Cfg:
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(n):
        (texts / f"v{i:02d}.txt").write_text(" ".join(["w"] * (i % 5 + 1)))
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(f"v{i:02d}" for i in range(n)))
    return Cfg(ids_file=str(ids), texts=str(texts))


def _pipes(cfg: Cfg, with_global: bool = False) -> list[Pipeline]:
    steps: list[Step] = [ReadText(texts=Path(cfg.texts)), Double()]
    if with_global:
        steps.append(Longest(scale=cfg.scale))
    return [Pipeline("items", Ids(ids_file=Path(cfg.ids_file)), steps, shard_size=4)]


def _run(cfg: Cfg, work: Path, **kw):
    for cls in (ReadText, Double, Longest):
        cls.calls = []
    return run_pipelines(_pipes(cfg, **kw), work, LocalRunner(), progress=False, log=lambda *_: None)


def _backdate(folder: Path) -> None:
    """Make the files older than the memo's racy window, as inputs that were not just written are."""
    import os
    import time

    old = time.time() - 60
    for p in folder.rglob("*"):
        os.utime(p, (old, old))


def test_editing_one_item_file_reruns_only_its_shard(tmp_path):
    cfg = _setup(tmp_path)
    _backdate(tmp_path)
    first = _run(cfg, tmp_path / "w")
    assert first.this_build()["shards_computed"] == 3 * 3  # source, read_text, double: 3 shards each
    assert sorted(ReadText.calls) == [f"v{i:02d}" for i in range(12)]

    again = _run(cfg, tmp_path / "w")
    assert ReadText.calls == [] and Double.calls == []
    assert again.this_build()["shards_computed"] == 0
    assert again.this_build()["counters"] == {}
    assert again.counters() == {"texts_read": 12}            # what the release's rows hold, replayed

    (tmp_path / "texts" / "v05.txt").write_text("one two three four five six seven")
    edited = _run(cfg, tmp_path / "w")
    assert sorted(ReadText.calls) == ["v04", "v05", "v06", "v07"]   # shard 1 only
    assert sorted(Double.calls) == ["v04", "v05", "v06", "v07"]
    assert edited.steps["read_text"].cached_shards == 2
    assert edited.this_build()["counters"] == {"texts_read": 4}
    rows = {r["id"]: r for r in edited.outputs["items"].rows()}
    assert rows["v05"]["words"] == 7 and rows["v05"]["double"] == 14
    # the stage folders are the same ones: an edit makes no new generation
    assert len(list((tmp_path / "w" / "items").glob("01_read_text-*"))) == 1


def test_removing_an_item_file_reruns_its_shard(tmp_path):
    cfg = _setup(tmp_path)
    _backdate(tmp_path)
    _run(cfg, tmp_path / "w")
    (tmp_path / "texts" / "v10.txt").unlink()
    res = _run(cfg, tmp_path / "w")
    assert sorted(ReadText.calls) == ["v08", "v09", "v10", "v11"]
    assert res.steps["read_text"].dropped == {"no_text": 1}


def test_editing_one_source_line_reruns_only_the_shards_it_moves(tmp_path):
    cfg = _setup(tmp_path)
    _backdate(tmp_path)
    _run(cfg, tmp_path / "w")
    ids = Path(cfg.ids_file)
    lines = ids.read_text().split()
    lines[9] = "v99"                                   # shard 2 (items 8..11) changes
    ids.write_text("\n".join(lines))
    res = _run(cfg, tmp_path / "w")
    assert res.steps["read_ids"].cached_shards == 0    # listed again, into the same folder
    assert sorted(ReadText.calls) == ["v08", "v10", "v11", "v99"]
    assert res.steps["read_text"].cached_shards == 2
    assert len(list((tmp_path / "w" / "items").glob("00_read_ids-*"))) == 1


def test_a_refitted_global_stage_redoes_every_shard(tmp_path):
    cfg = _setup(tmp_path)
    _backdate(tmp_path)
    _run(cfg, tmp_path / "w", with_global=True)
    assert {r["longest"] for r in _run(cfg, tmp_path / "w", with_global=True).outputs["items"].rows()} == {5}
    assert Longest.calls == []
    # one item gets longer: the fit changes, so every shard of the global stage is redone (not only shard 0)
    (tmp_path / "texts" / "v00.txt").write_text(" ".join(["w"] * 9))
    res = _run(cfg, tmp_path / "w", with_global=True)
    assert res.steps["longest"].fit == "ran"
    assert sorted(Longest.calls) == [f"v{i:02d}" for i in range(12)]
    assert sorted(ReadText.calls) == ["v00", "v01", "v02", "v03"]
    assert {r["longest"] for r in res.outputs["items"].rows()} == {9}
    assert res.this_build()["fits_ran"] == ["longest"]


def test_superseded_stage_folders_are_collected(tmp_path):
    cfg = _setup(tmp_path)
    work = tmp_path / "w"
    for scale in (1, 2, 3, 4):
        _run(Cfg(cfg.ids_file, cfg.texts, scale=scale), work, with_global=True)
    # this build's folder and the one generation used most recently before it
    assert len(list((work / "items").glob("03_longest-*"))) == 2
    assert len(list((work / "items").glob("01_read_text-*"))) == 1
    run_pipelines(_pipes(Cfg(cfg.ids_file, cfg.texts, scale=5), True), work, LocalRunner(), progress=False,
                  log=lambda *_: None, keep_generations=1)
    assert len(list((work / "items").glob("03_longest-*"))) == 1
    # switching back to the kept generation's config reuses it
    res = _run(Cfg(cfg.ids_file, cfg.texts, scale=5), work, with_global=True)
    assert res.steps["longest"].cached_shards == 3 and res.steps["longest"].fit == "cached"


def test_a_source_whose_rows_only_point_into_its_inputs_is_listed_into_a_new_folder(tmp_path):
    cfg = _setup(tmp_path)

    class PathsOnly(Ids):
        rows_carry_content = False

    def pipes():
        return [Pipeline("items", PathsOnly(ids_file=Path(cfg.ids_file)), [ReadText(texts=Path(cfg.texts))], shard_size=4)]

    run_pipelines(pipes(), tmp_path / "w", LocalRunner(), progress=False, log=lambda *_: None)
    Path(cfg.ids_file).write_text(Path(cfg.ids_file).read_text() + "\nv12")
    ReadText.calls = []
    res = run_pipelines(pipes(), tmp_path / "w", LocalRunner(), progress=False, log=lambda *_: None)
    assert res.steps["read_text"].cached_shards == 0 and len(ReadText.calls) == 13
    assert len(list((tmp_path / "w" / "items").glob("00_read_ids-*"))) == 2   # the earlier generation is kept


@dataclass(eq=False)
class LongestKept(Longest):
    """:class:`Longest` whose fit also appends to an artefact file: it sees what the previous fit left only when
    the step declares ``fit_updates_artefacts``."""

    name = "longest_kept"

    def fit(self, inputs: FitInputs) -> dict:
        log = inputs.artefact_dir / "fits.txt"
        before = log.read_text() if log.is_file() else ""
        log.write_text(before + "fit\n")
        return {"longest": super().fit(inputs), "fits_seen": before.count("fit") + 1}


@pytest.mark.parametrize("keeps", [False, True])
def test_a_refit_keeps_its_artefacts_only_when_the_step_updates_them_itself(tmp_path, monkeypatch, keeps):
    """``fit_updates_artefacts`` (the raw-caption split, re-split where the file changed): a refit in the same stage
    folder starts from the previous fit's artefacts; any other step's refit starts from an empty folder."""
    monkeypatch.setattr(LongestKept, "fit_updates_artefacts", keeps)
    cfg = _setup(tmp_path)
    _backdate(tmp_path)

    def run():
        pipes = [Pipeline("items", Ids(ids_file=Path(cfg.ids_file)), [ReadText(texts=Path(cfg.texts)),
                                                                      LongestKept()], shard_size=4)]
        return run_pipelines(pipes, tmp_path / "w", LocalRunner(), progress=False, log=lambda *_: None)

    first = run()
    assert first.fits["longest_kept"].state["fits_seen"] == 1
    (tmp_path / "texts" / "v00.txt").write_text(" ".join(["w"] * 9))
    res = run()
    assert res.steps["longest_kept"].fit == "ran"
    assert res.fits["longest_kept"].artefact_dir == first.fits["longest_kept"].artefact_dir
    state = res.fits["longest_kept"].state
    assert (state["longest"], state["fits_seen"]) == (9, 2 if keeps else 1)
    assert {r["longest"]["longest"] for r in res.outputs["items"].rows()} == {9}
