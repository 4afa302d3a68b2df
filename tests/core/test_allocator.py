"""builders/core/allocator.py: the CLI sets mimalloc's options before pyarrow is loaded, and keeps the user's."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

from builders.core.allocator import ARROW_ALLOCATOR_ENV, tune_arrow_allocator


def test_sets_the_options_and_keeps_a_value_the_user_set(monkeypatch):
    for key in ARROW_ALLOCATOR_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "250")
    tune_arrow_allocator()
    assert os.environ["MIMALLOC_ARENA_EAGER_COMMIT"] == "0"
    assert os.environ["MIMALLOC_PURGE_DELAY"] == "250"


def test_says_when_pyarrow_was_loaded_first(monkeypatch):
    importlib.import_module("pyarrow")  # loaded: its allocator has read its options
    for key in ARROW_ALLOCATOR_ENV:
        monkeypatch.delenv(key, raising=False)
    assert tune_arrow_allocator() is False


def test_cli_sets_them_before_pyarrow_is_imported():
    """``python -m builders.build`` imports no pyarrow before ``main``, whose first act sets the options: when the
    build then imports pyarrow (here its parser already does), the environment holds them."""
    code = (
        "import json, os, sys\n"
        "import builders.build as b\n"
        "assert 'pyarrow' not in sys.modules\n"
        "class Probe:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyarrow':\n"
        "            print(json.dumps({k: os.environ.get(k) for k in %r}), flush=True)\n"
        "            sys.meta_path.remove(self)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Probe())\n"
        "try:\n"
        "    b.main(['howtostep', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'pyarrow' in sys.modules\n" % sorted(ARROW_ALLOCATOR_ENV))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    assert json.loads(out.splitlines()[0]) == ARROW_ALLOCATOR_ENV
