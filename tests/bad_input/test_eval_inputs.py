"""Malformed evaluation inputs, every protocol of ``python eval/run.py`` (issue 14; ``evaluation.md`` §0).

Each case is generated here (no stored blobs) and asserts: the exit status (2 for a bad input; 0 with a named,
counted warning where the protocol skips the bad part and scores the rest), no traceback, the clear message or
warning name, and peak memory under 1 GB. Most cases run in-process through :func:`eval.run.main` (peak memory from
``tracemalloc``); a few run as a real subprocess (peak RSS of that child from ``os.wait4``).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import eval.protocols.marc as marc_protocol
from eval import registry
from eval.run import main

REPO = Path(__file__).resolve().parents[2]
MEMORY_CAP = 1 << 30  # bytes, per case
BOMB_DEPTH = 100_000  # the sweep's JSON bomb: 100,000 nested arrays (200 KB)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    peak_bytes: int


def run_in_process(argv: list[str]) -> Outcome:
    """``python eval/run.py ARGV`` in this process; an exception escaping ``main`` fails the case (a traceback)."""
    registry.all_protocols()  # discovery (imports) happens before memory is traced
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return Outcome(code, out.getvalue(), err.getvalue(), peak)


def run_subprocess(argv: list[str]) -> Outcome:
    """``python eval/run.py ARGV`` as a child process; peak RSS of that child (``ru_maxrss``, KiB on Linux)."""
    proc = subprocess.Popen([sys.executable, str(REPO / "eval" / "run.py"), *map(str, argv)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()  # small outputs: no pipe dead-lock
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Outcome(proc.returncode, stdout, stderr, usage.ru_maxrss * 1024)


def check(outcome: Outcome, code: int, needle: str) -> None:
    """The shared assertions of every case."""
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.code == code, (outcome.code, outcome.stderr[-2000:])
    assert needle in outcome.stderr, outcome.stderr[-2000:]
    assert outcome.peak_bytes < MEMORY_CAP, outcome.peak_bytes
    if code == 2:
        assert "error:" in outcome.stderr and outcome.stdout == ""


# ----------------------------------------------------------------------------------------------- generators


def write(path: Path, content: object) -> Path:
    """JSON for objects, text for ``str``, raw bytes for ``bytes``."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def array_bomb(depth: int = BOMB_DEPTH) -> str:
    return "[" * depth + "]" * depth


def object_bomb(depth: int = BOMB_DEPTH) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def huge_integer() -> str:
    return '{"v1": ' + "9" * 5000 + "}"  # above Python's 4300-digit int conversion limit


DVC_GT = {"v1": {"duration": 30.0, "timestamps": [[0, 10], [10, 20]], "sentences": ["crack eggs", "whisk"]}}
DVC_PRED = {"version": "1.0", "external_data": {}, "results": {"v1": [{"sentence": "crack eggs",
                                                                        "timestamp": [0, 10]}]}}
HTM_GT = {"vidA": [[1, 1.2, 3.6, "a0"], [0, 4, 5, "a1"]]}
HTM_PRED = {"vidA": {"pred_time": [2.0, 0.0]}}
STEP_GT = [{"video_uid": "v1", "video_duration": 12.0, "activity": "A", "variation": "none",
            "step_headline": ["s0", "s1"], "clips": [{"annotations": [{"language_queries": [
                {"clip_start_sec": 1.2, "clip_end_sec": 3.6, "query": "s0", "step": 100}]}]}]}]
CT_GT = [{"video_uid": "v1", "video_duration": 10.0, "task_id": "1", "task_name": "t", "task_steps": ["a", "b"],
          "clips": [{"annotations": [{"language_queries": [
              {"clip_start_sec": 1.5, "clip_end_sec": 3.2, "query": "a", "step": 0}]}]}]}]
MAP_GT = {"v1": {"subset": "val_seen", "activity": "A", "variation": "none", "duration": 60, "annotations": [
    {"segment": [0, 10], "id": 1, "label": "s", "partial": "Full Match"}]}}
MAP_PRED = ",video-id,t-start,t-end,label,score\n0,v1,0,10,1,0.9\n"


def taxonomy(path: Path, extra_row: list[str] | None = None) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["global_step_index", "activity", "step_index", "variation", "variation_index", "headline",
                     "paragraph"])
        wr.writerow([1, "A", 0, "none", 1, "step 1", ""])
        if extra_row:
            wr.writerow(extra_row)
    return path


