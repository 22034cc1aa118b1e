"""Open record files for reading and writing: :func:`open`, :class:`RecordReader`, :class:`RecordWriter`.

The package is layered, bottom up: :mod:`~recordkit.io.sources` (local files read with ``os.pread``, fsspec
URLs, file objects, directory listings, format sniffing), :mod:`~recordkit.io.manifest`,
:mod:`~recordkit.io.tfds` and :mod:`~recordkit.io.index` (reading what describes a dataset: its manifest,
tensorflow-datasets metadata, sidecar indexes), :mod:`~recordkit.io.reader`
(:class:`RecordReader`), :mod:`~recordkit.io.resolve` (:func:`resolve_sources`: what a user names becomes
the shards to read), :mod:`~recordkit.io.writer` (:class:`RecordWriter`, sidecar indexes). This module
defines :func:`open` and re-exports the public names, each loaded from its module on first use, so that
importing :mod:`recordkit.io.sources`, :mod:`recordkit.io.atomic` or the modules that read a dataset's
description does not load the reader. Nothing in this package imports :mod:`recordkit.datasets`, which is
built on it.

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

import os
from typing import TYPE_CHECKING, Any, Literal, overload

from recordkit.support.lazy import lazy_names
from recordkit.support.moved import moved_attribute, renamed_arguments

if TYPE_CHECKING:
    from recordkit.io.following import Follower, Following, follow
    from recordkit.io.reader import RecordReader, open_shard
    from recordkit.io.resolve import (
        ResolvedSources,
        Sources,
        expand_sources,
        find_dataset,
        resolve_sources,
    )
    from recordkit.io.sources import is_glob_pattern, is_url, reading_format
    from recordkit.io.writer import (
        RecordWriter,
        index_problem,
        open_writer,
        scan_offsets,
        write_index,
    )

# Public name -> the module that defines it (recordkit.io, whose __all__ lists them, is their home), imported
# on first use (PEP 562). A name that left this list since 0.2 (``natural_key``) is served, with a warning,
# from recordkit.support.moved.MOVED.
_DEFINED_IN = {
    name: f"recordkit.io.{module}"
    for module, names in {
        "following": "Follower Following follow",
        "reader": "RecordReader open_shard",
        "resolve": "ResolvedSources Sources expand_sources find_dataset resolve_sources",
        "sources": "is_glob_pattern is_url reading_format",
        "writer": "RecordWriter check_writer index_problem open_writer scan_offsets write_index",
    }.items()
    for name in names.split()
}

__all__ = [
    "Follower",
    "Following",
    "RecordReader",
    "RecordWriter",
    "ResolvedSources",
    "Sources",
    "check_writer",
    "expand_sources",
    "find_dataset",
    "follow",
    "index_problem",
    "is_glob_pattern",
    "is_url",
    "open",
    "open_shard",
    "open_writer",
    "reading_format",
    "resolve_sources",
    "scan_offsets",
    "write_index",
]

PathLike = str | os.PathLike[str]


def _moved(name: str) -> Any:
    """A name that left ``recordkit.io``'s public names: the object at its new place, with a warning."""
    return moved_attribute(__name__, name)


__getattr__, __dir__ = lazy_names(__name__, globals(), _DEFINED_IN, fallback=_moved)


@overload
def open(
    sources: Any,
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
    sources: Any,
    mode: Literal["w"],
    *,
    format: str | None = None,
    compression: str | None = None,
    level: int | None = None,
    n: int | None = None,
    fsync: bool = False,
) -> RecordWriter: ...


@renamed_arguments(src="sources")
def open(
    sources: Any,
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
    options: str | None = None,
) -> RecordReader | RecordWriter:
    """Open a record file for reading (``mode="r"``) or writing (``mode="w"``).

    Parameters
    ----------
    sources
        What to read, or, with ``mode="w"``, the one file to write: a path (``str`` or
        :class:`pathlib.Path`), an fsspec URL (``"s3://bucket/x.tfrecord"``, needs ``recordkit[remote]``),
        a binary file object, or, for reading, a directory, a glob pattern or a list of any of these, read as one sequence (see :func:`expand_sources`). A dataset directory with a
        manifest (``_recordkit_manifest.json``, written by :class:`recordkit.ShardWriter`) or a
        tensorflow-datasets ``dataset_info.json`` is read as its manifest lists it (:func:`find_dataset`):
        ``len()`` needs no scan, and a shard that is missing or whose size differs raises
        :class:`~recordkit.errors.ManifestError`.
    mode
        ``"r"`` or ``"w"``.
    format
        A registered format, see :func:`~recordkit.formats.available_formats` (any case): the built-in
        ``"tfrecord"``, ``"ofrecord"`` and ``"ffrecord"``, or one added with
        :func:`~recordkit.formats.register_format`. Default: from the file suffix (the built-in ones:
        ``.tfrecord``, ``.tfrecords``, ``.tfrec``, ``.tfr``, optionally followed by ``.gz``, ``.gzip`` or
        ``.zlib``; ``.ofrecord``; ``.ffr``), else, when reading, from the file's content.
    compression
        TFRecord only: ``""``/``"none"``, ``"gzip"`` or ``"zlib"`` (TensorFlow's ``"GZIP"``/``"ZLIB"`` too).
        Default: from the suffix, else (reading) from the content.
    check_crc
        Reading: verify checksums. ``False`` verifies nothing.
    index
        Reading TFRecord/OFRecord: a sidecar index path to load (only when one file is read: several files,
        a dataset's shards included, raise ``ValueError``), ``False`` to never use one, or ``None`` to
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
    options
        Writing ArrayRecord: array_record's ``ArrayRecordWriter`` option string (``"group_size:1,zstd:3"``,
        also ``brotli[:L]``, ``snappy``, ``uncompressed``, ``window_log:N``, ``pad_to_block_boundary:B``),
        with its defaults (``group_size:1,zstd:3,window_log:20``); ``level`` sets the codec's level.
        See docs/formats/arrayrecord.md.

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
    from recordkit.io.resolve import resolve_sources
    from recordkit.io.writer import open_writer

    if mode == "r":
        if level is not None or n is not None or fsync or options is not None:
            raise ValueError("level=, n=, fsync= and options= apply to writing (mode='w')")
        resolved = resolve_sources(
            sources, format=format, compression=compression, split=split, missing_ok=True
        )
        return resolved.open(check_crc=check_crc, index=index, lenient=lenient, zero_copy=zero_copy)
    if mode == "w":
        if index is not None or lenient or not check_crc or split is not None or zero_copy:
            raise ValueError(
                "check_crc=, index=, lenient=, split= and zero_copy= apply to reading (mode='r')"
            )
        return open_writer(
            sources,
            format=format,
            compression=compression,
            level=level,
            n=n,
            fsync=fsync,
            options=options,
        )
    raise ValueError(f"invalid mode {mode!r}: use 'r' or 'w'")
