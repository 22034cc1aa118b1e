"""Follow record files that are still being written: :class:`Follower` and :func:`follow`.

A training job appends to its TensorBoard event file, or a writer to its TFRecord shard, while someone reads
it. A :class:`Follower` keeps a local file open and, at each :meth:`~Follower.poll`, returns the records
appended since the last one: a record still being written (cut inside its header or its payload) stays
pending until its last byte is there, instead of raising
:class:`~recordkit.errors.TruncatedRecordError`. :func:`follow` turns that into an iterator that waits for
new records, ends after ``idle_timeout`` seconds without growth, and ends at once on ``close()`` (from any
thread).

The framing and the checksums are the format's own: the follower hands its pending bytes to the format's
reader (:meth:`~recordkit.formats.sequential.SequentialFrameReader.iter_window`, told that the window does
not reach the end of the file), so a record is checked exactly as :func:`recordkit.open` checks it. Formats
read that way can be followed: TFRecord (plain, and GZIP, ZLIB or BZIP2 through the same decompressor as
the reader, fed as compressed bytes arrive) and OFRecord. FFRecord cannot: its header holds the number of
records, written once the file is complete.

Examples
--------
>>> import os, tempfile, recordkit as rk
>>> from recordkit.formats.tfrecord import frame
>>> path = os.path.join(tempfile.mkdtemp(), "events.out.tfevents.1700000000.host")
>>> log = open(path, "wb")                 # a writer that is still running
>>> follower = Follower(path)              # named like an event file: TFRecord
>>> follower.poll()
[]
>>> data = frame(b"step 1") + frame(b"step 2")
>>> _ = log.write(data[:30]); log.flush()  # the second record is not complete yet
>>> follower.poll()
[b'step 1']
>>> _ = log.write(data[30:]); log.flush()
>>> follower.poll()
[b'step 2']
>>> log.close(); follower.close()
>>> list(rk.follow(path, idle_timeout=0, poll_interval=0.01))
[b'step 1', b'step 2']
"""

from __future__ import annotations

import builtins
import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any

from recordkit.errors import (
    CorruptRecordError,
    FileChangedError,
    UnknownFormatError,
    UnsupportedOperationError,
)
from recordkit.formats import available_formats, detect_format, format_for_path, get_format
from recordkit.formats.base import RecordFormat, Source
from recordkit.formats.sequential import SequentialFrameReader
from recordkit.io.atomic import pending_temporaries
from recordkit.io.sources import check_compression, is_url, resolve_format
from recordkit.support.closing import Closing
from recordkit.support.moved import renamed_arguments

_DETECT_MIN = 16
"""Bytes a file whose name does not tell its format (or compression) must hold before its content is
sniffed: the smallest TFRecord record; fewer could be taken for the start of another format."""

_WINDOW = 1 << 20
"""How many bytes a poll reads at a time, as the format layer does over a random-access file."""

_DETECT_MAX = 4096
"""A file whose first this many bytes no format recognises raises
:class:`~recordkit.errors.UnknownFormatError` (below that, the follower waits for more bytes)."""


class _NotYet(Exception):
    """Raised by :class:`_Appended` when the file holds no byte past the position read so far."""


