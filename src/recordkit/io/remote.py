"""Files at fsspec URLs, read by the byte range: exact ranges for random access, read-ahead for iteration.

fsspec's file objects read through a block cache: a random read fetches whole blocks (5 MB by default),
and reading in order fetches ahead past what is used. :class:`RemoteSource` asks the store for the bytes a
reader needs and no others:

* :meth:`RemoteSource.read_ranges` fetches many ranges at once. Ranges closer than :data:`GAP` are
  merged into one request, and the requests run concurrently (fsspec's ``cat_ranges``, concurrent on the
  asynchronous file systems: HTTP, S3, GCS, Azure).
* :meth:`RemoteSource.pread` fetches one exact range. When a large read starts where another ended (a
  reader going through the file in windows of 1 MiB), the next :data:`AHEAD` windows are fetched in the
  background while the records of this one are parsed: the file is fetched once, in requests of the
  reader's window. Reading single records, or a header, fetches nothing ahead.
* A request that fails, or takes longer than :data:`TIMEOUT` seconds, is retried :data:`RETRIES` times,
  waiting :data:`BACKOFF` seconds, then twice as long each time; then
  :class:`~recordkit.errors.RemoteReadError` names the URL and the byte range.
* The file must not change while it is read. Over HTTP(S) every request carries ``If-Match`` with the ETag
  the server gave when the file was opened, and a server that answers 412 has a new file; elsewhere, and
  without an ETag, a range that comes back shorter than asked means the same. Either raises
  :class:`~recordkit.errors.FileChangedError`, never a mix of two versions' bytes.

A reader holds a source of its own; nothing of it but the fsspec file system (which fsspec makes safe to
use after ``fork``) is shared, and the read-ahead thread is started in the process that reads.
"""

from __future__ import annotations

import asyncio
import bisect
import time
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from recordkit.errors import FileChangedError, RecordKitWarning, RemoteReadError
from recordkit.formats.base import Source

__all__ = ["AHEAD", "BACKOFF", "GAP", "RETRIES", "TIMEOUT", "WINDOW", "RemoteSource", "file_info"]

GAP = 4 << 10
"""Ranges less than this many bytes apart are fetched in one request (the bytes between are thrown away)."""
AHEAD = 4
"""How many windows past the one being parsed are fetched in the background, concurrently, when a file is
read in order."""
WINDOW = 2 << 20
"""The least a window fetched ahead holds (a reader reading in larger pieces has windows of its size)."""
_LARGE = 512 << 10
"""A read at least this large, on from another, is a reader going through the file (windows of 1 MiB);
smaller ones (a record, a header) fetch nothing ahead."""
RETRIES = 4
"""How many times a failed request is sent again before :class:`~recordkit.errors.RemoteReadError`."""
BACKOFF = 0.25
"""Seconds before the first retry; each further retry waits twice as long."""
TIMEOUT = 60.0
"""Seconds a request may take, from when it is sent to its last byte, before it is abandoned and counted as a
failure (retried, as :data:`RETRIES` says). ``None``: no limit but the file system's own. Enforced on the
asynchronous file systems (HTTP, S3, GCS, Azure); the others (``memory://``, local) do not wait on a
network."""
_CONCURRENT = 128
"""The most requests of one call sent at once; the others wait, outside their timeout."""


