"""The examples of docs/evaluation.md ("Examples for every protocol"): every protocol has one, its command runs from
the repository root, prints exactly what the page shows, and its metrics equal the values computed by hand below
from the tiny files of docs/examples/<protocol>/ (written for the docs, no benchmark data). ``recipe_pages`` runs on
the project's real fixture instead (``<fixtures>/recipe_pages``: the folder the ``shared_data`` fixture finds):
its reference values are checked in tests/eval/test_recipe_pages.py."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from eval_cli import REPO, run_cli, run_json

from eval.registry import all_protocols

PAGE = REPO / "docs" / "evaluation.md"
EXAMPLES = REPO / "docs" / "examples"
SECTION = "## Examples for every protocol"
#: the prefix of a page command's path into the real data fixtures (``tests/conftest.py``'s ``shared_data``); the docs
#: name no folder outside the repository (tests/test_docs.py), so the page writes it as a placeholder
SHARED = "<fixtures>/"
#: protocols whose example reads the real data fixtures instead of docs/examples/<protocol>/
ON_SHARED_DATA = {"recipe_pages": "recipe_pages"}
#: protocols whose text metrics run pycocoevalcap's Java scorers
JAVA = {"densevid", "soda"}
requires_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs `java` for pycocoevalcap's METEOR")


def _examples() -> dict[str, tuple[str, str]]:
    """``{protocol: (command, printed table)}`` from the section's ```bash / ```text block pairs."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else None]
    out: dict[str, tuple[str, str]] = {}
    for cmd, table in re.findall(r"```bash\n(.*?)\n```\s*```text\n(.*?)\n```", section, re.S):
        words = shlex.split(cmd)
        assert words[:2] == ["python", "eval/run.py"], cmd
        assert words[2] not in out, f"two examples for {words[2]}"
        out[words[2]] = (cmd, table)
    return out


EXAMPLES_ON_PAGE = _examples()


def _words(protocol: str, request: pytest.FixtureRequest) -> list[str]:
    """The page command of ``protocol`` as arguments; a path under ``<fixtures>/`` is taken from the fixture copy
    the tests use (``shared_data``: skipped without one, failed under ``CI``)."""
    words = shlex.split(EXAMPLES_ON_PAGE[protocol][0])
    if any(w.startswith(SHARED) for w in words):
        data = request.getfixturevalue("shared_data")
        words = [str(data / w[len(SHARED):]) if w.startswith(SHARED) else w for w in words]
    return words


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, tuple[str, dict]]:
    """Each page command run once (lazily) with ``--out``: its stdout and its JSON result."""
    folder = tmp_path_factory.mktemp("doc_examples")

    class Lazy(dict):
        def __missing__(self, protocol: str) -> tuple[str, dict]:
            out = folder / f"{protocol}.json"
            words = _words(protocol, request)
            stdout = run_cli(*words[2:], "--out", out, timeout=600).stdout
            self[protocol] = (stdout, json.loads(out.read_text(encoding="utf-8")))
            return self[protocol]

    return Lazy()


def _variant(protocol: str, *args: str) -> dict:
    """The page command of ``protocol`` with more arguments, run with ``--json``."""
    words = shlex.split(EXAMPLES_ON_PAGE[protocol][0])
    return run_json(*words[2:], *args)


# ---------------------------------------------------------------------------------------------------- the page


def test_every_protocol_has_an_example_with_its_own_files() -> None:
    assert set(EXAMPLES_ON_PAGE) == set(all_protocols())
    for protocol, (command, _) in EXAMPLES_ON_PAGE.items():
        if protocol in ON_SHARED_DATA:  # the real fixture, never a copy in docs/examples
            assert shlex.split(command)[3:] == ["--gt", SHARED + ON_SHARED_DATA[protocol]], command
            assert not (EXAMPLES / protocol).exists()
            continue
        paths = [w.rpartition("=")[2] for w in shlex.split(command) if "docs/examples/" in w]
        assert paths, command
        for path in paths:
            assert path.startswith(f"docs/examples/{protocol}/") or path == f"docs/examples/{protocol}", command
            assert (REPO / path).exists(), path


def test_example_files_are_tiny() -> None:
    files = [p for p in EXAMPLES.rglob("*") if p.is_file()]
    assert len(files) >= 20
    assert max(p.stat().st_size for p in files) < 8_000


