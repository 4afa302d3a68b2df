"""Per-row reuse inside a recomputed shard: editing one video's transcript reruns that video, not its 63 neighbours
(issue 19, "per-video invalidation"; docs/architecture.md, "Caching").

A shard is the unit of caching: it is redone when its input shard, fitted state or per-item inputs change. For a
step that declares ``row_wise = True`` (each input row's kept rows, drops and counters depend on that row alone, its
per-item inputs, the step's parameters and its fitted state) the runner also records, per input row, a digest of
the row and the counters it produced (``row_memo`` in the shard's ``stats.json``). When such a shard is redone under
the same fitted state, a row whose digest is unchanged takes its kept rows, drops and counters from the previous
shard instead of being processed again; the others are processed one by one, or, for a step that also declares
``row_wise_batch`` (it attributes each counter to its row: ``Out.item``), together in one call (a fresh shard too,
as before the step was row-wise; if that call raises a data error, one by one). The shard written is the one a full
recomputation writes (tested row for row): only the time differs.

One exception, by design: rows that refer to files a step writes, named by their content (``VisualFeatures``'s
feature store, builders/corpora/howtostep/features.py). After a partial recompute the reused rows still name the
previous shard's store block and the recomputed rows a new, smaller one, so ``features_path`` / ``features_rows``
differ from a full recomputation's while the features they load are the same. The store is never garbage-collected
(``collect_garbage`` removes only stage folders), so the blocks named stay valid.

Never reused: rows dropped with ``step_error`` (they are retried whenever their shard is redone, as before), rows of
a shard whose ids are not unique, and everything after a fitted state changed (the shard is recomputed whole).
"""

from __future__ import annotations

import hashlib
import pickle
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DamagedCache, ShardUnfinished, describe
from .records import MAX_DETAIL_CHARS, STEP_ERROR, Drop, Out, Row
from .shards import read_drops, read_rows, read_stats, work_shard_name

if TYPE_CHECKING:  # runners imports this module
    from .runners import StageTask

#: the stats key of the per-row memo: ``{row id: [digest, {counter: n}]}``
MEMO_KEY = "row_memo"
_DIGEST_CHARS = 32


def row_digests(task: "StageTask", rows: list[Row]) -> list[str]:
    """A digest per input row: its content (its pickle, protocol 5) and, for a step with per-item inputs, the row's
    own :meth:`~builders.core.step.Step.item_digest`.

    The rows are those the shard reader returns, so equal rows pickle to the same bytes (same field order, same
    reader); different values never do, so a row is never reused for another. A pickle is 5x faster than canonical
    JSON here (3 against 15 ms for a 64-video HowToStep shard of 1 MB), which every fresh shard of a ``row_wise``
    step pays; a reader that ordered fields otherwise would only make rows recompute."""
    step = task.step
    cols = step.item_columns() if step.has_item_inputs else None
    out = []
    for r in rows:
        h = hashlib.sha256(pickle.dumps(r, protocol=5))
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


#: one input row's outputs: its kept rows, its drops and its counters
_Part = tuple[list[Row], list[Drop], dict[str, int]]


def _sorted(counters: Any) -> dict[str, int]:
    return {k: v for k, v in sorted(counters.items())}


