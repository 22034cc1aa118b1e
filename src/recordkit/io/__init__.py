"""Open record files for reading and writing: :func:`open`, :class:`RecordReader`, :class:`RecordWriter`.

This module is format-agnostic: it finds the format (argument, file suffix, then content), opens the
file (read with `os.pread` when it is a local file), and delegates the framing to the format's frame reader or
writer from :mod:`recordkit.formats`.

Examples
--------
>>> import os, tempfile, recordkit as rk
>>> path = os.path.join(tempfile.mkdtemp(), "demo.tfrecord")
>>> with rk.open(path, "w") as writer:
...     writer.write_many([b"alpha", b"beta", b"gamma"])
3
>>> with rk.open(path) as reader:
...     len(reader), reader[-1], reader.read([2, 0])
(3, b'gamma', [b'gamma', b'alpha'])
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import errno
import glob
import itertools
import operator
import os
import posixpath
import re
import stat
import warnings
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, overload

from recordkit.datasets.index import (
    INDEX_SUFFIX,
    find_index,
    index_paths,
    load_index,
    save_index,
)
from recordkit.datasets.manifest import MANIFEST_NAME, Manifest, Shard, load_manifest, sha256_of
from recordkit.errors import (
    ManifestError,
    StaleIndexError,
    UnknownFormatError,
    UnsafePathError,
    UnsupportedOperationError,
)
from recordkit.formats import (
    available_formats,
    detect_format,
    format_for_path,
    get_format,
    suffix_compression,
)
from recordkit.formats._sequential import SequentialFrameReader
from recordkit.formats.base import (
    FrameReader,
    FrameWriter,
    RecordFormat,
    Source,
    VerifiedOffsets,
    as_bytes,
    normalize_compression,
)
from recordkit.io.atomic import AtomicFile, UploadOnCommit
from recordkit.io.mapped import MappedFile, ViewLedger
from recordkit.support.closing import Closing

if TYPE_CHECKING:
    from recordkit.datasets.tfds import ReadOrder

__all__ = [
    "RecordReader",
    "RecordWriter",
    "ResolvedSources",
    "dataset_files",
    "expand_sources",
    "find_dataset",
    "find_index",
    "index_problem",
    "is_url",
    "natural_key",
    "open",
    "open_shard",
    "reading_format",
    "require_fsspec",
    "resolve_sources",
    "scan_offsets",
    "shard_count_error",
    "shard_listing",
    "shard_path",
    "source_exists",
    "write_index",
]

PathLike = str | os.PathLike[str]
SNIFF_SIZE = 1 << 16
"""How many leading bytes are read to recognise a file's format (more for a large FFRecord header)."""
SNIFF_LIMIT = 1 << 26
"""The most a sniffer may ask for (64 MiB)."""


def is_url(path: str) -> bool:
    """Whether ``path`` is an fsspec URL (``s3://...``, ``memory://...``, ``file://...``), read through
    fsspec, rather than a local path."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isidentifier() and len(scheme) > 1


def require_fsspec() -> Any:
    """The ``fsspec`` module, or an ``ImportError`` that says which extra brings it."""
    try:
        import fsspec
    except ImportError as exc:
        raise ImportError(
            "reading or writing URLs needs fsspec: pip install 'recordkit[remote]' "
            "(or pip install fsspec)"
        ) from exc
    return fsspec


# -- opening one file for reading -----------------------------------------------------------------


class _Opened:
    """A source plus the resources recordkit opened for it (closed by :meth:`close`).

    ``info`` is the ``os.fstat()`` of a local file, taken when it was opened (``None`` otherwise).
    """

    def __init__(
        self,
        source: Source,
        resources: Sequence[Any] = (),
        local_path: str | None = None,
        info: os.stat_result | None = None,
    ) -> None:
        self.source = source
        self.resources = list(resources)
        self.local_path = local_path
        self.info = info

    def close(self) -> None:
        for resource in reversed(self.resources):
            resource.close()
        self.resources.clear()


def _close_all(opened: list[_Opened]) -> None:
    for item in opened:
        item.close()


def _open_local(path: str, zero_copy: bool = False) -> _Opened:
    # Regular files are read with os.pread on the descriptor (see Source). They are memory-mapped only when
    # asked (zero_copy=True): a map of a file that another process truncates kills the reader with SIGBUS.
    file = builtins.open(path, "rb")  # noqa: SIM115 - owned by the returned _Opened
    try:
        info = os.fstat(file.fileno())
        regular = stat.S_ISREG(info.st_mode)
        if zero_copy and regular:
            mapped = MappedFile(file, info.st_size)
            return _Opened(Source(path=path, buffer=mapped.view), [file, mapped], path, info)
        if zero_copy:
            raise UnsupportedOperationError(
                f"zero_copy=True maps the file into memory, and {path} is not a regular file"
            )
        source = Source(
            path=path, fileobj=file, seekable=regular, size=info.st_size if regular else None
        )
    except BaseException:
        file.close()
        raise
    return _Opened(source, [file], path, info)


def _open_url(url: str) -> _Opened:
    fs, fs_path = require_fsspec().core.url_to_fs(url)
    file = fs.open(fs_path, "rb")
    try:
        size = fs.size(fs_path)
        return _Opened(Source(path=url, fileobj=file, seekable=True, size=size), [file])
    except BaseException:
        file.close()
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


def _open_fileobj(fileobj: Any) -> _Opened:
    if not callable(getattr(fileobj, "read", None)):
        raise TypeError(f"expected a path or a binary file object, not {type(fileobj).__name__}")
    name = getattr(fileobj, "name", None)
    path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
    try:
        seekable = bool(fileobj.seekable())
    except (AttributeError, OSError, ValueError):
        seekable = False
    return _Opened(Source(path=path, fileobj=fileobj, seekable=seekable))


def _head(opened: _Opened, n: int) -> bytes:
    source = opened.source
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


def _sniff(opened: _Opened) -> RecordFormat:
    size = opened.source.size
    head = _head(opened, SNIFF_SIZE)
    name = detect_format(head, size)
    if name is None and opened.source.random_access:
        # A sniffer may need more bytes (an FFRecord header); give each one what it asks for, once.
        for candidate in available_formats():
            fmt = get_format(candidate)
            wanted = fmt.sniff(head, size)
            needs_more = (
                wanted is not True and wanted is not False and len(head) < wanted <= SNIFF_LIMIT
            )
            if needs_more and fmt.sniff(_head(opened, int(wanted)), size) is True:
                name = candidate
                break
    if name is None:
        where = opened.source.path or "the file object"
        raise UnknownFormatError(
            f"cannot tell the record format of {where}: pass format= (one of "
            f"{', '.join(available_formats())}) or use a known file suffix"
        )
    return get_format(name)


def _resolve_format(
    opened: _Opened | None, path: str | None, format: str | None, compression: str | None
) -> tuple[RecordFormat, str | None]:
    """Return the format and the compression (``None``: still unknown) for one file."""
    if compression is not None:
        compression = normalize_compression(compression)
    if format is not None:
        fmt = get_format(format)
        if compression is None and path:
            compression = _named_compression(fmt, path)
        return fmt, compression
    by_suffix = format_for_path(path) if path else None
    if by_suffix is not None:
        fmt, suffix_compression = by_suffix
        return fmt, compression if compression is not None else suffix_compression
    if opened is None:
        raise UnknownFormatError(
            f"cannot tell the record format of {path or 'the file object'} from its name: pass format= "
            f"(one of {', '.join(available_formats())})"
        )
    return _sniff(opened), compression


def _reading_format(
    opened: _Opened, path: str | None, format: str | None, compression: str | None
) -> tuple[RecordFormat, str]:
    """Return the format and compression of a file to read: the one resolution of every reader.

    The format: ``format``, else the name's suffix, else the content. The compression: ``compression``,
    else the name's suffix (also when ``format`` is given: ``x.tfrecord.gz`` holds GZIP data), else the
    content. :func:`open` and :mod:`recordkit.recover` both call it.
    """
    fmt, comp = _resolve_format(opened, path, format, compression)
    if comp is None:
        comp = fmt.detect_compression(_head(opened, 64)) if fmt.capabilities.compression else ""
    _check_compression(fmt, comp)
    return fmt, comp


def reading_format(
    source: Source, *, format: str | None = None, compression: str | None = None
) -> tuple[str, str]:
    """Return the ``(format, compression)`` :func:`open` reads ``source`` with (``""``: uncompressed).

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
    fmt, comp = _reading_format(_Opened(source), source.path, format, compression)
    return fmt.name, comp


