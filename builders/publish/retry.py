"""The retry policy of every Hub request, written once (``with_retry``), with its request timeouts and the publish's
deadline (docs/publishing.md, "Publishing a version" and "Timeouts and the deadline").

Writes answered with 429, 412, 409 (commits), 5xx or a dropped connection or timeout are retried with exponential
backoff (``Retry-After`` honoured), ``MAX_TRIES`` attempts in all, each retry announced with its attempt number and
wait; a retry that would start after the deadline is not made, and ``HF_HUB_OFFLINE`` is never retried. Every request
gets connect, read and write timeouts (``hub_timeouts``) and the whole publish a deadline (``Deadline``, ``alarm``).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .checks import PublishError

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "Deadline", "MAX_TRIES", "NO_CONFLICT_RETRY", "OFFLINE_MESSAGE",
           "RETRY_STATUS", "hub_timeouts", "offline_mode", "with_retry"]

RETRY_STATUS = (409, 412, 429, 500, 502, 503, 504)
NO_CONFLICT_RETRY = (429, 500, 502, 503, 504)   # reads and idempotent writes: a 409/412 there is an answer

MAX_TRIES = 6
BACKOFF_BASE = 2.0
BACKOFF_CAP = 120.0
DEFAULT_TIMEOUT = 60.0          # seconds: connect, read and write timeout of every Hub request (--timeout)
DEFAULT_DEADLINE = 6 * 3600.0   # seconds: the whole publish, gate to tag (--deadline)
HARD_EXIT_GRACE = 15.0          # seconds after the deadline before a CLI publish stuck in native code is ended
_sleep: Callable[[float], None] = time.sleep   # replaced by tests

#: upload stages in use: removed by the deadline watchdog before it ends the process (``builders.publish.upload``)
STAGES: set[Path] = set()


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes and contexts, each once."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def http_status(exc: BaseException) -> tuple[int | None, str | None]:
    """(HTTP status, Retry-After) of the first HTTP error in the exception chain."""
    for e in chain(exc):
        resp = getattr(e, "response", None)
        if resp is not None and getattr(resp, "status_code", None) is not None:
            return resp.status_code, resp.headers.get("Retry-After")
    return None, None


def is_offline(exc: BaseException) -> bool:
    """True when the Hub client refused a request because ``HF_HUB_OFFLINE`` is set (never worth a retry)."""
    return any(type(e).__name__ == "OfflineModeIsEnabled" for e in chain(exc))


def is_network(exc: BaseException) -> bool:
    import httpx2

    if is_offline(exc):
        return False
    return any(isinstance(e, (httpx2.TransportError, ConnectionError, TimeoutError)) for e in chain(exc))


def is_timeout(exc: BaseException) -> bool:
    import httpx2

    return any(isinstance(e, (httpx2.TimeoutException, TimeoutError)) for e in chain(exc))


def offline_mode() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) asks the Hub client never to use the network."""
    from huggingface_hub import constants

    flag = getattr(constants, "is_offline_mode", None)
    on = flag() if callable(flag) else bool(getattr(constants, "HF_HUB_OFFLINE", False))
    return on or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def endpoint() -> str:
    from huggingface_hub import constants

    return str(getattr(constants, "ENDPOINT", "https://huggingface.co"))


OFFLINE_MESSAGE = ("HF_HUB_OFFLINE is set: publishing needs the network; unset HF_HUB_OFFLINE (use --dry-run to "
                   "check the folder offline)")


