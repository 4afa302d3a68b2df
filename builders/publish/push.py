"""The publish itself (``publish``): the release gate, the repo, one ``upload_folder`` commit, the load-back of every
config, the tag and its load-back, each Hub request under the retry policy of ``builders.publish.retry``
(docs/publishing.md, "Publishing a version"; the steps are listed in ``builders.publish``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .checks import PublishError, check_limits, check_repo_id, parse_version, redact
from .notes import previous_version, release_notes, rows_from_card
from .retry import (
    DEFAULT_DEADLINE,
    DEFAULT_TIMEOUT,
    MAX_TRIES,
    NO_CONFLICT_RETRY,
    OFFLINE_MESSAGE,
    Deadline,
    DeadlineAlarm,
    alarm,
    endpoint,
    http_status,
    hub_timeouts,
    is_network,
    is_offline,
    is_timeout,
    offline_mode,
    with_retry,
)
from .upload import IGNORE_PATTERNS, Layout, compare, read_layout, record, staged, upload_files

__all__ = ["publish", "verify_on_hub"]

# ------------------------------------------------------------------------------------------------ load-back


def verify_on_hub(repo: str, revision: str, layout: Layout, token: str, cache_dir: str) -> None:
    """``load_dataset(repo, cfg, revision=revision)`` for every config: the README's Features and row counts."""
    from datasets import load_dataset

    from ..release.gate import quiet_progress

    for cfg in layout.splits:
        try:
            with quiet_progress():
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


def publish(folder: str | os.PathLike, repo: str, version: str, *, private: bool = False,
            message: str | None = None, dry_run: bool = False, log: Callable[[str], None] = print,
            timeout: float = DEFAULT_TIMEOUT, deadline: float = DEFAULT_DEADLINE,
            hard_exit: bool = False) -> dict[str, Any]:
    """Publish ``folder`` as ``repo`` at tag ``version`` (see ``builders.publish``). Returns the publish record,
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
        with alarm(limit, hard_exit=hard_exit):
            if dry_run:
                return _publish(folder, repo, version, private=private, message=message, dry_run=True, log=log,
                                limit=limit, timeout=timeout)
            with hub_timeouts(timeout, limit):
                return _publish(folder, repo, version, private=private, message=message, dry_run=False, log=log,
                                limit=limit, timeout=timeout)
    except DeadlineAlarm:
        raise PublishError(limit.message()) from None


def _publish(folder: str | os.PathLike, repo: str, version: str, *, private: bool, message: str | None,
             dry_run: bool, log: Callable[[str], None], limit: Deadline, timeout: float) -> dict[str, Any]:
    """The steps of :func:`publish`, inside its deadline and request timeouts."""
    folder = Path(folder).resolve()
    layout = read_layout(folder)

    from ..release.gate import ReleaseGateError, gate

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
        code, _ = http_status(e)
        if code == 401:
            return PublishError(f"{what}: the Hub rejected the token (HTTP 401): check HF_TOKEN or `hf auth login`")
        if code == 403:
            return PublishError(f"{what}: the token may not write to {repo} (HTTP 403)")
        if is_offline(e):
            return PublishError(f"{what}: {OFFLINE_MESSAGE}")
        if code is None and is_timeout(e):
            return PublishError(f"{what} failed (network error): the Hub at {endpoint()} gave no answer within "
                                f"{timeout:g} s (--timeout), {MAX_TRIES} attempts")
        kind = f"HTTP {code}" if code is not None else ("network error" if is_network(e) else type(e).__name__)
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
                previous_rows = rows_from_card(Path(p).read_text(encoding="utf-8"))
        readme = (folder / "README.md").read_text(encoding="utf-8").rstrip("\n") + "\n\n" + \
            release_notes(repo, version, previous, layout, previous_rows)

        with staged(folder, files, readme) as stage:
            if version in tags:
                diffs = compare(api, repo, version, stage, files)
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
                    if http_status(e)[0] != 409:
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