def conllu(forms: list[str]) -> str:
    """A CoNLL-U recipe (CRLF, 10 columns) whose first token of every sentence is an action."""
    rows = []
    for i, form in enumerate(forms, start=1):
        tag = "B-A" if i == 1 or forms[i - 2] == "." else "O"
        rows.append("\t".join([str(i), form, "_", "_", tag, "_", "0", "root", "_", "_"]))
    return "\r\n".join(rows) + "\r\n"


def ara_folder(root: Path, rows: list[str], recipe_text: str | None = None) -> Path:
    """One dish, two recipes of 2 instructions (tokens 1-6), and ``alignments.tsv`` holding ``rows``."""
    recipes = root / "soup" / "recipes"
    recipes.mkdir(parents=True)
    for k in range(2):
        text = recipe_text if (recipe_text is not None and k == 1) else conllu(["Boil", "water", ".", "Add",
                                                                                "salt", "."])
        (recipes / f"soup_{k}.conllu").write_text(text, encoding="utf-8")
    (root / "soup" / "alignments.tsv").write_text("\r\n".join(["file1\ttoken1\tfile2\ttoken2", *rows]) + "\r\n",
                                                   encoding="utf-8")
    return root


def page_folder(root: Path, html: bytes, expected: object, index: object | None = None) -> Path:
    root.mkdir()
    (root / "p1.html.gz").write_bytes(html)
    write(root / "p1.expected.json", expected)
    if index is not None:
        write(root / "INDEX.json", index)
    return root


RECIPE_HTML = gzip.compress(b'<html><script type="application/ld+json">{"@type": "Recipe", "name": "Soup", '
                            b'"recipeInstructions": ["Boil water."]}</script></html>')
EXPECTED = {"title": "Soup", "instructions_list": ["Boil water."], "language": "en"}


# ----------------------------------------------------------------------------------------------- the cases

Case = Callable[[Path], list]  # writes the case's files under a temporary folder and returns the CLI arguments


def _dvc(gt: object, pred: object = DVC_PRED, protocol: str = "densevid", *extra: str) -> Case:
    def make(tmp: Path) -> list:
        return [protocol, "--gt", write(tmp / "gt.json", gt), "--pred", write(tmp / "pred.json", pred), *extra]
    return make


def _pair(protocol: str, gt: object, pred: object, *extra: str, suffix: str = ".json") -> Case:
    def make(tmp: Path) -> list:
        return [protocol, "--gt", write(tmp / f"gt{suffix}", gt), "--pred", write(tmp / f"pred{suffix}", pred),
                *extra]
    return make


def _npy_dir(tmp: Path, files: dict[str, bytes]) -> Path:
    folder = tmp / "npy"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def _crosstask_release(tmp: Path, annotation: bytes) -> Path:
    folder = tmp / "release"
    (folder / "annotations").mkdir(parents=True)
    (folder / "tasks_primary.txt").write_text("1\nMake soup\nhttp://x\n2\nboil,salt\n\n", encoding="utf-8")
    (folder / "videos.csv").write_text("1,v1,http://y\n", encoding="utf-8")
    (folder / "annotations" / "1_v1.csv").write_bytes(annotation)
    return folder


def _map_case(pred_text: str | bytes, tax_extra: list[str] | None = None) -> Case:
    def make(tmp: Path) -> list:
        tax = taxonomy(tmp / "taxonomy.csv", tax_extra)
        pred = tmp / "pred.csv"
        pred.write_bytes(pred_text if isinstance(pred_text, bytes) else pred_text.encode())
        return ["htstep_map", "--gt", write(tmp / "gt.json", MAP_GT), "--pred", pred, "--variant",
                f"taxonomy={tax}"]
    return make


def _marc(gt_lines: list[str], pred_lines: list[str]) -> Case:
    def make(tmp: Path) -> list:
        return ["marc", "--gt", write(tmp / "gold.jsonl", "\n".join(gt_lines)),
                "--pred", write(tmp / "pred.jsonl", "\n".join(pred_lines))]
    return make


def _ara(rows: list[str], recipe_text: str | None = None, methods: str = "uniform") -> Case:
    def make(tmp: Path) -> list:
        return ["marc_ara", "--gt", ara_folder(tmp / "ara", rows, recipe_text), "--variant", f"methods={methods}"]
    return make


