"""Unit tests of ``builders.publish`` that need no Hub (the Hub flow is in tests/hub_contract, its own process)."""

from __future__ import annotations

import pytest

from builders import publish
from builders.publish import PublishError


@pytest.mark.parametrize("v, want", [("v0.0.0", (0, 0, 0)), ("v1.2.3", (1, 2, 3)), ("v10.0.12", (10, 0, 12))])
def test_semantic_versions(v, want):
    assert publish.parse_version(v) == want


@pytest.mark.parametrize("v", ["1.2.3", "v1.2", "v1.2.3.4", "v01.2.3", "v1.2.3-rc1", "V1.2.3", " v1.2.3", ""])
def test_non_semantic_versions_are_refused(v):
    with pytest.raises(PublishError, match="not semantic"):
        publish.parse_version(v)


@pytest.mark.parametrize("repo", ["acme/sieve_swap", "a/b", "Org-1/name.v2", "x_y/z-9"])
def test_repo_ids(repo):
    assert publish.check_repo_id(repo) == repo


@pytest.mark.parametrize("repo", ["sieve_swap", "acme/", "/x", "a/b/c", "a b/c", "a/b!", "-a/b", "a/b-", "a--b/c",
                                  "a/b..c", "a/" + "x" * 97])
def test_illegal_repo_ids_are_refused(repo):
    with pytest.raises(PublishError, match="repo id"):
        publish.check_repo_id(repo)


def test_previous_version_is_the_highest_semantic_tag_below():
    tags = ["v1.0.0", "v1.10.0", "v1.2.0", "v2.0.0", "nightly", "v1.2.0-rc1"]
    assert publish.previous_version(tags, "v1.3.0") == "v1.2.0"
    assert publish.previous_version(tags, "v1.11.0") == "v1.10.0"
    assert publish.previous_version(tags, "v1.0.0") is None
    assert publish.previous_version(tags, "v3.0.0") == "v2.0.0"


def test_redaction():
    msg = "401 for Bearer hf_AbCdEf123456 and token=mysecret"
    assert publish.redact(msg, "mysecret") == "401 for Bearer hf_*** and token=***"


def test_release_notes_compare_row_counts_with_the_previous_version():
    layout = publish.Layout(features={}, splits={"steps": ["train", "test"]},
                            rows={"steps": {"train": 7, "test": 2}}, default="steps")
    notes = publish.release_notes("acme/toy", "v1.1.0", "v1.0.0", layout,
                                  {"steps": {"train": 5, "test": 2}, "narrations": {"train": 3}})
    assert notes.startswith(publish.NOTES_START) and notes.rstrip().endswith(publish.NOTES_END)
    assert "previous version: `v1.0.0`" in notes and "configs removed: narrations" in notes
    assert "| steps | train | 5 | 7 | +2 |" in notes and "| narrations | train | 3 | – | – |" in notes
    first = publish.release_notes("acme/toy", "v1.0.0", None, layout, None)
    assert "none (first release)" in first and "| steps | train | 7 |" in first
    assert publish._strip_notes("# T\n\nbody\n\n" + notes) == "# T\n\nbody\n\n"


def test_upload_files_leave_out_hidden_lock_and_tmp_files(tmp_path):
    for rel in ["README.md", "steps/train-00000-of-00001.parquet", ".cache/x", "steps/.train.tmp", "a.lock",
                "b.tmp", "models/LICENSE", "models/model.json"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert publish.upload_files(tmp_path) == ["README.md", "models/model.json", "steps/train-00000-of-00001.parquet"]


def test_help_is_plain_text(capsys):
    """``--help`` prints no reST markup (the module docstring is reST; the description is plain)."""
    import pytest as _pytest

    from builders import publish

    with _pytest.raises(SystemExit) as exit_info:
        publish.main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "``" not in out and "Publish a built release folder" in out
