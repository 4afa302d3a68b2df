"""One way to open an input file: checked to be a regular file, never blocking, reads capped by bytes read
(docs/reason-codes.md; docs/architecture.md, "Failures").

Every reader of ``builders/sources`` opens its paths through :func:`open_input` (or checks them with
:func:`check_regular_file` before a library opens them), so that

* a FIFO, a socket or a device (``/dev/zero``, ``/dev/stdin``) in place of an input is refused before it is read: a
  FIFO is opened with ``O_NONBLOCK`` and checked with ``fstat``, so opening it never waits for a writer;
* a symbolic link is followed, but a loop of links is refused with a message that says so;
* a read is capped by the bytes actually read, not by ``st_size`` (which is 0 for ``/dev/zero`` and for a file that
  grows while it is read): reading more than ``max_bytes`` raises :class:`InputTooLarge`.

The errors are ``OSError`` subclasses: a per-item reader (one video's transcript, one web page) turns them into that
item's named drop; a whole-input reader turns them into :class:`~builders.core.errors.InputError` (exit 2) with
:func:`whole_input_error`.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import IO, Any, Literal, overload

from builders.core.errors import InputError

__all__ = ["InputTooLarge", "NotRegularFile", "check_regular_file", "open_input", "read_input_bytes",
           "whole_input_error"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_O_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) \
    | getattr(os, "O_BINARY", 0)


class NotRegularFile(OSError):
    """The path is a FIFO, socket, device or directory where a regular file is expected, or a loop of links."""


class InputTooLarge(OSError):
    """More than ``max_bytes`` were read from an input (the cap is on bytes read, not on its ``stat`` size)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _stat(path: Path, what: str) -> os.stat_result:
    try:
        return os.stat(path)  # follows links
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, f"{what} {path}: a loop of symbolic links") from None
        raise


def check_regular_file(path: str | Path, what: str = "input") -> os.stat_result:
    """The ``stat`` of ``path`` (links followed) when it is a regular file; :class:`NotRegularFile` naming what it is
    otherwise (a FIFO, a device, a directory, a loop of links); ``FileNotFoundError`` when it does not exist."""
    p = Path(path)
    st = _stat(p, what)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(errno.EINVAL, f"{what} {p} is {_kind(st.st_mode)}, not a regular file")
    return st


class _CappedRaw(io.RawIOBase):
    """A raw binary stream over a file descriptor that raises :class:`InputTooLarge` once more than ``max_bytes``
    bytes have been read (``None``: no cap), whatever the file's ``stat`` size says."""

    def __init__(self, fd: int, name: str, max_bytes: int | None, what: str) -> None:
        super().__init__()
        self._fd, self.name, self._max, self._what = fd, name, max_bytes, what
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = len(view)
        if self._max is not None:
            want = min(want, self._max + 1 - self.bytes_read)
            if want <= 0:
                raise InputTooLarge(errno.EFBIG, f"{self._what} {self.name}: more than {self._max} bytes")
        data = os.read(self._fd, want)
        view[:len(data)] = data
        self.bytes_read += len(data)
        if self._max is not None and self.bytes_read > self._max:
            raise InputTooLarge(errno.EFBIG, f"{self._what} {self.name}: more than {self._max} bytes")
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self._fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


@overload
def open_input(path: str | Path, *, max_bytes: int | None, what: str = ..., text: Literal[False] = ...,
               encoding: str = ..., errors: str = ..., newline: str | None = ...) -> IO[bytes]: ...


@overload
def open_input(path: str | Path, *, max_bytes: int | None, what: str = ..., text: Literal[True],
               encoding: str = ..., errors: str = ..., newline: str | None = ...) -> IO[str]: ...


def open_input(path: str | Path, *, max_bytes: int | None, what: str = "input", text: bool = False,
               encoding: str = "utf-8", errors: str = "strict", newline: str | None = None) -> IO[Any]:
    """Open an input file for reading (binary, or text with ``text=True``) after checking that it is a regular file.

    Opened with ``O_NONBLOCK`` (a FIFO never blocks the open) and checked again with ``fstat`` on the open descriptor
    (a file swapped for a FIFO between the two checks is refused too). Reading more than ``max_bytes`` bytes raises
    :class:`InputTooLarge` (``None``: streaming readers whose memory is bounded otherwise). Raises
    ``FileNotFoundError`` for a missing path and :class:`NotRegularFile` for anything but a regular file."""
    p = Path(path)
    check_regular_file(p, what)
    try:
        fd = os.open(p, _O_FLAGS)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, f"{what} {p}: a loop of symbolic links") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, f"{what} {p} is {_kind(st.st_mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: plain blocking reads from here on
        raw = _CappedRaw(fd, str(p), max_bytes, what)
    except BaseException:
        os.close(fd)
        raise
    buffered = io.BufferedReader(raw, buffer_size=1 << 16)
    if not text:
        return buffered
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)


def read_input_bytes(path: str | Path, *, max_bytes: int, what: str = "input") -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` bytes (:func:`open_input`'s checks and errors)."""
    with open_input(path, max_bytes=max_bytes, what=what) as f:
        return f.read()


def whole_input_error(err: OSError, path: str | Path, what: str) -> InputError:
    """The :class:`~builders.core.errors.InputError` (exit 2, one line) of a whole input that cannot be opened: its
    message names the file and the problem."""
    message = str(err) if isinstance(err, (NotRegularFile, InputTooLarge)) else \
        f"{what} {path}: cannot be read: {err.strerror or type(err).__name__}"
    return InputError(message)