def _named_compression(fmt: RecordFormat, path: str) -> str | None:
    """Return the compression ``path``'s suffix names for a file of format ``fmt`` (``None``: none named).

    A name ending in ``.gz`` holds GZIP data whatever ``format=`` says; a format that cannot be compressed
    that way is refused rather than writing (or expecting) plain bytes under a compressed name.
    """
    named = suffix_compression(path)
    if named is not None and named not in fmt.capabilities.compression:
        raise ValueError(
            f"{path}: the name says {named} compression, which the {fmt.name} format does not support; "
            "pass compression='none' to use this name for an uncompressed file"
        )
    return named


def _check_compression(fmt: RecordFormat, compression: str) -> None:
    if compression and compression not in fmt.capabilities.compression:
        raise ValueError(f"the {fmt.name} format does not support {compression!r} compression")


def _index_loader(index: Any, opened: _Opened) -> Callable[[], array[int]] | None:
    source = opened.source
    if index is False or not source.random_access or source.size is None:
        return None
    if isinstance(index, _ShardIndex):
        return index.loader(opened)
    if index is None or index is True:
        if opened.local_path is None:
            return None
        found = find_index(opened.local_path)
        if found is None:
            return None
        index_path = found
    else:
        index_path = os.fspath(index)
    size = source.size
    return lambda: load_index(index_path, size=size, path=source.path)


def _open_part(
    src: Any,
    *,
    format: str | None,
    compression: str | None,
    check_crc: bool,
    index: Any,
    lenient: bool,
    zero_copy: bool = False,
) -> tuple[FrameReader, _Opened, RecordFormat, str]:
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if zero_copy and is_url(path):
            raise UnsupportedOperationError(
                f"zero_copy=True maps a local file into memory; {path} is remote"
            )
        opened = _open_url(path) if is_url(path) else _open_local(path, zero_copy)
    else:
        if zero_copy:
            raise UnsupportedOperationError(
                "zero_copy=True maps a file into memory: pass its path, not a file object"
            )
        opened = _open_fileobj(src)
        path = opened.source.path
    try:
        fmt, comp = _reading_format(opened, path, format, compression)
        if zero_copy and comp:
            raise UnsupportedOperationError(
                f"zero_copy=True needs an uncompressed file; {path} is {comp}-compressed (its records "
                "exist only once inflated)"
            )
        offsets = None if comp else _index_loader(index, opened)
        frames = fmt.reader(
            opened.source, check_crc=check_crc, lenient=lenient, compression=comp, offsets=offsets
        )
    except BaseException:
        opened.close()
        raise
    return frames, opened, fmt, comp


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


_GLOB_CHARS = frozenset("*?[")


def natural_key(name: str) -> list[Any]:
    """Sort key that orders embedded numbers by value: ``part-2`` before ``part-10``.

    Examples
    --------
    >>> sorted(["part-10", "part-2", "part-1"], key=natural_key)
    ['part-1', 'part-2', 'part-10']
    """
    # re.split with a group alternates text and digits, so the odd pieces are the numbers.
    return [int(piece) if i % 2 else piece for i, piece in enumerate(re.split(r"(\d+)", name))]


def _not_found(message: str, source: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, message, source)


def _is_record_name(path: str) -> bool:
    """Whether a listed or globbed file may hold records: sidecar indexes and manifests do not."""
    return not path.endswith(INDEX_SUFFIX) and os.path.basename(path) != MANIFEST_NAME


def _directory_files(directory: str, fmt: RecordFormat | None) -> list[str]:
    """The record files of ``directory``, unsorted (see :func:`expand_sources`)."""
    entries = [
        path
        for path in dataset_files(directory, "")
        if _is_record_name(path) and os.path.isfile(path)
    ]
    named = [(path, format_for_path(path)) for path in entries]
    chosen = [path for path, found in named if found and (fmt is None or found[0] is fmt)]
    if not chosen:
        # OneFlow's part-0, part-1, ...: no suffix, the format is given or told by the content. JSON
        # files beside them are metadata (tensorflow-datasets' dataset_info.json, features.json).
        chosen = [path for path, found in named if found is None and not path.endswith(".json")]
    if not chosen:
        kind = "record" if fmt is None else fmt.name
        raise _not_found(f"no {kind} files in this directory", directory)
    return chosen


def _glob(pattern: str) -> list[str]:
    if is_url(pattern):
        fs, inner = require_fsspec().core.url_to_fs(pattern)
        matches = [fs.unstrip_protocol(p) for p in fs.glob(inner)]
    else:
        matches = [p for p in glob.glob(pattern) if os.path.isfile(p)]
    matches = [p for p in matches if _is_record_name(p)]
    if not matches:
        raise _not_found("no file matches this pattern", pattern)
    return matches


def source_exists(path: str) -> bool:
    """Whether the file (or directory) ``path`` exists, local or at an fsspec URL."""
    if is_url(path):
        fs, inner = require_fsspec().core.url_to_fs(path)
        return bool(fs.exists(inner))
    return os.path.exists(path)


def _expand_one(
    source: str, fmt: RecordFormat | None, key: Callable[[str], Any], check: bool
) -> list[str]:
    if not is_url(source) and os.path.isdir(source):
        return sorted(_directory_files(source, fmt), key=key)
    if _GLOB_CHARS.intersection(source) and not source_exists(source):
        return sorted(_glob(source), key=key)
    if check and not source_exists(source):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
    return [source]


def expand_sources(
    sources: Any,
    *,
    format: str | None = None,
    natural: bool = True,
    missing_ok: bool = False,
) -> list[Any]:
    """Return the files ``sources`` names, in order: what every reading entry point accepts.

    :func:`open`, :class:`recordkit.data.Dataset`, :class:`recordkit.compat.ffrecord.FileReader` and the command
    line all turn their sources into files with this function.

    Parameters
    ----------
    sources
        One source or a list (any iterable) of them, which keeps its order. A source is

        * a file (a path, a :class:`pathlib.Path` or an fsspec URL), returned as it is;
        * a local directory: its files whose suffix names a record format (with ``format``: that format),
          or, when it has none, its files whose suffix names no format (OneFlow's ``part-0``, ``part-1``,
          ...), JSON files left out. Hidden files, sidecar ``*.idx`` indexes, manifests and
          subdirectories are left out, and a link to a file outside the directory is refused
          (:func:`dataset_files`). (:func:`open` reads a directory with a manifest through the
          manifest instead.)
        * a glob pattern (``*``, ``?``, ``[...]``, also in fsspec URLs) that is not itself an existing
          name: the files it matches (sidecar indexes left out);
        * a binary file object, returned as it is.
    format
        Choose a directory's files by this format's suffixes.
    natural
        Sort a directory's files and a glob's matches in natural order (``part-2`` before ``part-10``,
        :func:`natural_key`); ``False`` sorts by name, as ffrecord does.
    missing_ok
        Return a file that does not exist as it is (opening it reports the error) instead of raising.
        Without it, a missing local file is reported here; a missing URL too (one request to the storage).

    Returns
    -------
    list
        The files, directories and globs replaced by what they hold.

    Raises
    ------
    FileNotFoundError
        A file does not exist, a glob matches nothing, or a directory holds no record file; ``filename``
        is the source concerned.
    ValueError
        An empty list.
    UnsafePathError
        A directory entry links to a file outside the directory.
    """
    one = isinstance(sources, (str, os.PathLike)) or callable(getattr(sources, "read", None))
    items = [sources] if one else list(sources)
    if not items:
        raise ValueError("no sources given: pass a file, a directory, a glob or a list of them")
    fmt = get_format(format) if format is not None else None
    key: Callable[[str], Any] = natural_key if natural else str
    files: list[Any] = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            files.extend(_expand_one(os.fspath(item), fmt, key, check=not missing_ok))
        else:
            files.append(item)
    return files