class RemoteSource(Source):
    """The :class:`~recordkit.formats.base.Source` of a file at an fsspec URL, read by exact byte ranges.

    Parameters
    ----------
    url
        The file's URL, shown in errors.
    fs, fs_path
        The fsspec file system and the path in it (``fsspec.core.url_to_fs(url)``).
    info
        ``fs.info(fs_path)``: its size, and its ETag when the store gives one.
    """

    remote = True

    def __init__(self, url: str, fs: Any, fs_path: str, info: dict[str, Any]) -> None:
        # A source of its own kind, with neither a buffer nor a file object: every read is a method below.
        super().__init__(path=url, buffer=b"")
        self.buffer = None
        self.size = self.length = int(info["size"])
        self.fs, self.fs_path = fs, fs_path
        self.etag = info.get("ETag") or info.get("etag")
        self._options: dict[str, Any] = {}
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if self.etag and {"http", "https"} & set(protocols):
            self._options["headers"] = {"If-Match": self.etag}
        self._ahead: list[tuple[int, int, Future[bytes]]] = []  # windows fetched ahead, in order
        self._last_start = self._last_end = -1  # where the last read began and ended
        self._last_large = False  # and whether it was large
        self._pool: ThreadPoolExecutor | None = None
        self._warned = False  # that the server ignores Range

    def pread(self, offset: int, n: int) -> bytes:
        """Return up to ``n`` bytes at ``offset`` (fewer at the end of the file): from the read-ahead when
        it holds them, otherwise fetched in one request.

        A read of :data:`_LARGE` bytes or more that starts within or at the end of another such read (a reader going
        through the file in windows, each starting at the first record the one before cut) has the
        windows after it fetched in the background.
        """
        n = min(n, self.length - offset)
        if n <= 0:
            return b""
        with self._lock:  # the read-ahead's bookkeeping, for readers shared by threads
            data = self._from_ahead(offset, n)
            if data is None:
                self._cancel_ahead()
        fetched = data is None
        if data is None:
            data = self._fetch([(offset, offset + n)])[0]
        with self._lock:
            large = n >= _LARGE
            if large and fetched:  # kept: the next window starts inside it, at the record it cut
                self._ahead[:0] = [(offset, offset + n, _done(data))]
            onward = self._last_start < offset <= self._last_end  # on from the read before
            if large and self._last_large and onward:
                self._read_ahead(offset + n, max(n, WINDOW))
            self._last_start, self._last_end, self._last_large = offset, offset + n, large
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Return the bytes of each ``[start, end)`` of ``ranges`` (fewer at the end of the file), fetched
        together: ranges less than :data:`GAP` apart in one request, the requests concurrently."""
        length = self.length
        requests: list[list[int]] = []  # [start, end] of each request, in file order
        for start, end in sorted({(start, min(end, length)) for start, end in ranges}):
            if start >= end:
                continue
            if requests and start - requests[-1][1] < GAP:
                requests[-1][1] = max(requests[-1][1], end)
            else:
                requests.append([start, end])
        spans = [(start, end) for start, end in requests]
        blobs = self._fetch(spans) if spans else []
        bases = [start for start, _ in spans]
        out = []
        for start, end in ranges:
            end = min(end, length)
            if start >= end:
                out.append(b"")
                continue
            i = bisect.bisect_right(bases, start) - 1
            out.append(blobs[i][start - bases[i] : end - bases[i]])
        return out

    def descriptor(self) -> int | None:
        """A remote file has no descriptor."""
        return None

    def close(self) -> None:
        """Stop fetching ahead."""
        self._cancel_ahead()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _from_ahead(self, offset: int, n: int) -> bytes | None:
        """The bytes from the windows fetched ahead, if they hold them all (one window or several in a
        row); the windows wholly before ``offset`` are dropped."""
        while self._ahead and self._ahead[0][1] <= offset:
            self._ahead.pop(0)
        if not self._ahead or self._ahead[0][0] > offset:
            return None
        pieces, at, stop = [], offset, offset + n
        for start, end, future in self._ahead:
            if at >= stop:
                break
            if start > at:
                return None  # a gap: not all there
            blob = future.result()
            pieces.append(blob[at - start : min(end, stop) - start])
            at = min(end, stop)
        return b"".join(pieces) if at >= stop else None

    def _read_ahead(self, offset: int, size: int) -> None:
        """Have :data:`AHEAD` windows of ``size`` bytes from ``offset`` on fetched, or being fetched."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(AHEAD, thread_name_prefix="recordkit-read-ahead")
            weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        if self._ahead:
            offset = max(offset, self._ahead[-1][1])
        while len(self._ahead) < AHEAD and offset < self.length:
            end = min(offset + size, self.length)
            self._ahead.append((offset, end, self._pool.submit(self._fetch_one, offset, end)))
            offset = end

    def _cancel_ahead(self) -> None:
        for _, _, future in self._ahead:
            future.cancel()
        self._ahead.clear()

    def _fetch_one(self, start: int, end: int) -> bytes:
        return self._fetch([(start, end)])[0]

    def _fetch(self, spans: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each span, retrying what failed; checked to be of the length asked."""
        results: list[Any] = [None] * len(spans)
        todo = list(range(len(spans)))
        for attempt in range(RETRIES + 1):
            if attempt:
                time.sleep(BACKOFF * 2 ** (attempt - 1))
            answers = self._request([spans[i] for i in todo])
            failed = []
            for i, answer in zip(todo, answers, strict=True):
                if isinstance(answer, BaseException):
                    if _is_change(answer) or isinstance(answer, FileNotFoundError):
                        raise self._changed(spans[i], answer) from answer
                    failed.append(i)
                    results[i] = answer
                else:
                    results[i] = self._checked(spans[i], answer)
            todo = failed
            if not todo:
                return results
        start, end = spans[todo[0]]
        raise RemoteReadError(
            f"could not be fetched in {RETRIES + 1} attempts: {_brief(results[todo[0]])}",
            path=self.path or "",
            start=start,
            end=end,
        ) from results[todo[0]]

    def _request(self, spans: list[tuple[int, int]]) -> list[Any]:
        """One attempt at each span: its bytes, or the exception it failed with."""
        if getattr(self.fs, "async_impl", False):
            try:
                result: list[Any] = _run(self.fs, self._gather(spans))
                return result
            except Exception as exc:  # noqa: BLE001 - a failure of the whole batch: each is retried
                return [exc] * len(spans)
        return [self._attempt(start, end) for start, end in spans]  # in process: nothing to wait on

    def _attempt(self, start: int, end: int) -> Any:
        """The bytes of ``[start, end)`` from a file system that is not asynchronous, or the exception."""
        try:
            return self.fs.cat_file(self.fs_path, start=start, end=end, **self._options)
        except Exception as exc:  # noqa: BLE001 - classified by the caller
            return exc

    async def _gather(self, spans: list[tuple[int, int]]) -> list[Any]:
        """Every span requested concurrently (at most :data:`_CONCURRENT` at once), each within
        :data:`TIMEOUT`."""
        gate = asyncio.Semaphore(_CONCURRENT)

        async def one(start: int, end: int) -> bytes:
            async with gate:
                fetch = self.fs._cat_file(self.fs_path, start=start, end=end, **self._options)
                return await asyncio.wait_for(fetch, TIMEOUT)

        return await asyncio.gather(
            *(one(start, end) for start, end in spans), return_exceptions=True
        )

    def _checked(self, span: tuple[int, int], data: bytes) -> bytes:
        start, end = span
        if len(data) == end - start:
            return data
        if len(data) == self.length and start + len(data) != end:  # a server that ignores Range
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"{self.path}: the server ignores Range requests and sends the whole file for "
                    "each read; read it through filecache:: (or download it) instead",
                    RecordKitWarning,
                    stacklevel=2,
                )
            return data[start:end]
        raise self._changed(span, None, len(data))

    def _changed(
        self, span: tuple[int, int], cause: BaseException | None, got: int | None = None
    ) -> FileChangedError:
        start, end = span
        what = (
            f"{got} bytes came back for bytes {start}-{end - 1}"
            if got is not None
            else _brief(cause)
        )
        return FileChangedError(
            f"the file changed on the server while it was read ({what}); open it again",
            path=self.path,
            offset=start,
        )


def _done(data: bytes) -> Future[bytes]:
    future: Future[bytes] = Future()
    future.set_result(data)
    return future


def file_info(url: str, fs: Any, fs_path: str) -> dict[str, Any]:
    """``fs.info(fs_path)``, asked again as a failed request is (:data:`RETRIES`) when the store could not
    be reached: fsspec's HTTP file system reports a refused connection or a timeout as a missing file,
    with the real failure as its cause.

    Raises
    ------
    FileNotFoundError
        The store says there is no such file.
    RemoteReadError
        The store could not be reached, each time.
    """
    failure: BaseException | None = None
    for attempt in range(RETRIES + 1):
        if attempt:
            time.sleep(BACKOFF * 2 ** (attempt - 1))
        try:
            info: dict[str, Any] = (
                _run(fs, asyncio.wait_for(fs._info(fs_path), TIMEOUT))
                if getattr(fs, "async_impl", False)
                else fs.info(fs_path)
            )
            return info
        except asyncio.TimeoutError as exc:
            failure = exc
        except FileNotFoundError as exc:
            cause = exc.__cause__
            if cause is None or getattr(cause, "status", None) is not None:
                raise  # the store answered: there is no such file
            failure = cause
    raise RemoteReadError(
        f"could not be reached in {RETRIES + 1} attempts: {_brief(failure)}",
        path=url,
        start=0,
        end=0,
    ) from failure


def _run(fs: Any, awaitable: Any) -> Any:
    """Run a coroutine on the event loop of an asynchronous fsspec file system (which runs in a thread of
    its own), from this thread."""

    async def run() -> Any:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(run(), fs.loop).result()


def _brief(exc: BaseException | None) -> str:
    """An exception as a short text (aiohttp's name the whole request, headers and all)."""
    if isinstance(exc, asyncio.TimeoutError) and not str(exc):
        return f"no answer within {TIMEOUT} s (recordkit.io.remote.TIMEOUT)"
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:197] + "..."


def _is_change(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's answer that the file is no longer the one opened: HTTP 412 to
    ``If-Match`` (aiohttp's error carries the status)."""
    return getattr(exc, "status", None) == 412
