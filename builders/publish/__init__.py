"""``python -m builders.publish DIR --repo ORG/NAME --version vX.Y.Z [--private] [--message TEXT] [--dry-run]
[--timeout SECONDS] [--deadline SECONDS]``:
publish a built release folder to the HuggingFace Hub as an immutable, tagged version (docs/publishing.md).

Works for any release folder the toolkit writes (no per-corpus code): configs, splits, Features and row counts are
read from the folder's README (``configs:`` + ``dataset_info:``). Steps, in order:

1. check the version (``vMAJOR.MINOR.PATCH``) and the repo id (``org/name``), before any work;
2. the release gate on the folder (``builders.release.gate.gate``: complete shard sets, ``load_dataset`` offline gives
   the declared Features and row counts); ``--dry-run`` stops here and prints files, bytes and configs, with no
   network call;
3. the token (``HF_TOKEN`` or the ``hf auth login`` token) and ``create_repo(exist_ok=True)``;
4. the upload set: the folder's files (hidden files, ``*.lock``, ``*.tmp`` left out), its README with a release-notes
   section (this version, the previous version, what changed: configs and row counts), ``manifest.json`` without
   the local publish records;
5. if tag ``vX.Y.Z`` exists: identical files -> "already published" (exit 0); different -> refused (exit 2);
6. one ``upload_folder`` (remote files not in the release are deleted in the same commit, so the tag holds exactly
   the release); the local manifest records ``{version, repo, commit, tag}`` as ``uploaded``;
7. ``load_dataset(repo, config, revision=<commit>)`` for every config: Features and row counts (nothing is tagged
   before it loads);
8. ``create_tag`` on that commit, then the tag is loaded back (same checks) and the record becomes ``published``.

Writes answered with 429, 412, 409 (commits), 5xx or a dropped connection are retried with exponential backoff
(``Retry-After`` honoured), re-reading the head of ``main`` every time; each retry is announced with its attempt
number and wait. Every request has connect, read and write timeouts (``--timeout``, default 60 s) and the whole
publish a deadline (``--deadline``, default 6 h): a server that accepts and never answers ends the publish with exit 2
and one line, never a hang (docs/publishing.md, "Timeouts and the deadline"). ``HF_HUB_OFFLINE=1`` is refused at
once (exit 2), never retried. A rerun after an interruption at any point
ends in the same state: unchanged files are skipped by the Hub client, so a finished upload makes no new commit.
Tokens never appear in output, manifests, cards or error messages.

Exit codes: 0 published (or already published, or dry run); 2 anything refused or failed (bad version, repo id or
folder, failed gate, changed version, token missing or rejected, network or Hub error after retries).

Modules: ``checks`` (versions, repo ids, limits, redaction: refused before any work), ``retry`` (the retry policy,
request timeouts and the deadline), ``upload`` (the folder's layout, the upload set, the local publish records),
``notes`` (the release-notes section of the uploaded card), ``push`` (the steps above) and ``cli`` (``python -m
builders.publish``). The names below are re-exported here.
"""

from __future__ import annotations

from .checks import PublishError, check_limits, check_repo_id, parse_version, redact
from .cli import DESCRIPTION, add_arguments, add_limit_arguments, exit_now, main, one_line
from .notes import NOTES_END, NOTES_START, previous_version, release_notes, strip_notes
from .push import publish, verify_on_hub
from .retry import (
    DEFAULT_DEADLINE,
    DEFAULT_TIMEOUT,
    MAX_TRIES,
    NO_CONFLICT_RETRY,
    OFFLINE_MESSAGE,
    RETRY_STATUS,
    Deadline,
    hub_timeouts,
    offline_mode,
    with_retry,
)
from .upload import IGNORE_PATTERNS, MANIFEST_KEY, Layout, read_layout, record, upload_files

__all__ = [
    "DEFAULT_DEADLINE", "DEFAULT_TIMEOUT", "DESCRIPTION", "IGNORE_PATTERNS", "MANIFEST_KEY", "MAX_TRIES",
    "NOTES_END", "NOTES_START", "NO_CONFLICT_RETRY", "OFFLINE_MESSAGE", "RETRY_STATUS", "Deadline", "Layout",
    "PublishError", "add_arguments", "add_limit_arguments", "check_limits", "check_repo_id", "exit_now",
    "hub_timeouts", "main", "offline_mode", "one_line", "parse_version", "previous_version", "publish", "read_layout",
    "record", "redact", "release_notes", "strip_notes", "upload_files", "verify_on_hub", "with_retry",
]
