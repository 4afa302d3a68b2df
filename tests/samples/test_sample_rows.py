"""The four bundled samples keep every row of the releases built before the corpus layer's refactor (issue 21):
per config and split, the same number of rows and the same row digest (``tests/samples/row_digests.py``;
``expected_rows.json`` was made from a ``make sample`` of commit 0c9e48b). The samples are those ``make sample``
built, or built here once per session (the ``sample_release`` fixture of ``tests/conftest.py``)."""

from __future__ import annotations

import json

import pytest

from tests.samples.row_digests import CORPORA, EXPECTED, release_digests


@pytest.mark.parametrize("corpus", CORPORA)
def test_sample_release_rows_are_unchanged(sample_release, corpus):
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))[corpus]
    got = release_digests(sample_release(corpus))
    assert sorted(got) == sorted(expected), "configs/splits differ"
    changed = {k: (expected[k], got[k]) for k in expected if got[k] != expected[k]}
    assert not changed, f"{corpus}: rows differ from the release built before the refactor: {changed}"