@pytest.mark.parametrize("protocol", sorted(EXAMPLES_ON_PAGE))
def test_page_shows_what_the_command_prints(protocol: str, results: dict) -> None:
    if protocol in JAVA and shutil.which("java") is None:
        pytest.skip("needs `java` for pycocoevalcap's METEOR")
    stdout = results[protocol][0]
    printed = [line.rstrip() for line in stdout.rstrip("\n").split("\n")]
    assert printed == EXAMPLES_ON_PAGE[protocol][1].split("\n")


# ------------------------------------------------------------------------------------- hand-computed metrics


def test_crosstask(results: dict) -> None:
    # exclusive end rule (default), targets Y[floor(s):ceil(e)]; slot = floor(predicted second)
    # pancakes_a: 8 in [5,12) hit, 30 in [20,28) miss, 41 in [40,44) hit          -> 2 of 3
    # pancakes_b: 4 in [3,9) hit, step 1 not annotated, 35 in [30,35) miss        -> 1 of 2
    # seedling_a: 6, 15, 27 all hit                                                -> 3 of 3
    # seedling_b: 20 in [0,6) miss, 9 in [8,14) hit                                -> 1 of 2
    # recall pooled per task: pancakes 3/5, seedling 4/5; Avg R@1 = (0.6 + 0.8) / 2 = 0.7
    # 4 videos < 1850: every random set is all 4 videos, so the 20-set mean is the same 0.7
    out = results["crosstask"][1]
    assert out["metrics"]["avg_r1"] == pytest.approx(0.7)
    assert out["counts"]["items"] == 10  # annotated (video, step) pairs: 3 + 2 + 3 + 2
    # inclusive Y[floor(s):ceil(e)+1]: pancakes_b's 35 in [30,36) becomes a hit -> pancakes 4/5; (0.8 + 0.8) / 2
    inclusive = _variant("crosstask", "--variant", "end=inclusive")
    assert inclusive["metrics"]["avg_r1"] == pytest.approx(0.8)
    everything = _variant("crosstask", "--variant", "protocol=all")
    assert everything["metrics"]["avg_r1"] == pytest.approx(0.7)


def test_htstep_r1(results: dict) -> None:
    # inclusive end (default) Y[floor(s):ceil(e)+1]
    # vinaigrette_a, one second per headline: 4.2 -> 4 in [2,7) hit; "add mustard" not annotated;
    #   18.7 -> 18 in [10,19) hit; 31 in [30,34) hit                                -> 3 of 3
    # vinaigrette_b, {global step: second}: 101: 3 in [1,5) hit; 102: 12 in [6,10) miss; 103: 20 in [12,17) miss
    #                                                                               -> 1 of 3
    # R@1 = 4 / 6
    assert results["htstep_r1"][1]["metrics"]["r1"] == pytest.approx(4 / 6)
    assert results["htstep_r1"][1]["counts"]["items"] == 6
    # exclusive Y[floor(s):ceil(e)]: 18 leaves [10,18) -> 3 / 6
    assert _variant("htstep_r1", "--variant", "end=exclusive")["metrics"]["r1"] == pytest.approx(0.5)


def test_htstep_map(results: dict) -> None:
    # activity "Make a vinaigrette" (2 GT segments): by score, [10,18] tIoU 1 (TP), then [3,9] vs [2,6]:
    #   3 / 7 = 0.43 (TP at 0.3 and 0.4, FP from 0.5): AP 1 at 0.3/0.4; at 0.5-0.7 precision [1, 1/2] recall
    #   [1/2, 1/2] -> VOC AP 0.5. The row "vinaigrette_a,0,5,5" names a coffee step: dropped (not_in_article).
    # activity "Brew pour-over coffee": [30,40] (score 0.95) overlaps nothing (FP), [0,10] labelled step 5 matches
    #   the step-4 segment (one class per activity) with tIoU 1: precision [0, 1/2], recall [0, 1/2] -> AP 0.25
    # mAP per threshold: (1 + 0.25) / 2 twice, (0.5 + 0.25) / 2 three times; mean (2 x 0.625 + 3 x 0.375) / 5
    out = results["htstep_map"][1]
    assert out["metrics"]["map_per_tiou"] == pytest.approx(
        {"0.3": 0.625, "0.4": 0.625, "0.5": 0.375, "0.6": 0.375, "0.7": 0.375})
    assert out["metrics"]["map"] == pytest.approx(0.475)
    assert out["counts"]["skip_reasons"] == {"not_in_article": 1}


