"""Issue 20: two builds into the same ``--out``, and a swap killed half-way (``builders.release.swap``: ``release_lock``,
``stage_release``, ``swap_into_place``, ``recover_swap``; ``loading_scripts.hub.restore_interrupted_swap``).

Each build is a separate process running the toy build of ``test_flow.py`` (``run_toy``): "pipelines"
(a sleep), then ``write_release`` into ``<out>/toy``. Whatever the interleaving, the release in place must be the
one the last successful build wrote, complete, with no staging folder left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders.release import old_path, staging_root

from .test_flow import texts

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {t: {"test": [f"{t} row {i}" for i in (0, 4, 8)],
                "train": [f"{t} row {i}" for i in range(12) if i % 4]} for t in ("a", "b")}

pytestmark = pytest.mark.timeout(300)


def start(out: Path, work: Path, tag: str, *, pre_sleep: float | str = 0, slow: float | str = 0, kill: bool = False
          ) -> subprocess.Popen:
    code = "import sys; from tests.release.test_flow import run_toy; run_toy(*sys.argv[1:])"
    args = [str(out), str(work), tag, str(pre_sleep), str(slow), "1" if kill else "0"]
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def finish(proc: subprocess.Popen) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def assert_clean_release(out: Path, tag: str, *, staging_left: bool = False) -> None:
    """The release in place is ``tag``'s, complete (its gate passes) and nothing but the lock lies beside it (and
    the killed build's staging folder, with ``staging_left``: only a build cleans those)."""
    from builders.release.gate import gate

    from .test_flow import FEATURES

    root = out / "toy"
    assert texts(root) == EXPECTED[tag]
    assert gate(root, features_by_config={"items": FEATURES}, splits_by_config={"items": ["train", "test"]},
                default_config="items") == {"items": {"train": 9, "test": 3}}
    beside = sorted(p.name for p in out.iterdir())
    assert beside == ([".toy.incomplete", ".toy.lock", "toy"] if staging_left else [".toy.lock", "toy"])


def test_a_second_build_during_the_first_ones_pipelines(tmp_path):
    out = tmp_path / "out"
    # the first build is in its "pipelines" until the second one has published
    first = start(out, tmp_path / "w1", "a", pre_sleep=f"until:{out / 'toy' / 'README.md'}")
    second = start(out, tmp_path / "w2", "b")
    b, _ = finish(second)
    a, _ = finish(first)
    assert not a["up_to_date"] and not b["up_to_date"]
    assert_clean_release(out, "a")  # the last to succeed


def test_a_second_build_during_the_first_ones_release_waits_for_it(tmp_path):
    out, go = tmp_path / "out", tmp_path / "go"
    first = start(out, tmp_path / "w1", "a", slow=f"until:{go}")  # writes its release until `go` exists
    deadline = time.time() + 120
    while not staging_root(out / "toy").exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.02)
    assert first.poll() is None, "the first build finished before the second one started"
    second = start(out, tmp_path / "w2", "b")
    said = ""
    for line in second.stderr:  # the second build must say that it waits, and wait
        said += line
        if "waiting for it to finish" in line:
            break
    assert "waiting for it to finish" in said, said[-3000:]
    assert second.poll() is None and not (out / "toy").exists()
    go.touch()
    a, _ = finish(first)
    b, _ = finish(second)
    assert not a["up_to_date"] and not b["up_to_date"]
    assert_clean_release(out, "b")


def test_builds_after_one_another(tmp_path):
    out = tmp_path / "out"
    finish(start(out, tmp_path / "w1", "a"))
    again, err = finish(start(out, tmp_path / "w2", "a"))  # the same final shards from another work directory
    assert again["up_to_date"] and "is up to date" in err
    assert_clean_release(out, "a")
    newer, _ = finish(start(out, tmp_path / "w3", "b"))
    assert not newer["up_to_date"]
    assert_clean_release(out, "b")


def _kill_between_renames(out: Path, work: Path) -> None:
    proc = start(out, work, "b", kill=True)
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL
    assert old_path(out / "toy").is_dir() and not (out / "toy").exists()  # killed between the two renames


def test_a_swap_killed_between_its_renames_is_recovered(tmp_path, monkeypatch):
    out = tmp_path / "out"
    finish(start(out, tmp_path / "w1", "a"))
    _kill_between_renames(out, tmp_path / "w2")
    # a reader first: the loader renames the previous release back
    from loading_scripts.hub import resolve

    monkeypatch.chdir(out)
    assert resolve("toy") == str(out / "toy")
    assert_clean_release(out, "a", staging_left=True)
    # then a build: it restores the previous release before anything else, and publishes its own
    _kill_between_renames(out, tmp_path / "w2")
    b, err = finish(start(out, tmp_path / "w2", "b"))
    assert "restored the previous release" in err and not b["up_to_date"]
    assert_clean_release(out, "b")


def test_the_loader_leaves_a_swap_in_progress_alone(tmp_path):
    """While a build holds the release lock, ``.<name>.old`` without ``<name>`` is its swap in progress."""
    from builders.release import release_lock
    from loading_scripts.hub import restore_interrupted_swap

    folder = tmp_path / "toy"
    old_path(folder).mkdir()
    with release_lock(folder):
        assert restore_interrupted_swap(folder) is False
        assert not folder.exists()
    assert restore_interrupted_swap(folder) is True and folder.is_dir()


def test_release_lock_without_waiting_names_the_holder(tmp_path):
    from builders.release import ReleaseLocked, release_lock

    code = ("import sys, time; from builders.release import release_lock\n"
            "with release_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "toy")], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ReleaseLocked, match=f"pid {holder.pid}"), release_lock(tmp_path / "toy", wait=False):
            pass
    finally:
        holder.kill()
        holder.wait()
    with release_lock(tmp_path / "toy", wait=False):  # the lock went with the killed process
        pass
