"""How the build classifies failures (docs/architecture.md, "Failures").

* a whole input file that cannot be used at all (empty, not the format its flag names, a missing column, the wrong
  JSON shape) -> :class:`InputError`, raised before any work where the corpus checks its inputs; it is a
  ``ConfigError``, so ``python -m builders.build`` exits 2 with its message and no traceback;
* bad data -> the step drops the row with a named reason (or the runner records ``step_error`` for an exception that
  only some rows raise);
* a **transient** failure (a timeout, a refused or reset connection, CUDA out of memory, a backend that raises
  :class:`TransientError`) is retried with backoff and, if it persists, leaves its shard unfinished: nothing is cached,
  the build exits non-zero naming the shard, and a rerun retries it. It is never cached as a drop.
"""

from __future__ import annotations

import errno as _errno
import re
from typing import TypeVar

from .config import ConfigError

E = TypeVar("E", bound=BaseException)

#: exception class names (anywhere in the MRO) treated as transient, for libraries we do not import here
TRANSIENT_NAMES = frozenset({
    "OutOfMemoryError",            # torch.cuda.OutOfMemoryError
    "ReadTimeout", "ConnectTimeout", "ReadTimeoutError", "ConnectTimeoutError", "PoolTimeout",  # requests/httpx
    "APITimeoutError", "APIConnectionError", "RateLimitError", "ServiceUnavailableError",      # OpenAI-style clients
    "GetTimeoutError", "RayActorError", "ActorDiedError", "WorkerCrashedError", "ObjectLostError",  # Ray
})


class InputError(ConfigError):
    """A whole input file is unusable (its message names the file and the problem): exit 2, never a drop per row.

    A ``ValueError`` (through ``ConfigError``), as the readers raised before."""


class TransientError(RuntimeError):
    """Raised by a backend for a failure that may go away on retry (a busy server, a dropped connection)."""


class ShardUnfinished(RuntimeError):
    """A shard could not be finished because of a persistent transient failure; it is left uncached."""

    def __init__(self, stage: str, shard: int, cause: str):
        super().__init__(f"{stage} shard {shard}: {cause}")
        self.stage, self.shard, self.cause = stage, shard, cause

    def __reduce__(self):  # picklable across process pools
        return (ShardUnfinished, (self.stage, self.shard, self.cause))


class DamagedCache(RuntimeError):
    """A cache file of the build (a work shard, a release part, a feature block, a cached model output) is not what
    was written: its sha256 or a page checksum differs, it is cut short or no longer decodes. Never a user error: the
    reader treats the entry as missing and recomputes it (``builders.core.checked``)."""

    def __init__(self, path: object, why: str):
        super().__init__(f"{path}: damaged cache file: {why}")
        self.path, self.why = str(path), why
        #: the ``stats.json`` of the work shards whose rows name this file (``builders.core.repair.owners_of``)
        self.owners: list[str] = []

    def __reduce__(self):  # picklable across process pools
        return (DamagedCache, (self.path, self.why))


class BuildIncomplete(RuntimeError):
    """Some shards of a stage stayed unfinished (transient failures): the build stops; a rerun retries them."""


class ErrorRateExceeded(RuntimeError):
    """A step's ``step_error`` drops exceed ``--max-error-rate``: the build fails rather than shrink silently."""


def is_transient(exc: BaseException) -> bool:
    """True for timeouts, connection errors, CUDA OOM and :class:`TransientError` (by type or class name)."""
    if isinstance(exc, (TransientError, TimeoutError, ConnectionError)):
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    if names & TRANSIENT_NAMES:
        return True
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)


def describe(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {str(exc)[:limit]}"


#: errno values of a full disk (``ENOSPC``) or an exhausted quota (``EDQUOT``, where the platform has it)
DISK_FULL = frozenset(e for e in (getattr(_errno, "ENOSPC", None), getattr(_errno, "EDQUOT", None)) if e is not None)
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


def error_in(exc: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` in ``exc``'s chain of causes and contexts (a runner may wrap a worker's error; Ray's task
    errors hold it as ``cause``), or None."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, kind):
            return e
        cause = getattr(e, "cause", None)
        e = cause if isinstance(cause, BaseException) else (e.__cause__ or e.__context__)
    return None


def os_error_in(exc: BaseException) -> OSError | None:
    """The first ``OSError`` in ``exc``'s chain of causes and contexts (:func:`error_in`)."""
    return error_in(exc, OSError)


def error_number(exc: OSError) -> int | None:
    """``exc.errno``, or the ``[errno N]`` pyarrow and other wrappers write into the message when they drop it."""
    if exc.errno is not None:
        return exc.errno
    m = _ERRNO_IN_TEXT.search(str(exc))
    if m:
        return int(m.group(1))
    return _errno.ENOSPC if "no space left on device" in str(exc).lower() else None


def describe_os_error(exc: OSError) -> str:
    """One line naming what failed and what to do, for the build CLI's ``error:`` line (docs/architecture.md,
    "Failures": exit 2 for a bad input, output or work directory)."""
    num = error_number(exc)
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    at = f" ({where})" if where else ""
    if num in DISK_FULL:
        what = "quota exceeded" if num == getattr(_errno, "EDQUOT", -1) else "no space left on the device"
        return (f"{what}{at}: free space or give --out / --work-dir on a larger disk; the release in place is "
                "unchanged")
    if num in (_errno.EACCES, _errno.EPERM):
        return f"permission denied{at}: this process may not read or write there"
    if num == _errno.EROFS:
        return f"read-only file system{at}: give --out / --work-dir on a writable disk"
    if num == _errno.ELOOP:
        return f"symlink loop{at}: too many levels of symbolic links; fix or remove the link"
    text = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    return f"{text}{at}"