class _Appended:
    """A ``read(n)`` stream over a growing file: the bytes from ``position`` up to ``limit`` (the size at the
    last check), read with ``os.pread``; :class:`_NotYet` instead of ``b""`` when there are none yet.

    A decompressor reading from it stops where the bytes stop, its state intact, and goes on from there
    when it is read again after more bytes arrived.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.position = 0
        self.limit = 0

    def read(self, n: int = -1, /) -> bytes:
        left = self.limit - self.position
        n = left if n < 0 else min(n, left)
        data = os.pread(self.fd, n, self.position) if n > 0 else b""
        if not data:
            raise _NotYet
        self.position += len(data)
        return data


class Follower(Closing):
    """Incremental reader of one growing record file.

    Parameters
    ----------
    path
        A local file (a name, or a :class:`pathlib.Path`). It is opened now, so it must exist; it may be
        empty.
    format
        A registered format. Default: the one the name says (its suffix; ``events.out.tfevents.*`` files
        are TFRecord), else the one the content shows, sniffed once the file holds 16
        bytes (until then :meth:`poll` returns nothing). The compression of a TFRecord file is told by
        its name (``.gz``, ``.zlib``, ``.bz2``), else by its first 16 bytes.
    check_crc
        Verify checksums, as :func:`recordkit.open` does.

    Raises
    ------
    UnsupportedOperationError
        The format cannot be followed (FFRecord), or ``path`` is a URL or not a regular file.
    UnknownFormatError
        ``format`` names no registered format.
    FileNotFoundError
        There is no file at ``path``; when a temporary file of a writer of ``path`` is beside it
        (``recordkit.open(path, "w")`` has not closed it yet), the message says so.

    Notes
    -----
    Only appending is followed. The file is checked at each poll: a path that now names another file
    (replaced or rotated), no file, or a file shorter than what was read raises
    :class:`~recordkit.errors.FileChangedError` (after the complete records the old file still held). A
    file rewritten in place to the same length or longer cannot be told from one appended to.

    A follower may be polled from one thread and closed from another; :meth:`poll` never blocks. It is a
    context manager that closes it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, format: str | None = None, check_crc: bool = True
    ) -> None:
        self.path: str = os.fspath(path)
        self.check_crc = check_crc
        if is_url(self.path):
            raise UnsupportedOperationError(
                f"{self.path}: only local files can be followed as they grow"
            )
        fmt: RecordFormat | None = None
        self._compression: str | None = None
        if format is not None or format_for_path(self.path) is not None:
            fmt, self._compression = resolve_format(None, self.path, format, None)
        self._format = fmt
        if fmt is not None:
            self._followable(fmt)
        if not stat.S_ISREG(_stat(self.path).st_mode):  # (opening a FIFO would wait for a writer)
            raise UnsupportedOperationError(
                f"{self.path} is not a regular file: it cannot be followed"
            )
        self._file = builtins.open(self.path, "rb")  # noqa: SIM115 - closed by close()
        info = os.fstat(self._file.fileno())
        self._identity = (info.st_dev, info.st_ino)
        self._raw = _Appended(self._file.fileno())
        self._stream: Any = None  # what the records are read from: _raw, or a decompressor over it
        self._reader: SequentialFrameReader | None = None
        self._pending = bytearray()  # bytes read (decompressed) from self._offset, not yet framed
        self._offset = 0  # the (decompressed) offset where the next record starts
        self._index = 0  # its index
        self._need = 0  # how many pending bytes the next frame needs at least
        self._failure: CorruptRecordError | None = None  # raised by every poll from now on
        self._stream_error: CorruptRecordError | None = None  # damaged compressed data, met ahead
        self._lock = threading.Lock()
        self._closed = False

    # -- the public interface ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def format(self) -> str | None:
        """The name of the file's format, ``None`` while it is not known yet (too few bytes to tell)."""
        return None if self._format is None else self._format.name

    @property
    def position(self) -> tuple[int, int]:
        """``(index, offset)`` of the next record: how many records were returned, and where the next one
        starts in the (decompressed) file."""
        return self._index, self._offset

    def poll(self) -> list[bytes]:
        """Return every complete record appended since the last poll (an empty list if none), in order.

        Never waits. A record whose last byte is not written yet stays pending for a later poll. After
        :meth:`close` it returns an empty list.

        Raises
        ------
        recordkit.errors.CorruptRecordError
            A record is damaged (a checksum mismatch, an impossible length, damaged compressed data),
            located by path, record index and byte offset. The records before it are returned first: the
            error comes from the next poll, and every poll after it.
        recordkit.errors.FileChangedError
            The file was replaced, removed or shortened (see the class's notes).
        recordkit.errors.UnknownFormatError
            No format recognises the file's first 4096 bytes.
        """
        records: list[bytes] = []
        try:
            replaced = self._check()
            while True:
                batch = self._next_batch()
                if batch is None:
                    break
                records += batch
            if replaced is not None:
                raise self._changed(replaced)
        except CorruptRecordError as exc:
            self._failure = self._failure or exc
            if not records:
                raise
        return records

    def close(self) -> None:
        """Close the file; :meth:`poll` returns nothing afterwards. Safe to call from another thread."""
        with self._lock:
            self._closed = True
            self._file.close()

    def __del__(self) -> None:
        # A follower dropped unclosed (``for record in rk.follow(path): break``) releases its file.
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"at record {self._index}, byte {self._offset}"
        return f"<Follower {self.path!r} {self.format or 'format not known yet'}, {state}>"

    # -- checking the file -------------------------------------------------------------------------

    def _followable(self, fmt: RecordFormat) -> None:
        """Raise if ``fmt``'s files cannot be read as they grow."""
        try:
            probe: object = fmt.reader(Source(path=self.path, buffer=b""), check_crc=False)
        except CorruptRecordError:  # it reads a file header (or footer) at once
            probe = None
        if not isinstance(probe, SequentialFrameReader):
            raise UnsupportedOperationError(
                f"{self.path}: {fmt.name} files cannot be followed as they grow: only formats of "
                "records framed one after the other (TFRecord, OFRecord) can, not one whose records "
                "are found through a header or footer written when the file is complete (an "
                "FFRecord header counts the records)"
            )

    def _check(self) -> str | None:
        """Bring the readable size up to date; raise if the file shrank; if the path now names another
        file or none, return why (the error is raised once the old file's last records are read)."""
        with self._lock:
            if self._closed or self._failure is not None:
                if self._failure is not None:
                    raise self._failure
                return None
            size = os.fstat(self._file.fileno()).st_size
            if size < self._raw.position:
                raise FileChangedError(
                    f"the file shrank to {size} bytes while being followed; {self._raw.position} "
                    "bytes had been read (it was truncated or rewritten)",
                    path=self.path,
                    index=self._index,
                    offset=self._raw.position,
                )
            self._raw.limit = size
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return "the file was removed (deleted or renamed) while being followed"
        if (info.st_dev, info.st_ino) != self._identity:
            return (
                "the path now names another file (the file was replaced or rotated while being "
                "followed); follow the new file from its start"
            )
        return None

    def _changed(self, reason: str) -> FileChangedError:
        return FileChangedError(reason, path=self.path, index=self._index, offset=self._offset)

    # -- reading -----------------------------------------------------------------------------------

    def _next_batch(self) -> list[bytes] | None:
        """:meth:`_batch` under the lock; ``None`` once closed."""
        with self._lock:
            return None if self._closed else self._batch()

    def _batch(self) -> list[bytes] | None:
        """The records of the next window of pending bytes, or ``None`` when no more are complete now.

        Reads up to about ``_WINDOW`` bytes (more for a longer record) on to
        the pending ones, then frames them with the format's reader. Called under the lock.
        """
        if self._failure is not None:
            raise self._failure
        if self._reader is None and not self._start():
            return None
        reader = self._reader
        assert reader is not None
        pending = self._pending
        want = max(_WINDOW, self._need)
        while len(pending) < want and self._stream_error is None:
            try:
                data = self._stream.read(want - len(pending))
            except _NotYet:
                break
            except CorruptRecordError as exc:  # damaged compressed data: after the bytes before it
                self._stream_error = exc
                break
            if not data:
                break
            pending += data
        if not pending or len(pending) < self._need:
            damaged = self._stream_error
            if damaged is not None:
                raise type(damaged)(
                    damaged.reason, path=self.path, index=self._index, offset=damaged.offset
                )
            return None
        window = bytes(pending)
        records: list[bytes] = []
        frames = reader.iter_window(window, self._offset, self._index, False)
        try:
            while True:
                records.append(next(frames))
        except StopIteration as stop:
            end, index, need = stop.value
        except CorruptRecordError as exc:
            self._failure = exc
            self._index += len(records)
            return records
        del pending[: end - self._offset]
        self._offset, self._index = end, index
        self._need = need or reader.HEADER
        return records

    def _start(self) -> bool:
        """Choose the format and the compression once enough bytes tell them; whether they are known."""
        fmt, compression = self._format, self._compression
        if fmt is None or (compression is None and fmt.capabilities.compression):
            head = os.pread(self._file.fileno(), min(self._raw.limit, _DETECT_MAX), 0)
            if len(head) < _DETECT_MIN:
                return False
            if fmt is None:
                name = detect_format(head, None)
                if name is None:
                    if len(head) < _DETECT_MAX:
                        return False
                    raise UnknownFormatError(
                        f"cannot tell the record format of {self.path} from its first {len(head)} "
                        f"bytes: pass format= (one of {', '.join(available_formats())})"
                    )
                fmt = get_format(name)
                self._followable(fmt)
            if compression is None:
                compression = fmt.detect_compression(head) if fmt.capabilities.compression else ""
        compression = compression or ""
        check_compression(fmt, compression)
        reader = fmt.reader(
            Source(path=self.path, buffer=b""), check_crc=self.check_crc, compression=compression
        )
        assert isinstance(reader, SequentialFrameReader)  # checked by _followable
        self._format, self._compression, self._reader = fmt, compression, reader
        self._stream = self._raw if reader.inflate is None else reader.inflate(self._raw)
        self._need = reader.HEADER
        return True


