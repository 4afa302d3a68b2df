"""Entries of an input directory that cannot be read as input files, for the readers that list a directory.

An entry named like an input (``x.warc.gz``, ``<vid>.json``, ``<vid>.mp4``, ``<vid>.npy``, ``<key>.html``) that is
not a readable regular file (a dangling link, a loop of links, a directory, a FIFO, socket or device, a file this
process may not read) is one item's named drop with its path, never the end of the build nor a silent skip
(docs/reason-codes.md). Readers keyed by video id hand such an entry to the video's own read, which drops the video
under its usual reason (``malformed_transcript``, ``video_unreadable``, ``bad_features``); a reader whose items are
the files themselves (the WARC files of a folder) drops the entry as :data:`UNREADABLE_INPUT_ENTRY`.
"""

from __future__ import annotations

from pathlib import Path

from builders.core.fingerprint import entry_problem
from builders.core.records import Drop

#: the drop reason of a directory entry that is no readable file (docs/reason-codes.md)
UNREADABLE_INPUT_ENTRY = "unreadable_input_entry"

__all__ = ["UNREADABLE_INPUT_ENTRY", "entry_problem", "unreadable_entry_drop"]


def unreadable_entry_drop(path: Path, item_id: str, stage: str, problem: str) -> Drop:
    """The drop of one bad entry: ``item_id`` as the reader names its items, the full path and the problem in the
    detail (e.g. ``/data/warc/b.warc.gz: dangling symbolic link``)."""
    return Drop(item_id, stage, UNREADABLE_INPUT_ENTRY, f"{path}: {problem}")
