"""Resharding: the records of anything :func:`recordkit.open` reads, written again as a dataset of M shards.

:func:`reshard` resolves its sources with :func:`recordkit.io.resolve_sources`, reads every record once, in
order or in a seeded global shuffle, and writes them with :class:`~recordkit.ShardWriter` into a hidden
directory beside the destination, which is renamed into place once its manifest is written. Uncompressed
TFRecord written again as such, in order, is copied frame by frame instead
(:mod:`recordkit.datasets._framecopy`), into the same files.
``docs/datasets.md`` says how the shuffle keeps to its memory budget.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any

import numpy as np

from recordkit.datasets._framecopy import copy_frames
from recordkit.datasets.seeds import derive_seed
from recordkit.datasets.shardfile import commit_manifest_file
from recordkit.datasets.writer import ShardWriter
from recordkit.errors import (
    CorruptRecordError,
    ManifestError,
    NoLengthError,
    OutputExistsError,
    RecordKitWarning,
)
from recordkit.formats import get_format
from recordkit.formats.base import RecordFormat
from recordkit.io import open as open_records
from recordkit.io.manifest import MANIFEST_NAME, Manifest, Shard, load_manifest
from recordkit.io.reader import RecordReader
from recordkit.io.resolve import resolve_sources
from recordkit.io.sources import is_url, source_size
from recordkit.io.writer import open_writer

__all__ = ["shard_sizes"]

Progress = Callable[[Iterator[bytes], int | None], Iterable[bytes]]
"""``progress(records, total)``: returns the same records, counting them on the way (a progress bar)."""

_PARTIAL = ".rk-reshard-"
_BATCH = 4096
_OVERHEAD = (
    100  # what Python holds per record in memory beside its payload: the bytes object, the list
)
_WRITE_BUFFER = (
    2 << 20
)  # what each open bucket file may buffer (its frame writer's 1 MiB, and more)


def shard_sizes(total: int, shards: int) -> list[int]:
    """Split ``total`` records into ``shards`` contiguous runs whose sizes differ by at most one.

    Examples
    --------
    >>> shard_sizes(10, 4)
    [3, 3, 2, 2]
    """
    base, extra = divmod(total, shards)
    return [base + (i < extra) for i in range(shards)]


def reshard(
    sources: Any,
    dest: str | os.PathLike[str],
    *,
    shards: int,
    shuffle: bool = False,
    seed: int = 0,
    format: str | None = None,
    compression: str | None = None,
    options: str | None = None,
    split: str | None = None,
    overwrite: bool = False,
    memory_bytes: int = 256 << 20,
    progress: Progress | None = None,
) -> Manifest:
    """Write every record of ``sources`` once into a new dataset of ``shards`` shards at ``dest``.

    Shard sizes differ by at most one record, and no shard is empty: with fewer records than ``shards``,
    one shard per record is written (with a :class:`~recordkit.errors.RecordKitWarning`). Without
    ``shuffle`` the records keep their order (reading the shards in order gives the sources' order back)
    and are streamed; with it, they are shuffled globally within ``memory_bytes`` (see
    ``docs/datasets.md``), the same order for the same ``seed`` and records, whatever the sources' format.

    The dataset is written into a hidden directory beside ``dest`` (``.rk-reshard-<name>``) and renamed to
    ``dest`` once complete, so an interrupted reshard leaves no dataset at ``dest`` (or the one there
    before); a new run removes what an interrupted one left.

    Parameters
    ----------
    sources
        Anything :func:`recordkit.open` reads: a file, a list, a glob, a directory, a dataset directory, or
        what :func:`recordkit.io.resolve_sources` returned (to choose the sources' format).
    dest
        The local directory to write, new or empty unless ``overwrite``.
    shards
        The number of shards.
    shuffle, seed
        Shuffle the records globally, seeded by ``seed``.
    format, compression
        The format of the shards, as :class:`~recordkit.ShardWriter` takes them; default the sources'
        format, and their compression when the format is theirs. Records are copied as they are.
    options
        The format's writer option string (ArrayRecord's ``"group_size:1,zstd:3"``), as for
        :func:`recordkit.open` in mode ``"w"``.
    split
        The split of a dataset directory to read; the shards are labelled with it (or with the one split
        the sources' shards have) in the new manifest.
    overwrite
        Replace a ``dest`` that holds files (the sources themselves may be there).
    memory_bytes
        The memory budget of the shuffle: records held at once, with what Python keeps per record.
    progress
        Called as ``progress(records, total)`` on each pass over the records; returns them (the command
        line shows a progress bar).

    Returns
    -------
    Manifest
        The new dataset's manifest.

    Raises
    ------
    FileExistsError
        ``dest`` holds files and ``overwrite`` is false.
    ValueError
        ``shards`` or ``memory_bytes`` is below 1, or ``dest`` is a URL.
    """
    if shards < 1 or memory_bytes < 1:
        raise ValueError(
            f"shards and memory_bytes must be at least 1, not {shards}, {memory_bytes}"
        )
    dest = os.fspath(dest)
    if is_url(dest):
        raise ValueError(
            f"{dest}: reshard writes a local directory and renames it into place; for object stores "
            "use the Ray or Dask writers (docs/datasets.md)"
        )
    resolved = resolve_sources(sources, split=split)
    if os.path.lexists(dest) and not _empty_directory(dest):
        _check_replaceable(dest, overwrite)
    parent, name = os.path.split(os.path.abspath(dest))
    partial = os.path.join(parent, _PARTIAL + name)
    shutil.rmtree(partial, ignore_errors=True)  # what an interrupted reshard left
    labels = {shard.split for shard in resolved.manifest.shards} if resolved.manifest else set()
    try:
        with resolved.open() as reader:
            fmt = get_format(format or reader.format)
            if compression is None:
                compression = reader.compression if fmt.name == reader.format else ""
            suffix = {"gzip": ".gz", "zlib": ".zlib"}.get(compression, "")
            label = split or (labels.pop() if len(labels) == 1 else None)
            schema = resolved.manifest.schema if resolved.manifest else None
            if not shuffle and _copies_frames(reader, fmt, compression, options):
                manifest = _copy(
                    reader,
                    fmt,
                    partial,
                    shards,
                    label,
                    schema,
                    progress,
                    resolved.source or partial,
                )
            else:
                writer = ShardWriter(
                    os.path.join(partial, fmt.shard_pattern + suffix),
                    format=fmt.name,
                    compression=compression or None,
                    options=options,
                    split=label,
                    schema=schema,
                )
                with writer:
                    total, records = _records(
                        reader, resolved.files, partial, shuffle, seed, memory_bytes, progress
                    )
                    records = iter(progress(records, total)) if progress else records
                    _write(writer, records, total, shards, resolved.source or partial)
                assert writer.manifest is not None
                manifest = writer.manifest
        shutil.rmtree(os.path.join(partial, ".buckets"), ignore_errors=True)
        _put_in_place(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


def _copies_frames(
    reader: RecordReader, fmt: RecordFormat, compression: str, options: str | None
) -> bool:
    """Whether the records can be copied frame by frame (:mod:`recordkit.datasets._framecopy`): local
    uncompressed files of a format whose frames can be copied, written again as such."""
    return (
        fmt.name == reader.format
        and fmt.capabilities.copyable_frames
        and not compression
        and not reader.compression
        and options is None
        and all(isinstance(path, str) and not is_url(path) for path in reader.paths)
    )


def _copy(
    reader: RecordReader,
    fmt: RecordFormat,
    directory: str,
    shards: int,
    split: str | None,
    schema: Any,
    progress: Progress | None,
    where: str,
) -> Manifest:
    """Reshard by copying frames; write the manifest into ``directory`` and return it."""
    total = len(reader)
    sizes = shard_sizes(total, min(shards, total)) if total else []
    if total < shards:
        _too_few(total, shards, where)
    os.makedirs(directory)
    entries: list[Shard] = []
    files = [path for path in reader.paths if path is not None]
    counts = copy_frames(fmt, files, directory, sizes, split, entries)
    if progress is None:
        for _ in counts:  # a block at a time
            pass
    else:  # one tick per record, which the progress bar counts
        for _ in progress((b"" for count in counts for _ in range(count)), total):
            pass
    manifest = Manifest(format=fmt.name, compression="", shards=tuple(entries), schema=schema)
    commit_manifest_file(manifest, os.path.join(directory, MANIFEST_NAME))
    return manifest


def _records(
    reader: RecordReader,
    files: list[Any],
    directory: str,
    shuffle: bool,
    seed: int,
    memory_bytes: int,
    progress: Progress | None,
) -> tuple[int, Iterator[bytes]]:
    """The number of records and the records, in the order they are written."""
    watch = progress or (lambda records, total: records)
    if not shuffle:
        try:
            total = len(reader)
        except NoLengthError:  # compressed, without a manifest: counted in a pass of its own
            total = sum(1 for _ in watch(iter(reader), None))
        return total, iter(reader)
    keys = np.random.PCG64(derive_seed(seed, "reshard"))
    if reader.supports_random_access:
        return len(reader), _permuted(reader, keys, memory_bytes)
    # A compressed file has no random access: bucket files, each shuffled in memory.
    disk = sum(source_size(os.fspath(f)) for f in files if isinstance(f, (str, os.PathLike)))
    bits = _bits(4 * disk, memory_bytes)  # 4: what compression typically saved
    batches = ((keys.random_raw(len(b)), b) for b in _batched(watch(iter(reader), None)))
    buckets = _scatter(batches, os.path.join(directory, ".buckets"), 0, bits)
    return sum(count for _, count, _ in buckets), _drain(buckets, 0, bits, memory_bytes)


def _write(
    writer: ShardWriter, records: Iterator[bytes], total: int, shards: int, where: str
) -> None:
    """Write ``records`` (``total`` of them) as ``shards`` shards of balanced sizes, none empty."""
    if total < shards:
        _too_few(total, shards, where)
    for size in shard_sizes(total, min(shards, total)) if total else []:
        writer.write_many(itertools.islice(records, size))
        writer.end_shard()
    if writer.count != total or next(records, None) is not None:
        raise CorruptRecordError(
            f"the sources changed while they were read: {total} records were counted, "
            f"{writer.count} or more read",
            path=where,
        )


def _too_few(total: int, shards: int, where: str) -> None:
    warnings.warn(
        f"{where}: {total} records, fewer than the {shards} shards asked for: writing "
        + (
            f"{total} shards of one record (no shard is left empty)"
            if total
            else "a dataset of no shards"
        ),
        RecordKitWarning,
        stacklevel=4,
    )


def _permuted(reader: RecordReader, keys: Any, memory_bytes: int) -> Iterator[bytes]:
    """The records in the order of their random keys, read by index a chunk within the budget at once.

    The order (``argsort`` of one 64-bit key per record, drawn in reading order) is the one
    :func:`_drain` gives a reader without random access, so the format of the sources does not change it.
    """
    total = len(reader)
    order = np.argsort(keys.random_raw(total), kind="stable")
    sample = reader.read(range(min(total, 256)))
    mean = sum(map(len, sample)) // max(1, len(sample))
    chunk = max(1, memory_bytes // (mean + _OVERHEAD))
    for start in range(0, total, chunk):
        yield from reader.read(order[start : start + chunk].tolist())


def _bits(size: int, memory_bytes: int) -> int:
    """How many key bits pick the bucket: buckets of half the budget on average, as few files as it takes
    (at most 256 open at once, and their write buffers within the budget)."""
    wanted = (max(0, 2 * size // memory_bytes)).bit_length()
    most = max(1, min(8, (memory_bytes // _WRITE_BUFFER).bit_length() - 1))
    return min(wanted, most)


def _batched(records: Iterable[bytes]) -> Iterator[list[bytes]]:
    it = iter(records)
    while batch := list(itertools.islice(it, _BATCH)):
        yield batch


def _scatter(
    batches: Iterable[tuple[Any, list[bytes]]], directory: str, used: int, bits: int
) -> list[tuple[str, int, int]]:
    """Write each record, its 8-byte key first, into the bucket file its key's bits after the first
    ``used`` pick (``2**bits`` of them, uncompressed TFRecord files); return each bucket's path, record
    count and payload bytes, in key order."""
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f"{i:03d}.tfrecord") for i in range(1 << bits)]
    counts, sizes = [0] * len(paths), [0] * len(paths)
    shift, mask = np.uint64(64 - used - bits), np.uint64((1 << bits) - 1)
    with ExitStack() as stack:
        writers = [stack.enter_context(open_writer(path, format="tfrecord")) for path in paths]
        for keys, records in batches:
            where = ((keys >> shift) & mask).tolist()
            for key, bucket, record in zip(keys.tolist(), where, records, strict=True):
                writers[bucket].write(key.to_bytes(8, "big") + record)
                counts[bucket] += 1
                sizes[bucket] += len(record)
    return list(zip(paths, counts, sizes, strict=True))


def _drain(
    buckets: list[tuple[str, int, int]], used: int, bits: int, memory_bytes: int
) -> Iterator[bytes]:
    """The records of the buckets, each bucket sorted by key in memory; a bucket over the budget is
    scattered again by the next bits of the keys."""
    for path, count, size in buckets:
        if size + count * _OVERHEAD > memory_bytes and count > 1 and used + bits < 64:
            more = max(1, min(64 - used - bits, _bits(size, memory_bytes)))
            with open_records(path, format="tfrecord") as reader:
                batches = (
                    (_keys_of(b).astype(np.uint64), [r[8:] for r in b]) for b in _batched(reader)
                )
                inner = _scatter(batches, path + ".d", used + bits, more)
            os.remove(path)
            yield from _drain(inner, used + bits, more, memory_bytes)
            continue
        with open_records(path, format="tfrecord") as reader:
            held = list(reader)
        os.remove(path)
        for i in np.argsort(_keys_of(held), kind="stable").tolist():
            yield held[i][8:]
        del held


def _keys_of(records: list[bytes]) -> Any:
    """The keys the records of a bucket file start with."""
    return np.frombuffer(b"".join(record[:8] for record in records), dtype=">u8")


def _empty_directory(path: str) -> bool:
    return os.path.isdir(path) and not os.listdir(path)


def _check_replaceable(dest: str, overwrite: bool) -> None:
    """Refuse to replace ``dest`` unless asked to, and unless it holds a recordkit dataset and nothing else.

    Replacing a directory deletes it whole, so a directory holding any file its manifest does not list (the
    sources of the reshard, a user's notes) is never replaced, whatever ``overwrite`` says.
    """
    if not overwrite:
        raise OutputExistsError("exists; pass overwrite=True to replace it", path=dest)
    if not os.path.isdir(dest):
        raise OutputExistsError("is not a directory: reshard writes a dataset directory", path=dest)
    try:
        manifest = load_manifest(dest)
    except (OSError, ManifestError):
        manifest = None
    listed = {MANIFEST_NAME} if manifest is not None else set()
    for shard in manifest.shards if manifest is not None else ():
        listed.add(os.path.normpath(shard.path))
        if shard.index is not None:
            listed.add(os.path.normpath(shard.index.path))
    others = sorted(
        os.path.relpath(os.path.join(root, name), dest)
        for root, _, names in os.walk(dest)
        for name in names
        if os.path.normpath(os.path.relpath(os.path.join(root, name), dest)) not in listed
    )
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise OutputExistsError(
            f"holds files that are not a recordkit dataset's ({shown}): reshard replaces the whole "
            "directory, so it replaces only an empty one or a dataset directory holding nothing else; "
            "choose another destination",
            path=dest,
        )


def _put_in_place(partial: str, dest: str) -> None:
    """Rename the finished dataset to ``dest``; a directory there is moved aside first, then deleted."""
    if not os.path.lexists(dest):
        os.rename(partial, dest)
        return
    parent, name = os.path.split(os.path.abspath(dest))
    old = tempfile.mkdtemp(prefix=f".rk-replaced-{name}-", dir=parent)
    try:
        os.rename(dest, old)  # an empty directory is replaced by the rename
    except OSError:
        os.rmdir(old)
        raise
    try:
        os.rename(partial, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    shutil.rmtree(old)
