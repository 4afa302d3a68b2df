"""Per-row reuse inside a recomputed shard: editing one video's transcript reruns that video, not its 63 neighbours
(issue 19, "per-video invalidation"; docs/architecture.md, "Caching").

A shard is the unit of caching: it is redone when its input shard, fitted state or per-item inputs change. For a
step that declares ``row_wise = True`` (each input row's kept rows, drops and counters depend on that row alone, its
per-item inputs, the step's parameters and its fitted state) the runner also records, per input row, a digest of
the row and the counters it produced (``row_memo`` in the shard's ``stats.json``). When such a shard is redone under
the same fitted state, a row whose digest is unchanged takes its kept rows, drops and counters from the previous
shard instead of being processed again; the others are processed one by one. The shard written is the one a full
recomputation writes (tested row for row): only the time differs.

Never reused: rows dropped with ``step_error`` (they are retried whenever their shard is redone, as before), rows of
a shard whose ids are not unique, and everything after a fitted state changed (the shard is recomputed whole).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ShardUnfinished, describe
from .records import STEP_ERROR, Drop, Out, Row
from .shards import read_drops, read_rows, read_stats, work_shard_name

if TYPE_CHECKING:  # runners imports this module
    from .runners import StageTask

#: the stats key of the per-row memo: ``{row id: [digest, {counter: n}]}``
MEMO_KEY = "row_memo"
_DIGEST_CHARS = 32


def row_digests(task: "StageTask", rows: list[Row]) -> list[str]:
    """A digest per input row: its content (canonical JSON) and, for a step with per-item inputs, the row's own
    :meth:`~builders.core.step.Step.item_digest`."""
    step = task.step
    cols = step.item_columns() if step.has_item_inputs else None
    out = []
    for r in rows:
        h = hashlib.sha256(json.dumps(r, sort_keys=True, default=str, separators=(",", ":")).encode("utf-8"))
        if cols is not None:
            h.update(task.item_digest([{c: r.get(c) for c in cols}]).encode("ascii"))
        out.append(h.hexdigest()[:_DIGEST_CHARS])
    return out


class _Previous:
    """What the previous computation of shard ``i`` left, per row id: its digest, counters, kept rows and drops."""

    def __init__(self, memo: dict[str, list[Any]], rows: list[Row], drops: list[dict[str, str]], id_field: str):
        self.memo = memo
        self.rows: dict[str, list[Row]] = {}
        for r in rows:
            self.rows.setdefault(str(r.get(id_field)), []).append(r)
        self.drops: dict[str, list[dict[str, str]]] = {}
        for d in drops:
            self.drops.setdefault(str(d["item_id"]), []).append(d)

    def get(self, rid: str, digest: str) -> tuple[list[Row], list[Drop], dict[str, int]] | None:
        """The outputs of row ``rid`` if it was computed from a row with this ``digest`` (one kept row or one drop,
        never a ``step_error``); else None."""
        entry = self.memo.get(rid)
        if not entry or entry[0] != digest:
            return None
        kept, drops = self.rows.get(rid, []), self.drops.get(rid, [])
        if len(kept) + len(drops) != 1 or any(d["reason"] == STEP_ERROR for d in drops):
            return None
        return kept, [Drop(d["item_id"], d["stage"], d["reason"], d["detail"]) for d in drops], dict(entry[1])


def previous(task: "StageTask", i: int) -> _Previous | None:
    """The reusable outputs of the last computation of shard ``i`` of ``task.out_dir``: None when there is none,
    it has no row memo, or it was computed under another fitted state."""
    if not Path(task.out_dir, f"{work_shard_name(i)}.stats.json").exists():
        return None
    try:
        stats = read_stats(task.out_dir, i)
        memo = stats.get(MEMO_KEY)
        if not memo or stats.get("state_key", "") != task.state_key:
            return None
        return _Previous(memo, read_rows(task.out_dir, i), read_drops(task.out_dir, i), task.step.id_field)
    except (OSError, ValueError, KeyError):  # an unreadable earlier shard: recompute it whole, as without a memo
        return None


def process_row_wise(task: "StageTask", rows: list[Row], i: int, call: Any) -> tuple[Out, dict[str, Any]]:
    """Process shard ``i`` of a ``row_wise`` step one row at a time, reusing unchanged rows' outputs. ``call(step,
    rows, policy, shard)`` runs ``step.process`` with the runner's retry policy. Returns the merged output and the
    extra shard statistics (``row_memo``, ``rows_reused``, ``counters_computed``).

    Failures follow the batch runner's rule: a row that raises a data error is dropped (``step_error``), unless every
    row of the shard raised the same exception type (a systemic failure: raised)."""
    step = task.step
    ids = [str(r.get(step.id_field)) for r in rows]
    unique = len(set(ids)) == len(ids)
    digests = row_digests(task, rows) if unique else []
    prev = previous(task, i) if unique else None
    out = Out(step.name)
    computed: Counter = Counter()
    memo: dict[str, list[Any]] = {}
    failures: list[BaseException] = []
    reused = 0
    for k, (r, rid) in enumerate(zip(rows, ids)):
        hit = prev.get(rid, digests[k]) if prev is not None else None
        if hit is not None:
            kept, drops, counters = hit
            out.rows.extend(kept)
            out.drops.extend(drops)
            out.counters.update(counters)
            memo[rid] = [digests[k], counters]
            reused += 1
            continue
        try:
            one = call(step, [r], task.policy, i)
        except ShardUnfinished:
            raise
        except Exception as e:  # noqa: BLE001 - recorded per row, as the batch runner does
            failures.append(e)
            out.drop(rid, STEP_ERROR, describe(e))
            continue
        out.rows.extend(one.rows)
        out.drops.extend(one.drops)
        out.counters.update(one.counters)
        computed.update(one.counters)
        if unique:
            memo[rid] = [digests[k], {k2: v for k2, v in sorted(one.counters.items())}]
    if rows and len(failures) == len(rows) and len({type(e) for e in failures}) == 1:
        raise failures[0]
    extra: dict[str, Any] = {}
    if unique:
        extra[MEMO_KEY] = memo
    if reused:
        extra["rows_reused"] = reused
        extra["counters_computed"] = dict(computed)
    return out, extra
