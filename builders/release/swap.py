"""Staging, the release lock and the swap (docs/architecture.md, "The release step"): a build writes its release into
its own staging folder beside ``<out>/<corpus>`` and, holding an exclusive lock, swaps it into place
(``swap_into_place``); a swap killed half-way is undone or finished by ``recover_swap``.

The swap renames whole directories with ``os.replace`` (the old release aside, the new one in, then the old one
deleted), so it is not ``builders.core.atomic``'s one-file temp-and-rename: what makes it safe is the order of the
renames and ``recover_swap``, described at ``swap_into_place``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "ReleaseLocked",
    "clean_stale_stages",
    "discard_stage",
    "lock_path",
    "old_path",
    "recover_swap",
    "release_lock",
    "scratch_dir",
    "stage_release",
    "staging_root",
    "swap_into_place",
]

# ------------------------------------------------------------------------------- staging, lock, swap, recovery
#
#   <out>/<corpus>/                              the release in place
#   <out>/.<corpus>.lock                         flock'ed by the build that writes or swaps the release
#   <out>/.<corpus>.incomplete/<owner>/          a build's staging folder, <owner> = <host>-<pid>-<random>
#   <out>/.<corpus>.incomplete/<owner>.scratch/  its scratch space (external sorts, the gate's datasets cache)
#   <out>/.<corpus>.old/                         the previous release, only during (or after a kill in) a swap


class ReleaseLocked(RuntimeError):
    """Another build holds the release lock and the caller asked not to wait."""


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def staging_root(out_dir: str | os.PathLike) -> Path:
    """The hidden folder beside ``out_dir`` that holds the staging folders of builds: ``.<name>.incomplete``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.incomplete")


def lock_path(out_dir: str | os.PathLike) -> Path:
    """The lock file beside ``out_dir``: ``.<name>.lock`` (hidden, never uploaded)."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.lock")


def old_path(out_dir: str | os.PathLike) -> Path:
    """Where ``swap_into_place`` keeps the previous release during a swap: ``.<name>.old``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.old")


def stage_release(out_dir: str | os.PathLike) -> Path:
    """A new, empty staging folder owned by this build: ``.<name>.incomplete/<host>-<pid>-<random>`` (see ``swap_into_place``).

    Unique per build, so two builds into the same ``--out`` never write into (or delete) each other's files.
    """
    import secrets

    stage = staging_root(out_dir) / f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir(parents=True)
    return stage


def scratch_dir(stage: str | os.PathLike) -> Path:
    """The scratch folder of a staging folder (``<owner>.scratch``), created on first use."""
    stage = Path(stage)
    path = stage.with_name(f"{stage.name}.scratch")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def clean_stale_stages(out_dir: str | os.PathLike) -> list[Path]:
    """Remove staging folders whose owner is gone; returns what was removed. Call it holding ``release_lock``.

    An entry of ``.<name>.incomplete`` named ``<host>-<pid>-<random>`` (or ``...scratch``) is stale when ``<host>`` is
    this machine and process ``<pid>`` is this one (an earlier, failed release of the same process) or no longer runs.
    Entries of other machines are left alone. Anything else in there is a leftover of the single staging folder of
    earlier toolkit versions and is removed. The folder itself goes when it is empty.
    """
    import shutil

    root = staging_root(out_dir)
    if not root.is_dir():
        return []
    removed = []
    host = _host()
    for p in sorted(root.iterdir()):
        base = p.name.split(".", 1)[0]
        parts = base.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit():
            owner_host, pid = parts[0], int(parts[1])
            if owner_host != host or (pid != os.getpid() and _pid_alive(pid)):
                continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        removed.append(p)
    with contextlib.suppress(OSError):
        root.rmdir()
    return removed


def discard_stage(stage: str | os.PathLike) -> None:
    """Remove a staging folder and its scratch folder, and the staging root when nothing else is in it."""
    import shutil

    stage = Path(stage)
    for p in (stage, stage.with_name(f"{stage.name}.scratch")):
        shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(OSError):
        stage.parent.rmdir()


@contextlib.contextmanager
def release_lock(out_dir: str | os.PathLike, *, wait: bool = True) -> Iterator[Path]:
    """Hold the exclusive lock of the release at ``out_dir`` (``fcntl.flock`` on ``.<name>.lock``) in the block.

    A second build into the same ``--out`` waits for the first one to release it (and says so on stderr), or, with
    ``wait=False``, raises ``ReleaseLocked``. The lock goes with the process: a killed build never leaves it held.
    The lock file holds the owner's ``<host> <pid>`` for that message and is never deleted (deleting a lock file
    races with a process that has just opened it). Without ``fcntl`` (Windows) the block runs unlocked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield lock_path(out_dir)
        return
    path = lock_path(out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown process"
            if not wait:
                raise ReleaseLocked(f"another build ({holder}) is writing the release {out_dir}") from None
            print(f"another build ({holder}) is writing the release {out_dir}: waiting for it to finish",
                  file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{_host()} pid {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def recover_swap(out_dir: str | os.PathLike) -> str | None:
    """Finish or undo a swap that a killed ``swap_into_place`` left half done; returns what it did, or ``None``.

    ``.<name>.old`` without ``<name>``: the build was killed between the two renames, so the previous release is
    renamed back (``"restored"``). Both present: the new release was already in place and only the removal of the
    old one was cut short (``"removed"``). Call it holding ``release_lock``.
    """
    out_dir = Path(out_dir)
    old = old_path(out_dir)
    if not (old.exists() or old.is_symlink()):
        return None
    if out_dir.exists() or out_dir.is_symlink():
        _remove(old)
        return "removed"
    os.replace(old, out_dir)
    return "restored"


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def swap_into_place(stage: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Move a finished staged release into place, replacing an older release of the same name.

    The old release is kept until the new one is in place: ``out_dir`` is renamed to the hidden sibling
    ``.<name>.old``, ``stage`` is renamed to ``out_dir``, and only then the old release is deleted. If the second
    rename fails, the old release is renamed back to ``out_dir`` and the error is raised. A process killed between the
    two renames leaves ``.<name>.old`` and no ``out_dir``: ``recover_swap`` (run first here, and by every build and the
    ``loading_scripts`` loaders) renames it back, so ``out_dir`` always ends up holding a complete release. A failure
    to delete the old copy at the end only warns, because the new release is already in place; the next build
    removes what is left. Run it holding ``release_lock``.
    """
    import warnings

    stage, out_dir = Path(stage), Path(out_dir)
    old = old_path(out_dir)
    recover_swap(out_dir)
    had_old = out_dir.exists() or out_dir.is_symlink()
    if had_old:
        os.replace(out_dir, old)
    try:
        os.replace(stage, out_dir)
    except BaseException:
        if had_old:
            os.replace(old, out_dir)
        raise
    if had_old:
        try:
            _remove(old)
        except OSError as e:
            warnings.warn(f"published {out_dir}, but could not delete the previous release at {old}: {e}",
                          RuntimeWarning, stacklevel=2)
    if stage.parent == staging_root(out_dir):
        with contextlib.suppress(OSError):  # the staging root goes once no other build stages there
            stage.parent.rmdir()
    return out_dir
