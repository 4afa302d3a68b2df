"""``python -m builders.publish DIR --repo ORG/NAME --version vX.Y.Z [--private] [--message TEXT] [--dry-run]
[--timeout SECONDS] [--deadline SECONDS]``:
publish a built release folder to the HuggingFace Hub as an immutable, tagged version (docs/publishing.md).

Works for any release folder the toolkit writes (no per-corpus code): configs, splits, Features and row counts are
read from the folder's README (``configs:`` + ``dataset_info:``). Steps, in order:

1. check the version (``vMAJOR.MINOR.PATCH``) and the repo id (``org/name``), before any work;
2. the release gate on the folder (``builders.release.gate``: complete shard sets, ``load_dataset`` offline gives the
   declared Features and row counts); ``--dry-run`` stops here and prints files, bytes and configs, with no network
   call;
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
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fnmatch
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PublishError", "Layout", "check_repo_id", "parse_version", "publish", "read_layout", "upload_files", "main"]

#: matched with ``fullmatch`` only: ``$`` would also accept a trailing newline (``"v1.0.0\n"``)
SEMVER_RE = re.compile(r"v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_RE = re.compile(rf"{_REPO_PART}/{_REPO_PART}")
IGNORE_PATTERNS = ["*.lock", "*.tmp", "**/LICENSE", "**/dataset_info.json", ".*", "**/.*"]
RETRY_STATUS = (409, 412, 429, 500, 502, 503, 504)
NO_CONFLICT_RETRY = (429, 500, 502, 503, 504)   # reads and idempotent writes: a 409/412 there is an answer
MANIFEST_KEY = "hub"   # local publish records in manifest.json, never uploaded
NOTES_START = "<!-- release-notes:start -->"
NOTES_END = "<!-- release-notes:end -->"

MAX_TRIES = 6
BACKOFF_BASE = 2.0
BACKOFF_CAP = 120.0
DEFAULT_TIMEOUT = 60.0          # seconds: connect, read and write timeout of every Hub request (--timeout)
DEFAULT_DEADLINE = 6 * 3600.0   # seconds: the whole publish, gate to tag (--deadline)
HARD_EXIT_GRACE = 15.0          # seconds after the deadline before a CLI publish stuck in native code is ended
_sleep: Callable[[float], None] = time.sleep   # replaced by tests


class PublishError(RuntimeError):
    """A refused or failed publish (exit 2). The message names the problem and never holds a token."""


# ------------------------------------------------------------------------------------------------ checks


def parse_version(version: str) -> tuple[int, int, int]:
    """``"v1.2.3"`` -> ``(1, 2, 3)``; anything else raises ``PublishError``."""
    m = SEMVER_RE.fullmatch(version) if isinstance(version, str) else None
    if not m:
        raise PublishError(f"version {version!r} is not semantic: expected vMAJOR.MINOR.PATCH, e.g. v1.0.0")
    return int(m[1]), int(m[2]), int(m[3])


def check_repo_id(repo: str) -> str:
    """A namespaced dataset repo id ``org/name`` (letters, digits, ``-``, ``_``, ``.``; no ``--`` or ``..``)."""
    if not isinstance(repo, str) or not REPO_RE.fullmatch(repo) or "--" in repo or ".." in repo or len(repo) > 96:
        raise PublishError(f"repo id {repo!r} is invalid: expected ORG/NAME made of letters, digits, '-', '_', '.' "
                           "(no '--' or '..', at most 96 characters)")
    return repo


_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9_-]{4,}")


def redact(text: str, token: str | None = None) -> str:
    """``text`` with the token (and anything shaped like a Hub token) replaced by ``***``."""
    text = str(text)
    if token:
        text = text.replace(token, "***")
    return _TOKEN_RE.sub("hf_***", text)


# ------------------------------------------------------------------------------------------------ the folder


@dataclass
class Layout:
    """What a release folder declares in its README."""

    features: dict[str, Any]              # config -> datasets.Features
    splits: dict[str, list[str]]          # config -> splits
    rows: dict[str, dict[str, int]]       # config -> split -> num_examples (README)
    default: str


def read_layout(folder: str | os.PathLike) -> Layout:
    """Configs, splits, Features, row counts and default config from ``<folder>/README.md``."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    folder = Path(folder)
    readme = folder / "README.md"
    if not folder.is_dir():
        raise PublishError(f"{folder} is not a directory")
    if not readme.is_file():
        raise PublishError(f"{folder} is not a release folder: it has no README.md (build it with "
                           "python -m builders.build <corpus>)")
    try:
        data = DatasetCard.load(readme).data
        configs = MetadataConfigs.from_dataset_card_data(data)
        infos = DatasetInfosDict.from_dataset_card_data(data)
    except Exception as e:  # noqa: BLE001
        raise PublishError(f"{folder} is not a release folder: README.md metadata does not parse: {e}") from e
    if not configs or not infos:
        raise PublishError(f"{folder} is not a release folder: README.md has no 'configs:' and 'dataset_info:'")
    features, splits, rows = {}, {}, {}
    for name, cfg in configs.items():
        info = infos.get(name)
        if info is None or info.features is None or not info.splits:
            raise PublishError(f"{folder}: config {name!r} has no dataset_info (features and splits) in README.md")
        files = cfg.get("data_files") or []
        splits[name] = [f["split"] for f in files] if isinstance(files, list) else list(files)
        features[name] = info.features
        rows[name] = {s: info.splits[s].num_examples for s in splits[name] if s in info.splits}
    defaults = [n for n, c in configs.items() if c.get("default")]
    default = defaults[0] if len(defaults) == 1 else (next(iter(configs)) if len(configs) == 1 else None)
    if default is None:
        raise PublishError(f"{folder}: README.md must mark exactly one config 'default: true'")
    return Layout(features, splits, rows, default)


