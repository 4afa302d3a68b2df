"""Rows, drops and the per-batch output collector shared by sources, steps and runners.

A *row* is a plain ``dict`` (one video, one recipe, ...). A row that a reader or a step cannot handle becomes a
:class:`Drop` with a named reason; drops are counted in the build statistics and written to ``drops.parquet``
(``item_id, stage, reason, detail``). Nothing is lost silently: for every step, rows in = rows kept + rows dropped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]

DROP_FIELDS = ("item_id", "stage", "reason", "detail")
#: the drop reason of a row whose step raised a data error (the runners isolate it: docs/reason-codes.md)
STEP_ERROR = "step_error"
MAX_DETAIL_CHARS = 500


@dataclass(frozen=True, slots=True)
class Drop:
    """One dropped item: its id, the stage that dropped it, a named reason and a short detail."""

    item_id: str
    stage: str
    reason: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "item_id": str(self.item_id),
            "stage": self.stage,
            "reason": self.reason,
            "detail": str(self.detail)[:MAX_DETAIL_CHARS],
        }


@dataclass
class Out:
    """Collects what a step does with one batch: kept rows, drops and named counters.

    Steps call ``keep``, ``drop`` and ``count``; the runner turns the result into shard files and statistics.
    Counters are for events that do not remove a row (``bad_segment``, ``unknown_task_id``, ...).

    A ``row_wise_batch`` step (builders/core/step.py) sets ``item`` to the id of the input row it is working on
    before counting for it: ``count`` then also adds to ``item_counters[item]``, the per-row counters that the row
    memo records (builders/core/row_reuse.py; docs/architecture.md, "Caching"). While ``item`` is None (every other
    step) nothing else changes.
    """

    stage: str
    rows: list[Row] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    counters: Counter = field(default_factory=Counter)
    #: the id of the input row whose counters ``count`` records now (keyed as ``str``); None: not attributed
    item: Any = None
    item_counters: dict[str, Counter] = field(default_factory=dict)

    def keep(self, row: Row) -> None:
        self.rows.append(row)

    def drop(self, item_id: Any, reason: str, detail: str = "") -> None:
        self.drops.append(Drop(str(item_id), self.stage, reason, str(detail)[:MAX_DETAIL_CHARS]))

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.counters[name] += int(n)
            if self.item is not None:
                self.item_counters.setdefault(str(self.item), Counter())[name] += int(n)

    def unattributed(self) -> dict[str, int]:
        """The counters not attributed to an item (``counters`` less the sum of ``item_counters``): empty when every
        count was made under an ``item``."""
        rest = Counter(self.counters)
        for c in self.item_counters.values():
            rest.subtract(c)
        return {k: v for k, v in sorted(rest.items()) if v}


@dataclass(frozen=True, slots=True)
class Count:
    """A named counter event emitted by a source (e.g. ``unknown_task_id``); it removes no row."""

    name: str
    n: int = 1
