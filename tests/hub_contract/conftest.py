"""The hub contract suite: its own pytest process, pointed at the in-process fake Hub (specs/releases.md §9b).

``HF_ENDPOINT``, ``HF_HUB_DISABLE_XET``, ``HF_HUB_OFFLINE`` and ``HF_HOME`` are read when ``huggingface_hub`` and
``datasets`` are imported, so they are set here, before either is imported, and checked: run this folder in a process
of its own (``make test`` does: ``python -m pytest tests/hub_contract --override-ini addopts=-ra``).
"""

from __future__ import annotations

import os
import sys
import tempfile

FAKE_ENDPOINT = "https://fakehub.test"
FAKE_TOKEN = "hf_fake"

if "huggingface_hub" not in sys.modules and "datasets" not in sys.modules:
    os.environ["HF_ENDPOINT"] = FAKE_ENDPOINT
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "0"
    os.environ["HF_DATASETS_OFFLINE"] = "0"
    os.environ["HF_TOKEN"] = FAKE_TOKEN
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hub-contract-home-")
    os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)
    os.environ.pop("HF_OIDC_RESOURCE", None)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import pytest  # noqa: E402
from huggingface_hub import constants  # noqa: E402

if constants.ENDPOINT != FAKE_ENDPOINT or not constants.HF_HUB_DISABLE_XET or constants.HF_HUB_OFFLINE:
    pytest.exit("tests/hub_contract must run in its own pytest process, before anything imports huggingface_hub: "
                "python -m pytest tests/hub_contract --override-ini addopts=-ra", returncode=3)

from .fakehub import FakeHub  # noqa: E402


@pytest.fixture
def fake_hub(monkeypatch):
    import httpx2
    import huggingface_hub
    from huggingface_hub.utils._http import default_client_factory

    from builders import publish

    hub = FakeHub(tokens=(FAKE_TOKEN,))
    huggingface_hub.set_client_factory(
        lambda: httpx2.Client(transport=httpx2.MockTransport(hub.handler), follow_redirects=True))
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    hub.sleeps = []
    monkeypatch.setattr(publish.retry, "_sleep", hub.sleeps.append)
    yield hub
    huggingface_hub.set_client_factory(default_client_factory)
