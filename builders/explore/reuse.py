"""Items of the explorer page kept from the page an earlier build wrote, for the ids whose rows did not change
(issue 19, the edit rerun: the page of an edited release costs the items of the edited videos only).

A view's item is a function of its id's rows in a few configs (``howtostep``: ``steps``, ``narrations`` and
``dropped_steps`` of one video) and of the explorer's code. When the release flow writes those configs from cached
parts (``builders.release.parts``: one part per work shard, made again only when the shard's rows changed; a part's
name says which rows it holds), the rows of an id are unchanged as long as the parts that held them are still in use
and no part made since holds the id. ``ItemReuse`` keeps, in one file of the release cache, each item's JSON text with
the parts that held its rows and the names of every part in use; a later page takes the texts of the items that still
qualify and builds the others. The page is the same either way.

Only the parts made since the record was written are read (their id column), so a page costs the items of the changed
rows whatever the corpus size; an id the record does not know (a sample that changed) is looked up in every part.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Encoded", "ItemReuse", "explorer_code"]

#: bump when a record of the same items would differ
REUSE_FORMAT = 1


class Encoded(NamedTuple):
    """An item of the page given as its JSON text (``json_for_script``), kept from an earlier page."""

    id: str
    json: str


def explorer_code() -> str:
    """A digest of the explorer's source (its modules and templates): items of another code are never reused."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted([*root.glob("*.py"), *(root / "templates").glob("*")]):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _part_ids(path: Path, id_column: str) -> set[Any]:
    """The ``id_column`` values of one part (only that column is read)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        index = reader.schema.get_field_index(id_column)
        if index < 0:
            raise KeyError(id_column)
        options = pa.ipc.IpcReadOptions(included_fields=[index])
        return set(pa.ipc.open_file(source, options=options).read_all().column(0).to_pylist())


@dataclass
class ItemReuse:
    """The item record ``record`` (a file in the release cache, written by this toolkit) and the parts this
    release's configs were written from (config -> part files, in order)."""

    record: Path
    parts: Mapping[str, Sequence[Path]]
    scope: tuple[str, tuple[str, ...], str] | None = None  # (corpus, configs, id column) of the view that loaded
    _before: dict[str, Any] = field(default_factory=dict, repr=False)  # the record read by ``load``
    _new: dict[str, dict[str, set[Any]]] = field(default_factory=dict, repr=False)  # ids of the parts made since

    def _key(self, corpus: str, configs: Sequence[str], id_column: str) -> list[Any]:
        return [REUSE_FORMAT, explorer_code(), corpus, list(configs), id_column]

    def load(self, corpus: str, configs: Sequence[str], id_column: str) -> dict[str, str]:
        """The JSON text of each earlier item whose rows did not change since, by id ({} when nothing qualifies).
        ``configs`` are the configs an item of the view ``corpus`` is made of, tied by ``id_column``: ``save``
        records the page's items for the same."""
        self.scope, self._before, self._new = (corpus, tuple(configs), id_column), {}, {}
        if any(c not in self.parts for c in configs):
            return {}
        from ..core.errors import DamagedCache
        from ..core.checked import read_checked_json

        try:
            rec = read_checked_json(self.record)  # damaged, it is missing and written again
        except OSError:
            return {}
        except DamagedCache as err:
            if not err.why.startswith("an earlier format"):
                import logging

                logging.getLogger(__name__).warning("damaged explorer item record %s (%s): items made again",
                                                    self.record, err.why)
            return {}
        if not isinstance(rec, dict) or rec.get("key") != self._key(corpus, configs, id_column):
            return {}
        try:
            current = {c: {p.name for p in self.parts[c]} for c in configs}
            for c in configs:
                before = set(rec["parts"][c])
                self._new[c] = {p.name: _part_ids(p, id_column) for p in self.parts[c] if p.name not in before}
            changed = set().union(*(ids for new in self._new.values() for ids in new.values()))
            self._before = rec
            return {vid: item["json"] for vid, item in rec["items"].items()
                    if vid not in changed and all(set(item["in"][c]) <= current[c] for c in configs)}
        except (KeyError, TypeError, ValueError, OSError):
            self._before, self._new = {}, {}
            return {}

    def _held(self, ids: set[Any]) -> dict[Any, dict[str, list[str]]]:
        """For each id, per config, the names of the parts in use that hold its rows: from the record and the parts
        made since where the record knows the id, else from every part of the config."""
        corpus, configs, id_column = self.scope  # type: ignore[misc]
        known = self._before.get("items", {})
        held: dict[Any, dict[str, list[str]]] = {vid: {c: [] for c in configs} for vid in ids}
        for c in configs:
            names = [p.name for p in self.parts[c]]
            current = set(names)
            new = self._new.get(c, {})
            unknown = {vid for vid in ids if vid not in known}
            every: dict[str, set[Any]] = {}
            if unknown:
                every = {p.name: new[p.name] if p.name in new else _part_ids(p, id_column) for p in self.parts[c]}
            for vid in ids:
                if vid in known:
                    before = [n for n in known[vid]["in"][c] if n in current]
                    held[vid][c] = sorted(set(before) | {n for n, got in new.items() if vid in got},
                                          key=names.index)
                else:
                    held[vid][c] = [n for n in names if vid in every[n]]
        return held

    def save(self, items: Iterable[tuple[Any, str]]) -> None:
        """Record the page's items' JSON texts (``(id, text)``; ids that are not strings are left out) with the parts
        that hold their rows, for the scope of the last ``load`` (nothing without one, or when a config of it was not
        written from parts). A cache: a failure to write it is no error."""
        if self.scope is None or any(c not in self.parts for c in self.scope[1]):
            return
        corpus, configs, id_column = self.scope
        items = list(items)
        if len({vid for vid, _ in items}) != len(items):  # two items of one id: not kept by id
            return
        items = [(vid, text) for vid, text in items if isinstance(vid, str)]
        try:
            held = self._held({vid for vid, _ in items})
        except (KeyError, OSError, ValueError):
            return
        rec = {"key": self._key(corpus, configs, id_column),
               "parts": {c: [p.name for p in self.parts[c]] for c in configs},
               "items": {vid: {"json": text, "in": held[vid]} for vid, text in items}}
        with contextlib.suppress(OSError):
            from ..core.atomic import atomic_write_text
            from ..core.checked import checked_json

            self.record.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.record, checked_json(rec))
