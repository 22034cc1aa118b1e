"""Where a frame reader's bytes come from: a :class:`Source` (a buffer, a seekable file, or a stream), and
the bounded reads of a stream (:func:`read_full`).

A plain local file is read with ``os.pread``; other seekable file objects with ``seek`` and ``read`` under a
lock, which a forked child replaces. The I/O layer gives remote files a source of their own, which fetches
byte ranges (:mod:`recordkit.io.remote`).
"""

from __future__ import annotations

import io
import os
import stat
import threading
import weakref
from collections.abc import Sequence
from typing import IO, Any, Protocol

from recordkit.errors import UnsupportedOperationError

__all__ = ["Source", "SupportsRead", "read_full"]

_READ_CHUNK = 1 << 20
"""The largest single read from a stream: a length field, however large, never allocates more than this
ahead of the bytes actually present."""


class SupportsRead(Protocol):
    """A binary stream: ``read(n)`` returns at most ``n`` bytes, ``b""`` at the end."""

    def read(self, n: int = -1, /) -> bytes:
        """Read up to ``n`` bytes."""
        ...


def read_full(read: Any, n: int) -> bytes:
    """Return ``n`` bytes from ``read`` (a ``read(size)`` callable), fewer only if the stream ends first.

    Reads at most ``_READ_CHUNK`` bytes at a time, so a corrupt length never allocates more than the
    stream actually holds.
    """
    if n <= 0:
        return b""
    if n <= _READ_CHUNK:
        data: bytes = read(n)
        if len(data) == n or not data:
            return data
        parts = [data]
        got = len(data)
    else:
        parts = []
        got = 0
    while got < n:
        chunk: bytes = read(min(n - got, _READ_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


_LOCKED_SOURCES: weakref.WeakSet[Source] = weakref.WeakSet()
"""Sources read with seek + read under a lock, whose locks a forked child must replace."""


def _replace_locks() -> None:
    # A thread of the parent may have held a lock at the fork; it does not exist in the child, and the lock
    # would stay held forever. The file object itself is in a consistent state (its methods run under the GIL).
    for source in list(_LOCKED_SOURCES):
        source._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_replace_locks)


def _descriptor(file: Any) -> int | None:
    """Return the descriptor holding exactly the bytes ``file`` reads, or ``None``.

    Only plain files qualify: a ``FileIO``, or a buffered reader over one, open for reading on a regular file.
    Other objects with a ``fileno()`` (a ``GzipFile``, a socket file) read something else than their
    descriptor holds.
    """
    raw = file.raw if isinstance(file, (io.BufferedReader, io.BufferedRandom)) else file
    if not isinstance(raw, io.FileIO):
        return None
    try:
        fd = raw.fileno()
        if not raw.readable() or not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        if isinstance(file, io.BufferedRandom):
            file.flush()  # bytes still in its write buffer are not in the file yet
    except (OSError, ValueError):
        return None
    return fd


def _pread(fd: int, n: int, offset: int) -> bytes:
    """``os.pread`` until ``n`` bytes or the end of the file (one call reads at most about 2 GiB)."""
    data = os.pread(fd, n, offset)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        chunk = os.pread(fd, n - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Source:
    """The bytes a frame reader reads: a buffer, a seekable file, or a stream.

    Parameters
    ----------
    path
        Shown in error messages (a path or URL), or ``None``.
    buffer
        The whole file as ``bytes`` (or another buffer). Iteration and random access slice it.
    fileobj
        A binary file object, used when there is no buffer.
    seekable
        Whether ``fileobj`` may be positioned with ``seek``; random access needs it (or a buffer).
    size
        The file size in bytes, when known.

    Notes
    -----
    With a seekable ``fileobj`` every offset is relative to the position the file was at when the source
    was made, so a record file embedded in a larger file can be read too, and nothing past the size the
    file had then is read.

    A plain file (a ``FileIO`` or a buffered reader over one, on a regular file) is read with ``os.pread``
    on its descriptor: no file position is involved, so threads need no lock and a forked child shares
    nothing with its parent, and a file that shrinks under the reader gives short reads (reported as
    :class:`~recordkit.errors.TruncatedRecordError`), where a memory map would kill the process with
    ``SIGBUS``. Other seekable objects are read with ``seek`` and ``read`` under a lock, which a forked child
    replaces.
    """

    remote = False
    """Whether each read is a request to a remote store (:class:`recordkit.io.remote.RemoteSource`): then
    a reader avoids reading the whole file to check an index (see the formats)."""

    def __init__(
        self,
        *,
        path: str | None,
        buffer: Any = None,
        fileobj: IO[bytes] | SupportsRead | None = None,
        seekable: bool = False,
        size: int | None = None,
    ) -> None:
        if buffer is None and fileobj is None:
            raise ValueError("a Source needs a buffer or a file object")
        self.path = path
        self.buffer = buffer
        self.fileobj = fileobj
        self.base = 0
        self.fd: int | None = None
        self._lock = threading.Lock()
        if buffer is not None:
            self.seekable = True
            self.size: int | None = len(buffer)
            return
        self.seekable = seekable
        self.size = size
        if seekable:
            file: Any = fileobj
            self.base = file.tell()
            self.fd = _descriptor(file)
            if self.fd is None:
                # seek + read is two steps: one lock per source keeps a reader shared by threads correct.
                _LOCKED_SOURCES.add(self)
            if size is None:
                end = (
                    os.fstat(self.fd).st_size if self.fd is not None else file.seek(0, os.SEEK_END)
                )
                self.size = max(end - self.base, 0)
                if self.fd is None:
                    file.seek(self.base)

    @property
    def random_access(self) -> bool:
        """Whether :meth:`pread` works."""
        return self.seekable

    def pread(self, offset: int, n: int) -> bytes:
        """Return up to ``n`` bytes at ``offset`` (fewer at the end of the file).

        Raises
        ------
        UnsupportedOperationError
            If the source is a stream.
        """
        if self.buffer is not None:
            data: bytes = self.buffer[offset : offset + n]  # a view, for a mapped file
            return data
        fd = self.descriptor()
        if fd is not None:
            # Never past the size seen at opening (what was appended since is not part of this file),
            # which also bounds what a damaged length can make this allocate.
            n = min(n, self.size - offset)  # type: ignore[operator]
            return _pread(fd, n, self.base + offset) if n > 0 else b""
        if not self.seekable:
            raise UnsupportedOperationError(
                "this source is a stream and cannot be read at an offset"
            )
        file: Any = self.fileobj
        with self._lock:
            file.seek(self.base + offset)
            return read_full(file.read, n)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Return the bytes of each ``[start, end)`` of ``ranges`` (fewer at the end of the file).

        Here one :meth:`pread` each; a remote source fetches them together.
        """
        return [self.pread(start, end - start) for start, end in ranges]

    def descriptor(self) -> int | None:
        """Return the descriptor read with ``os.pread``, or ``None`` when the source has none.

        Raises
        ------
        ValueError
            If the file object was closed: its descriptor number may already belong to another file.
        """
        if self.fd is not None and self.fileobj.closed:  # type: ignore[union-attr]
            raise ValueError("I/O operation on a closed file (the file object the reader reads)")
        return self.fd

    def stream(self) -> SupportsRead:
        """Return a stream positioned at the first byte of the records (of a buffer: a fresh one)."""
        if self.seekable:  # a buffer too: its reads are slices
            return _PositionedStream(self)
        return self.fileobj  # type: ignore[return-value]


class _PositionedStream:
    """A ``read(n)`` stream over a seekable source that keeps its own position (reads are :meth:`Source.pread`)."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._pos = 0

    def read(self, n: int = -1, /) -> bytes:
        if n < 0:
            n = max((self._source.size or 0) - self._pos, 0)
        data = self._source.pread(self._pos, n)
        self._pos += len(data)
        return data
