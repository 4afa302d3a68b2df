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

from .config import ConfigError

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
