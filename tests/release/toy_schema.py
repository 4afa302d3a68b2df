"""The features and card of the toy release of ``tests/release/incremental_toy.py``, defined as a loading script
defines a corpus's (imports ``datasets``): the release flow reads them lazily."""

from __future__ import annotations

from datasets import Features, Value

FEATURES = {"items": Features({"id": Value("int64"), "text": Value("string")}),
            "ids": Features({"id": Value("int64")})}
CARD = {"license": "cc-by-4.0", "pretty_name": "Toy", "tags": ["toy"]}
