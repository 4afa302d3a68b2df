"""Arrow's allocator settings for a build process (docs/architecture.md, "The release step").

pyarrow allocates through its bundled mimalloc, which by default commits its arenas eagerly and keeps freed pages for
a while before it gives them back. A build allocates and frees Arrow buffers shard after shard (release parts, row
groups, the explorer's reads), so that retained memory, not live data, set the peak RSS of a build: the release of
20,000 HowTo100M-shaped videos, written again from cached shards, peaked at 361-368 MiB with mimalloc's defaults and
254-257 MiB with the two options below, for the same 71 MiB of live Arrow memory and the same time (37 s;
``tests/perf/README.md``).

mimalloc reads its options once, when pyarrow's library is loaded: they are set as environment variables before
pyarrow is imported (the CLI does it first thing), and the worker processes of a build inherit them. A value the user
set is kept.
"""

from __future__ import annotations

import os
import sys

#: mimalloc's options (``MIMALLOC_<OPTION>``): commit arena memory on demand, and return freed pages at once
ARROW_ALLOCATOR_ENV = {"MIMALLOC_ARENA_EAGER_COMMIT": "0", "MIMALLOC_PURGE_DELAY": "0"}


def tune_arrow_allocator() -> bool:
    """Set :data:`ARROW_ALLOCATOR_ENV` where the environment does not set it; returns whether this process's pyarrow
    can still take them (False when pyarrow is already imported: its allocator has read its options; child processes
    started from now on take them)."""
    for key, value in ARROW_ALLOCATOR_ENV.items():
        os.environ.setdefault(key, value)
    return "pyarrow" not in sys.modules
