"""Contract tests of ``builders.publish`` and the loading helpers against the in-process fake Hub (releases.md §9b)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx2
import pytest
from datasets import load_dataset

from builders import publish
from loading_scripts import hub as hub_helpers

from .releases import STEPS, make_release

REPO = "acme/toy"


class Killed(BaseException):
    """A process kill at a chosen request (not an Exception: nothing in the flow may catch it)."""


def _kill(request):
    raise Killed(f"killed at {request.method} {request.url.path}")


def run(argv, capsys):
    rc = publish.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out + err


def records(folder: Path) -> list[dict]:
    return json.loads((folder / "manifest.json").read_text())["hub"]["releases"]


def rows(repo, config, revision, split="train", streaming=False, cache_dir=None):
    ds = load_dataset(repo, config, revision=revision, split=split, streaming=streaming, cache_dir=cache_dir)
    return [r["text"] for r in ds]


# ------------------------------------------------------------------------------------------ publish, versions


def test_first_publish_uploads_once_tags_the_commit_and_records_it(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 0, out
    repo = fake_hub.repos[REPO]
    assert fake_hub.count("POST", r"/commit/") == 1 and fake_hub.commit_count(REPO) == 2   # initial + release
    assert repo.tags == {"v1.0.0": repo.branches["main"]}
    files = fake_hub.files_at(REPO, "v1.0.0")
    assert sorted(files) == sorted([".gitattributes", *publish.upload_files(rel)])
    for rel_path in publish.upload_files(rel):
        if rel_path not in ("README.md", "manifest.json"):
            assert files[rel_path] == (rel / rel_path).read_bytes(), rel_path
    card = files["README.md"].decode()
    assert card.startswith((rel / "README.md").read_text().rstrip("\n"))
    assert "## Release v1.0.0" in card and "previous version: none (first release)" in card
    assert "hub" not in json.loads(files["manifest.json"])          # local records are never uploaded
    assert records(rel) == [{"version": "v1.0.0", "repo": REPO, "commit": repo.tags["v1.0.0"], "tag": "v1.0.0",
                             "status": "published"}]
    assert "published acme/toy v1.0.0" in out
    # a tag and a commit load map-style and streaming, with the README's Features
    assert rows(REPO, "steps", "v1.0.0") == [f"step {i}" for i in range(5)]
    assert rows(REPO, "steps", "v1.0.0", split="test", streaming=True) == ["step 100", "step 101"]
    assert load_dataset(REPO, "steps", revision="v1.0.0", split="train").features == STEPS


def test_second_version_loads_beside_the_first_and_the_card_says_what_changed(fake_hub, tmp_path, capsys):
    v1 = make_release(tmp_path / "a" / "toy")
    assert run([v1, "--repo", REPO, "--version", "v1.0.0"], capsys)[0] == 0
    # v1.1.0: more rows (another shard count), different texts, and the narrations config dropped
    v2 = make_release(tmp_path / "b" / "toy", n_train=7, tag=" v2", narrations=False)
    rc, out = run([v2, "--repo", REPO, "--version", "v1.1.0", "--message", "More steps"], capsys)
    assert rc == 0, out
    repo = fake_hub.repos[REPO]
    assert set(repo.tags) == {"v1.0.0", "v1.1.0"} and repo.tags["v1.0.0"] != repo.tags["v1.1.0"]
    files = fake_hub.files_at(REPO, "v1.1.0")
    assert not any(p.startswith("narrations/") for p in files)          # stale files of v1.0.0 deleted
    assert sorted(p for p in files if p.startswith("steps/train")) == [
        f"steps/train-0000{i}-of-00004.parquet" for i in range(4)]
    card = files["README.md"].decode()
    assert "previous version: `v1.0.0`" in card and "configs removed: narrations" in card
    assert "| steps | train | 5 | 7 | +2 |" in card
    assert repo.commits[repo.tags["v1.1.0"]].title == "More steps"
    # every tag loads its own rows, map-style and streaming, and v1.0.0 again after v1.1.0
    for streaming in (False, True):
        assert rows(REPO, "steps", "v1.0.0", streaming=streaming) == [f"step {i}" for i in range(5)]
        assert rows(REPO, "steps", "v1.1.0", streaming=streaming) == [f"step {i} v2" for i in range(7)]
        assert rows(REPO, "narrations", "v1.0.0", streaming=streaming) == [f"now we cut {i}" for i in range(3)]
    assert rows(REPO, "steps", "v1.0.0") == [f"step {i}" for i in range(5)]
    vs = hub_helpers.versions(REPO)
    assert [v["version"] for v in vs] == ["v1.0.0", "v1.1.0"]
    assert [v["commit"] for v in vs] == [repo.tags["v1.0.0"], repo.tags["v1.1.0"]]
    assert vs[0]["date"] < vs[1]["date"]


def test_identical_republish_is_a_no_op(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    assert run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)[0] == 0
    commits = fake_hub.commit_count(REPO)
    fake_hub.requests.clear()
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 0 and "already published" in out
    assert fake_hub.commit_count(REPO) == commits
    assert fake_hub.count("POST", r"/commit/|/tag/|lfs") == 0
    # a rebuilt copy of the same release (same bytes) is identical too, even with local records in its manifest
    copy = tmp_path / "copy" / "toy"
    shutil.copytree(rel, copy)
    assert run([copy, "--repo", REPO, "--version", "v1.0.0"], capsys)[0] == 0
    assert fake_hub.commit_count(REPO) == commits


def test_changed_republish_of_a_version_is_refused(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "a" / "toy")
    assert run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)[0] == 0
    tag_before = fake_hub.repos[REPO].tags["v1.0.0"]
    changed = make_release(tmp_path / "b" / "toy", tag=" changed")
    rc, out = run([changed, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2
    assert "already has v1.0.0 with different files" in out and "steps/train-00000-of-00003.parquet" in out
    assert fake_hub.repos[REPO].tags["v1.0.0"] == tag_before
    assert fake_hub.count("POST", r"/commit/") == 1


# ------------------------------------------------------------------------------------------ retries, interruptions


def test_429_412_500_on_the_commit_are_retried_honouring_retry_after(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    fake_hub.fail("POST", r"/commit/main$", 429, headers={"Retry-After": "1"},
                  body={"error": "You have exceeded our hourly quotas for action: repository commits (128 per hour)"})
    fake_hub.fail("POST", r"/commit/main$", 412, body={"error": "A commit has happened since."})
    fake_hub.fail("POST", r"/commit/main$", 500)
    fake_hub.fail("POST", r"/tag/", 503, headers={"Retry-After": "2"})
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 0, out
    assert fake_hub.count("POST", r"/commit/main$") == 4 and fake_hub.commit_count(REPO) == 2
    assert fake_hub.count("POST", r"/tag/") == 2 and "v1.0.0" in fake_hub.repos[REPO].tags
    assert fake_hub.sleeps[0] == 1.0 and fake_hub.sleeps[-1] == 2.0 and len(fake_hub.sleeps) == 4
    assert "HTTP 429, retrying in 1.0 s" in out and "HTTP 412" in out and "HTTP 500" in out
    # every upload try re-read the head of main
    assert fake_hub.count("GET", r"/revision/main$") >= 4


def test_a_concurrent_commit_gives_412_and_the_retry_rebases_on_the_new_head(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    fake_hub.on("POST", r"/commit/main$",
                lambda req: fake_hub.commit_files(REPO, {"notes.txt": b"someone else"}))
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 0 and "HTTP 412" in out
    files = fake_hub.files_at(REPO, "v1.0.0")
    assert "notes.txt" not in files and "README.md" in files           # the tag holds exactly the release


@pytest.mark.parametrize("kill_at", [r"/commit/main$", r"/tag/"])
def test_an_interrupted_publish_completes_on_rerun(fake_hub, tmp_path, capsys, kill_at):
    rel = make_release(tmp_path / "toy")
    fake_hub.on("POST", kill_at, _kill)
    with pytest.raises(Killed):
        publish.main([str(rel), "--repo", REPO, "--version", "v1.0.0"])
    assert fake_hub.repos[REPO].tags == {}
    if kill_at == r"/tag/":
        assert records(rel)[0]["status"] == "uploaded"
    commits = fake_hub.commit_count(REPO)
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 0, out
    repo = fake_hub.repos[REPO]
    assert repo.tags["v1.0.0"] == repo.branches["main"]
    assert fake_hub.commit_count(REPO) == (commits if kill_at == r"/tag/" else commits + 1)  # no second commit
    assert records(rel) == [{"version": "v1.0.0", "repo": REPO, "commit": repo.tags["v1.0.0"], "tag": "v1.0.0",
                             "status": "published"}]
    assert rows(REPO, "steps", "v1.0.0") == [f"step {i}" for i in range(5)]


def test_a_network_error_mid_upload_fails_cleanly_with_nothing_tagged(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")

    def drop(request):
        raise httpx2.ConnectError("connection reset by peer", request=request)

    fake_hub.on("POST", r"/commit/main$", drop, times=100)
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2
    assert "upload" in out.lower() and "network error" in out
    assert fake_hub.repos[REPO].tags == {} and fake_hub.commit_count(REPO) == 1
    assert len(fake_hub.sleeps) == publish.MAX_TRIES - 1


# ------------------------------------------------------------------------------------------ private, tokens


def test_private_repo(fake_hub, tmp_path, capsys, monkeypatch):
    rel = make_release(tmp_path / "toy")
    rc, out = run([rel, "--repo", "acme/secret", "--version", "v1.0.0", "--private"], capsys)
    assert rc == 0, out
    assert fake_hub.repos["acme/secret"].private
    assert rows("acme/secret", "steps", "v1.0.0") == [f"step {i}" for i in range(5)]
    assert [v["version"] for v in hub_helpers.versions("acme/secret")] == ["v1.0.0"]
    # --private into an existing public repo is refused
    assert run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)[0] == 0
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.1", "--private"], capsys)
    assert rc == 2 and "is public" in out


def test_missing_token_is_a_clear_error_before_any_request(fake_hub, tmp_path, capsys, monkeypatch):
    rel = make_release(tmp_path / "toy")
    monkeypatch.delenv("HF_TOKEN")
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "no Hub token: set HF_TOKEN" in out
    assert fake_hub.requests == []


def test_invalid_token_is_a_clear_error_and_never_printed(fake_hub, tmp_path, capsys, monkeypatch):
    rel = make_release(tmp_path / "toy")
    secret = "hf_NotTheRightSecret123"
    monkeypatch.setenv("HF_TOKEN", secret)
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "rejected the token (HTTP 401)" in out
    assert secret not in out and REPO not in fake_hub.repos
    assert secret not in (rel / "manifest.json").read_text()


def test_a_server_echoing_the_token_never_gets_it_printed(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    from .conftest import FAKE_TOKEN

    fake_hub.fail("POST", r"/commit/main$", 400, body={"error": f"bad request from Bearer {FAKE_TOKEN}"})
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "HTTP 400" in out
    assert FAKE_TOKEN not in out
    assert FAKE_TOKEN not in (rel / "manifest.json").read_text()


# ------------------------------------------------------------------------------------------ dry run, bad input


def test_dry_run_prints_the_plan_without_any_network_call(fake_hub, tmp_path, capsys, monkeypatch):
    rel = make_release(tmp_path / "toy")
    monkeypatch.delenv("HF_TOKEN")
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0", "--dry-run"], capsys)
    assert rc == 0, out
    assert fake_hub.requests == []
    assert "no network call" in out and "steps: train=5 rows, test=2 rows" in out and "narrations: train=3" in out
    assert "steps/train-00000-of-00003.parquet" in out and "README.md" in out and "files (10," in out
    assert "hub" not in json.loads((rel / "manifest.json").read_text())


@pytest.mark.parametrize("version", ["1.0.0", "v1.0", "v01.0.0", "v1.0.0-rc1", "latest", ""])
def test_a_malformed_version_is_refused_before_any_work(fake_hub, tmp_path, capsys, version):
    rc, out = run([tmp_path / "does-not-exist", "--repo", REPO, "--version", version], capsys)
    assert rc == 2 and "is not semantic" in out and fake_hub.requests == []


@pytest.mark.parametrize("repo", ["toy", "acme/bad name", "acme/toy/extra", "-acme/toy", "acme/to..y", "a/b!"])
def test_an_illegal_repo_id_is_refused(fake_hub, tmp_path, capsys, repo):
    rel = make_release(tmp_path / "toy")
    rc, out = run([rel, f"--repo={repo}", "--version", "v1.0.0"], capsys)
    assert rc == 2 and "repo id" in out and fake_hub.requests == []


def test_a_folder_that_is_not_a_release_is_refused(fake_hub, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    rc, out = run([tmp_path / "empty", "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "not a release folder" in out
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "README.md").write_text("# just a readme\n")
    rc, out = run([tmp_path / "plain", "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "no 'configs:'" in out
    assert fake_hub.requests == []


def test_a_folder_failing_the_gate_is_refused(fake_hub, tmp_path, capsys):
    rel = make_release(tmp_path / "toy")
    (rel / "steps" / "train-00000-of-00003.parquet.tmp").write_bytes(b"junk")
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "fails the release gate" in out and "train-00000-of-00003.parquet.tmp" in out
    os.remove(rel / "steps" / "train-00000-of-00003.parquet.tmp")
    os.remove(rel / "steps" / "train-00001-of-00003.parquet")
    rc, out = run([rel, "--repo", REPO, "--version", "v1.0.0"], capsys)
    assert rc == 2 and "incomplete shard set" in out
    assert fake_hub.requests == []