def _ignored(rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, p) for p in IGNORE_PATTERNS) or any(
        part.startswith(".") for part in rel.split("/"))


def upload_files(folder: str | os.PathLike) -> list[str]:
    """The files of a release folder that are uploaded (relative POSIX paths, sorted)."""
    folder = Path(folder)
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and not _ignored(rel):
            out.append(rel)
    return sorted(out)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _strip_notes(text: str) -> str:
    """README text without the generated release-notes block (compared apart from it)."""
    return re.sub(re.escape(NOTES_START) + r".*?" + re.escape(NOTES_END) + r"\n?", "", text, flags=re.S)


def _load_manifest(folder: Path) -> dict[str, Any] | None:
    p = folder / "manifest.json"
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        return None


def record(folder: Path, rec: dict[str, Any]) -> None:
    """Add or update the publish record ``rec`` (keyed by repo + version) in ``<folder>/manifest.json``."""
    from .release import write_json_atomic

    man = _load_manifest(folder) or {}
    hub = man.setdefault(MANIFEST_KEY, {})
    recs = [r for r in hub.get("releases", []) if (r.get("repo"), r.get("version")) != (rec["repo"], rec["version"])]
    recs.append(rec)
    hub["releases"] = recs
    write_json_atomic(folder / "manifest.json", man)


# ------------------------------------------------------------------------------------------------ retries


def _status(exc: BaseException) -> tuple[int | None, str | None]:
    """(HTTP status, Retry-After) of the first HTTP error in the exception chain."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        resp = getattr(e, "response", None)
        if resp is not None and getattr(resp, "status_code", None) is not None:
            return resp.status_code, resp.headers.get("Retry-After")
        e = e.__cause__ or e.__context__
    return None, None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes and contexts, each once."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _is_offline(exc: BaseException) -> bool:
    """True when the Hub client refused a request because ``HF_HUB_OFFLINE`` is set (never worth a retry)."""
    return any(type(e).__name__ == "OfflineModeIsEnabled" for e in _chain(exc))


def _is_network(exc: BaseException) -> bool:
    import httpx2

    if _is_offline(exc):
        return False
    return any(isinstance(e, (httpx2.TransportError, ConnectionError, TimeoutError)) for e in _chain(exc))


def _is_timeout(exc: BaseException) -> bool:
    import httpx2

    return any(isinstance(e, (httpx2.TimeoutException, TimeoutError)) for e in _chain(exc))


def offline_mode() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) asks the Hub client never to use the network."""
    from huggingface_hub import constants

    flag = getattr(constants, "is_offline_mode", None)
    on = flag() if callable(flag) else bool(getattr(constants, "HF_HUB_OFFLINE", False))
    return on or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _endpoint() -> str:
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


