"""Where records come from: local files read with ``os.pread``, fsspec URLs, binary file objects.

Also what a source is called and holds: :func:`is_url`, :func:`is_glob_pattern`, and, for recordkit's own
packages rather than its users, :func:`source_exists`, :func:`source_size`, :func:`require_fsspec` and the
listing of a directory (:func:`dataset_files`, :func:`natural_key`); and the format and compression of a file, from ``format=``,
its name or its first bytes (:func:`reading_format`). Everything above (:mod:`recordkit.io.resolve`, the
reader and the writer) opens its files here.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import errno
import itertools
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

from recordkit.errors import UnknownFormatError, UnsafePathError, UnsupportedOperationError
from recordkit.formats import (
    available_formats,
    detect_format,
    format_for_path,
    get_format,
    suffix_compression,
)
from recordkit.formats.base import RecordFormat, Source, normalize_compression
from recordkit.io.mapped import MappedFile
from recordkit.io.remote import RemoteSource, file_info
from recordkit.support.extras import require

__all__ = [
    "SNIFF_SIZE",
    "Opened",
    "check_compression",
    "close_all",
    "open_source",
    "resolve_format",
]

SNIFF_SIZE = 1 << 16
"""How many leading bytes are read to recognise a file's format (more for a large FFRecord header, up to
:data:`recordkit.formats.SNIFF_LIMIT`)."""


def is_url(path: str) -> bool:
    """Whether ``path`` is an fsspec URL (``s3://...``, ``memory://...``, ``file://...``), read through
    fsspec, rather than a local path; chained URLs too (``filecache::s3://...``, ``simplecache::gs://...``,
    ``zip://a.tfrecord::s3://bucket/b.zip``)."""
    first, chained, _ = path.partition("::")
    scheme, sep, _ = first.partition("://")
    return (bool(sep) or bool(chained)) and scheme.isidentifier() and len(scheme) > 1


def listed_url(url: str, fs: Any, path: str) -> str:
    """The URL of ``path``, a file that ``fs`` (``url``'s file system) listed, with ``url``'s chain.

    A glob over ``filecache::s3://bucket/*`` lists through the cache's target; its matches keep the
    ``filecache::`` prefix (and anything chained after the listed file system, as in ``zip://*::s3://b.zip``)
    so that they are read through the same cache.
    """
    pieces = url.split("::")
    wrappers = list(itertools.takewhile(lambda piece: "://" not in piece, pieces))
    tail = pieces[len(wrappers) + 1 :]
    return "::".join([*wrappers, fs.unstrip_protocol(path), *tail])


def _caches(fs: Any) -> bool:
    """Whether ``fs`` is one of fsspec's caching file systems (``filecache``, ``simplecache``,
    ``blockcache``)."""
    try:
        from fsspec.implementations.cached import CachingFileSystem
    except ImportError:  # pragma: no cover - an fsspec without caches
        return False
    return isinstance(fs, CachingFileSystem)


def _cached(fs: Any, path: str) -> bool:
    """Whether fsspec's cache ``fs`` holds ``path`` (unexpired): then it is read from the cache, and is
    there even where the remote store no longer has it or cannot be reached. The check is the one the
    cache's own ``open`` makes (``_check_file``); an fsspec without it answers ``False``."""
    check = getattr(fs, "_check_file", None)
    return bool(check(fs._strip_protocol(path))) if callable(check) else False


def require_fsspec() -> Any:
    """The ``fsspec`` module, or an ``ImportError`` that says which extra brings it."""
    return require("fsspec", "reading or writing URLs", "fsspec", "remote", "fsspec")


# -- opening one file for reading -----------------------------------------------------------------


@dataclasses.dataclass(eq=False, repr=False)
class Opened:
    """A source plus the resources recordkit opened for it (closed by :meth:`close`); see :func:`open_source`.

    ``info`` is the ``os.fstat()`` of a local file, taken when it was opened (``None`` otherwise).
    """

    source: Source
    resources: list[Any] = dataclasses.field(default_factory=list)
    local_path: str | None = None
    info: os.stat_result | None = None

    def close(self) -> None:
        """Close what recordkit opened (a file object passed in stays open)."""
        for resource in reversed(self.resources):
            resource.close()
        self.resources.clear()


def close_all(opened: list[Opened]) -> None:
    """Close every one of ``opened``."""
    for item in opened:
        item.close()


def _open_local(path: str, zero_copy: bool = False) -> Opened:
    # Regular files are read with os.pread on the descriptor (see Source). They are memory-mapped only when
    # asked (zero_copy=True): a map of a file that another process truncates kills the reader with SIGBUS.
    file = builtins.open(path, "rb")  # noqa: SIM115 - owned by the returned Opened
    with _closed_on_error(file):
        info = os.fstat(file.fileno())
        regular = stat.S_ISREG(info.st_mode)
        if zero_copy and regular:
            mapped = MappedFile(file, info.st_size)
            return Opened(Source(path=path, buffer=mapped.view), [file, mapped], path, info)
        if zero_copy:
            raise UnsupportedOperationError(
                f"zero_copy=True maps the file into memory, and {path} is not a regular file"
            )
        source = Source(
            path=path, fileobj=file, seekable=regular, size=info.st_size if regular else None
        )
        return Opened(source, [file], path, info)


def _open_url(url: str) -> Opened:
    fs, fs_path = require_fsspec().core.url_to_fs(url)
    try:
        if not _caches(
            fs
        ):  # a store: read by the byte range (a cache is read as the file it holds)
            source = RemoteSource(url, fs, fs_path, file_info(url, fs, fs_path))
            return Opened(source, [source])
        file = fs.open(fs_path, "rb")
    except FileNotFoundError as exc:
        # fsspec names the path without its protocol (and without a cache's chain), and no reason.
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), url) from exc
    with _closed_on_error(file):
        return Opened(Source(path=url, fileobj=file, seekable=True, size=_size(file)), [file])


