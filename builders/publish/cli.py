"""``python -m builders.publish DIR --repo ORG/NAME --version vX.Y.Z [--private] [--message TEXT] [--dry-run]
[--timeout SECONDS] [--deadline SECONDS]``: the command line of ``builders.publish.push.publish`` (docs/publishing.md),
its flags (shared with ``python -m builders.build ... --push``: ``--push-timeout``, ``--push-deadline``) and its exit.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading

from .checks import PublishError, redact
from .push import publish
from .retry import DEFAULT_DEADLINE, DEFAULT_TIMEOUT

__all__ = ["DESCRIPTION", "add_arguments", "add_limit_arguments", "exit_now", "main", "one_line"]


#: the --help description: plain text (the module docstring is reST)
DESCRIPTION = ("Publish a built release folder to the HuggingFace Hub as an immutable, tagged version: the release "
               "gate, one commit, every config loaded back, then the tag (docs/publishing.md).")


def add_arguments(p: argparse.ArgumentParser, *, folder: bool = True) -> None:
    if folder:
        p.add_argument("folder", metavar="DIR", help="a built release folder (README.md + <config>/*.parquet)")
    p.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub dataset repo, e.g. acme/sieve_swap")
    p.add_argument("--version", required=True, metavar="vX.Y.Z", help="the release tag (semantic version)")
    p.add_argument("--private", action="store_true", help="create the repo private (refused if it exists public)")
    p.add_argument("--message", default=None, metavar="TEXT", help="commit and tag message")
    p.add_argument("--dry-run", action="store_true", help="print what would be uploaded; no network call")
    add_limit_arguments(p)


def add_limit_arguments(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--timeout`` and ``--deadline`` (``--push-timeout``, ``--push-deadline`` with ``prefix="push-"``)."""
    p.add_argument(f"--{prefix}timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="connect, read and write timeout of every Hub request; a request that gets no answer in that "
                        f"time is retried (default {DEFAULT_TIMEOUT:g})")
    p.add_argument(f"--{prefix}deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                   help="the whole publish, retries included, ends with exit 2 after this many seconds; raise it "
                        f"for very large releases (default {DEFAULT_DEADLINE:g} = 6 h)")


def one_line(message: str) -> str:
    """``message`` (token redacted) on one line: the CLIs print exactly one ``error:`` line."""
    return " ".join(redact(message).split())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m builders.publish", description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        publish(args.folder, args.repo, args.version, private=args.private, message=args.message,
                dry_run=args.dry_run, timeout=args.timeout, deadline=args.deadline, hard_exit=True)
    except PublishError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: publish interrupted; nothing was tagged, rerun the same command to finish it", file=sys.stderr)
        return 2
    return 0


def exit_now(rc: int, *, skip_teardown: bool = False) -> None:
    """Exit with ``rc``; when a Hub client's worker thread is still stuck in a request (after a deadline), exit
    without waiting for it (``os._exit`` after flushing), so the process ends within the deadline.

    ``skip_teardown`` (the build CLI): with no other thread left, run the ``atexit`` handlers (logging's flush, Ray's
    shutdown, ``weakref.finalize`` of temporary folders) and then ``os._exit``, without the interpreter's teardown of
    its ~1,800 modules and their objects, which took 0.5-0.7 s: a tenth of an incremental rebuild (docs/architecture.md,
    "Caching and resume"). Every file the build writes is closed by then (context managers, atomic renames)."""
    sys.stdout.flush()
    sys.stderr.flush()
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if rc and stuck:
        os._exit(rc)
    if skip_teardown and not stuck:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    sys.exit(rc)