class _DeadlineAlarm(BaseException):
    """Raised in the main thread by ``SIGALRM`` at the deadline; a ``BaseException`` so that no ``except
    Exception`` of a library swallows it. ``publish`` turns it into a ``PublishError``."""


@contextlib.contextmanager
def _alarm(limit: Deadline, *, hard_exit: bool) -> Iterator[None]:
    """Bound the block by ``limit``: ``SIGALRM`` raises :class:`_DeadlineAlarm` in the main thread at the deadline
    (interrupting a blocking socket call); with ``hard_exit`` (the CLIs) a watchdog thread also ends the process with
    exit 2 and one line ``HARD_EXIT_GRACE`` seconds later, for a call stuck in native code (Xet) or a worker thread
    that the exception cannot reach. Staging folders registered in ``_STAGES`` are removed first."""
    use_signal = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
                  and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None))
    previous = None
    if use_signal:
        def on_alarm(signum: int, frame: Any) -> None:
            raise _DeadlineAlarm()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(limit.remaining(), 0.001))
    done = threading.Event()
    if hard_exit:
        def watchdog() -> None:
            if done.wait(max(limit.remaining(), 0) + HARD_EXIT_GRACE):
                return
            for stage in list(_STAGES):
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
            if _is_offline(e):
                raise PublishError(f"{what}: {OFFLINE_MESSAGE}") from None
            code, retry_after = _status(e)
            retriable = code in statuses if code is not None else _is_network(e)
            if not retriable or attempt == MAX_TRIES:
                raise
            if retry_after and retry_after.strip().isdigit():
                wait = float(retry_after.strip())
            else:
                wait = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)) * (0.5 + random.random())
            if code is not None:
                reason = f"HTTP {code}"
            else:
                reason = f"no answer within {timeout:g} s" if _is_timeout(e) and timeout else "connection error"
            if limit is not None and wait >= limit.remaining():
                raise PublishError(f"{what}: {reason} on attempt {attempt}/{MAX_TRIES}, and the next attempt "
                                   f"(in {wait:.1f} s) would pass the deadline of {limit.seconds:g} s (--deadline)"
                                   ) from None
            left = f"; {limit.remaining():.0f} s left of the deadline" if limit is not None else ""
            log(f"{what}: {reason}, retrying in {wait:.1f} s (attempt {attempt}/{MAX_TRIES} failed{left})")
            _sleep(wait)
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------------------ the card


def _semver_tags(tags: list[str]) -> list[tuple[tuple[int, int, int], str]]:
    return sorted((tuple(int(x) for x in m.groups()), t) for t in tags if (m := SEMVER_RE.fullmatch(t)))


def previous_version(tags: list[str], version: str) -> str | None:
    """The highest semantic tag below ``version``."""
    v = parse_version(version)
    below = [t for k, t in _semver_tags(tags) if k < v]
    return below[-1] if below else None


def release_notes(repo: str, version: str, previous: str | None, layout: Layout,
                  previous_rows: dict[str, dict[str, int]] | None) -> str:
    """The release-notes block appended to the uploaded README: version, previous version, what changed."""
    from .release import md_table

    lines = [NOTES_START, "", f"## Release {version}", "",
             f"- version: `{version}` (load it with `datasets.load_dataset(\"{repo}\", \"<config>\", "
             f"revision=\"{version}\")`)",
             f"- previous version: `{previous}`" if previous else "- previous version: none (first release)"]
    prev = previous_rows or {}
    if previous:
        added = sorted(set(layout.rows) - set(prev))
        removed = sorted(set(prev) - set(layout.rows))
        lines.append(f"- configs added: {', '.join(added) or 'none'}; configs removed: {', '.join(removed) or 'none'}")
    table = []
    for cfg in sorted(set(layout.rows) | set(prev)):
        for split in sorted(set(layout.rows.get(cfg, {})) | set(prev.get(cfg, {}))):
            now, before = layout.rows.get(cfg, {}).get(split), prev.get(cfg, {}).get(split)
            if previous:
                delta = "–" if now is None or before is None else f"{now - before:+,}"
                table.append([cfg, split, "–" if before is None else f"{before:,}",
                              "–" if now is None else f"{now:,}", delta])
            else:
                table.append([cfg, split, f"{now:,}"])
    header = ["config", "split", f"rows in {previous}", f"rows in {version}", "change"] if previous else \
        ["config", "split", "rows"]
    lines += ["", md_table(header, table), "", NOTES_END, ""]
    return "\n".join(lines)


