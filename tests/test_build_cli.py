from __future__ import annotations

import subprocess
import sys

import pytest

from builders.build import main


def test_help_lists_the_four_corpora(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in ("howtostep", "showhowto", "sieve_swap", "marc"):
        assert name in out


def test_every_corpus_is_built_now():
    from builders.corpora import CORPORA

    assert all(CORPORA.values())


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "needs --manifest FILE"),
    (lambda d: (d / "m.csv").write_text("id,path\nabcdefghijk,v.mp4\n"), "must name video_id and video_path"),
    (lambda d: (d / "m.csv").write_text(""), "is empty"),
    (lambda d: (d / "m.csv").write_text("video_id,video_path,title\n"), "has no rows"),
])
def test_showhowto_manifest_is_checked_before_any_work(tmp_path, capsys, make, message):
    make(tmp_path)
    args = ["--manifest", str(tmp_path / "m.csv")] if (tmp_path / "m.csv").exists() else ["--tasks", str(tmp_path)]
    out = tmp_path / "out"
    assert main(["showhowto", "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_input_is_an_error_before_any_work(tmp_path, capsys):
    code = main(["sieve_swap", "--out", str(tmp_path), "--videos", str(tmp_path / "nope.csv"),
                 "--transcripts", str(tmp_path), "--recipes", str(tmp_path / "r.csv")])
    assert code == 2
    assert "nope.csv does not exist" in capsys.readouterr().err
    assert not (tmp_path / ".work").exists()


def test_partial_inputs_name_the_missing_ones(tmp_path, capsys):
    (tmp_path / "v.csv").write_text("video_id\nabc\n")
    assert main(["sieve_swap", "--out", str(tmp_path), "--videos", str(tmp_path / "v.csv")]) == 2
    assert "--transcripts, --recipes" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--set", "sim_threshold=high"], "sim_threshold"),
    (["--set", "no_such_key=1"], "unknown config key"),
])
def test_bad_config_exits_2(tmp_path, capsys, args, message):
    assert main(["sieve_swap", "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err


def test_unreadable_config_file(tmp_path, capsys):
    bad = tmp_path / "c.yaml"
    bad.write_text("sim_threshold: [0.7\n")
    assert main(["sieve_swap", "--out", str(tmp_path), "--config", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "builders.build", "showhowto", "--manifest", "no/such.csv"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no/such.csv does not exist" in r.stderr and "Traceback" not in r.stderr


def test_marc_inputs_are_checked_before_any_work(tmp_path, capsys):
    # videos without transcripts, no pages, a missing WARC, and the not-built LSTM classifier: exit 2, nothing written
    cases = [
        (["--videos", str(tmp_path)], "--warc FILES|DIRS and/or --pages DIR"),
        (["--warc", str(tmp_path / "none.warc.gz")], "does not exist"),
        (["--pages", str(tmp_path), "--videos", str(tmp_path)], "--videos (video_candidates.jsonl) and --transcripts"),
        (["--pages", str(tmp_path), "--videos", str(tmp_path), "--transcripts", str(tmp_path)], "--youcook2"),
        (["--set", "classifier=lstm"], "not implemented in this version"),
    ]
    out = tmp_path / "out"
    for args, message in cases:
        assert main(["marc", "--out", str(out), *args]) == 2
        assert message in capsys.readouterr().err
    assert not out.exists()


def test_eval_cli_runs_as_script_and_module():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    script = subprocess.run([sys.executable, str(root / "eval" / "run.py"), "--help"], capture_output=True, text=True,
                            cwd=root.parent, check=False)
    module = subprocess.run([sys.executable, "-m", "eval.run", "--help"], capture_output=True, text=True, cwd=root,
                            check=False)
    for r in (script, module):
        assert r.returncode == 0, r.stderr
        for protocol in ("densevid", "soda", "htm_align", "htstep_r1", "htstep_map", "crosstask"):
            assert protocol in r.stdout
    r = subprocess.run([sys.executable, str(root / "eval" / "run.py"), "densevid", "--pred", "p.json"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "--gt" in r.stderr


def test_help_lists_each_choice_once():
    """The corpora (and eval's protocols) are listed once, by the subcommand list, not again in an epilog."""
    import subprocess
    import sys

    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    build = subprocess.run([sys.executable, "-m", "builders.build", "--help"], capture_output=True, text=True,
                           cwd=root, check=True).stdout
    assert build.count("HowToStep: ASR narrations") == 1 and build.count("Sieve & Swap:") == 1
    run = subprocess.run([sys.executable, "eval/run.py", "--help"], capture_output=True, text=True, cwd=root,
                         check=True).stdout
    assert run.count("CrossTask zero-shot step localisation") == 1


@pytest.mark.parametrize("rc", [0, 3])
def test_exit_without_teardown_runs_atexit_handlers_and_keeps_the_exit_code(tmp_path, rc):
    """``exit_now(rc, skip_teardown=True)`` (the build CLI's exit) skips the interpreter's teardown but still runs
    the atexit handlers (logging's flush, Ray's shutdown, temp folder finalizers) and flushes what was printed."""
    marker, tmp_dir = tmp_path / "atexit-ran", tmp_path / "finalized"
    tmp_dir.mkdir()
    code = (
        "import atexit, logging, pathlib, shutil, sys, weakref\n"
        "from builders.publish import exit_now\n"
        f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes'))\n"
        "class Holder: pass\n"
        "h = Holder()\n"
        f"weakref.finalize(h, shutil.rmtree, {str(tmp_dir)!r})\n"
        "logging.basicConfig(stream=sys.stderr)\n"
        "logging.getLogger('t').warning('logged before exit')\n"
        "print('printed before exit', end='')\n"
        f"exit_now({rc}, skip_teardown=True)\n"
        "print('never')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == rc, p.stderr
    assert p.stdout == "printed before exit"
    assert "logged before exit" in p.stderr
    assert marker.read_text() == "yes"
    assert not tmp_dir.exists()