def test_htm_align(results: dict) -> None:
    # TAN rule floor(s) <= floor(pred_time) <= ceil(e), alignable sentences only:
    # knot: 5 in [3, 8] hit; 17 in [12, 17] hit. bread: 2 in [0, 5] hit; 12 in [20, 25] miss -> R@1 3/4
    # ROC-AUC over all 6 sentences: positives 0.9, 0.6, 0.8, 0.7; negatives 0.2, 0.65; pairs ordered right:
    # 0.9 (2) + 0.6 (1: not above 0.65) + 0.8 (2) + 0.7 (2) = 7 of 8
    m = results["htm_align"][1]["metrics"]
    assert m == pytest.approx({"r1": 0.75, "roc_auc": 0.875})
    # nsva rule s <= t <= e on raw seconds: 17 > 16.6 is a miss -> 2/4
    assert _variant("htm_align", "--variant", "rule=nsva")["metrics"]["r1"] == pytest.approx(0.5)


def test_marc(results: dict) -> None:
    # pancakes gold [0,1,1,2] pred [0,1,2,2]: supports 1,2,1; precision per label 1, 1, 1/2; recall 1, 1/2, 1;
    #   F1 1, 2/3, 2/3 -> weighted P 0.875, R 0.75, F 0.75
    # omelette gold [0,-1,1] pred [0,1,1] (NONE a label): P (0 + 1 + 1/2)/3 = 0.5, R 2/3, F (0 + 1 + 2/3)/3 = 5/9
    m = results["marc"][1]["metrics"]
    assert m == pytest.approx({"precision": (0.875 + 0.5) / 2, "recall": (0.75 + 2 / 3) / 2,
                               "f1": (0.75 + 5 / 9) / 2})
    # ignore_gold drops the NONE item: omelette gold [0,1] pred [0,1] scores 1, 1, 1
    ignore = _variant("marc", "--variant", "none=ignore_gold")
    assert ignore["metrics"] == pytest.approx({"precision": 0.9375, "recall": 0.875, "f1": 0.875})
    assert ignore["counts"]["scored_instructions"] == 6


def test_marc_ara(results: dict) -> None:
    # gold from the action alignments: lemonade_0 -> lemonade_1 [1, 0, NONE], lemonade_1 -> lemonade_0 [1, 0, 1, NONE]
    # (none=ignore_gold: NONE items are not scored)
    # uniform floor(i*N/M): pair A (M=3, N=4) [0,1,2] vs gold [1,0]: 0 right -> 0, 0, 0;
    #   pair B (M=4, N=3) [0,0,1,2] vs gold [1,0,1]: labels 0 (support 1, predicted 2, tp 1) and 1 (support 2,
    #   predicted 1, tp 1): P 1/3 x 1/2 + 2/3 x 1 = 5/6, R 2/3, F 2/3          -> mean 5/12, 1/3, 1/3
    # exact word match (content words after stop words): pair A both right -> 1, 1, 1;
    #   pair B: "mix juice syrup" shares no word with any source, argmax -> 0 (gold 1): pred [1,0,0] vs [1,0,1]
    #   -> P 1/3 x 1/2 + 2/3 x 1 = 5/6, R 2/3, F 2/3                              -> mean 11/12, 5/6, 5/6
    out = results["marc_ara"][1]
    counts = out["counts"]
    assert (counts["recipes"], counts["pairs"], counts["source_instructions"], counts["labelled"], counts["none"]) \
        == (2, 2, 7, 5, 2)
    m = out["metrics"]
    assert [m["uniform"][k] for k in ("precision", "recall", "f1")] == pytest.approx([5 / 12, 1 / 3, 1 / 3])
    assert [m["exact_match"][k] for k in ("precision", "recall", "f1")] == pytest.approx([11 / 12, 5 / 6, 5 / 6])
    assert m["exact_match"]["any_accuracy"] == pytest.approx(5 / 6)  # one target per action: any = strict here


def test_recipe_pages(results: dict) -> None:
    # the page's counts are the fixture's (tests/eval/test_recipe_pages.py checks its reference values): 175 pages,
    # 132 English JSON-LD pages scored, the 12 without a Schema.org Recipe skipped
    out = results["recipe_pages"][1]
    c = out["counts"]
    assert (c["pages"], c["items"], c["skipped"]) == (175, 132, 12)
    assert c["skip_reasons"] == {"no_schema_recipe": 12}
    assert out["metrics"]["title_accuracy"] == pytest.approx(c["titles_correct"] / 132)