def _size(file: Any) -> int:
    """The size of an open fsspec file, from the file itself: a file a cache holds (``filecache::``) is
    measured without asking the remote store, which may be gone."""
    size = getattr(file, "size", None)
    if isinstance(size, int):
        return size
    position = file.tell()
    end: int = file.seek(0, os.SEEK_END)
    file.seek(position)
    return end


@contextlib.contextmanager
def _closed_on_error(resource: Any) -> Iterator[None]:
    """Close ``resource`` if the block raises (anything, ``KeyboardInterrupt`` too), and re-raise."""
    try:
        yield
    except BaseException:
        resource.close()
        raise


class _PeekStream:
    """A stream whose first bytes were already read (to sniff them) and are replayed first."""

    def __init__(self, head: bytes, stream: Any) -> None:
        self._head = head
        self._read = stream.read

    def read(self, n: int = -1, /) -> bytes:
        if not self._head:
            data: bytes = self._read(n)
            return data
        if n < 0:
            data = self._head + self._read()
            self._head = b""
            return data
        data, self._head = self._head[:n], self._head[n:]
        return data


def _open_fileobj(fileobj: Any) -> Opened:
    if not callable(getattr(fileobj, "read", None)):
        raise TypeError(f"expected a path or a binary file object, not {type(fileobj).__name__}")
    name = getattr(fileobj, "name", None)
    path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
    try:
        seekable = bool(fileobj.seekable())
    except (AttributeError, OSError, ValueError):
        seekable = False
    return Opened(Source(path=path, fileobj=fileobj, seekable=seekable))


def _head(source: Source, n: int) -> bytes:
    if source.random_access:
        return bytes(source.pread(0, n))
    fileobj: Any = source.fileobj
    head = fileobj.read(n)
    if not isinstance(head, bytes):
        raise TypeError(
            f"the file object returned {type(head).__name__} from read(); open it in binary mode"
        )
    source.fileobj = _PeekStream(head, fileobj)
    return head


def _sniff(source: Source) -> RecordFormat:
    """The format ``source``'s first bytes show (:func:`~recordkit.formats.detect_format`'s order)."""
    more = (lambda n: _head(source, n)) if source.random_access else None
    name = detect_format(_head(source, SNIFF_SIZE), source.size, more=more)
    if name is None:
        where = source.path or "the file object"
        raise UnknownFormatError(
            f"cannot tell the record format of {where}: pass format= (one of "
            f"{', '.join(available_formats())}) or use a known file suffix"
        )
    return get_format(name)


def resolve_format(
    source: Source | None, path: str | None, format: str | None, compression: str | None
) -> tuple[RecordFormat, str | None]:
    """Return the format and the compression (``None``: still unknown) of one file, to read or to write.

    The format is ``format``, else the one ``path``'s suffix names, else (with ``source``) the one the
    content shows (``source``'s first bytes); the compression is ``compression``, else the one the suffix
    names.

    Raises
    ------
    UnknownFormatError
        The format cannot be told.
    ValueError
        The name says a compression the format does not support.
    """
    if compression is not None:
        compression = normalize_compression(compression)
    if format is not None:
        fmt = get_format(format)
        if compression is None and path:
            # A name ending in .gz holds GZIP data whatever format= says; a format that cannot be
            # compressed that way is refused rather than writing (or expecting) plain bytes under it.
            compression = suffix_compression(path)
            if compression is not None and compression not in fmt.capabilities.compression:
                raise ValueError(
                    f"{path}: the name says {compression} compression, which the {fmt.name} format "
                    "does not support; pass compression='none' to use this name for an uncompressed file"
                )
        return fmt, compression
    by_suffix = format_for_path(path) if path else None
    if by_suffix is not None:
        fmt, named = by_suffix
        return fmt, compression if compression is not None else named
    if source is None:
        raise UnknownFormatError(
            f"cannot tell the record format of {path or 'the file object'} from its name: pass format= "
            f"(one of {', '.join(available_formats())})"
        )
    return _sniff(source), compression