def process_row_wise(task: "StageTask", rows: list[Row], i: int, call: Any) -> tuple[Out, dict[str, Any]]:
    """Process shard ``i`` of a ``row_wise`` step, reusing unchanged rows' outputs; the other rows are processed one
    at a time or, for a ``row_wise_batch`` step, in one call (:func:`_process_batch`). ``call(step, rows, policy,
    shard)`` runs ``step.process`` with the runner's retry policy. Returns the output, in input order as a full
    recomputation orders it, and the extra shard statistics (``row_memo``, ``rows_reused``, ``counters_computed``).

    Failures follow the batch runner's rule: a row that raises a data error is dropped (``step_error``), unless every
    row of the shard raised the same exception type (a systemic failure: raised)."""
    step = task.step
    ids = [str(r.get(step.id_field)) for r in rows]
    unique = len(set(ids)) == len(ids)
    digests = row_digests(task, rows) if unique else []
    prev = previous(task, i) if unique else None
    parts: list[_Part | None] = [prev.get(rid, digests[k]) if prev is not None else None for k, rid in enumerate(ids)]
    changed = [k for k, part in enumerate(parts) if part is None]
    reused = len(rows) - len(changed)
    batch = _process_batch(task, rows, ids, changed, i, call) if step.row_wise_batch and changed else None
    memo: dict[str, list[Any]] = {}
    if batch is not None and not reused:  # a fresh shard: the batch's output is the full recomputation's, as it is
        out, computed = batch, Counter(batch.counters)
        if unique:
            memo = {rid: [digests[k], _sorted(batch.item_counters.get(rid, {}))] for k, rid in enumerate(ids)}
        return out, _extra(unique, memo, reused, computed)
    split = _split(step.name, step.id_field, batch, [ids[k] for k in changed]) if batch is not None else {}
    failures: dict[int, BaseException] = {}
    for k in changed:
        if batch is not None:
            parts[k] = split[ids[k]]
            continue
        try:
            one = call(step, [rows[k]], task.policy, i)
        except (ShardUnfinished, DamagedCache):  # never a drop: the build recomputes the damaged cache
            raise
        except Exception as e:  # noqa: BLE001 - recorded per row, as the batch runner does
            failures[k] = e
            parts[k] = ([], [Drop(ids[k], step.name, STEP_ERROR, describe(e)[:MAX_DETAIL_CHARS])], {})
            continue
        parts[k] = (one.rows, one.drops, _sorted(one.counters))
    if rows and len(failures) == len(rows) and len({type(e) for e in failures.values()}) == 1:
        raise next(iter(failures.values()))
    out, computed, is_changed = Out(step.name), Counter(), set(changed)
    for k, part in enumerate(parts):
        kept, drops, counters = part  # type: ignore[misc] - every row has its part by now
        out.rows.extend(kept)
        out.drops.extend(drops)
        out.counters.update(counters)
        if k in is_changed:
            computed.update(counters)
        if unique and k not in failures:
            memo[ids[k]] = [digests[k], counters]
    return out, _extra(unique, memo, reused, computed)


def _extra(unique: bool, memo: dict[str, list[Any]], reused: int, computed: Counter) -> dict[str, Any]:
    """The shard statistics of row reuse: the memo (ids unique), and what was reused and computed (rows reused)."""
    extra: dict[str, Any] = {}
    if unique:
        extra[MEMO_KEY] = memo
    if reused:
        extra["rows_reused"] = reused
        extra["counters_computed"] = dict(computed)
    return extra


def _process_batch(task: "StageTask", rows: list[Row], ids: list[str], changed: list[int], i: int,
                   call: Any) -> Out | None:
    """The changed rows of a ``row_wise_batch`` step in one ``call``; None when it raised a data error (the rows are
    then processed one at a time, each failing one dropped as ``step_error``). Raises ``RuntimeError`` when a
    counter is not attributed to one of these rows (``Out.item``): the memo could not give each row its own."""
    step = task.step
    try:
        out = call(step, [rows[k] for k in changed], task.policy, i)
    except (ShardUnfinished, DamagedCache):  # never a drop: the build recomputes the damaged cache
        raise
    except Exception:  # noqa: BLE001 - isolated row by row by the caller
        return None
    rest, stray = out.unattributed(), sorted(set(out.item_counters) - {ids[k] for k in changed})
    if rest or stray:
        raise RuntimeError(f"step {step.name!r} is row_wise_batch but did not attribute its counters to its input "
                           f"rows on shard {i} (unattributed {rest}, unknown items {stray[:3]}): set out.item to the "
                           f"row's {step.id_field} before each row's work")
    return out


def _split(stage: str, id_field: str, out: Out, want: list[str]) -> dict[str, _Part]:
    """A batch's outputs per input id: kept rows by ``id_field``, drops by ``item_id``, counters by item."""
    parts: dict[str, _Part] = {rid: ([], [], _sorted(out.item_counters.get(rid, {}))) for rid in want}
    for rid, kept, drop in [(str(r.get(id_field)), r, None) for r in out.rows] + \
            [(str(d.item_id), None, d) for d in out.drops]:
        if rid not in parts:
            raise RuntimeError(f"step {stage!r} output {id_field} {rid!r}, which is not among its input rows")
        if kept is not None:
            parts[rid][0].append(kept)
        else:
            parts[rid][1].append(drop)
    return parts
