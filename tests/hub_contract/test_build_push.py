"""``python -m builders.build <corpus> --push ORG/NAME --version vX.Y.Z``: build, then publish (the build itself is
replaced by a tiny release writer: the corpus builds have their own tests)."""

from __future__ import annotations

import pytest

from builders import build
from builders.core import driver

from .releases import make_release


@pytest.fixture
def fake_build(monkeypatch):
    calls = []

    def run_build(corpus, args):
        calls.append(corpus.NAME)
        make_release(__import__("pathlib").Path(args.out) / corpus.NAME)
        return "built"

    monkeypatch.setattr(driver, "run_build", run_build)
    return calls


def test_build_then_push(fake_hub, tmp_path, capsys, fake_build):
    rc = build.main(["sieve_swap", "--out", str(tmp_path), "-q", "--push", "acme/sieve_swap", "--version", "v1.0.0",
                     "--private"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert fake_build == ["sieve_swap"]
    repo = fake_hub.repos["acme/sieve_swap"]
    assert repo.private and repo.tags["v1.0.0"] == repo.branches["main"]


@pytest.mark.parametrize("argv, message", [
    (["--push", "acme/x", "--version", "1.0"], "is not semantic"),
    (["--push", "acme/x y", "--version", "v1.0.0"], "repo id"),
    (["--version", "v1.0.0"], "go together"),
    (["--push", "acme/x"], "go together"),
])
def test_bad_push_arguments_fail_before_the_build(fake_hub, tmp_path, capsys, fake_build, argv, message):
    rc = build.main(["sieve_swap", "--out", str(tmp_path), *argv])
    assert rc == 2 and message in capsys.readouterr().err
    assert fake_build == [] and fake_hub.requests == []


def test_a_failed_push_exits_2_and_keeps_the_built_release(fake_hub, tmp_path, capsys, fake_build, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    rc = build.main(["sieve_swap", "--out", str(tmp_path), "-q", "--push", "acme/sieve_swap", "--version", "v1.0.0"])
    assert rc == 2 and "no Hub token" in capsys.readouterr().err
    assert (tmp_path / "sieve_swap" / "README.md").is_file()