def _rows_from_card(text: str) -> dict[str, dict[str, int]]:
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard

    infos = DatasetInfosDict.from_dataset_card_data(DatasetCard(text).data)
    return {c: {s: si.num_examples for s, si in (i.splits or {}).items()} for c, i in infos.items()}


# ------------------------------------------------------------------------------------------------ staging


_STAGES: set[Path] = set()   # upload stages in use: removed by the deadline watchdog before it ends the process


@contextlib.contextmanager
def _staged(folder: Path, files: list[str], readme: str) -> Iterator[Path]:
    """A hidden sibling folder holding the upload set (hard links where possible), removed afterwards."""
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}.publish-", dir=folder.parent))
    except OSError:
        stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}.publish-"))
    _STAGES.add(stage)
    try:
        for rel in files:
            src, dst = folder / rel, stage / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if rel == "README.md":
                dst.write_text(readme, encoding="utf-8")
            elif rel == "manifest.json" and (man := _load_manifest(folder)) is not None and MANIFEST_KEY in man:
                from .release import write_json_atomic

                man.pop(MANIFEST_KEY)
                write_json_atomic(dst, man)   # the serializer that wrote it: the same bytes as before any record
            else:
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy2(src, dst)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _STAGES.discard(stage)


def _compare(api: Any, repo: str, tag: str, stage: Path, files: list[str]) -> list[str]:
    """Differences between the files at ``tag`` and the upload set (``[]`` when identical)."""
    from huggingface_hub import hf_hub_download

    remote = {e.path: e for e in api.list_repo_tree(repo, repo_type="dataset", revision=tag, recursive=True)
              if hasattr(e, "blob_id") and e.path != ".gitattributes"}
    diffs = [f"{p}: only in {tag} on the Hub" for p in sorted(set(remote) - set(files))]
    diffs += [f"{p}: only in the local release" for p in sorted(set(files) - set(remote))]
    for rel in sorted(set(files) & set(remote)):
        e, local = remote[rel], stage / rel
        if e.lfs is not None:
            same = e.lfs.sha256 == _sha256(local)
        else:
            same = e.blob_id == _git_sha1(local.read_bytes())
        if not same and rel == "README.md":
            with tempfile.TemporaryDirectory() as d:
                got = Path(hf_hub_download(repo, "README.md", repo_type="dataset", revision=tag, local_dir=d))
                same = _strip_notes(got.read_text(encoding="utf-8")) == _strip_notes(local.read_text("utf-8"))
        if not same:
            diffs.append(f"{rel}: content differs")
    return diffs


# ------------------------------------------------------------------------------------------------ load-back


def verify_on_hub(repo: str, revision: str, layout: Layout, token: str, cache_dir: str) -> None:
    """``load_dataset(repo, cfg, revision=revision)`` for every config: the README's Features and row counts."""
    from datasets import load_dataset

    from .release import _quiet

    for cfg in layout.splits:
        try:
            with _quiet():
                dd = load_dataset(repo, cfg, revision=revision, cache_dir=cache_dir, token=token)
        except Exception as e:  # noqa: BLE001
            raise PublishError(f"load-back of {repo} config {cfg!r} at {revision} failed: "
                               f"{type(e).__name__}: {redact(str(e), token)}") from None
        if sorted(dd) != sorted(layout.splits[cfg]):
            raise PublishError(f"load-back of {cfg!r} at {revision}: splits {sorted(dd)} != {layout.splits[cfg]}")
        for split in layout.splits[cfg]:
            if dd[split].features != layout.features[cfg]:
                raise PublishError(f"load-back of {cfg}/{split} at {revision}: Features differ from the release")
            if dd[split].num_rows != layout.rows[cfg][split]:
                raise PublishError(f"load-back of {cfg}/{split} at {revision}: {dd[split].num_rows} rows, "
                                   f"the release holds {layout.rows[cfg][split]}")