def _display_path(src: Any) -> str | None:
    """What :attr:`RecordReader.path` shows: the one path, directory or glob given, else ``None``."""
    return os.fspath(src) if isinstance(src, (str, os.PathLike)) else None


# -- dataset directories: a manifest (or TFDS's dataset_info.json) lists the shards ----------------

_TFDS_INFO = "dataset_info.json"


def shard_listing(manifest: Manifest | None) -> str | None:
    """Return ``"dataset_info.json"`` for a manifest made from a tensorflow-datasets directory, else ``None``.

    What lists a dataset's shards decides what an error about a changed shard says: a recordkit manifest is
    described again by ``recordkit manifest build``; a TFDS directory's ``dataset_info.json`` is TFDS's own.
    """
    return _TFDS_INFO if manifest is not None and "tfds" in manifest.metadata else None


def _changed_shard(listing: str | None) -> tuple[str, str]:
    """Who lists the shard (for "... says N"), and what to do about a shard that changed."""
    if listing == _TFDS_INFO:
        remedy = (
            "it changed after tensorflow-datasets prepared the dataset: restore the shard, or prepare "
            "the dataset again with tfds (dataset_info.json is TFDS's own record of its shards)"
        )
        return _TFDS_INFO, remedy
    remedy = (
        "it changed after the manifest was written (recordkit manifest build describes it again; "
        "recordkit verify DIR --salvage repairs a damaged shard in place)"
    )
    return "the manifest", remedy


def shard_count_error(
    path: str | None, shard: int, found: int, expected: int, listing: str | None
) -> ManifestError:
    """The error for a dataset's shard that holds ``found`` records where its listing says ``expected``.

    Every reader and command that counts a shard builds its error here, so each gives the same words and
    the remedy that fits what lists the shard: ``recordkit manifest build`` (or ``verify DIR --salvage``)
    for a recordkit manifest, restoring the shard or preparing the dataset again with tfds for a
    tensorflow-datasets directory (``listing`` is :func:`shard_listing`'s answer).
    """
    lister, remedy = _changed_shard(listing)
    return ManifestError(
        f"the shard holds {found} records, but {lister} says {expected}: {remedy}",
        path=path,
        shard=shard,
    )


def find_dataset(
    source: Any, *, split: str | None = None, all_splits: bool = False
) -> tuple[str, Manifest] | None:
    """Return ``(directory, manifest)`` when ``source`` names a dataset with a manifest, else ``None``.

    A dataset is a local directory holding a ``_recordkit_manifest.json`` or, failing that, a
    tensorflow-datasets ``dataset_info.json``; or the path or URL of a manifest file itself (any name ending
    in ``.json``, e.g. one a :class:`~recordkit.ShardWriter` wrote with ``manifest="w3.json"``); or a URL
    ending in ``/`` whose directory holds a manifest. Shard paths in the manifest are relative to
    ``directory``.

    Parameters
    ----------
    source
        What the user passed to :func:`open` or :class:`recordkit.data.Dataset`.
    split
        Keep only this split's shards (:meth:`Manifest.select`).
    all_splits
        Return every shard, whatever its split (``split`` is then ignored).

    Raises
    ------
    ManifestError
        The manifest is malformed, or the split is missing or needed.
    """
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    found = _read_dataset(path, None if all_splits else split)
    if found is None or all_splits:
        return found
    directory, manifest = found
    try:
        return directory, manifest.select(split)
    except ManifestError as exc:
        raise ManifestError(exc.reason, path=path) from None


def _manifest_file(path: str) -> str | None:
    """The manifest (or TFDS ``dataset_info.json``) that makes ``path`` a dataset, else ``None``.

    The one test of what a dataset is (:func:`find_dataset`, :func:`resolve_sources`): a local directory
    holding a manifest or a ``dataset_info.json``, a manifest file (any ``.json`` name), or a URL ending in
    ``/`` whose directory holds a manifest.
    """
    if is_url(path):
        if path.endswith(".json"):
            return path
        if path.endswith("/"):
            candidate = path + MANIFEST_NAME
            return candidate if source_exists(candidate) else None
        return None
    if os.path.isdir(path):
        for name in (MANIFEST_NAME, _TFDS_INFO):
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return candidate
        return None
    if path.endswith(".json") and os.path.isfile(path):
        return path
    return None


def _read_dataset(path: str, split: str | None) -> tuple[str, Manifest] | None:
    found = _manifest_file(path)
    if found is None:
        return None
    if is_url(found):
        return posixpath.dirname(found), _load_remote_manifest(found)
    directory = os.path.dirname(found) or "."
    if os.path.basename(found) == _TFDS_INFO:
        from recordkit.datasets.tfds import manifest_from_tfds

        return directory, manifest_from_tfds(directory, split=split)
    return directory, load_manifest(found)


def _load_remote_manifest(url: str) -> Manifest:
    with require_fsspec().open(url, "rb") as file:
        return Manifest.from_json(file.read(), path=url)


def shard_path(directory: str, shard: Shard) -> str:
    """Return the path (or URL) of a manifest's shard, given the manifest's directory."""
    if is_url(directory):
        return directory.rstrip("/") + "/" + shard.path
    return os.path.join(directory, *shard.path.split("/"))


def _manifest_format(
    manifest: Manifest, format: str | None, compression: str | None, path: str | None = None
) -> tuple[str, str]:
    if format is not None and get_format(format).name != manifest.format:
        raise ManifestError(
            f"format={format!r}, but the manifest says its shards are {manifest.format}", path=path
        )
    if compression is not None and normalize_compression(compression) != manifest.compression:
        raise ManifestError(
            f"compression={compression!r}, but the manifest says {manifest.compression or 'none'}",
            path=path,
        )
    return manifest.format, manifest.compression


def _unchanged(shard: Shard, opened: _Opened) -> bool:
    """Whether an opened shard still has the fingerprint its manifest recorded (its size is checked apart).

    ``False`` also when the manifest records none (an earlier version's, a TFDS directory's) or the shard
    is remote: only a shard known to be unchanged is read by its manifest's index without a header walk.
    """
    fingerprint = shard.fingerprint
    return fingerprint is not None and opened.info is not None and fingerprint.matches(opened.info)


class _ShardIndex:
    """The sidecar index a manifest recorded for a shard.

    It is used as the offset table without walking the record headers only while the shard has the
    fingerprint the manifest recorded (:func:`_unchanged`) and the index its recorded checksum. A shard
    whose fingerprint differs gets no index here: its headers are walked, and :class:`_ShardCheck` compares
    what they say with the manifest.
    """

    def __init__(self, path: str, shard: Shard) -> None:
        self.path, self.shard = path, shard

    def recorded_path(self) -> str | None:
        """The index file the manifest records, if it exists and still has the recorded checksum."""
        recorded = self.shard.index
        if recorded is None or is_url(self.path):
            return None
        index_path = os.path.join(os.path.dirname(self.path), os.path.basename(recorded.path))
        try:
            with builtins.open(index_path, "rb") as file:
                digest = sha256_of(file)[1]
        except FileNotFoundError:
            return None
        return index_path if digest == recorded.sha256 else None

    def loader(self, opened: _Opened) -> Callable[[], array[int]] | None:
        if not _unchanged(self.shard, opened):
            return None  # the headers are walked: _ShardCheck compares them with the manifest
        recorded = self.shard.index
        if recorded is None or is_url(self.path):
            return None
        index_path = os.path.join(os.path.dirname(self.path), os.path.basename(recorded.path))
        if not os.path.exists(index_path):
            return None
        size = opened.source.size
        assert size is not None

        def load() -> array[int]:
            return load_index(index_path, size=size, path=self.path)

        if self.recorded_path() is None:
            return load  # changed since the manifest was written: checked against the headers
        return VerifiedOffsets(self._counted(load))

    def _counted(self, load: Callable[[], array[int]]) -> Callable[[], array[int]]:
        def checked() -> array[int]:
            table = load()
            if len(table) - 1 != self.shard.records:
                raise ManifestError(
                    f"the index lists {len(table) - 1} records; the manifest says "
                    f"{self.shard.records}",
                    path=self.path,
                )
            return table

        return checked