@renamed_arguments(interval="poll_interval")
class Following(Closing):
    """The iterator :func:`follow` returns: the records of a growing file as they are appended.

    It ends after ``idle_timeout`` seconds without growth, or when :meth:`close` is called (from any
    thread: a waiting iteration ends at once). It is its own context manager, closed on exit.
    """

    def __init__(
        self, follower: Follower, idle_timeout: float | None, poll_interval: float
    ) -> None:
        self.follower = follower
        self.idle_timeout = idle_timeout
        self.poll_interval = poll_interval
        self._wake = threading.Event()
        self._records = self._run()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._records)

    def _run(self) -> Iterator[bytes]:
        follower = self.follower
        last_growth = time.monotonic()
        seen = follower._raw.position
        replaced: str | None = None
        while not follower.closed:
            if replaced is None:
                replaced = follower._check()
            batch = follower._next_batch()
            if follower._raw.position != seen:
                seen, last_growth = follower._raw.position, time.monotonic()
            if batch is not None:
                yield from batch  # an empty batch: part of a record was read, read on
                continue
            if replaced is not None:
                raise follower._changed(replaced)
            idle = time.monotonic() - last_growth
            if self.idle_timeout is not None and idle >= self.idle_timeout:
                break
            self._wake.wait(self.poll_interval)
        self.close()

    def close(self) -> None:
        """Stop: the iteration ends (a waiting one at once), and the file is closed."""
        self.follower.close()
        self._wake.set()