def reading_format(
    source: Source, *, format: str | None = None, compression: str | None = None
) -> tuple[str, str]:
    """Return the ``(format, compression)`` :func:`recordkit.open` reads ``source`` with (``""``: uncompressed).

    The format is ``format``, else the one ``source.path``'s suffix names, else the one its content
    shows; the compression is ``compression``, else the one the suffix names (also when ``format`` is
    given), else the one the content shows. :mod:`recordkit.recover` reads damaged files with it.

    Raises
    ------
    UnknownFormatError
        The format cannot be told.
    ValueError
        The compression does not fit the format.
    """
    fmt, comp = resolve_format(source, source.path, format, compression)
    if comp is None:
        comp = fmt.detect_compression(_head(source, 64)) if fmt.capabilities.compression else ""
    check_compression(fmt, comp)
    return fmt.name, comp


def check_compression(fmt: RecordFormat, compression: str) -> None:
    """Raise ``ValueError`` when ``fmt`` cannot be compressed with ``compression``."""
    if compression and compression not in fmt.capabilities.compression:
        raise ValueError(f"the {fmt.name} format does not support {compression!r} compression")


def dataset_files(directory: str, suffix: str) -> list[str]:
    """Return the files of ``directory`` whose names end with ``suffix``, sorted (hidden files left out).

    A symbolic link is followed only if it resolves inside ``directory``: a dataset folder cannot make a
    reader open files elsewhere. Pass the files as an explicit list to read such links anyway.

    Raises
    ------
    UnsafePathError
        If an entry resolves outside the directory.
    """
    root = os.path.realpath(directory)
    files = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(".") or not name.endswith(suffix):
            continue
        path = os.path.join(directory, name)
        real = os.path.realpath(path)
        if os.path.commonpath([root, real]) != root:
            raise UnsafePathError(
                f"{path} links to {real}, outside the dataset directory {directory}; pass the files "
                "as a list to read it anyway"
            )
        files.append(path)
    return files


def natural_key(name: str) -> list[Any]:
    """Sort key that orders embedded numbers by value: ``part-2`` before ``part-10``.

    Examples
    --------
    >>> sorted(["part-10", "part-2", "part-1"], key=natural_key)
    ['part-1', 'part-2', 'part-10']
    """
    # re.split with a group alternates text and digits, so the odd pieces are the numbers.
    return [int(piece) if i % 2 else piece for i, piece in enumerate(re.split(r"(\d+)", name))]


_GLOB_CHARS = frozenset("*?[")


def _has_wildcards(text: str) -> bool:
    """Whether ``text`` holds a glob wildcard: ``*``, ``?`` or ``[`` (whether or not it names a file)."""
    return bool(_GLOB_CHARS.intersection(text))


def is_glob_pattern(source: str) -> bool:
    """Whether the reading entry points read ``source`` as a glob pattern: it holds a wildcard (``*``,
    ``?`` or ``[``) and names no file or directory itself (``data[1].tfrecord``, when it exists, is read
    as that file).

    Examples
    --------
    >>> is_glob_pattern("no/such/dir/part-*.tfrecord"), is_glob_pattern("part-1.tfrecord")
    (True, False)
    """
    return _has_wildcards(source) and not source_exists(source)


def source_exists(path: str) -> bool:
    """Whether the file (or directory) ``path`` exists, local or at an fsspec URL."""
    if is_url(path):
        fs, inner = require_fsspec().core.url_to_fs(path)
        if _caches(fs) and _cached(fs, inner):
            return True
        return bool(fs.exists(inner))
    return os.path.exists(path)


def source_size(path: str) -> int:
    """The size in bytes of the file ``path``, local or at an fsspec URL (a file an fsspec cache holds,
    ``filecache::...``: the cached copy's, without asking the remote store).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    """
    if not is_url(path):
        return os.path.getsize(path)
    opened = _open_url(path)
    try:
        assert opened.source.size is not None
        return opened.source.size
    finally:
        opened.close()


def open_source(src: Any, *, zero_copy: bool = False) -> Opened:
    """Open a path, an fsspec URL or a binary file object for reading.

    A local regular file is read with ``os.pread`` (``zero_copy=True``: memory-mapped), a URL through
    fsspec, a file object as it is (its first bytes are replayed after sniffing when it cannot seek).

    Raises
    ------
    UnsupportedOperationError
        ``zero_copy=True`` for anything but a local regular file.
    TypeError
        ``src`` is neither a path nor a binary file object.
    """
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if zero_copy and is_url(path):
            raise UnsupportedOperationError(
                f"zero_copy=True maps a local file into memory; {path} is remote"
            )
        return _open_url(path) if is_url(path) else _open_local(path, zero_copy)
    if zero_copy:
        raise UnsupportedOperationError(
            "zero_copy=True maps a file into memory: pass its path, not a file object"
        )
    return _open_fileobj(src)