class _ShardCheck:
    """A shard that may differ from its manifest entry although its size is the same.

    Its fingerprint differs from the one the manifest recorded (it was rewritten, replaced, or copied
    elsewhere), or the manifest records none. Before its first random access its record headers are
    walked, and the offsets they give are compared with the manifest's count and, when the index file the
    manifest records is still the same, with that index: any difference is a
    :class:`~recordkit.errors.ManifestError`, never a record read from where the file holds none.

    Attributes
    ----------
    changed
        A fingerprint is recorded and the file no longer has it: ``len()`` walks the headers too.
    """

    def __init__(
        self, path: str, shard: Shard, number: int, listing: str | None, changed: bool
    ) -> None:
        self.path, self.shard, self.number, self.listing = path, shard, number, listing
        self.changed = changed

    def compare(self, frames: FrameReader) -> None:
        """Compare the walked headers of ``frames`` (whose count already matched) with the manifest's index.

        Raises
        ------
        ManifestError
            The recorded index puts a record anywhere else than the headers do.
        """
        recorded = self.shard.index
        index_path = _ShardIndex(self.path, self.shard).recorded_path()
        if (
            recorded is None
            or index_path is None
            or not isinstance(frames, SequentialFrameReader)
            or frames.source.size is None
        ):
            return
        lister, remedy = _changed_shard(self.listing)
        table = frames.offsets
        try:
            loaded = load_index(index_path, size=frames.source.size, path=self.path)
        except StaleIndexError as exc:
            raise ManifestError(
                f"the index {recorded.path} that {lister} records for the shard does not describe it "
                f"({exc.reason}): {remedy}",
                path=self.path,
                shard=self.number,
            ) from None
        if table == loaded:
            return
        first = next(i for i, (a, b) in enumerate(zip(table, loaded, strict=False)) if a != b)
        record = max(first - 1, 0)
        raise ManifestError(
            f"the shard's record headers put record {record} at bytes {table[record]}-"
            f"{table[record + 1]}, but the index {recorded.path} that {lister} records says bytes "
            f"{loaded[record]}-{loaded[record + 1]}: {remedy}",
            path=self.path,
            shard=self.number,
        )


def open_shard(
    directory: str,
    shard: Shard,
    *,
    format: str,
    compression: str,
    check_crc: bool = True,
    listing: str | None = None,
) -> RecordReader:
    """Open one shard of a manifest for reading, with the checks :func:`open` makes on a dataset.

    Parameters
    ----------
    directory
        The manifest's directory (a local path or an fsspec URL).
    shard
        The manifest's entry for the shard.
    format, compression
        The manifest's.
    check_crc
        Verify checksums.
    listing
        ``"dataset_info.json"`` when the manifest was made from a tensorflow-datasets directory
        (:func:`shard_listing`): the errors then name it, and its remedy.

    Raises
    ------
    ManifestError
        The shard is missing, or its size differs from the manifest's.
    """
    path = shard_path(directory, shard)
    spec = _Reopen([path], path, check_crc, None, False, (shard,), listing=listing)
    return _read_files(spec, format=format, compression=compression)


def _open_shard(
    file: str, shard: Shard, number: int, *, index: Any, listing: str | None, **options: Any
) -> tuple[FrameReader, _Opened, RecordFormat, str]:
    lister, remedy = _changed_shard(listing)
    try:
        frames, opened, fmt, comp = _open_part(file, index=index, **options)
    except FileNotFoundError:
        raise ManifestError(
            f"the shard {shard.path} listed in {lister} is missing", path=file, shard=number
        ) from None
    size = opened.source.size
    if size is not None and size != shard.size:
        opened.close()
        # TFDS records no shard sizes: the size is the one the file had when the dataset was opened.
        said = "it had" if listing == _TFDS_INFO else f"{lister} says"
        raise ManifestError(
            f"the shard is {size} bytes, but {said} {shard.size}: {remedy}",
            path=file,
            shard=number,
        )
    return frames, opened, fmt, comp


# -- resolving sources: the one way every reading entry point turns what it is given into files ------


class ResolvedSources(NamedTuple):
    """What a reading entry point reads, as :func:`resolve_sources` found it.

    Attributes
    ----------
    files
        The files (paths, URLs or file objects), in reading order.
    format, compression
        A dataset's, from its manifest; otherwise as given (``None``: found per file).
    source
        The one path, directory or glob given, else ``None`` (what :attr:`RecordReader.path` shows).
    directory
        The dataset's directory, or ``None``.
    manifest
        The manifest (of the chosen split) whose shards are ``files``, one for one; ``None`` when the
        sources are not a dataset.
    """

    files: list[Any]
    format: str | None
    compression: str | None
    source: str | None = None
    directory: str | None = None
    manifest: Manifest | None = None

    def open(
        self,
        *,
        check_crc: bool = True,
        index: Any = None,
        lenient: bool = False,
        zero_copy: bool = False,
    ) -> RecordReader:
        """Open every file as one reader: what :func:`open` returns (the options are its own).

        A dataset's shards are checked against the manifest (presence, size, record count).
        """
        shards = None if self.manifest is None else self.manifest.shards
        if shards is None and len(self.files) > 1 and index not in (None, False, True):
            raise ValueError("index= takes a path only when reading a single file")
        spec = _Reopen(
            self.files,
            self.source,
            check_crc,
            index,
            lenient,
            shards,
            zero_copy,
            self.order,
            shard_listing(self.manifest),
        )
        return _read_files(spec, format=self.format, compression=self.compression)

    @property
    def order(self) -> ReadOrder | None:
        """The order the records are read in when it is not file after file: a TFDS split's.

        TFDS reads a split's shards side by side (:func:`recordkit.datasets.tfds.read_order`); ``None``
        otherwise.
        """
        if self.manifest is None:
            return None
        from recordkit.datasets.tfds import read_order

        return read_order(self.manifest)

    def open_part(self, part: int, *, check_crc: bool = True) -> RecordReader:
        """Open file number ``part`` alone; a dataset's shard with the checks :meth:`open` makes on it."""
        if self.manifest is not None:
            assert self.directory is not None
            assert self.format is not None
            return open_shard(
                self.directory,
                self.manifest.shards[part],
                format=self.format,
                compression=self.compression or "",
                check_crc=check_crc,
                listing=shard_listing(self.manifest),
            )
        file = self.files[part]
        spec = _Reopen([file], _display_path(file), check_crc, None, False)
        return _read_files(spec, format=self.format, compression=self.compression)