#: the arrays of docs/examples/showhowto/features.npz (checked below), so the hand computation can be read here
SHOWHOWTO_FEATURES = {
    "gen_ids": ["tea_01/1", "tea_01/2", "toast_01/1", "toast_01/2", "toast_01/3"],
    "gen_clip": [[0.9, 0.1, 0.3, 0.0], [0.6, 0.5, 0.0, 0.2], [0.0, 0.0, 1.0, 0.2], [0.1, 0.0, 0.1, 1.0],
                 [0.0, 0.2, 0.2, 1.0]],
    "prompt_ids": ["tea_01/1", "tea_01/2", "toast_01/1", "toast_01/2", "toast_01/3"],
    "prompt_clip": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 1, 1]],
    "task_names": ["make tea", "make toast", "make coffee"],
    "task_clip": [[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0.5]],
    "gen_dino": [[1.0, 0.1, 0.0], [0.2, 1.0, 0.0], [0.0, 1.0, 0.1], [0.1, 0.9, 0.3], [0.0, 1.0, 0.0]],
    "gallery_ids": ["tea_01/1", "tea_01/2", "toast_01/1", "toast_01/2", "toast_01/3"],
    "gallery_dino": [[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0.9, 0.2], [0.1, 1, 0]],
    "gen_inception": [[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5]],
    "real_inception": [[3, 4], [4, 4], [3, 5], [4, 5], [3.5, 4.5]],
}


def test_showhowto_features_file_holds_the_documented_arrays() -> None:
    with np.load(EXAMPLES / "showhowto" / "features.npz", allow_pickle=False) as npz:
        assert set(npz.files) == set(SHOWHOWTO_FEATURES)
        for name, value in SHOWHOWTO_FEATURES.items():
            if isinstance(value[0], str):
                assert npz[name].tolist() == value, name
            else:
                np.testing.assert_array_equal(npz[name], np.asarray(value, dtype=np.float64), err_msg=name)


def test_showhowto(results: dict) -> None:
    # SF (classes = the sequence's prompts 1..n, cosine): tea/1 best prompt 1 (0.9 vs 0.1) hit; tea/2 prompt 1
    #   (0.6 > 0.5) miss; toast/1 prompt 1 (1 > 1.2/sqrt 2 > 0.2) hit; toast/2 prompt 2 (1 > 1.1/sqrt 2) hit;
    #   toast/3 prompt 2 (1 > 1.2/sqrt 2) miss -> (1/2 + 2/3) / 2 = 7/12
    # SC (nearest source frame i >= 1, DINO): tea/1 -> a tea frame, tea/2 [.2, 1, 0] -> a toast frame (miss),
    #   every toast frame -> a toast frame -> (1/2 + 3/3) / 2
    # TF: tea images lie in dims 0-1 ("make tea" [1,1,0,0]), toast images in dims 2-3 ("make toast") -> 2/2
    # FID: real = generated + (3, 4): equal covariances, |mean difference|^2 = 9 + 16 = 25
    m = results["showhowto"][1]["metrics"]
    assert m == pytest.approx({"sf": 7 / 12, "sc": 0.75, "tf": 1.0, "fid": 25.0}, abs=1e-9)
    # image-level means: SF 3 of 5 images, SC 4 of 5
    pooled = _variant("showhowto", "--variant", "pooled=true")["metrics"]
    assert (pooled["sf"], pooled["sc"]) == pytest.approx((0.6, 0.8))


def test_soda_d_without_java() -> None:
    # SODA-d = best order-preserving one-to-one matching of tIoU (no text, so no Java):
    # lemon-curd, GT [0,8] [10,20] [22,35], predictions sorted [0,8] [12,20] [30,40]: 1 + 8/10 + 5/18 = 187/90
    #   -> P = R = F = 187/270
    # garlic-bread, GT [0,10] [12,25], one prediction [0,25]: tIoU 10/25 and 13/25, at most one match: 0.52
    #   -> P 0.52, R 0.26, F 2 x 0.52 / 3
    # iced-tea has no prediction: dropped by default (missing=drop), scored 0 with missing=zero
    lemon, garlic = 187 / 270, (0.52, 0.26, 2 * 0.52 / 3)
    drop = _variant("soda", "--variant", "kinds=d")
    assert drop["metrics"]["soda_d"] == pytest.approx(
        {"precision": (lemon + garlic[0]) / 2, "recall": (lemon + garlic[1]) / 2, "f1": (lemon + garlic[2]) / 2})
    assert drop["counts"]["skip_reasons"] == {"gt_video_without_prediction": 1}
    zero = _variant("soda", "--variant", "kinds=d", "--variant", "missing=zero")
    assert zero["metrics"]["soda_d"] == pytest.approx(
        {"precision": (lemon + garlic[0]) / 3, "recall": (lemon + garlic[1]) / 3, "f1": (lemon + garlic[2]) / 3})


