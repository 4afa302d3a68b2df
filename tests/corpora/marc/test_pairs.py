"""The ``hmm_ibm1`` stage (builders/corpora/marc/pairs.py) trains its four models from pair shards on disk (issue 37):
the parameters and alignments are those of EM over the pairs held in memory bit for bit, one shard is resident at a
time, the workers map checked tables, and a damaged table is refitted by the build, never used."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from builders.core.errors import DamagedCache
from builders.core.orchestrate import fit_locally
from builders.core.records import Out
from builders.core.step import FitInputs
from builders.corpora.marc import em_files
from builders.corpora.marc.config import MarcConfig
from builders.corpora.marc.pairs import HmmIbm1Align, _directions
from builders.corpora.marc.pipeline import pipelines
from builders.models.tokens import Tokenizer
from builders.ops.hmm_ibm1 import HmmIbm1, HmmIbm1Config


class _Data:
    def __init__(self, rows):
        self._rows = rows

    def rows(self, columns=None):
        return [{k: r[k] for k in (columns or r) if k in r} for r in self._rows]


def _step() -> HmmIbm1Align:
    return next(s for p in pipelines(MarcConfig()) for s in p.steps if s.name == "hmm_ibm1")


def _inputs(shared_data):
    """Within-dish pairs of the real ARA recipes: even-numbered recipes of a dish play text, odd ones video, so the
    four models train (train split: every pair of the first two dishes; the third dish is the test split)."""
    from eval.benchmarks.ara_conllu import read_corpus

    corpus = read_corpus(shared_data / "marc_ara")
    text, videos, rows = [], [], []
    for d, dish in enumerate(corpus.dishes[:3]):
        split = "test" if d == 2 else "train"
        recipes = corpus.dish_recipes(dish)
        for i, r in enumerate(recipes):
            (videos if i % 2 else text).append({"split": split, "instructions": r.instruction_texts})
        for i in range(len(recipes)):
            for j in range(i + 1, len(recipes)):
                kind = {0: "text_text", 1: "text_video", 2: "video_video"}[i % 2 + j % 2]
                a, b = (j, i) if kind == "text_video" and i % 2 else (i, j)
                rows.append({"pair_id": f"{dish}:{i}|{j}", "split": split, "pair_type": kind,
                             "a_instructions": recipes[a].instruction_texts,
                             "b_instructions": recipes[b].instruction_texts})
    return rows, {"text": _Data(text), "videos": _Data(videos)}


def _in_memory(step: HmmIbm1Align, rows, side, cfg: HmmIbm1Config) -> dict[str, HmmIbm1]:
    """The four models as the stage trained them before issue 37: every train pair in a list, EM in memory."""
    tok = Tokenizer(step.tokens, step.spacy_model)
    counts = {"text": defaultdict(int), "video": defaultdict(int)}
    for name, modality in (("text", "text"), ("videos", "video")):
        for r in side[name].rows():
            if r["split"] == "train":
                for toks in tok(r["instructions"]):
                    for w in toks:
                        counts[modality][w] += 1
    words = {m: {w for w, c in counts[m].items() if c >= 1} for m in counts}
    vocabs = {"text_text": words["text"], "video_video": words["video"],
              "text_to_video": words["text"] | words["video"], "video_to_text": words["text"] | words["video"]}
    train = defaultdict(list)
    for r in rows:
        if r["split"] == "train":
            a, b = tok(r["a_instructions"]), tok(r["b_instructions"])
            fwd, bwd = _directions(r["pair_type"])
            train[fwd].append((a, b))
            train[bwd].append((b, a))
    return {name: HmmIbm1(cfg).fit(pairs, vocabulary={w: i for i, w in enumerate(sorted(vocabs[name]))})
            for name, pairs in train.items()}


@pytest.mark.parametrize("chunk_entries", [None, 20_000], ids=["one_shard", "many_shards"])
def test_fit_streams_the_pairs_and_equals_in_memory_em(chunk_entries, shared_data, tmp_path, monkeypatch):
    step = _step()
    cfg = HmmIbm1Config.best() if chunk_entries is None else HmmIbm1Config.best(chunk_entries=chunk_entries)
    monkeypatch.setattr(HmmIbm1Align, "_config", lambda self: cfg)
    stores: list[em_files.DiskPairShards] = []

    class Recording(em_files.DiskPairShards):
        def __init__(self, root):
            super().__init__(root)
            stores.append(self)

    monkeypatch.setattr("builders.corpora.marc.pairs.DiskPairShards", Recording)
    rows, side = _inputs(shared_data)
    state = fit_locally(step, FitInputs(_Data(rows), side, tmp_path / "fit"))
    assert set(state["names"]) == {"text_text", "text_to_video", "video_to_text", "video_video"}
    assert not (tmp_path / "fit" / "em_pairs").exists()  # the pair shards are working files of the fit
    assert all(s.max_resident_pairs <= s.max_shard_pairs for s in stores)
    if chunk_entries is None:
        assert all(len(s) == 1 for s in stores)
    else:
        assert all(len(s) > 2 and s.max_resident_pairs < s.pairs for s in stores)
    memory = _in_memory(step, rows, side, cfg)
    step.setup(state)
    models = step.state["models"]
    for name, m in memory.items():
        s = models[name]
        assert isinstance(s.t.base, np.memmap) and not s.t.flags.writeable  # the workers map the tables
        assert np.array_equal(s.keys, m.keys) and s.vocabulary == m.vocabulary
        assert np.array_equal(s.t, m.t) and list(s.jump.items()) == list(m.jump.items())
    info = json.loads((tmp_path / "fit" / "aligner_info.json").read_text())
    assert info["train_pairs"] == {n: len(v) for n, v in sorted(_train_counts(rows).items())}
    assert all(info["table_bytes"][n] > 0 for n in memory)
    # the alignments of every pair (both splits) are the in-memory models' alignments
    out = Out("hmm_ibm1")
    step.process(rows, out)
    assert not out.drops and len(out.rows) == len(rows)
    tok = Tokenizer(step.tokens, step.spacy_model)
    jobs = defaultdict(list)  # the batches process() aligns: per model, both directions in row order
    for i, r in enumerate(rows):
        fwd, bwd = _directions(r["pair_type"])
        a, b = tok(r["a_instructions"]), tok(r["b_instructions"])
        jobs[fwd].append(((i, "a_to_b"), a, b))
        jobs[bwd].append(((i, "b_to_a"), b, a))
    expected = {key: al.rows() for name, items in jobs.items()
                for (key, _, _), al in zip(items, memory[name].align([(s, t) for _, s, t in items]))}
    for i, r in enumerate(out.rows):
        for key in ("a_to_b", "b_to_a"):
            want, got = expected[(i, key)], r[key]
            assert got == want


def _train_counts(rows):
    out = defaultdict(list)
    for r in rows:
        if r["split"] == "train":
            fwd, bwd = _directions(r["pair_type"])
            out[fwd].append(1)
            out[bwd].append(1)
    return out


def test_setup_refuses_a_damaged_table(shared_data, tmp_path):
    step = _step()
    rows, side = _inputs(shared_data)
    state = fit_locally(step, FitInputs(_Data(rows), side, tmp_path))
    t = tmp_path / "model_video_video" / "t.npy"
    data = bytearray(t.read_bytes())
    data[len(data) // 2] ^= 0x01
    t.write_bytes(bytes(data))
    with pytest.raises(DamagedCache) as err:
        _step().setup(state)
    assert Path(err.value.path) == t


def test_repair_of_a_fit_artefact_makes_the_stage_fit_again(tmp_path):
    """core/repair.py: a damaged file under ``<stage>/_fit/`` removes the fit's marker, so the stage is refitted."""
    from builders.core.repair import Repairs

    fit = tmp_path / "pairs" / "01_hmm_ibm1-0123456789ab" / "_fit"
    table = fit / "artefacts" / "model_text_text" / "t.npy"
    table.parent.mkdir(parents=True)
    table.write_bytes(b"x")
    (fit / "_complete.json").write_text("{}")
    (fit / "state.json").write_text("{}")
    damaged = DamagedCache(table, "sha256 differs")
    assert Repairs(tmp_path).forget(damaged, damaged) == "pairs/01_hmm_ibm1-0123456789ab/_fit/artefacts/" \
                                                        "model_text_text/t.npy"
    assert not table.exists() and not (fit / "_complete.json").exists()


@pytest.mark.slow
def test_a_build_refits_a_damaged_table_and_releases_the_same_rows(tmp_path, capsys):
    from builders.build import main
    from tests.corpora.marc.test_build import tables

    work = tmp_path / "work"
    assert main(["marc", "--out", str(tmp_path / "a"), "--work-dir", str(work), "--no-progress", "-q"]) == 0
    first = tables(tmp_path / "a" / "marc")
    table = next(work.glob("pairs/01_hmm_ibm1-*/_fit/artefacts/model_text_text/t.npy"))
    data = bytearray(table.read_bytes())
    data[-5] ^= 0x10
    table.write_bytes(bytes(data))
    # a shard of the stage to redo (a killed build): its worker maps the tables, finds one damaged, the build refits
    (table.parents[3] / "part-00000.stats.json").unlink()
    capsys.readouterr()
    assert main(["marc", "--out", str(tmp_path / "b"), "--work-dir", str(work), "--no-progress", "-q"]) == 0
    assert "damaged cache file" in capsys.readouterr().err
    stats = json.loads((tmp_path / "b" / "marc" / "stats.json").read_text())
    assert stats["steps"]["hmm_ibm1"]["fit"] == "ran"
    assert tables(tmp_path / "b" / "marc") == first