def resolve_sources(
    sources: Any,
    *,
    format: str | None = None,
    compression: str | None = None,
    split: str | None = None,
    all_splits: bool = False,
    natural: bool = True,
    missing_ok: bool = False,
) -> ResolvedSources:
    """Return what ``sources`` names for reading: the resolution :func:`open` and every other reader uses.

    :func:`open`, :class:`recordkit.data.Dataset`, :class:`recordkit.integrations.torch.MapDataset`,
    :class:`recordkit.compat.ffrecord.FileReader`, the Ray and Dask readers and the command line all call it, so
    a source names the same records whichever of them reads it.

    * A dataset (:func:`find_dataset`: a directory with a ``_recordkit_manifest.json`` or a
      tensorflow-datasets ``dataset_info.json``, a manifest file, or a URL ending in ``/`` whose directory
      has a manifest) gives the shards its manifest lists for ``split``, in the manifest's order, with the
      manifest's format and compression. Files beside them that it does not list (left over from an earlier
      write) are not read.
    * Anything else is expanded by :func:`expand_sources` (files, directories, globs, lists).

    Parameters
    ----------
    sources
        One source or a list of them (see :func:`expand_sources`). A dataset is read on its own: a list of
        several sources that holds one raises :class:`~recordkit.errors.UnsupportedOperationError` (its
        manifest, not the files present, says what it holds). A list of one source is that source.
    format, compression
        As given to :func:`open`. With a dataset they must agree with its manifest.
    split
        A dataset's split; required when it has several (unless ``all_splits``).
    all_splits
        Take every shard of a dataset, whatever its split.
    natural, missing_ok
        As for :func:`expand_sources`.

    Raises
    ------
    ManifestError
        The manifest is malformed, disagrees with ``format``/``compression``, or the split is missing or
        needed.
    ValueError
        ``split`` was given for sources that are not a dataset, or no source was given.
    UnsupportedOperationError
        A list of several sources holds a dataset.
    FileNotFoundError, UnsafePathError
        As for :func:`expand_sources`.
    """
    one = isinstance(sources, (str, os.PathLike)) or callable(getattr(sources, "read", None))
    items = [sources] if one else list(sources)
    if len(items) == 1 and isinstance(items[0], (str, os.PathLike)):
        dataset = find_dataset(items[0], split=split, all_splits=all_splits)
        if dataset is not None:
            directory, manifest = dataset
            fmt, comp = _manifest_format(manifest, format, compression, directory)
            files = [shard_path(directory, shard) for shard in manifest.shards]
            return ResolvedSources(files, fmt, comp, _display_path(sources), directory, manifest)
    else:
        for item in items:
            if isinstance(item, (str, os.PathLike)) and _manifest_file(os.fspath(item)):
                raise UnsupportedOperationError(
                    f"{os.fspath(item)} is a dataset (it has a manifest), and a dataset is read on its "
                    "own: its manifest, not the files present, says which files it holds. Open it "
                    "alone, or mix datasets with recordkit.data.mix"
                )
    if split is not None and not all_splits:
        raise ValueError(
            f"split={split!r} needs a dataset directory: one with a {MANIFEST_NAME} or a "
            "tensorflow-datasets dataset_info.json"
        )
    files = expand_sources(items, format=format, natural=natural, missing_ok=missing_ok)
    return ResolvedSources(files, format, compression, _display_path(sources))


# -- what readers and writers share ----------------------------------------------------------------


