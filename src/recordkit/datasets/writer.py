"""``ShardWriter``: write a dataset as numbered shards, with a manifest written last."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import re
import string
import warnings
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from recordkit.datasets.shardfile import (
    OpenShard,
    _hidden_beside,
    _join,
    _remove_file,
    begin_replacing,
    commit_manifest_file,
    parent_directory,
    relative_path,
)
from recordkit.errors import ManifestError
from recordkit.formats.base import as_bytes
from recordkit.io.index import default_index_path
from recordkit.io.manifest import MANIFEST_NAME, Manifest, Shard, load_manifest
from recordkit.io.sources import is_url, require_fsspec, resolve_format
from recordkit.io.writer import check_writer
from recordkit.support.closing import Closing
from recordkit.support.moved import renamed_arguments

_PENDING = ".rk-pending-"


@renamed_arguments(pattern="dest")
class ShardWriter(Closing):
    """Write records into numbered shard files, starting a new shard when a limit would be passed.

    Each shard is written atomically (it appears under its name only once complete), with the sidecar
    offset index of a TFRecord or OFRecord shard beside it. On :meth:`close` the manifest
    (``_recordkit_manifest.json``, see ``docs/formats/manifest.md``) is written, last and atomically, so a
    crash at any point leaves either the previous manifest or a complete new one, never one that names a
    missing or partial shard.

    Parameters
    ----------
    dest
        Where the shards go: their path, a :meth:`str.format` template with ``{shard}`` (the shard number, from 0) and
        optionally ``{num_shards}`` (the number of shards, known at :meth:`close`), e.g.
        ``"out/train-{shard:05d}-of-{num_shards:05d}.tfrecord"``, the naming of tensorflow-datasets. With
        ``{num_shards}``, finished shards wait under hidden names and are renamed at :meth:`close`. A local
        path (its directories are created as needed; the fields may also name directories, as in
        ``"out/{shard:03d}/data.tfrecord"``) or an fsspec URL.
    format, compression, level, options
        As for :func:`recordkit.open` in mode ``"w"`` (``options``: a format's writer option string,
        ArrayRecord's ``"group_size:1,zstd:3"``), checked now; the format defaults to the one the suffix
        names.
    max_records
        The most records in one shard.
    max_bytes
        The most bytes in one shard, counting each record's payload and its framing, before compression.
        A single record larger than the limit gets a shard of its own.
    index
        Write the sidecar index of each uncompressed TFRecord or OFRecord shard.
    split
        The split all shards belong to (``"train"``), recorded in the manifest.
    manifest
        ``True`` (the default) writes ``_recordkit_manifest.json`` in the pattern's directory (the last one
        before a field); a path writes
        it there (it must be in that directory or above it); ``False`` writes none. If the manifest exists,
        its shards are kept, except the ones this writer's pattern names, which are removed from it when
        the writer opens. Once :meth:`close` has written the new manifest, the files the old one named
        and the new one does not (older shards of this pattern that were not rewritten, and their
        indexes) are deleted, so that tools reading every file of the directory see only the new
        dataset; files no manifest named are never touched.
    schema, metadata
        JSON objects stored in the manifest: the feature schema, and anything else.
    fsync
        Flush each shard, and the manifest's directory, to stable storage.

    Attributes
    ----------
    shards
        The entries of the shards finished so far.
    manifest
        The manifest written by :meth:`close`, or ``None`` before.

    Examples
    --------
    >>> import tempfile, recordkit as rk
    >>> tmp = tempfile.mkdtemp()
    >>> with rk.ShardWriter(tmp + "/part-{shard:02d}.tfrecord", max_records=2) as writer:
    ...     writer.write_many([b"a", b"b", b"c"])
    3
    >>> [(shard.path, shard.records) for shard in writer.manifest.shards]
    [('part-00.tfrecord', 2), ('part-01.tfrecord', 1)]
    """

    _noun = "ShardWriter"

    def __init__(
        self,
        dest: str | os.PathLike[str],
        *,
        format: str | None = None,
        compression: str | None = None,
        level: int | None = None,
        options: str | None = None,
        max_records: int | None = None,
        max_bytes: int | None = None,
        index: bool = True,
        split: str | None = None,
        manifest: bool | str | os.PathLike[str] = True,
        schema: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        fsync: bool = False,
    ) -> None:
        self._pattern = os.fspath(dest)
        self._fields = _fields(self._pattern)
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, not {max_records}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._options: dict[str, Any] = {
            "format": format,
            "compression": compression,
            "level": level,
            "options": options,
            "index": index,
            "split": split,
            "fsync": fsync,
        }
        fmt, comp = resolve_format(None, self._name(0, 1), format, compression)
        self._format = (fmt.name, comp or "")
        check_writer(fmt.name, compression=comp, level=level, options=options)
        self._overhead = fmt.overhead  # bytes each record adds around its payload, for max_bytes
        self._directory = _static_parent(self._pattern)
        # The directories this writer made: a writer dropped or aborted removes those it left empty.
        self._created: list[str] = []
        self._created += _make_directories(self._directory)
        self._manifest_path = _manifest_target(manifest, self._directory)
        self._root = (
            parent_directory(self._manifest_path) if self._manifest_path else self._directory
        )
        self._schema, self._metadata = schema, dict(metadata or {})
        self._kept: tuple[Shard, ...] = ()
        self._previous: Manifest | None = None
        # The shard being written, held in a box the finalizer shares (see _current).
        self._box: list[OpenShard] = []
        self._current_bytes = 0
        self._pending: list[tuple[str, Shard]] = []
        self.shards: list[Shard] = []
        self.manifest: Manifest | None = None
        self._closed = False
        if self._manifest_path:
            self._forget_own_shards()
        # A writer dropped without close() warns, and removes the shards waiting under hidden names and
        # the directories it made that are then empty.
        self._abandoned = weakref.finalize(
            self,
            _abandon,
            self._pending,
            self._pattern,
            "num_shards" in self._fields,
            self._created,
            self._box,
        )

    @property
    def _current(self) -> OpenShard | None:
        """The shard being written. It lives in a box shared with the finalizer, not in the writer's own
        attributes, so that a dropped writer's finalizer can let it go (its temporary file is then
        removed) before removing the directories the writer made."""
        return self._box[0] if self._box else None

    @_current.setter
    def _current(self, shard: OpenShard | None) -> None:
        self._box[:] = [] if shard is None else [shard]

    # -- writing ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._closed

    @property
    def count(self) -> int:
        """The number of records written so far, in all shards."""
        current = self._current.count if self._current is not None else 0
        return sum(shard.records for shard in self.shards) + current

    def write(self, record: Any) -> None:
        """Append one record: ``bytes``, a bytes-like object or a protobuf message."""
        if self._closed:
            raise ValueError("I/O operation on a closed ShardWriter")
        data = as_bytes(record)
        shard = self._shard_for(len(data))
        shard.write(data)
        self._current_bytes += len(data) + self._overhead

    def write_many(self, records: Iterable[Any]) -> int:
        """Append every record of ``records``; return how many were written."""
        if (
            self._max_records is None and self._max_bytes is None
        ):  # one shard: its writer's own loop
            records = iter(records)
            first = next(records, None)
            if first is None:
                return 0
            self.write(first)
            assert self._current is not None
            return 1 + self._current.write_many(records)
        written = 0
        for record in records:
            self.write(record)
            written += 1
        return written

    def end_shard(self) -> None:
        """Finish the shard being written: the next record starts a new one, whatever the limits.

        For shards whose sizes the caller chooses (:func:`~recordkit.datasets.reshard` balances them).
        With no shard started (nothing written since the last one ended), it does nothing: a shard is
        never empty.
        """
        if self._closed:
            raise ValueError("I/O operation on a closed ShardWriter")
        self._finish_shard()

    def _shard_for(self, size: int) -> OpenShard:
        shard = self._current
        if shard is not None and shard.count:
            most, framed = self._max_bytes, self._current_bytes + size + self._overhead
            if (self._max_records is not None and shard.count >= self._max_records) or (
                most is not None and framed > most
            ):
                self._finish_shard()
                shard = None
        if shard is None:
            shard = self._current = self._open_shard(len(self.shards))
            self._current_bytes = 0
        return shard

    def _open_shard(self, number: int) -> OpenShard:
        final = self._name(number, None)
        path = _hidden_beside(final, _PENDING) if "num_shards" in self._fields else final
        self._created += _make_directories(
            posixpath.dirname(path) if is_url(path) else os.path.dirname(path) or "."
        )
        return OpenShard(path, root=self._root, **self._options)

    def _name(self, number: int, total: int | None) -> str:
        values: dict[str, Any] = {"shard": number}
        if "num_shards" in self._fields:
            values["num_shards"] = total if total is not None else 0
        return self._pattern.format(**values)

    def _finish_shard(self) -> None:
        shard, self._current = self._current, None
        if shard is None:
            return
        entry = shard.close()
        self.shards.append(entry)
        self._pending.append((shard.path, entry))

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Finish the last shard, give the shards their final names and write the manifest. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._abandoned.detach()
        try:
            self._finish_shard()
            if "num_shards" in self._fields:
                self.shards = self._rename_pending()
            self.manifest = self._build_manifest()
            if self._manifest_path:
                commit_manifest_file(self.manifest, self._manifest_path)
        except BaseException:
            self._discard_pending()
            raise

    def abort(self) -> None:
        """Stop writing: discard the shard being written and the shards waiting for a final name.

        Shards already under their final names stay, but no manifest names them; directories the writer
        created and left empty are removed. Idempotent.
        """
        self._closed = True
        self._abandoned.detach()
        if self._current is not None:
            self._current.abort()
            self._current = None
        self._discard_pending()
        _remove_empty(self._created)

    def _leave(self, *, failed: bool) -> None:
        self.abort() if failed else self.close()

    def _rename_pending(self) -> list[Shard]:
        total = len(self._pending)
        renamed = []
        for number, (pending, entry) in enumerate(self._pending):
            final = self._name(number, total)
            _move(pending, final)
            index = entry.index
            if index is not None:
                _move(default_index_path(pending), default_index_path(final))
                index = dataclasses.replace(
                    index, path=relative_path(default_index_path(final), self._root)
                )
            renamed.append(
                dataclasses.replace(entry, path=relative_path(final, self._root), index=index)
            )
        self._pending.clear()
        return renamed

    def _discard_pending(self) -> None:
        if "num_shards" in self._fields:
            _discard_files(self._pending)

    def _build_manifest(self) -> Manifest:
        previous = self._previous
        schema = previous.schema if self._schema is None and previous is not None else self._schema
        return Manifest(
            format=self._format[0],
            compression=self._format[1],
            shards=self._kept + tuple(self.shards),
            schema=schema,
            metadata={**(previous.metadata if previous else {}), **self._metadata},
        )

    def _forget_own_shards(self) -> None:
        """Drop from an existing manifest the shards this writer's pattern names: they are rewritten."""
        assert self._manifest_path is not None
        try:
            previous = load_manifest(self._manifest_path)
        except FileNotFoundError:
            return
        mine = _pattern_regex(relative_path(self._pattern, self._root))
        kept = tuple(s for s in previous.shards if not mine.fullmatch(s.path))
        if (previous.format, previous.compression) != self._format:
            raise ManifestError(
                f"the manifest is for {previous.format} shards "
                f"({previous.compression or 'uncompressed'}); this writer writes {self._format[0]} "
                f"({self._format[1] or 'uncompressed'}): write them to another directory",
                path=self._manifest_path,
            )
        self._previous = previous
        self._kept = kept
        begin_replacing(self._manifest_path)
        if len(kept) != len(previous.shards):
            dataclasses.replace(previous, shards=kept).save(self._manifest_path)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ShardWriter {self._pattern!r} ({len(self.shards)} shards, {state})>"