def _pages(html: bytes, expected: object, index: object | None = None) -> Case:
    def make(tmp: Path) -> list:
        return ["recipe_pages", "--gt", page_folder(tmp / "pages", html, expected, index)]
    return make


GOOD_ROWS = ["soup_0\t1\tsoup_1\t1", "soup_0\t4\tsoup_1\t4"]
NAN_DVC_TS = '{"v1": {"duration": 30.0, "timestamps": [[0, NaN]], "sentences": ["crack eggs"]}}'
NAN_DVC_DUR = '{"v1": {"duration": NaN, "timestamps": [[0, 10]], "sentences": ["crack eggs"]}}'

CASES: dict[str, tuple[Case, int, str]] = {
    # densevid: ground truth and predictions (errors before any scorer starts)
    "densevid-gt-array-bomb": (_dvc(array_bomb()), 2, "nested 100000 levels deep"),
    "densevid-pred-object-bomb": (_dvc(DVC_GT, object_bomb()), 2, "nested 100000 levels deep"),
    "densevid-gt-nan-duration": (_dvc(NAN_DVC_DUR), 2, "duration nan"),
    "densevid-gt-nan-timestamp": (_dvc(NAN_DVC_TS), 2, "non-finite timestamp"),
    "densevid-gt-infinite-timestamp": (_dvc(NAN_DVC_TS.replace("NaN", "Infinity")), 2, "non-finite timestamp"),
    "densevid-gt-reversed-segment": (_dvc({"v1": {"duration": 30, "timestamps": [[9, 2]], "sentences": ["x"]}}), 2,
                                     "reversed timestamp"),
    "densevid-youcook2-nan-segment": (_dvc({"database": {"v1": {"subset": "validation", "duration": 9, "annotations": [
        {"segment": [float("nan"), 3], "sentence": "x"}]}}}), 2, "non-finite timestamp"),
    "densevid-gt-not-utf8": (_dvc(b'{"v1": "\xff\xfe"}'), 2, "not UTF-8"),
    "densevid-pred-huge-integer": (_dvc(DVC_GT, huge_integer()), 2, "not valid JSON"),
    # soda
    "soda-gt-object-bomb": (_dvc(object_bomb(), DVC_PRED, "soda"), 2, "nested 100000 levels deep"),
    "soda-pred-array-bomb": (_dvc(DVC_GT, array_bomb(), "soda"), 2, "nested 100000 levels deep"),
    "soda-gt-nan-timestamp": (_dvc(NAN_DVC_TS, DVC_PRED, "soda"), 2, "non-finite timestamp"),
    "soda-pred-results-not-object": (_dvc(DVC_GT, {"results": [1, 2]}, "soda"), 2, "expected"),
    "soda-pred-nan-timestamp-warns": (_dvc(DVC_GT, {"version": "1", "external_data": {}, "results": {"v1": [
        {"sentence": "crack eggs", "timestamp": [0, 10]},
        {"sentence": "whisk", "timestamp": [float("nan"), 20]}]}}, "soda", "--variant", "kinds=d"), 0,
        "warning: bad_timestamp x1"),
    # htm_align
    "htm_align-gt-array-bomb": (_pair("htm_align", array_bomb(), HTM_PRED), 2, "nested 100000 levels deep"),
    "htm_align-pred-object-bomb": (_pair("htm_align", HTM_GT, object_bomb()), 2, "nested 100000 levels deep"),
    "htm_align-gt-nan-time": (_pair("htm_align", '{"vidA": [[1, NaN, 3.6, "a0"]]}', HTM_PRED), 2,
                              "expected a finite number"),
    "htm_align-pred-truncated": (_pair("htm_align", HTM_GT, '{"vidA": {"pred_time": [2.0,'), 2, "not valid JSON"),
    # htstep_r1
    "htstep_r1-gt-array-bomb": (_pair("htstep_r1", array_bomb(), {"v1": [1, 2]}), 2, "nested 100000 levels deep"),
    "htstep_r1-pred-object-bomb": (_pair("htstep_r1", STEP_GT, object_bomb()), 2, "nested 100000 levels deep"),
    "htstep_r1-pred-huge-integer": (_pair("htstep_r1", STEP_GT, huge_integer()), 2, "not valid JSON"),
    # crosstask
    "crosstask-gt-object-bomb": (_pair("crosstask", object_bomb(), {"v1": [1, 2]}), 2, "nested 100000 levels deep"),
    "crosstask-pred-array-bomb": (_pair("crosstask", CT_GT, array_bomb()), 2, "nested 100000 levels deep"),
    "crosstask-gt-empty-file": (_pair("crosstask", "", {"v1": [1, 2]}), 2, "not valid JSON"),
    # htstep_map
    "htstep_map-gt-array-bomb": (lambda tmp: ["htstep_map", "--gt", write(tmp / "gt.json", array_bomb()),
                                              "--pred", write(tmp / "p.csv", MAP_PRED), "--variant",
                                              f"taxonomy={taxonomy(tmp / 'taxonomy.csv')}"], 2,
                                 "nested 100000 levels deep"),
    "htstep_map-pred-not-utf8": (_map_case(b",video-id,t-start,t-end,label,score\n0,v\xff1,0,10,1,0.9\n"), 2,
                                 "not UTF-8"),
    "htstep_map-pred-nul-byte-warns": (_map_case(MAP_PRED + "1,v1\x00,0,10,1,0.9\n"), 0,
                                       "warning: unknown_video x1"),
    "htstep_map-pred-all-rows-nan": (_map_case(",video-id,t-start,t-end,label,score\n0,v1,nan,10,1,0.9\n"), 2,
                                     "none of its 1 rows is valid"),
    "htstep_map-pred-one-nan-row-warns": (_map_case(MAP_PRED + "1,v1,nan,10,1,0.5\n"), 0, "warning: invalid_row x1"),
    "htstep_map-taxonomy-huge-field": (_map_case(MAP_PRED, ["2", "A" * 200_000, "1", "none", "1", "h", ""]), 2,
                                       "not valid CSV"),
    # marc (JSONL)
    "marc-gt-line-array-bomb": (_marc([array_bomb()], ['{"pair_id": "a|b", "pred": [0]}']), 2,
                                "line 1: JSON nested 100000 levels deep"),
    "marc-pred-line-object-bomb": (_marc(['{"pair_id": "a|b", "gold": [0]}', ""], [object_bomb()]), 2,
                                   "nested 100000 levels deep"),
    "marc-gt-huge-integer-label": (_marc(['{"pair_id": "a|b", "gold": [' + "9" * 5000 + "]}"],
                                         ['{"pair_id": "a|b", "pred": [0]}']), 2, "not valid JSON"),
    "marc-gt-not-utf8": (lambda tmp: ["marc", "--gt", write(tmp / "g.jsonl", b'{"pair_id": "\xff", "gold": [0]}'),
                                      "--pred", write(tmp / "p.jsonl", '{"pair_id": "a|b", "pred": [0]}')], 2,
                         "not UTF-8"),
    # marc_ara
    "marc_ara-row-past-recipe-end-warns": (_ara([*GOOD_ROWS, "soup_0\t4\tsoup_1\t99"]), 0,
                                           "warning: alignment_row_out_of_range x1"),
    "marc_ara-source-token-past-end-warns": (_ara([*GOOD_ROWS, "soup_0\t77\tsoup_1\t1"]), 0,
                                             "warning: alignment_row_out_of_range x1"),
    "marc_ara-alignments-bad-columns": (_ara(["soup_0\t1\tsoup_1"]), 2, "3 columns, expected 4"),
    "marc_ara-recipe-bad-columns": (_ara(GOOD_ROWS, recipe_text="1\tBoil\r\n"), 2, "2 columns, expected 10"),
    # recipe_pages
    "recipe_pages-index-array-bomb": (_pages(RECIPE_HTML, EXPECTED, array_bomb()), 2, "nested 100000 levels deep"),
    "recipe_pages-expected-bomb-warns": (lambda tmp: ["recipe_pages", "--gt", _two_pages(tmp)], 0,
                                         "warning: malformed_expected x1"),
    "recipe_pages-no-usable-page": (_pages(RECIPE_HTML, object_bomb()), 2, "no page with both"),
}


