"""builders/core/atomic.py: hidden temp file in the same folder, os.replace, temp removed on error."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from builders.core import atomic
from builders.core.atomic import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    temp_name,
)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_temp_name_is_a_hidden_sibling_with_the_pid(tmp_path):
    assert temp_name(tmp_path / "stats.json") == tmp_path / f".stats.json.tmp.{os.getpid()}"


@pytest.mark.parametrize("fsync", [False, True])
def test_writes_create_the_folder_replace_and_leave_nothing_else(tmp_path, fsync):
    path = tmp_path / "sub" / "a.bin"
    assert atomic_write_bytes(path, b"one", fsync=fsync) == path
    assert atomic_write_bytes(str(path), b"two", fsync=fsync) == path
    assert path.read_bytes() == b"two"
    assert atomic_write_text(tmp_path / "sub" / "t.md", "é\n", fsync=fsync).read_bytes() == "é\n".encode()
    assert names(tmp_path / "sub") == ["a.bin", "t.md"]


def test_atomic_write_json_passes_the_kwargs_and_ends_with_a_newline(tmp_path):
    path = atomic_write_json(tmp_path / "m.json", {"b": 1, "a": "é"}, sort_keys=True, indent=2, ensure_ascii=False)
    assert path.read_text(encoding="utf-8") == json.dumps({"a": "é", "b": 1}, indent=2, ensure_ascii=False) + "\n"


def test_an_unserialisable_object_leaves_the_old_file(tmp_path):
    path = atomic_write_json(tmp_path / "m.json", {"ok": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1}
    assert names(tmp_path) == ["m.json"]


def test_atomic_path_renames_on_success(tmp_path):
    path = tmp_path / "t.parquet"
    with atomic_path(path) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".") and not path.exists()
        tmp.write_bytes(b"data")
    assert path.read_bytes() == b"data" and names(tmp_path) == ["t.parquet"]


def test_atomic_path_removes_the_temp_and_keeps_the_old_file_on_error(tmp_path):
    path = atomic_write_bytes(tmp_path / "t.parquet", b"old")
    with pytest.raises(RuntimeError, match="writer failed"), atomic_path(path) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert path.read_bytes() == b"old" and names(tmp_path) == ["t.parquet"]


def test_a_failed_rename_removes_the_temp(tmp_path, monkeypatch):
    path = atomic_write_bytes(tmp_path / "a.txt", b"old")

    def fail(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="rename failed"):
        atomic_write_text(path, "new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old" and names(tmp_path) == ["a.txt"]


def test_a_stale_temp_of_the_same_name_is_overwritten(tmp_path):
    path = tmp_path / "a.txt"
    temp_name(path).write_bytes(b"leftover of a crashed run")
    atomic_write_text(path, "new")
    assert names(tmp_path) == ["a.txt"] and path.read_text() == "new"


def test_the_module_imports_only_the_standard_library():
    tree = ast.parse(Path(atomic.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative imports"
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)