def _perfect(gt: Path, out: Path) -> Path:
    """A submission that predicts every ground-truth segment with its own sentence."""
    data = json.loads(gt.read_text(encoding="utf-8"))
    results = {v: [{"sentence": s, "timestamp": t} for t, s in zip(c["timestamps"], c["sentences"])]
               for v, c in data.items()}
    out.write_text(json.dumps({"version": "VERSION 1.0", "results": results, "external_data": {}}), encoding="utf-8")
    return out


@requires_java
@pytest.mark.java
def test_densevid(results: dict, tmp_path: Path) -> None:
    # precision / recall at tIoU > thr (strict), per video then over videos, then over the 4 thresholds:
    # salad predictions [0,10] 1.0, [14,30] 16/18, [50,60] 0, [1,9] 0.8 -> P 3/4 up to 0.7, 1/4 at 0.9;
    #   GT segments covered 2/3 up to 0.7, 1/3 at 0.9
    # soup [5,20] 0.75, [40,60] 2/3 -> P = R = 1 at 0.3/0.5, 1/2 at 0.7, 0 at 0.9
    # P = (7/8 + 7/8 + 5/8 + 1/8) / 4 = 0.625; R = (5/6 + 5/6 + 7/12 + 1/6) / 4 = 29/48
    m = results["densevid"][1]["metrics"]
    assert (m["precision"], m["recall"]) == pytest.approx((0.625, 29 / 48))
    assert list(m["per_tiou"]) == ["0.3", "0.5", "0.7", "0.9"]
    assert [v["precision"] for v in m["per_tiou"].values()] == pytest.approx([7 / 8, 7 / 8, 5 / 8, 1 / 8])
    assert [v["recall"] for v in m["per_tiou"].values()] == pytest.approx([5 / 6, 5 / 6, 7 / 12, 1 / 6])
    # the Java text scores: the deterministic values observed (tokenize=video), as the page prints them
    assert (m["meteor"], m["cider"], m["bleu4"]) == pytest.approx((0.1910, 2.2938, 0.0059), abs=5e-5)
    # sanity: predicting the ground truth itself scores higher on every text metric, precision = recall = 1
    perfect = run_json("densevid", "--gt", EXAMPLES / "densevid" / "gt.json",
                       "--pred", _perfect(EXAMPLES / "densevid" / "gt.json", tmp_path / "perfect.json"))["metrics"]
    assert (perfect["precision"], perfect["recall"]) == (1.0, 1.0)
    assert perfect["meteor"] > m["meteor"] and perfect["cider"] > m["cider"] and perfect["bleu4"] > m["bleu4"]


@requires_java
@pytest.mark.java
def test_soda(results: dict, tmp_path: Path) -> None:
    m = results["soda"][1]["metrics"]
    # SODA-d as computed by hand in test_soda_d_without_java
    lemon, garlic = 187 / 270, (0.52, 0.26, 2 * 0.52 / 3)
    assert m["soda_d"] == pytest.approx(
        {"precision": (lemon + garlic[0]) / 2, "recall": (lemon + garlic[1]) / 2, "f1": (lemon + garlic[2]) / 2})
    # SODA-c weighs each matched tIoU by METEOR: the deterministic values observed, and never above SODA-d
    assert m["soda_c"] == pytest.approx({"precision": 0.2596, "recall": 0.2434, "f1": 0.2488}, abs=5e-5)
    assert all(m["soda_c"][k] <= m["soda_d"][k] for k in ("precision", "recall", "f1"))
    # sanity: the ground truth as prediction has SODA-d 1 and a higher SODA-c
    perfect = run_json("soda", "--gt", EXAMPLES / "soda" / "gt.json",
                       "--pred", _perfect(EXAMPLES / "soda" / "gt.json", tmp_path / "perfect.json"))["metrics"]
    assert perfect["soda_d"] == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0})
    assert perfect["soda_c"]["f1"] > m["soda_c"]["f1"]


def test_commands_run_from_the_repository_root_only_with_relative_paths() -> None:
    """The page's commands name files relative to the root of a clone (nothing absolute, nothing outside), except the
    real data fixtures (``<fixtures>/``, the ``shared_data`` folder) for ``ON_SHARED_DATA``."""
    for protocol, (command, _) in EXAMPLES_ON_PAGE.items():
        for word in shlex.split(command):
            if protocol in ON_SHARED_DATA and word.startswith(SHARED):
                word = word[len(SHARED):]
            assert not word.rpartition("=")[2].startswith("/") and ".." not in word, command