def _two_pages(tmp: Path) -> Path:
    root = page_folder(tmp / "pages", RECIPE_HTML, EXPECTED)
    (root / "p2.html.gz").write_bytes(RECIPE_HTML)
    write(root / "p2.expected.json", array_bomb())
    return root


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_input_in_process(name: str, tmp_path: Path) -> None:
    make, code, needle = CASES[name]
    check(run_in_process(make(tmp_path)), code, needle)


def test_marc_ara_skipped_row_still_scores_the_rest(tmp_path: Path) -> None:
    """The row past the end of its recipe is counted and skipped; the pair is still scored (exit 0, JSON out)."""
    outcome = run_in_process([*CASES["marc_ara-row-past-recipe-end-warns"][0](tmp_path), "--json"])
    check(outcome, 0, "soup/alignments.tsv:4")
    out = json.loads(outcome.stdout)
    assert out["counts"]["alignment_rows_skipped"] == 1 and out["counts"]["labelled"] == 2
    assert out["metrics"]["uniform"]["f1"] == pytest.approx(1.0)


@pytest.mark.parametrize("protocol", sorted(registry.all_protocols()))
def test_missing_ground_truth_every_protocol(protocol: str, tmp_path: Path) -> None:
    """Every registered protocol (new ones included) answers a missing ``--gt`` with a clear error, exit 2."""
    argv = [protocol, "--gt", tmp_path / "nope.json"]
    if registry.get(protocol).needs_pred:
        argv += ["--pred", write(tmp_path / "pred.json", {})]
    outcome = run_in_process(argv)
    assert "Traceback" not in outcome.stderr and outcome.code == 2 and "error:" in outcome.stderr
    assert outcome.peak_bytes < MEMORY_CAP