def _fields(pattern: str) -> set[str]:
    names = {name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None}
    if "shard" not in names:
        raise ValueError(f"the pattern {pattern!r} has no {{shard}} field to number the shards")
    unknown = names - {"shard", "num_shards"}
    if unknown:
        raise ValueError(
            f"the pattern {pattern!r} has fields {sorted(unknown)}; only {{shard}} and "
            "{num_shards} are filled in"
        )
    return names


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regex matching every path ``pattern`` can produce (each field becomes a run of digits)."""
    parts = []
    for literal, name, _, _ in string.Formatter().parse(pattern):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(r"[0-9]+")
    return re.compile("".join(parts))


def _manifest_target(manifest: bool | str | os.PathLike[str], directory: str) -> str | None:
    if manifest is False:
        return None
    return _join(directory, MANIFEST_NAME) if manifest is True else os.fspath(manifest)


def _move(source: str, target: str) -> None:
    if is_url(source):
        fsspec = require_fsspec()
        fs, inner = fsspec.core.url_to_fs(source)
        fs.mv(inner, fsspec.core.url_to_fs(target)[1])
    else:
        os.replace(source, target)


def _abandon(
    pending: list[tuple[str, Shard]],
    pattern: str,
    hidden: bool,
    created: list[str],
    current: list[OpenShard],
) -> None:
    current.clear()  # the last reference: the shard being written discards its temporary file now
    if hidden:
        _discard_files(pending)
    _remove_empty(created)
    left = (
        "" if hidden or not pending else f"; the {len(pending)} shards it finished stay, unlisted"
    )
    warnings.warn(
        f"a ShardWriter for {pattern} was dropped without close(): no manifest was written{left}",
        ResourceWarning,
        stacklevel=2,
    )


def _make_directories(directory: str) -> list[str]:
    """Create ``directory`` and its missing parents; return the ones created, outermost first.

    Of URLs, only ``file://`` ones are directories to create (and are kept): an object store has none,
    and its ``makedirs`` may try to create a bucket.
    """
    if is_url(directory):
        fs, inner = require_fsspec().core.url_to_fs(directory)
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        if "file" in protocols:
            fs.makedirs(inner, exist_ok=True)
        return []
    missing = []
    path = os.path.abspath(directory)
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    os.makedirs(directory, exist_ok=True)
    return missing[::-1]


def _remove_empty(created: list[str]) -> None:
    """Remove the directories of ``created`` that are empty, innermost first (a writer's own leftovers)."""
    for directory in sorted(set(created), key=len, reverse=True):
        with contextlib.suppress(OSError):  # not empty, or already gone
            os.rmdir(directory)
    created.clear()


def _static_parent(pattern: str) -> str:
    """The directory of ``pattern`` up to its first component with a field: where the manifest goes."""
    separators = "/" if is_url(pattern) else "/" + (os.altsep or "") + os.sep
    parent = parent_directory(pattern)
    while "{" in os.path.basename(parent.rstrip(separators)) and parent not in ("", "."):
        parent = parent_directory(parent)
    return parent


def _discard_files(pending: list[tuple[str, Shard]]) -> None:
    for path, _ in pending:
        _remove_file(path)
        _remove_file(default_index_path(path))
    pending.clear()
