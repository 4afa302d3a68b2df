"""Opt-in live test against the real Hub (specs/releases.md §9c): skipped unless ``HF_TOKEN`` and
``HUB_TEST_NAMESPACE`` are set. Publishes the sieve_swap sample to a private throwaway repo
``<ns>/toolkit-it-<uuid>``, tags it, loads it by tag and deletes the repo in ``finally``. Never part of offline CI.

    HF_TOKEN=hf_... HUB_TEST_NAMESPACE=<user or org> python -m pytest tests/test_publish_live.py -m integration
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (os.environ.get("HF_TOKEN") and os.environ.get("HUB_TEST_NAMESPACE")),
                       reason="live Hub test: set HF_TOKEN and HUB_TEST_NAMESPACE to run it"),
]

ROOT = Path(__file__).resolve().parents[1]


def test_publish_the_sieve_swap_sample_to_a_private_throwaway_repo(tmp_path):
    from huggingface_hub import HfApi

    from builders import build, publish
    from loading_scripts import hub, sieve_swap

    folder = tmp_path / "sieve_swap"
    if (ROOT / "sieve_swap" / "README.md").is_file():
        shutil.copytree(ROOT / "sieve_swap", folder, ignore=shutil.ignore_patterns(".*"))
    else:
        assert build.main(["sieve_swap", "--out", str(tmp_path), "-q", "--no-progress"]) == 0
    repo = f"{os.environ['HUB_TEST_NAMESPACE']}/toolkit-it-{uuid.uuid4().hex[:12]}"
    api = HfApi()
    try:
        got = publish.publish(folder, repo, "v1.0.0", private=True)
        assert got["status"] == "published"
        assert api.repo_info(repo, repo_type="dataset").private
        assert [v["version"] for v in hub.versions(repo)] == ["v1.0.0"]
        layout = publish.read_layout(folder)
        dd = sieve_swap.load("default", repo=repo, revision="v1.0.0", cache_dir=str(tmp_path / "cache"))
        assert {s: dd[s].num_rows for s in dd} == layout.rows["default"]
        assert publish.publish(folder, repo, "v1.0.0", private=True)["status"] == "already-published"
    finally:
        api.delete_repo(repo, repo_type="dataset", missing_ok=True)
