"""The bad inputs that must stop a build before any work (issue 14), through the real ``python -m builders.build``:
exit 2, the message naming the file and the problem, no traceback, no release. Plus two builds into one ``--out``:
the second exits 2 naming the lock holder and the first still writes its release. Kept to a handful of subprocesses
(each pays the CLI start-up); the readers' cases run in-process in the other files of this folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO

SAMPLE = REPO / "builders" / "samples" / "sieve_swap"


def _build(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builders.build", *args, "--no-progress"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _sieve_inputs(tmp_path, **replace) -> list[str]:
    files = {"videos": SAMPLE / "HowTo100M_v1.csv", "transcripts": SAMPLE / "raw_caption.json",
             "recipes": SAMPLE / "recipes.csv"}
    args = []
    for key, default in files.items():
        args += [f"--{key}", str(replace.pop(key, default))]
    for key, path in replace.items():
        args += [f"--{key}", str(path)]
    return args


CASES = [  # (case, corpus, file name, bytes, flag, message)
    ("sieve_swap_empty_videos_csv", "videos", "HowTo100M_v1.csv", b"", "empty file, no header"),
    ("sieve_swap_undecodable_videos_csv", "videos", "HowTo100M_v1.csv", b"\xff\xfe\x00v\x80,x\n",
     "unreadable header line"),
    ("sieve_swap_top_level_list_raw_caption", "transcripts", "raw_caption.json", b"[1, 2]", "a JSON list"),
    ("sieve_swap_recipenlg_missing_columns", "recipes", "full_dataset.csv", b"id,title\n1,Toast\n",
     "not a RecipeNLG CSV"),
    ("sieve_swap_exclusion_json_wrong_shape", "exclude", "exclude.json", b'{"ids": ["a"]}', "exclusion list must be"),
]


@pytest.mark.parametrize("case,flag,name,data,message", CASES, ids=[c[0] for c in CASES])
def test_whole_file_error_exits_2_before_any_work(tmp_path, case, flag, name, data, message):
    bad = tmp_path / name
    bad.write_bytes(data)
    done = _build("sieve_swap", *_sieve_inputs(tmp_path, **{flag: bad}), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and message in done.stderr and str(bad) in done.stderr
    assert not (tmp_path / "out").exists()  # before any work: no work directory, no release


def test_two_builds_into_one_out(tmp_path):
    """The first build holds the work directory under ``--out``; the second exits 2 with a clear message; the first
    then finishes and leaves its release."""
    gate = tmp_path / "gate"
    code = ("import sys, builders.build as b; sys.path.insert(0, {tests!r}); from bad_input import toy_corpus; "
            "b.load_corpus = lambda name: toy_corpus; sys.exit(b.main(['sieve_swap', '--out', {out!r}, "
            "'--no-progress', '-q']))").format(tests=str(REPO / "tests"), out=str(tmp_path / "out"))
    env = {**os.environ, "TOY_GATE": str(gate)}
    first = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "holding"  # inside the build, the lock held
        second = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=60, check=False)
        assert second.returncode == 2 and "Traceback" not in second.stderr
        assert "another build is using the work directory" in second.stderr and "--wait" in second.stderr
    finally:
        gate.touch()
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err[-2000:]
    rows = json.loads((tmp_path / "out" / "toy" / "rows.json").read_text())
    assert [r["id"] for r in rows] == [f"n{i}" for i in range(6)]