class Deadline:
    """The total time a publish may take (``--deadline``), measured on the monotonic clock from its creation."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.end = time.monotonic() + self.seconds
        self.current = "the release gate"   # the step under way, named when the deadline passes

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def message(self, what: str | None = None) -> str:
        return (f"the publish did not finish within its deadline of {self.seconds:g} s (--deadline; it was at "
                f"{what or self.current}); nothing was tagged, rerun the same command to finish it")

    def check(self, what: str) -> None:
        """Raise ``PublishError`` when the deadline has passed."""
        if self.remaining() <= 0:
            raise PublishError(self.message(what))


class DeadlineAlarm(BaseException):
    """Raised in the main thread by ``SIGALRM`` at the deadline; a ``BaseException`` so that no ``except
    Exception`` of a library swallows it. ``builders.publish.push.publish`` turns it into a ``PublishError``."""


@contextlib.contextmanager
def alarm(limit: Deadline, *, hard_exit: bool) -> Iterator[None]:
    """Bound the block by ``limit``: ``SIGALRM`` raises :class:`DeadlineAlarm` in the main thread at the deadline
    (interrupting a blocking socket call); with ``hard_exit`` (the CLIs) a watchdog thread also ends the process with
    exit 2 and one line ``HARD_EXIT_GRACE`` seconds later, for a call stuck in native code (Xet) or a worker thread
    that the exception cannot reach. Staging folders registered in ``STAGES`` are removed first."""
    use_signal = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
                  and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None))
    previous = None
    if use_signal:
        def on_alarm(signum: int, frame: Any) -> None:
            raise DeadlineAlarm()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(limit.remaining(), 0.001))
    done = threading.Event()
    if hard_exit:
        def watchdog() -> None:
            if done.wait(max(limit.remaining(), 0) + HARD_EXIT_GRACE):
                return
            for stage in list(STAGES):
                shutil.rmtree(stage, ignore_errors=True)
            print(f"error: {limit.message()}", file=sys.stderr, flush=True)
            os._exit(2)

        threading.Thread(target=watchdog, name="publish-deadline", daemon=True).start()
    try:
        yield
    finally:
        done.set()
        if use_signal:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def _request_timeout(timeout: float, limit: Deadline | None) -> Any:
    """The ``httpx2.Timeout`` of a request: ``timeout`` for connect, read, write and pool, never past the deadline."""
    import httpx2

    t = timeout if limit is None else max(0.05, min(timeout, limit.remaining()))
    return httpx2.Timeout(t)


@contextlib.contextmanager
def hub_timeouts(timeout: float, limit: Deadline | None = None) -> Iterator[None]:
    """Every request of ``huggingface_hub`` in the block gets connect/read/write timeouts (its default client has
    none: a server that accepts and never answers would hang it). The client factory in place (a test's fake Hub
    transport, a user's proxy settings) is wrapped, not replaced, and put back afterwards."""
    import huggingface_hub
    from huggingface_hub.utils import _http as hf_http

    previous = getattr(hf_http, "_GLOBAL_CLIENT_FACTORY", hf_http.default_client_factory)

    def factory() -> Any:
        client = previous()
        client.timeout = _request_timeout(timeout, limit)
        return client

    huggingface_hub.set_client_factory(factory)
    try:
        yield
    finally:
        huggingface_hub.set_client_factory(previous)


def _bound_session(timeout: float | None, limit: Deadline | None) -> None:
    """Before an attempt: the shared client's timeouts shrink to what is left of the deadline."""
    if timeout is None:
        return
    from huggingface_hub import get_session

    get_session().timeout = _request_timeout(timeout, limit)


def with_retry(what: str, fn: Callable[[], Any], *, statuses: tuple[int, ...] = RETRY_STATUS,
               log: Callable[[str], None] = print, limit: Deadline | None = None,
               timeout: float | None = None) -> Any:
    """``fn()`` retried on the given HTTP statuses, timeouts and dropped connections (``MAX_TRIES`` attempts in all),
    each retry announced (attempt n/N, the wait); never past ``limit`` (``PublishError``), never in offline mode."""
    for attempt in range(1, MAX_TRIES + 1):
        if limit is not None:
            limit.current = what
            limit.check(what)
        _bound_session(timeout, limit)
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            if is_offline(e):
                raise PublishError(f"{what}: {OFFLINE_MESSAGE}") from None
            code, retry_after = http_status(e)
            retriable = code in statuses if code is not None else is_network(e)
            if not retriable or attempt == MAX_TRIES:
                raise
            if retry_after and retry_after.strip().isdigit():
                wait = float(retry_after.strip())
            else:
                wait = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)) * (0.5 + random.random())
            if code is not None:
                reason = f"HTTP {code}"
            else:
                reason = f"no answer within {timeout:g} s" if is_timeout(e) and timeout else "connection error"
            if limit is not None and wait >= limit.remaining():
                raise PublishError(f"{what}: {reason} on attempt {attempt}/{MAX_TRIES}, and the next attempt "
                                   f"(in {wait:.1f} s) would pass the deadline of {limit.seconds:g} s (--deadline)"
                                   ) from None
            left = f"; {limit.remaining():.0f} s left of the deadline" if limit is not None else ""
            log(f"{what}: {reason}, retrying in {wait:.1f} s (attempt {attempt}/{MAX_TRIES} failed{left})")
            _sleep(wait)
    raise AssertionError("unreachable")
