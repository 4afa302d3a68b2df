"""What a publish refuses before any work (docs/publishing.md, "Publishing a version"): a version that is not
``vMAJOR.MINOR.PATCH``, a repo id that is not ``org/name``, limits that are not positive numbers of seconds; the
error every refusal and failure raises (``PublishError``, exit 2), and the redaction of tokens in messages.
"""

from __future__ import annotations

import re

__all__ = ["PublishError", "REPO_RE", "SEMVER_RE", "check_limits", "check_repo_id", "parse_version", "redact"]

#: matched with ``fullmatch`` only: ``$`` would also accept a trailing newline (``"v1.0.0\n"``)
SEMVER_RE = re.compile(r"v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_RE = re.compile(rf"{_REPO_PART}/{_REPO_PART}")


class PublishError(RuntimeError):
    """A refused or failed publish (exit 2). The message names the problem and never holds a token."""


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


def check_limits(timeout: float, deadline: float) -> None:
    """``--timeout`` and ``--deadline`` are finite, positive numbers of seconds (``PublishError`` otherwise)."""
    import math

    for flag, value in (("--timeout", timeout), ("--deadline", deadline)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise PublishError(f"{flag} must be a positive number of seconds, got {value!r}")