def _stat(path: str) -> os.stat_result:
    """``os.stat(path)``; a missing file that ``recordkit.open(path, "w")`` is writing says so."""
    try:
        return os.stat(path)
    except FileNotFoundError as exc:
        pending = pending_temporaries(path)
        if not pending:
            raise
        raise FileNotFoundError(
            exc.errno,
            f"no such file yet: a writer (recordkit.open(path, 'w')) is writing it, or was killed while "
            "writing it, under the temporary "
            f"name {os.path.basename(pending[-1])}, which becomes {os.path.basename(path)} only when it is "
            "closed; to follow a file while it is written, write it through a file object "
            "(recordkit.open(open(path, 'wb'), 'w', format=...)) and flush()",
            path,
        ) from exc


@renamed_arguments(poll="poll_interval")
def follow(
    path: str | os.PathLike[str],
    *,
    idle_timeout: float | None = None,
    poll_interval: float = 0.5,
    format: str | None = None,
    check_crc: bool = True,
) -> Following:
    """Yield the records of a file as they are appended to it, from its first record on.

    At a record that is not completely written yet, it waits (checking every ``poll_interval`` seconds) instead of
    raising :class:`~recordkit.errors.TruncatedRecordError`.

    Parameters
    ----------
    path
        A local TFRecord (plain or compressed) or OFRecord file; see :class:`Follower` for how its format
        is found (``events.out.tfevents.*`` files are TFRecord by name).
    idle_timeout
        End after this many seconds in which the file did not grow (``0``: once every record written so
        far was read). ``None``: never; end it with ``close()``.
    poll_interval
        Seconds between two checks of the file for new bytes.
    format, check_crc
        As for :class:`Follower`.

    Returns
    -------
    Following
        An iterator of the records (``bytes``), with ``close()``, usable as a context manager.

    Raises
    ------
    recordkit.errors.CorruptRecordError
        While iterating, as :meth:`Follower.poll` (every record before the damage is yielded first);
        :class:`~recordkit.errors.FileChangedError` when the file is replaced, removed or shortened.
    UnsupportedOperationError
        The format cannot be followed (FFRecord).

    Examples
    --------
    In a process that reads what a training job logs::

        for event in rk.follow("logs/run1/events.out.tfevents.1700000000.host", idle_timeout=600):
            ...
    """
    if poll_interval <= 0:
        raise ValueError(
            f"poll_interval must be a positive number of seconds, not {poll_interval!r}"
        )
    if idle_timeout is not None and idle_timeout < 0:
        raise ValueError(f"idle_timeout must be >= 0 or None, not {idle_timeout!r}")
    return Following(
        Follower(path, format=format, check_crc=check_crc), idle_timeout, poll_interval
    )