class _RecordFile(Closing):
    """The attributes and open/closed state common to :class:`RecordReader` and :class:`RecordWriter`."""

    _noun: ClassVar[str]

    def __init__(self, *, path: str | None, format: str, compression: str) -> None:
        self._path = path
        self._format = format
        self._compression = compression
        self._closed = False

    @property
    def path(self) -> str | None:
        """The path or URL given (the directory, for reading a directory of files), or ``None``."""
        return self._path

    @property
    def format(self) -> str:
        """The format name (``"tfrecord"``, ``"ofrecord"``, ``"ffrecord"``, ...)."""
        return self._format

    @property
    def compression(self) -> str:
        """The whole-file compression: ``""``, ``"gzip"`` or ``"zlib"``."""
        return self._compression

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` (or, for a writer, :meth:`~RecordWriter.abort`) was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"I/O operation on a closed {self._noun}")


# -- the reader -------------------------------------------------------------------------------------


class RecordReader(_RecordFile):
    """Reads the records of one file, or of several files as one sequence.

    Made by :func:`open`. Iterating yields each record as ``bytes``, file after file; the shards of a
    TFDS split come in the order TFDS reads them (:func:`recordkit.datasets.tfds.read_order`), and indexes
    count in that order. Files that allow random access (every uncompressed file that is not a stream)
    also support ``len(reader)``, ``reader[i]`` (negative indexes count from the end), ``reader[a:b]`` (a
    list) and :meth:`read`; on other files ``len()`` raises :class:`~recordkit.errors.NoLengthError` and
    the others :class:`~recordkit.errors.UnsupportedOperationError`.

    An iterator keeps its reader open, so ``for record in recordkit.open(path)`` needs no name for the
    reader; the files are closed by :meth:`close`, or once neither the reader nor an iterator over it is
    referenced any more.

    A reader pickles as the files it reads and its options (format, compression, ``check_crc``, ``index``,
    ``lenient``): unpickling opens them again, so a reader can be sent to another process (a PyTorch
    ``DataLoader`` worker started with ``spawn``). The position of an iteration is not part of it. A
    reader over a file object cannot be pickled (:class:`TypeError`), nor can a closed one
    (:class:`ValueError`).

    Attributes
    ----------
    paths
        The files read, in order (``None`` entries for file objects without a name).
    """

    _noun = "RecordReader"

    def __init__(
        self,
        parts: Sequence[tuple[FrameReader, _Opened]],
        *,
        path: str | None,
        format: str,
        compression: str,
        reopen: _Reopen | None = None,
        counts: Sequence[int] | None = None,
        order: ReadOrder | None = None,
        checks: Mapping[int, _ShardCheck] | None = None,
    ) -> None:
        super().__init__(path=path, format=format, compression=compression)
        # A TFDS split's records come in TFDS's interleaved order, not file after file (needs counts).
        self._order = order if counts is not None else None
        self._frames = [frames for frames, _ in parts]
        self._opened = [opened for _, opened in parts]
        # Record counts known without reading (a manifest's) make len() free, even of compressed files.
        # Each part is checked against its count when it is first read at random or read to its end.
        self._counts = None if counts is None else list(counts)
        self._starts = None if counts is None else list(itertools.accumulate(counts, initial=0))
        self._counted: set[int] = set()
        # The shards that may have changed since the manifest was written (their fingerprint differs):
        # walked and compared with the manifest before their first random access.
        self._checks = {} if checks is None else dict(checks)
        self._reopen = reopen
        # The first part that can only be read in order (it raises the error random access gets).
        self._sequential = next((f for f in self._frames if not f.random_access), None)
        self.paths = [frames.path for frames in self._frames]
        # Zero-copy readers hand out views of their maps; close() releases them (see recordkit.io.mapped).
        self._views = ViewLedger() if reopen is not None and reopen.zero_copy else None
        # A reader dropped without close() (e.g. inside a dataset object) still releases its files; views
        # it handed out then stay valid for as long as they live.
        self._release = weakref.finalize(self, _close_all, list(self._opened))

    @property
    def supports_random_access(self) -> bool:
        """Whether ``len()``, indexing, slicing and :meth:`read` work."""
        return self._sequential is None

    # lifecycle

    def close(self) -> None:
        """Close the files recordkit opened (a file object passed in stays open). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for frames in self._frames:
            frames.close()
        if self._views is not None:
            self._views.release()
        self._release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordReader {self._format} {self._path or self.paths!r} ({state})>"

    def __reduce__(self) -> tuple[Any, ...]:
        if self._closed:
            raise ValueError(
                "cannot pickle a closed RecordReader: pickling reopens the files, which were closed"
            )
        spec = self._reopen
        if spec is None or not all(isinstance(f, (str, os.PathLike)) for f in spec.files):
            raise TypeError(
                "cannot pickle a RecordReader over a file object: another process cannot reopen it; "
                "open the reader from a path or URL instead"
            )
        return (_reopen_reader, (spec, self._format, self._compression))

    # reading

    def __iter__(self) -> Iterator[bytes]:
        """Yield every record, file after file; a TFDS split's in TFDS's interleaved order."""
        self._check_open()
        if self._views is not None:
            return self._views.track(self._records())
        return self._records()

    def _records(self) -> Iterator[bytes]:
        # A generator method: the iterator holds the reader, whose finalizer would otherwise close the
        # files of an unnamed reader (``for r in recordkit.open(p)``) while the iteration still reads them.
        if self._order is not None:
            yield from self._ordered_records()
        elif self._counts is not None:
            yield from self._counted_records()
        elif len(self._frames) == 1:
            yield from self._frames[0]
        else:
            yield from itertools.chain.from_iterable(self._frames)

    def _records_from(self, start: int) -> Iterator[bytes]:
        """Every record from index ``start`` on, read in order (for :mod:`recordkit.data`).

        ``start=0`` is plain iteration, which builds no offset table. A later start of a single
        random-access file begins reading at that record, after the checks random access makes.
        """
        if start <= 0:
            return iter(self)
        if self._sequential is not None or self._order is not None or len(self._frames) != 1:
            return itertools.islice(iter(self), start, None)
        self._check_open()
        self._check_count(0)
        records = self._frames[0].iter_from(start)
        return self._held(records if self._views is None else self._views.track(records))

    def _held(self, records: Iterator[bytes]) -> Iterator[bytes]:
        # A generator method, as _records: the iterator keeps the reader (and its files) alive.
        yield from records

    def _counted_records(self) -> Iterator[bytes]:
        """Every record, each part checked against the count its manifest gives once it is read through."""
        assert self._counts is not None
        for part, (frames, expected) in enumerate(zip(self._frames, self._counts, strict=True)):
            check = self._checks.get(part)
            if check is not None and check.changed and frames.random_access:
                # Rewritten or replaced since its manifest: compared with the manifest before a record
                # of it is handed out, as random access does, not only counted at its end.
                self._check_count(part)
            found = 0
            for found, record in enumerate(frames, 1):  # noqa: B007 - found is the count afterwards
                yield record
            if found != expected:
                raise self._count_mismatch(part, found)

    def _ordered_records(self) -> Iterator[bytes]:
        """Every record in the order's turns, each part checked against its count as it ends."""
        assert self._order is not None
        assert self._counts is not None
        counts = self._counts
        readers: dict[int, Iterator[bytes]] = {}
        for part, start, stop in self._order.runs():
            records = readers.get(part)
            if records is None:
                records = readers[part] = iter(self._frames[part])
            # One turn: a block of a few records, taken at C speed.
            run = list(itertools.islice(records, stop - start))
            yield from run
            if len(run) < stop - start:
                raise self._count_mismatch(part, start + len(run))
            if stop == counts[part]:
                rest = sum(1 for _ in readers.pop(part))
                if rest:
                    raise self._count_mismatch(part, stop + rest)
        for part, expected in enumerate(counts):  # the empty shards the order never visits
            if not expected:
                found = sum(1 for _ in self._frames[part])
                if found:
                    raise self._count_mismatch(part, found)

    def _count_mismatch(self, part: int, found: int) -> ManifestError:
        assert self._counts is not None
        listing = None if self._reopen is None else self._reopen.listing
        path = self._frames[part].path
        return shard_count_error(path, part, found, self._counts[part], listing)

    def _check_count(self, part: int) -> None:
        """Before the first random access to a part with a known count: the file must hold that many.

        A shard that may have changed since its manifest was written (:class:`_ShardCheck`) has its record
        headers walked here, and they must also agree with the manifest's index.
        """
        if self._counts is None or part in self._counted:
            return
        frames = self._frames[part]
        found = len(frames)
        if found != self._counts[part]:
            raise self._count_mismatch(part, found)
        check = self._checks.pop(part, None)
        if check is not None:
            check.compare(frames)
        self._counted.add(part)

    def frame_reader(self, number: int) -> FrameReader:
        """Return the frame reader of file ``number`` (``paths[number]``), for format-specific access.

        A file whose record count its manifest gives is checked to hold that many records first, as
        before the first random access to it.
        """
        self._check_open()
        self._check_count(number)
        return self._frames[number]

    def _part_starts(self) -> list[int]:
        if self._starts is None:
            starts = [0]
            for frames in self._frames:
                starts.append(starts[-1] + len(frames))
            self._starts = starts
        return self._starts

    def __len__(self) -> int:
        """Return the number of records.

        It comes from the dataset manifest when there is one; otherwise TFRecord and OFRecord files are
        counted by a header-only scan on first use. A dataset's uncompressed shard whose fingerprint
        differs from the one its manifest recorded is counted by that scan too, and a count that differs
        from the manifest's raises :class:`~recordkit.errors.ManifestError`.
        """
        for part, check in list(self._checks.items()):
            if check.changed:
                self._check_count(part)
        return self._length()

    def _length(self) -> int:
        """The number of records, from the manifest's counts when there are (shards are not walked)."""
        self._check_open()
        if self._sequential is not None and self._starts is None:
            raise self._sequential.unsupported("len()", length=True)
        return self._part_starts()[-1]

    def _check_random_access(self, what: str) -> None:
        self._check_open()
        if self._sequential is not None:
            raise self._sequential.unsupported(what)

    def _normalize(self, index: Any, total: int) -> int:
        i = operator.index(index)
        if i < 0:
            i += total
        if not 0 <= i < total:
            raise IndexError(f"record index {index} out of range for {total} records")
        return i

    def _locate(self, i: int) -> tuple[FrameReader, int]:
        if self._order is not None:
            part, local = self._order.locate(i)
            self._check_count(part)
            return self._frames[part], local
        if len(self._frames) == 1:
            self._check_count(0)
            return self._frames[0], i
        starts = self._part_starts()
        part = bisect.bisect_right(starts, i) - 1
        self._check_count(part)
        return self._frames[part], i - starts[part]

    @overload
    def __getitem__(self, key: int) -> bytes: ...

    @overload
    def __getitem__(self, key: slice) -> list[bytes]: ...

    def __getitem__(self, key: int | slice) -> bytes | list[bytes]:
        """Return record ``key`` or, for a slice, a list of records."""
        if isinstance(key, slice):
            self._check_random_access("slicing (reader[a:b])")
            return self.read(range(*key.indices(self._length())))
        self._check_random_access("indexing (reader[i])")
        frames, local = self._locate(self._normalize(key, self._length()))
        if self._views is not None:
            return self._views.add(frames.read_at(local))  # type: ignore[no-any-return]
        return frames.read_at(local)

    def read(self, indices: Iterable[int]) -> list[bytes]:
        """Return the records at ``indices`` as a list, in the order asked.

        Neighbouring records are read together, so sorted or adjacent indexes cost few I/O calls.
        Negative indexes count from the end.
        """
        records = self._read(indices)
        if self._views is not None:
            self._views.add_all(records)
        return records

    def _read(self, indices: Iterable[int]) -> list[bytes]:
        self._check_random_access("read(indices)")
        total = self._length()
        wanted = indices if type(indices) is list else list(indices)
        if wanted and (min(wanted) < 0 or max(wanted) >= total or type(wanted[0]) is not int):
            wanted = [self._normalize(i, total) for i in wanted]
        if len(self._frames) == 1:
            self._check_count(0)
            return self._frames[0].read_many(wanted)
        by_part: dict[int, tuple[list[int], list[int]]] = {}
        if self._order is not None:
            locate = self._order.locate
            for i in wanted:
                part, local = locate(i)
                members, locals_ = by_part.setdefault(part, ([], []))
                members.append(i)
                locals_.append(local)
        else:
            starts = self._part_starts()
            for i in wanted:
                part = bisect.bisect_right(starts, i) - 1
                members, locals_ = by_part.setdefault(part, ([], []))
                members.append(i)
                locals_.append(i - starts[part])
        found: dict[int, bytes] = {}
        for part, (members, locals_) in by_part.items():
            self._check_count(part)
            records = self._frames[part].read_many(locals_)
            found.update(zip(members, records, strict=True))
        return [found[i] for i in wanted]


# -- the writer -------------------------------------------------------------------------------------


def _discard_writer(frames: FrameWriter, target: AtomicFile | UploadOnCommit | None) -> None:
    """Drop what a writer wrote: its temporary file goes even if the frame writer's abort fails."""
    try:
        frames.abort()
    finally:
        if target is not None:
            target.discard()


def _drop_writer(
    frames: FrameWriter, target: AtomicFile | UploadOnCommit | None, path: str | None
) -> None:
    """Discard a writer that was garbage-collected without ``close()``, and say so, as an open file does."""
    try:
        _discard_writer(frames, target)
    finally:
        lost = "nothing was written" if target is not None else "its last records were not written"
        warnings.warn(
            f"a writer of {path or 'a file object'} was dropped without close(): {lost} (close it, "
            "or write in a with block)",
            ResourceWarning,
            stacklevel=2,
        )


class RecordWriter(_RecordFile):
    """Writes records to one file. Made by :func:`open` with mode ``"w"``.

    Writing to a path is atomic: records go to a hidden temporary file beside the target, which is renamed
    into place by :meth:`close`. If the ``with`` block raises, :meth:`abort` is called, or the writer is
    garbage-collected without being closed, the target is left untouched and the temporary file removed:
    ``recordkit.open(path, "w").write(record)`` alone writes nothing, and says so with a
    :class:`ResourceWarning` naming the path (shown under ``python -X dev`` or ``-W default``, as for an
    unclosed file). A file object passed in is written directly and never closed.

    Attributes
    ----------
    count
        The number of records written so far.
    """

    _noun = "RecordWriter"

    def __init__(
        self,
        frames: FrameWriter,
        *,
        target: AtomicFile | UploadOnCommit | None,
        path: str | None,
        format: str,
        compression: str,
    ) -> None:
        super().__init__(path=path, format=format, compression=compression)
        self._frames = frames
        self._target = target
        # recordkit.datasets looks at the finished temporary file (size, checksum, offsets) before commit.
        self._inspect: Callable[[str], None] | None = None
        # A writer dropped without close() discards what it wrote (and the frame writer's spill file), and
        # warns with a ResourceWarning, as an unclosed file does.
        self._dropped = weakref.finalize(self, _drop_writer, frames, target, path)

    @property
    def count(self) -> int:
        """The number of records written so far."""
        return self._frames.count

    def write(self, data: Any) -> None:
        """Append one record: ``bytes``, any bytes-like object, or a protobuf message."""
        self._check_open()
        self._frames.write(as_bytes(data))

    def write_many(self, records: Iterable[Any]) -> int:
        """Append every record of ``records``; return how many were written."""
        self._check_open()
        return self._frames.write_many(map(as_bytes, records))

    def flush(self) -> None:
        """Push buffered records to the (temporary) file."""
        self._check_open()
        self._frames.flush()
        self._frames.fileobj.flush()

    def close(self) -> None:
        """Finish the file and move it into place. Idempotent.

        If finishing fails (a disk error, an FFRecord count different from ``n``), the error propagates and
        no file is left at the target.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._frames.close()
            if self._inspect is not None and self._target is not None:
                self._target.file.flush()
                self._inspect(self._target.temporary)
            if isinstance(self._target, AtomicFile):
                _remove_index(self._target.target)
            if self._target is not None:
                self._target.commit()
            else:
                self._frames.fileobj.flush()
        except BaseException:
            self._discard()
            raise
        self._dropped.detach()

    def abort(self) -> None:
        """Stop writing and discard everything: the target is left untouched. Idempotent."""
        self._closed = True
        self._discard()

    def _discard(self) -> None:
        """Discard what was written, once, without the warning of a writer dropped unclosed."""
        if self._dropped.detach() is not None:
            _discard_writer(self._frames, self._target)

    def _leave(self, *, failed: bool) -> None:
        if failed:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordWriter {self._format} {self._path!r} ({state})>"


def _remove_index(path: str) -> None:
    """Delete the sidecar indexes of ``path`` (both names): they describe the file about to be replaced."""
    for index_path in index_paths(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(index_path)


# -- open -------------------------------------------------------------------------------------------


class _Reopen(NamedTuple):
    """What a reader needs to open its files again in another process (see ``RecordReader.__reduce__``)."""

    files: list[Any]
    path: str | None
    check_crc: bool
    index: Any
    lenient: bool
    shards: Sequence[Shard] | None = None
    zero_copy: bool = False
    order: ReadOrder | None = None  # a TFDS split's interleaved order
    listing: str | None = None  # "dataset_info.json" when a TFDS directory lists the shards


def _open_reader(
    src: Any,
    *,
    format: str | None,
    compression: str | None,
    check_crc: bool,
    index: Any,
    lenient: bool,
    split: str | None = None,
    zero_copy: bool = False,
) -> RecordReader:
    resolved = resolve_sources(
        src, format=format, compression=compression, split=split, missing_ok=True
    )
    return resolved.open(check_crc=check_crc, index=index, lenient=lenient, zero_copy=zero_copy)


def _read_files(spec: _Reopen, *, format: str | None, compression: str | None) -> RecordReader:
    parts: list[tuple[FrameReader, _Opened]] = []
    formats: list[tuple[str, str]] = []
    checks: dict[int, _ShardCheck] = {}
    try:
        for i, file in enumerate(spec.files):
            options: dict[str, Any] = {
                "format": format,
                "compression": compression,
                "check_crc": spec.check_crc,
                "lenient": spec.lenient,
                "zero_copy": spec.zero_copy,
            }
            if spec.shards is None:
                frames, opened, fmt, comp = _open_part(file, index=spec.index, **options)
            else:
                shard = spec.shards[i]
                index = _ShardIndex(file, shard) if spec.index in (None, True) else spec.index
                frames, opened, fmt, comp = _open_shard(
                    file, shard, i, index=index, listing=spec.listing, **options
                )
                if frames.random_access and not _unchanged(shard, opened):
                    changed = shard.fingerprint is not None and opened.info is not None
                    checks[i] = _ShardCheck(file, shard, i, spec.listing, changed)
            parts.append((frames, opened))
            formats.append((fmt.name, comp))
        if len(set(formats)) > 1:
            raise _mixed_formats(spec.path, formats)
    except BaseException:
        for _, opened in parts:
            opened.close()
        raise
    if not formats:  # a dataset whose manifest lists no shards: an empty reader
        assert format is not None  # the manifest's
        formats.append((format, compression or ""))
    name, comp = formats[0]
    counts = None if spec.shards is None else [shard.records for shard in spec.shards]
    return RecordReader(
        parts,
        path=spec.path,
        format=name,
        compression=comp,
        reopen=spec,
        counts=counts,
        order=spec.order,
        checks=checks,
    )


def _mixed_formats(path: str | None, formats: list[tuple[str, str]]) -> UnknownFormatError:
    kinds = ", ".join(f"{name} {comp or 'uncompressed'}" for name, comp in sorted(set(formats)))
    return UnknownFormatError(
        f"{path + ': the' if path else 'The'} files mix formats or compressions ({kinds}); one reader reads "
        "one kind: open them one by one, or pass format= to read a directory's files of one format"
    )


def _reopen_reader(spec: _Reopen, format: str, compression: str) -> RecordReader:
    """Open a pickled reader's files again (the format and compression are the ones found the first time)."""
    return _read_files(spec, format=format, compression=compression)


def _open_writer(
    dst: Any,
    *,
    format: str | None,
    compression: str | None,
    level: int | None,
    n: int | None,
    fsync: bool,
) -> RecordWriter:
    target: AtomicFile | UploadOnCommit | None
    if isinstance(dst, (str, os.PathLike)):
        path: str | None = os.fspath(dst)
        fileobj = None
    elif callable(getattr(dst, "write", None)):
        name = getattr(dst, "name", None)
        path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
        fileobj = dst
    else:
        raise TypeError(f"expected a path or a binary file object, not {type(dst).__name__}")
    fmt, comp = _resolve_format(None, path, format, compression)
    comp = comp or ""
    _check_compression(fmt, comp)
    if fileobj is None:
        assert path is not None
        if is_url(path):
            fs, fs_path = require_fsspec().core.url_to_fs(path)
            target = UploadOnCommit(fs, fs_path)
        else:
            target = AtomicFile(path, fsync=fsync)
        fileobj = target.file
    else:
        target = None
    try:
        frames = fmt.writer(fileobj, compression=comp, level=level, n=n)
    except BaseException:
        if target is not None:
            target.discard()
        raise
    return RecordWriter(frames, target=target, path=path, format=fmt.name, compression=comp)


@overload
def open(
    src: Any,
    mode: Literal["r"] = "r",
    *,
    format: str | None = None,
    compression: str | None = None,
    check_crc: bool = True,
    index: PathLike | bool | None = None,
    lenient: bool = False,
    split: str | None = None,
    zero_copy: bool = False,
) -> RecordReader: ...


@overload
def open(
    src: Any,
    mode: Literal["w"],
    *,
    format: str | None = None,
    compression: str | None = None,
    level: int | None = None,
    n: int | None = None,
    fsync: bool = False,
) -> RecordWriter: ...


def open(
    src: Any,
    mode: str = "r",
    *,
    format: str | None = None,
    compression: str | None = None,
    check_crc: bool = True,
    index: PathLike | bool | None = None,
    lenient: bool = False,
    split: str | None = None,
    zero_copy: bool = False,
    level: int | None = None,
    n: int | None = None,
    fsync: bool = False,
) -> RecordReader | RecordWriter:
    """Open a record file for reading (``mode="r"``) or writing (``mode="w"``).

    Parameters
    ----------
    src
        A path (``str`` or :class:`pathlib.Path`), an fsspec URL (``"s3://bucket/x.tfrecord"``, needs
        ``recordkit[remote]``), a binary file object, or, for reading, a directory, a glob pattern or a list
        of any of these, read as one sequence (see :func:`expand_sources`). A dataset directory with a
        manifest (``_recordkit_manifest.json``, written by :class:`recordkit.ShardWriter`) or a
        tensorflow-datasets ``dataset_info.json`` is read as its manifest lists it (:func:`find_dataset`):
        ``len()`` needs no scan, and a shard that is missing or whose size differs raises
        :class:`~recordkit.errors.ManifestError`.
    mode
        ``"r"`` or ``"w"``.
    format
        ``"tfrecord"``, ``"ofrecord"``, ``"ffrecord"`` (any case). Default: from the file suffix
        (``.tfrecord``, ``.tfrecords``, ``.tfrec``, ``.tfr``, optionally followed by ``.gz``, ``.gzip`` or
        ``.zlib``; ``.ofrecord``; ``.ffr``), else, when reading, from the file's content.
    compression
        TFRecord only: ``""``/``"none"``, ``"gzip"`` or ``"zlib"`` (TensorFlow's ``"GZIP"``/``"ZLIB"`` too).
        Default: from the suffix, else (reading) from the content.
    check_crc
        Reading: verify checksums. ``False`` verifies nothing.
    index
        Reading TFRecord/OFRecord: a sidecar index path to load, ``False`` to never use one, or ``None`` to
        use the file's sidecar when it exists: ``.<name>.idx`` beside it (what recordkit writes), else
        ``<file>.idx`` (what earlier versions and DALI's tools write). Otherwise the offsets are found by a
        header-only scan when needed, and so they are when the index does not describe the file (it is
        then ignored with a :class:`~recordkit.errors.StaleIndexWarning`).
    lenient
        Reading: a file that ends inside a record header ends cleanly, as in TensorFlow; by default it
        raises :class:`~recordkit.errors.TruncatedRecordError`.
    split
        Reading a dataset directory: the split to read (``"train"``). Required when it has several.
    zero_copy
        Reading local uncompressed files: memory-map them and return each record as a read-only
        ``memoryview`` into the map instead of a ``bytes`` copy. The views are valid until the reader is
        closed; :meth:`RecordReader.close` releases them, and using one afterwards raises ``ValueError``.
        Copy what must outlive the reader (``bytes(view)``). A file truncated by another process while it
        is mapped kills the reading process with ``SIGBUS`` (replace files by renaming them, as recordkit's
        writers do). See docs/performance.md.
    level
        Writing compressed TFRecord: the zlib level, 0-9 (default: zlib's default, as TensorFlow).
    n
        Writing FFRecord: the number of records that will be written, if known (they are then written
        in place; otherwise they are assembled at close). Writing a different number is an error.
    fsync
        Writing: fsync the file and its directory on close.

    Returns
    -------
    RecordReader or RecordWriter

    Raises
    ------
    ValueError
        For a mode other than ``"r"``/``"w"``, or an option that does not fit the format.
    UnknownFormatError
        If the format cannot be determined.
    """
    if mode == "r":
        if level is not None or n is not None or fsync:
            raise ValueError("level=, n= and fsync= apply to writing (mode='w')")
        return _open_reader(
            src,
            format=format,
            compression=compression,
            check_crc=check_crc,
            index=index,
            lenient=lenient,
            split=split,
            zero_copy=zero_copy,
        )
    if mode == "w":
        if index is not None or lenient or not check_crc or split is not None or zero_copy:
            raise ValueError(
                "check_crc=, index=, lenient=, split= and zero_copy= apply to reading (mode='r')"
            )
        return _open_writer(
            src, format=format, compression=compression, level=level, n=n, fsync=fsync
        )
    raise ValueError(f"invalid mode {mode!r}: use 'r' or 'w'")


def write_index(
    path: PathLike,
    index_path: PathLike | None = None,
    *,
    format: str | None = None,
    hidden: bool | None = None,
) -> str:
    """Write the sidecar offset index of a TFRecord or OFRecord file.

    Parameters
    ----------
    path
        The record file (local, uncompressed).
    index_path
        Where to write the index. Default: beside the file, under the name ``hidden`` picks; :func:`open`
        finds it under either name. An index of the file under the other name is then deleted.
    format
        The format, if the suffix does not tell it.
    hidden
        ``True``: ``.<name>.idx``, a name that tools reading every file of a directory (Ray Data, Spark,
        Dask) pass by. ``False``: ``<name>.idx``, the name DALI's and the ``tfrecord`` package's tools use.
        ``None`` (default): hidden when the file's directory holds a dataset manifest, whose directory
        those tools read whole; otherwise ``<name>.idx``, where the user's other tools look for it.

    Returns
    -------
    str
        The index path.
    """
    offsets = scan_offsets(path, format=format)
    if index_path is not None:
        save_index(offsets, index_path)
        return os.fspath(index_path)
    if hidden is None:
        hidden = os.path.isfile(os.path.join(os.path.dirname(os.fspath(path)), MANIFEST_NAME))
    hidden_path, plain_path = index_paths(path)
    written, other = (hidden_path, plain_path) if hidden else (plain_path, hidden_path)
    save_index(offsets, written)
    with contextlib.suppress(FileNotFoundError):
        os.remove(other)
    return written


def scan_offsets(path: PathLike, *, format: str | None = None) -> array[int]:
    """Return the frame-offset table of a local, uncompressed TFRecord or OFRecord file.

    The table has ``len + 1`` entries: record ``i`` spans bytes ``[offsets[i], offsets[i + 1])``. Only the
    record headers are read.

    Raises
    ------
    TypeError
        The format keeps its own index (FFRecord).
    UnsupportedOperationError
        The file is compressed.
    """
    with _indexable_frames(path, format, "building an index") as frames:
        return frames.offsets


@contextlib.contextmanager
def _indexable_frames(
    path: PathLike, format: str | None, what: str
) -> Iterator[SequentialFrameReader]:
    """The frames of a local, uncompressed TFRecord or OFRecord file, opened without an index."""
    with _open_reader(
        path, format=format, compression=None, check_crc=True, index=False, lenient=False
    ) as reader:
        frames = reader._frames[0]
        if not isinstance(frames, SequentialFrameReader):
            raise TypeError(f"the {reader.format} format has its own index; it needs no sidecar")
        if not frames.random_access:
            raise frames.unsupported(what)
        yield frames


def index_problem(
    path: PathLike, index_path: PathLike, *, format: str | None = None
) -> StaleIndexError | None:
    """Return why a sidecar index does not describe a file, or ``None`` when every entry matches it.

    The index is checked as a reader checks it before use: it must be well formed, cover the file exactly,
    and agree with the record headers, walked from byte 0 (:func:`scan_offsets`). A reader that finds such a
    problem ignores the index (:class:`~recordkit.errors.StaleIndexWarning`) and scans the headers.

    Parameters
    ----------
    path
        The record file (local, uncompressed TFRecord or OFRecord).
    index_path
        The index, e.g. what :func:`find_index` found.
    format
        The format, if the suffix does not tell it.

    Raises
    ------
    CorruptRecordError
        The file itself is damaged (its headers cannot be walked).
    """
    with _indexable_frames(path, format, "checking an index") as frames:
        size = frames.source.size
        assert size is not None  # a random-access source knows its size
        try:
            frames.check_index(load_index(index_path, size=size, path=frames.path))
        except StaleIndexError as exc:
            return exc
    return None
