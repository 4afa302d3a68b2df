"""One top-level error policy for ``python -m builders.build`` (issue 20; docs/architecture.md, "Failures"): whatever
stops a build ends as exactly one ``error:`` line on stderr and its documented exit code, checked before any work
where it can be, with no Python traceback unless ``--debug`` is given.

The CLI cases run the real ``python -m builders.build`` (each refused in about two seconds, before any work: no work
directory is made); the ``OSError`` classes that cannot be produced on demand here (a permission error as root, a full
disk mid-build, a quota) are raised from a stand-in build in-process through ``builders.build.main``."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builders import build

from .conftest import REPO

SAMPLE = REPO / "builders" / "samples" / "sieve_swap"


def _cli(*args: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builders.build", *args, "--no-progress"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


def _one_error_line(stderr: str) -> str:
    """The single ``error:`` line of ``stderr`` (log warnings may precede it); no traceback anywhere."""
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert stderr.rstrip("\n").splitlines()[-1] == errors[0]
    return errors[0]


def _sieve(tmp_path: Path, **replace: Path) -> list[str]:
    files = {"videos": SAMPLE / "HowTo100M_v1.csv", "transcripts": SAMPLE / "raw_caption.json",
             "recipes": SAMPLE / "recipes.csv", **replace}
    return ["sieve_swap", *[a for k, v in files.items() for a in (f"--{k}", str(v))], "--out", str(tmp_path / "out")]


# ------------------------------------------------------------------------------ refused before any work (CLI)


def test_unknown_prompt_id(tmp_path):
    done = _cli("howtostep", "--set", "prompt_id=nope", "--out", str(tmp_path / "out"))
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and "unknown prompt_id 'nope'" in line and "howtostep_v3" in line
    assert not (tmp_path / "out").exists()


def test_unknown_text_encoder_is_refused_offline(tmp_path):
    """``bogus`` is neither a known encoder, ``hash:<dim>`` nor a folder: refused before any work, and never looked up
    on the Hub (the endpoint is a closed port and the Hub client is offline)."""
    done = _cli("howtostep", "--set", "text_encoder=bogus", "--out", str(tmp_path / "out"),
                env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"})
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and "text_encoder: unknown text encoder 'bogus'" in line
    assert not (tmp_path / "out").exists()


def test_hash_encoder_is_refused_where_only_sentence_encoders_work(tmp_path):
    done = _cli(*_sieve(tmp_path), "--set", "embedding_model=hash:16")
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and "embedding_model: unknown text encoder 'hash:16'" in line


def test_malformed_replay_line(tmp_path):
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"video_id": "a", "stage": "filter", "raw_output": "Yes"}) + "\n{not json\n")
    done = _cli("showhowto", "--set", "llm=replay", "--set", f"llm_replay={replay}", "--out", str(tmp_path / "out"))
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and f"{replay} line 2: malformed LLM output record" in line
    assert not (tmp_path / "out").exists()


def test_a_fifo_where_a_file_is_expected(tmp_path):
    """A reader would block forever opening a FIFO: refused before anything opens it."""
    fifo = tmp_path / "HowTo100M_v1.csv"
    os.mkfifo(fifo)
    done = _cli(*_sieve(tmp_path, videos=fifo), timeout=60)
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and f"videos: {fifo} is a FIFO (named pipe)" in line
    assert not (tmp_path / "out").exists()


def test_a_symlink_loop_as_the_transcripts(tmp_path):
    loop = tmp_path / "raw_caption.json"
    loop.symlink_to(loop)
    done = _cli(*_sieve(tmp_path, transcripts=loop))
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and f"transcripts: {loop} is a symlink loop" in line


def test_a_symlink_loop_inside_a_transcript_directory(tmp_path):
    """A WhisperX directory holding ``<id>.json -> itself`` and ``sub -> .`` is a usable directory (the build is not
    refused for it) and indexing it ends; the looping entry is its video's path, so that reading it drops the video
    as ``malformed_transcript`` naming the link (tests/bad_input/test_directory_entries.py), never silently."""
    from dataclasses import dataclass

    from builders.core.driver import check_paths
    from builders.sources.narrations import _index_dir

    d = tmp_path / "whisperx"
    d.mkdir()
    (d / "dQw4w9WgXcQ.json").symlink_to(d / "dQw4w9WgXcQ.json")
    (d / "sub").symlink_to(d)

    @dataclass
    class Cfg:
        transcripts: str = str(d)

    check_paths(Cfg())
    assert _index_dir(d) == {"dQw4w9WgXcQ": d / "dQw4w9WgXcQ.json"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: a permission error cannot be made by chmod")
def test_an_unreadable_input(tmp_path):
    bad = tmp_path / "HowTo100M_v1.csv"
    bad.write_bytes((SAMPLE / "HowTo100M_v1.csv").read_bytes())
    bad.chmod(0)
    done = _cli(*_sieve(tmp_path, videos=bad))
    line = _one_error_line(done.stderr)
    assert done.returncode == 2 and "permission denied" in line


# ------------------------------------------------------------------------------ raised mid-build (in-process)


def _raise_from_build(monkeypatch, exc: BaseException) -> None:
    from builders.core import driver

    def run_build(corpus, args):
        raise exc

    monkeypatch.setattr(driver, "run_build", run_build)


ENOSPC = OSError(errno.ENOSPC, "No space left on device", "/out/.sieve_swap.incomplete/x/default/train.parquet")
OS_CASES = [  # (id, exception, exit code, text in the line)
    ("enospc", ENOSPC, 2, "no space left on the device (/out/.sieve_swap.incomplete/x/default/train.parquet)"),
    ("edquot", OSError(errno.EDQUOT, "Disk quota exceeded", "/work/s.parquet"), 2, "quota exceeded (/work/s.parquet)"),
    ("pyarrow_enospc", OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"),
     2, "no space left on the device: free space"),
    ("permission", PermissionError(errno.EACCES, "Permission denied", "/data/raw_caption.json"), 2,
     "permission denied (/data/raw_caption.json)"),
    ("eloop", OSError(errno.ELOOP, "Too many levels of symbolic links", "/data/t/a.json"), 2,
     "symlink loop (/data/t/a.json)"),
    ("erofs", OSError(errno.EROFS, "Read-only file system", "/ro/out"), 2, "read-only file system (/ro/out)"),
    ("wrapped_by_a_runner", RuntimeError("shard 3 failed"), 2, "no space left on the device"),
    ("unexpected", ZeroDivisionError("division by zero"), 1,
     "internal error: ZeroDivisionError: division by zero (rerun with --debug for the traceback)"),
]


@pytest.mark.parametrize("case, exc, code, text", OS_CASES, ids=[c[0] for c in OS_CASES])
def test_errors_mid_build_are_one_line(monkeypatch, capsys, case, exc, code, text):
    if case == "wrapped_by_a_runner":
        exc.__cause__ = ENOSPC
    _raise_from_build(monkeypatch, exc)
    rc = build.main(["sieve_swap", "--out", "/nonexistent-out", "-q"])
    err = capsys.readouterr().err
    assert rc == code
    assert _one_error_line(err) and text in err and err.count("\n") == 1


def test_debug_prints_the_traceback_then_the_line(monkeypatch, capsys):
    _raise_from_build(monkeypatch, ENOSPC)
    rc = build.main(["sieve_swap", "--out", "/nonexistent-out", "-q", "--debug"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback (most recent call last)" in err
    assert err.rstrip("\n").splitlines()[-1].startswith("error: no space left on the device")


def test_push_flags_are_checked_before_any_work(monkeypatch, capsys):
    _raise_from_build(monkeypatch, AssertionError("the build ran"))
    rc = build.main(["sieve_swap", "--push", "acme/toy", "--version", "v1.0.0\n", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "is not semantic" in err
    rc = build.main(["sieve_swap", "--push", "acme/toy", "--version", "v1.0.0", "--push-deadline", "0", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "--deadline must be a positive number" in err