# ------------------------------------------------------------------------------------------------ the flow


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def check_limits(timeout: float, deadline: float) -> None:
    """``--timeout`` and ``--deadline`` are finite, positive numbers of seconds (``PublishError`` otherwise)."""
    import math

    for flag, value in (("--timeout", timeout), ("--deadline", deadline)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise PublishError(f"{flag} must be a positive number of seconds, got {value!r}")


def publish(folder: str | os.PathLike, repo: str, version: str, *, private: bool = False,
            message: str | None = None, dry_run: bool = False, log: Callable[[str], None] = print,
            timeout: float = DEFAULT_TIMEOUT, deadline: float = DEFAULT_DEADLINE,
            hard_exit: bool = False) -> dict[str, Any]:
    """Publish ``folder`` as ``repo`` at tag ``version`` (see the module docstring). Returns the publish record,
    with ``status`` one of ``dry-run``, ``already-published``, ``published``. Raises ``PublishError``.

    Every Hub request times out after ``timeout`` seconds without progress and the whole call after ``deadline``
    seconds (docs/publishing.md); ``hard_exit`` (the CLIs only) lets a watchdog end the process when a stuck native
    call outlives the deadline. ``HF_HUB_OFFLINE`` is refused before any work (except for ``dry_run``)."""
    parse_version(version)
    check_repo_id(repo)
    check_limits(timeout, deadline)
    if not dry_run and offline_mode():
        raise PublishError(OFFLINE_MESSAGE)
    limit = Deadline(deadline)
    try:
        with _alarm(limit, hard_exit=hard_exit):
            if dry_run:
                return _publish(folder, repo, version, private=private, message=message, dry_run=True, log=log,
                                limit=limit, timeout=timeout)
            with hub_timeouts(timeout, limit):
                return _publish(folder, repo, version, private=private, message=message, dry_run=False, log=log,
                                limit=limit, timeout=timeout)
    except _DeadlineAlarm:
        raise PublishError(limit.message()) from None


def _publish(folder: str | os.PathLike, repo: str, version: str, *, private: bool, message: str | None,
             dry_run: bool, log: Callable[[str], None], limit: Deadline, timeout: float) -> dict[str, Any]:
    """The steps of :func:`publish`, inside its deadline and request timeouts."""
    folder = Path(folder).resolve()
    layout = read_layout(folder)

    from .release import ReleaseGateError, gate

    try:
        counts = gate(folder, features_by_config=layout.features, splits_by_config=layout.splits,
                      default_config=layout.default)
    except (ReleaseGateError, ValueError) as e:
        raise PublishError(f"{folder} fails the release gate: {e}") from None
    layout.rows = counts
    files = upload_files(folder)
    sizes = {rel: (folder / rel).stat().st_size for rel in files}

    if dry_run:
        log(f"dry run: would publish {folder} to https://huggingface.co/datasets/{repo} as {version}"
            f"{' (private)' if private else ''}; no network call was made")
        log(f"configs ({len(layout.splits)}; default {layout.default!r}):")
        for cfg, sp in layout.rows.items():
            log(f"  {cfg}: " + ", ".join(f"{s}={n:,} rows" for s, n in sp.items()))
        log(f"files ({len(files)}, {_human(sum(sizes.values()))} in all):")
        for rel in files:
            log(f"  {rel}  {_human(sizes[rel])}")
        log("README.md gets a release-notes section (version, previous version, changes) at upload")
        return {"version": version, "repo": repo, "commit": None, "tag": version, "status": "dry-run",
                "files": files, "bytes": sum(sizes.values())}

    from huggingface_hub import HfApi, get_token, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    token = get_token()
    if not token:
        raise PublishError("no Hub token: set HF_TOKEN or run `hf auth login` (a token with write access)")
    api = HfApi(token=token)

    def hub_error(what: str, e: Exception) -> PublishError:
        code, _ = _status(e)
        if code == 401:
            return PublishError(f"{what}: the Hub rejected the token (HTTP 401): check HF_TOKEN or `hf auth login`")
        if code == 403:
            return PublishError(f"{what}: the token may not write to {repo} (HTTP 403)")
        if _is_offline(e):
            return PublishError(f"{what}: {OFFLINE_MESSAGE}")
        if code is None and _is_timeout(e):
            return PublishError(f"{what} failed (network error): the Hub at {_endpoint()} gave no answer within "
                                f"{timeout:g} s (--timeout), {MAX_TRIES} attempts")
        kind = f"HTTP {code}" if code is not None else ("network error" if _is_network(e) else type(e).__name__)
        detail = redact(str(e), token).strip().splitlines()
        return PublishError(f"{what} failed ({kind})" + (f": {detail[0]}" if detail else ""))

    rec: dict[str, Any] = {"version": version, "repo": repo, "commit": None, "tag": version}
    retry: dict[str, Any] = {"log": log, "limit": limit, "timeout": timeout}
    try:
        with_retry("create_repo", lambda: api.create_repo(repo, repo_type="dataset", exist_ok=True,
                                                          private=private or None),
                   statuses=NO_CONFLICT_RETRY, **retry)
        info = with_retry("repo_info", lambda: api.repo_info(repo, repo_type="dataset"),
                          statuses=NO_CONFLICT_RETRY, **retry)
        if private and not info.private:
            raise PublishError(f"{repo} exists and is public; refusing to publish a --private release into it")
        refs = with_retry("list_repo_refs", lambda: api.list_repo_refs(repo, repo_type="dataset"),
                          statuses=NO_CONFLICT_RETRY, **retry)
        tags = {t.name: t.target_commit for t in refs.tags}
        previous = previous_version(list(tags), version)
        previous_rows = None
        if previous:
            with tempfile.TemporaryDirectory() as d:
                p = with_retry("download previous README", lambda: hf_hub_download(
                    repo, "README.md", repo_type="dataset", revision=previous, local_dir=d, token=token),
                    statuses=NO_CONFLICT_RETRY, **retry)
                previous_rows = _rows_from_card(Path(p).read_text(encoding="utf-8"))
        readme = (folder / "README.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n" + \
            release_notes(repo, version, previous, layout, previous_rows)

        with _staged(folder, files, readme) as stage:
            if version in tags:
                diffs = _compare(api, repo, version, stage, files)
                if diffs:
                    shown = "; ".join(diffs[:10]) + (f"; ... ({len(diffs)} in all)" if len(diffs) > 10 else "")
                    raise PublishError(f"{repo} already has {version} with different files ({shown}): a published "
                                       "version never changes; publish a new version instead")
                rec.update(commit=tags[version], status="published")
                record(folder, rec)
                log(f"{repo} {version} is already published with these files (commit {tags[version]}); nothing to do")
                return {**rec, "status": "already-published"}

            title = message or f"Release {version}"

            def upload() -> Any:
                head = api.repo_info(repo, repo_type="dataset", revision="main").sha   # re-read every try
                return api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=str(stage),
                                         commit_message=title, parent_commit=head,
                                         ignore_patterns=list(IGNORE_PATTERNS), delete_patterns=["*"])

            log(f"uploading {len(files)} files ({_human(sum(sizes.values()))}) to {repo} in one commit")
            ci = with_retry("upload_folder", upload, **retry)
            rec.update(commit=ci.oid, status="uploaded")
            record(folder, rec)

        with tempfile.TemporaryDirectory(prefix="publish-verify-") as cache_dir:
            limit.current = "the load-back of the uploaded commit"
            verify_on_hub(repo, ci.oid, layout, token, cache_dir)
            log(f"uploaded commit {ci.oid} loads back: every config has the release's Features and row counts")

            def tag() -> None:
                try:
                    api.create_tag(repo, tag=version, revision=ci.oid, repo_type="dataset",
                                   tag_message=message or f"{repo.split('/')[1]} {version}")
                except HfHubHTTPError as e:
                    if _status(e)[0] != 409:
                        raise
                    now = {t.name: t.target_commit for t in api.list_repo_refs(repo, repo_type="dataset").tags}
                    if now.get(version) != ci.oid:
                        raise PublishError(f"{version} was created on {repo} by someone else meanwhile "
                                           f"(commit {now.get(version)}); not moving it") from None

            with_retry("create_tag", tag, statuses=NO_CONFLICT_RETRY, **retry)
            limit.current = "the load-back of the tag"
            verify_on_hub(repo, version, layout, token, cache_dir)
        rec["status"] = "published"
        record(folder, rec)
        log(f"published {repo} {version} (commit {ci.oid}); load it with "
            f"datasets.load_dataset({repo!r}, {layout.default!r}, revision={version!r})")
        return {**rec}
    except PublishError as e:
        raise PublishError(redact(str(e), token)) from None
    except Exception as e:  # noqa: BLE001 - every Hub or network failure is a clear exit 2
        raise hub_error("publish", e) from None


# ------------------------------------------------------------------------------------------------ CLI


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


if __name__ == "__main__":
    exit_now(main())