def test_crosstask_release_with_undecodable_annotation(tmp_path: Path) -> None:
    folder = _crosstask_release(tmp_path, b"1,0.5,\xff3.0\n")
    check(run_in_process(["crosstask", "--gt", folder, "--pred", write(tmp_path / "p.json", {"v1": [1, 2]})]), 2,
          "not UTF-8")


def test_htm_align_unreadable_npy_prediction(tmp_path: Path) -> None:
    folder = _npy_dir(tmp_path, {"vidA.npy": b"\x93NUMPY garbage"})
    check(run_in_process(["htm_align", "--gt", write(tmp_path / "gt.json", HTM_GT), "--pred", folder]), 2,
          "not a readable .npy")


@pytest.mark.parametrize("needle, error", [
    ("marc_ara method minilm failed: ValueError: encoder exploded", ValueError("encoder exploded")),
    ("marc_ara method minilm cannot run: RuntimeError: MiniLM is not installed", RuntimeError(
        "MiniLM is not installed")),
])
def test_marc_ara_failing_method_is_an_error(needle: str, error: Exception, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A method that fails, or that was asked for by name and cannot load, is exit 2, never "not run" + exit 0."""
    def broken(name: str):
        raise error

    monkeypatch.setattr(marc_protocol, "_default_encoder", broken)
    check(run_in_process(_ara(GOOD_ROWS, methods="uniform,minilm")(tmp_path)), 2, needle)


def test_one_protocol_import_error_leaves_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A protocol module whose import fails disables only its own protocols, which name the missing package."""
    import eval.protocols as package

    plugin = tmp_path / "plugins"
    plugin.mkdir()
    (plugin / "zz_needs_a_package.py").write_text(
        "import not_a_real_package_xyz  # noqa: F401\n"
        "from eval.registry import Protocol, register\n"
        "register(Protocol(name='needs_pkg', summary='s', evaluate=lambda inputs: None))\n", encoding="utf-8")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(plugin)])
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_DISCOVERED", False)
    assert registry.all_protocols()["needs_pkg"].unavailable is not None
    check(run_in_process(["needs_pkg", "--gt", "x"]), 2, "package 'not_a_real_package_xyz' is not installed")
    ok = run_in_process(["marc", "--gt", write(tmp_path / "g.jsonl", '{"pair_id": "a|b", "gold": [0, 1]}'),
                         "--pred", write(tmp_path / "p.jsonl", '{"pair_id": "a|b", "pred": [0, 1]}'), "--json"])
    assert ok.code == 0 and json.loads(ok.stdout)["metrics"]["f1"] == pytest.approx(1.0)
    assert "needs_pkg" in run_in_process(["--help"]).stdout


@pytest.mark.parametrize("protocol", ["densevid", "htm_align"])
def test_json_bomb_as_a_user_runs_it(protocol: str, tmp_path: Path) -> None:
    """The sweep's case exactly as a user meets it: ``python eval/run.py`` in a fresh interpreter."""
    gt, pred = (array_bomb(), DVC_PRED) if protocol == "densevid" else (HTM_GT, object_bomb())
    outcome = run_subprocess([protocol, "--gt", write(tmp_path / "gt.json", gt),
                              "--pred", write(tmp_path / "pred.json", pred)])
    check(outcome, 2, "nested 100000 levels deep")
