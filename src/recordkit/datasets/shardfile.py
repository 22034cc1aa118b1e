"""Writing one shard and describing it for a manifest.

:func:`write_shard` is the unit every sharded writer is built from: :class:`~recordkit.ShardWriter` calls it
once per shard, and the Ray and Dask integrations once per task. It writes atomically, so a task that dies
leaves nothing under the shard's name, and a retried task simply replaces the file.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import posixpath
from array import array
from collections.abc import Iterable
from typing import Any

from recordkit.io import open as open_records
from recordkit.io.atomic import write_atomically
from recordkit.io.index import default_index_path, find_index, format_index
from recordkit.io.manifest import (
    Fingerprint,
    IndexFile,
    Manifest,
    Shard,
    inside_path,
    load_manifest,
    sha256_of,
)
from recordkit.io.sources import is_url, require_fsspec, source_size
from recordkit.io.writer import open_writer, scan_offsets
from recordkit.support.moved import moved_attribute

__all__ = [
    "begin_replacing",
    "commit_manifest_file",
    "describe_shard",
    "file_sha256",
    "parent_directory",
    "relative_path",
]


def file_sha256(path: str | os.PathLike[str]) -> tuple[int, str]:
    """Return the size and the SHA-256 (lowercase hex) of a file, local or fsspec URL."""
    path = os.fspath(path)
    opener = require_fsspec().open if is_url(path) else open
    with opener(path, "rb") as file:
        return sha256_of(file)


_REPLACED = ".rk-replaced-"
"""Prefix of the hidden ledger beside a manifest that names the files of the dataset being replaced."""


def begin_replacing(manifest_path: str) -> None:
    """Note which files the manifest at ``manifest_path`` names, before a writer starts changing them.

    Every dataset writer calls this before it touches a shard (or deletes or rewrites the manifest), and
    :func:`commit_manifest_file` at the end. The names (each shard and its sidecar index, relative to the
    manifest's directory) go to a hidden ledger beside the manifest, ``.rk-replaced-<manifest name>``, so
    they survive a write that fails, or a process that dies, before the new manifest is written: the
    next commit still removes them. Names already in a ledger are kept. A missing or unreadable
    manifest adds nothing.
    """
    named = _named_files(manifest_path)
    if not named:
        return
    ledger = _hidden_beside(manifest_path, _REPLACED)
    known = _read_ledger(ledger)
    if named <= known:
        return
    write_atomically(ledger, json.dumps({"files": sorted(known | named)}, indent=1).encode("utf-8"))


def commit_manifest_file(manifest: Manifest, manifest_path: str) -> list[str]:
    """Write ``manifest`` at ``manifest_path`` (atomically), then remove the files it replaced.

    The files removed are those that the manifest previously at ``manifest_path``, or the ledger of
    :func:`begin_replacing`, named (shards and their sidecar indexes) and that ``manifest`` does not
    name. Nothing else in the directory is touched, and nothing is removed before the new manifest is
    in place: a crash in between leaves the ledger, and the next commit finishes the job. This is what
    every dataset writer commits with, so that tools that read every file of the directory (Ray's
    ``read_tfrecords(dir)``, a ``tf.io.gfile.glob``) see only the new dataset.

    Returns
    -------
    list of str
        The paths removed, relative to the manifest's directory.
    """
    begin_replacing(manifest_path)  # so that a crash after the save still leaves the names
    ledger = _hidden_beside(manifest_path, _REPLACED)
    replaced = _read_ledger(ledger)
    manifest.save(manifest_path)
    root = parent_directory(manifest_path)
    stale = sorted(replaced - _manifest_files(manifest))
    removed = [relative for relative in stale if _remove_file(_join(root, relative))]
    _remove_file(ledger)
    return removed


def _manifest_files(manifest: Manifest) -> set[str]:
    named = set()
    for shard in manifest.shards:
        named.add(posixpath.normpath(shard.path))
        if shard.index is not None:
            named.add(posixpath.normpath(shard.index.path))
    return named


def _named_files(manifest_path: str) -> set[str]:
    try:
        return _manifest_files(load_manifest(manifest_path))
    except (OSError, ValueError):  # missing, unreadable, or not a manifest (ManifestError)
        return set()


def _hidden_beside(path: str, prefix: str) -> str:
    """The hidden name ``prefix + name`` in the directory of ``path`` (a local path or a URL)."""
    split, join = (
        (posixpath.split, posixpath.join) if is_url(path) else (os.path.split, os.path.join)
    )
    parent, name = split(path)
    return join(parent, prefix + name)


def _read_ledger(ledger: str) -> set[str]:
    try:
        opener = require_fsspec().open if is_url(ledger) else open
        with opener(ledger, "rb") as file:
            files = json.loads(file.read())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    # Only relative paths inside the directory, as a manifest's are: never anything above it.
    named = {posixpath.normpath(name) for name in files if isinstance(name, str)}
    return {name for name in named if inside_path(name)}


def _join(root: str, relative: str) -> str:
    if is_url(root):
        return posixpath.join(root, relative)
    return os.path.join(root, *relative.split("/"))


def _remove_file(path: str) -> bool:
    """Delete one file if it is there; return whether it was."""
    if is_url(path):
        fs, inner = require_fsspec().core.url_to_fs(path)
        try:
            fs.rm_file(inner)
        except FileNotFoundError:
            return False
        return True
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


def relative_path(path: str, root: str) -> str:
    """Return ``path`` relative to the directory ``root``, with ``/`` separators.

    Raises
    ------
    ValueError
        ``path`` is not inside ``root``.
    """
    if is_url(path) or is_url(root):
        inner, base = path.split("://", 1)[-1], root.split("://", 1)[-1]
        relative = posixpath.relpath(inner, base)
    else:
        relative = os.path.relpath(path, root).replace(os.sep, "/")
    if relative == ".." or relative.startswith("../") or relative == ".":
        raise ValueError(f"{path} is not inside {root}")
    return relative


class OpenShard:
    """A shard being written: records go in one by one, :meth:`close` returns its manifest entry.

    The file appears under its name only when :meth:`close` succeeds (:func:`write_shard` has the
    parameters). :meth:`abort` discards it.

    Attributes
    ----------
    path
        The shard file.
    count
        The records written so far.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        root: str | os.PathLike[str] | None = None,
        format: str | None = None,
        compression: str | None = None,
        level: int | None = None,
        index: bool = True,
        split: str | None = None,
        fsync: bool = False,
        n: int | None = None,
        options: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._root = os.fspath(root) if root is not None else parent_directory(self.path)
        self._split = split
        self._facts: dict[str, Any] = {}
        self._writer = open_writer(
            self.path,
            format=format,
            compression=compression,
            level=level,
            n=n,
            fsync=fsync,
            options=options,
        )
        self._want_index = index and not self._writer.compression
        # A function of the facts only, not a method: a bound method would make the writer and this
        # object a reference cycle, and a dropped shard would then wait for the garbage collector to be
        # discarded.
        self._writer._inspect = functools.partial(
            _inspect, self._facts, self._writer.format, self._want_index
        )
        self.format = self._writer.format
        self.compression = self._writer.compression

    @property
    def count(self) -> int:
        """The number of records written so far."""
        return self._writer.count

    def write(self, record: Any) -> None:
        """Append one record."""
        self._writer.write(record)

    def write_many(self, records: Iterable[Any]) -> int:
        """Append every record of ``records``; return how many were written."""
        return self._writer.write_many(records)

    def close(self) -> Shard:
        """Finish the file, move it into place, write its index, and return its manifest entry."""
        self._writer.close()
        offsets: array[int] | None = self._facts.get("offsets")
        index_entry = None
        if offsets is not None:
            index_entry = _write_index(offsets, default_index_path(self.path), self._root)
        return Shard(
            path=relative_path(self.path, self._root),
            records=self._writer.count,
            size=self._facts["size"],
            sha256=self._facts["sha256"],
            split=self._split,
            index=index_entry,
            fingerprint=_fingerprint(self.path),
        )

    def abort(self) -> None:
        """Discard the file: nothing appears under its name. Idempotent."""
        self._writer.abort()


def _inspect(facts: dict[str, Any], format: str, want_index: bool, temporary: str) -> None:
    """Record the size, SHA-256 and (when wanted) offset table of a finished temporary shard file."""
    facts["size"], facts["sha256"] = file_sha256(temporary)
    if want_index:
        with contextlib.suppress(TypeError):  # the format keeps its own index
            facts["offsets"] = scan_offsets(temporary, format=format)


def parent_directory(path: str) -> str:
    """The directory of a local path or an fsspec URL (``"."`` for a bare name)."""
    return (posixpath.dirname(path) if is_url(path) else os.path.dirname(path)) or "."


def write_shard(records: Iterable[Any], path: str | os.PathLike[str], **options: Any) -> Shard:
    """Write ``records`` to one shard file, atomically, and return its manifest entry.

    Parameters
    ----------
    records
        The records: ``bytes``, bytes-like objects or protobuf messages.
    path
        The shard file (a local path or an fsspec URL). An existing file is replaced only once the new one
        is complete; if writing fails, nothing is left under the name.
    **options
        ``root`` (the directory of the manifest that will list the shard, which :attr:`Shard.path` is
        relative to; default the shard's own directory), ``format``, ``compression``, ``level`` and
        ``options`` (as for :func:`recordkit.open` in mode ``"w"``), ``index`` (default ``True``: also write the sidecar offset
        index ``.<name>.idx`` of an uncompressed TFRecord or OFRecord shard beside it, a hidden name, so that
        reading it at random needs no scan; FFRecord files hold their own index), ``split`` (recorded in the entry) and
        ``fsync``.

    Returns
    -------
    Shard
        The entry: relative path, record count, size, SHA-256, split and index.
    """
    shard = OpenShard(path, **options)
    try:
        shard.write_many(records)
    except BaseException:
        shard.abort()
        raise
    return shard.close()


def _write_index(offsets: array[int], index_path: str, root: str) -> IndexFile:
    data = format_index(offsets)
    write_atomically(index_path, data)
    return IndexFile(
        path=relative_path(index_path, root or "."), sha256=hashlib.sha256(data).hexdigest()
    )


def describe_shard(
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str],
    format: str | None = None,
    compression: str | None = None,
    split: str | None = None,
    checksum: bool = True,
) -> tuple[Shard, str, str]:
    """Describe an existing shard for a manifest by reading it (every record's checksum is verified).

    Returns
    -------
    tuple
        The entry, and the format and compression found. A sidecar index beside the shard is recorded only
        if it describes the file exactly.
    """
    path = os.fspath(path)
    # Taken before the file is read: a change while it is read then leaves a fingerprint that differs.
    fingerprint = _fingerprint(path)
    with open_records(path, format=format, compression=compression, index=False) as reader:
        count = sum(1 for _ in reader)
        found_format, found_compression = reader.format, reader.compression
    size, sha256 = file_sha256(path) if checksum else (source_size(path), None)
    index_entry = _existing_index(path, os.fspath(root), found_format, found_compression)
    shard = Shard(
        path=relative_path(path, os.fspath(root)),
        records=count,
        size=size,
        sha256=sha256,
        split=split,
        index=index_entry,
        fingerprint=fingerprint,
    )
    return shard, found_format, found_compression


def _fingerprint(path: str) -> Fingerprint | None:
    """The fingerprint of a local shard file for its manifest entry (``None`` for a URL)."""
    return None if is_url(path) else Fingerprint.of(os.stat(path))


def _existing_index(path: str, root: str, fmt: str, compression: str) -> IndexFile | None:
    if compression or is_url(path):
        return None
    index_path = find_index(path)  # recordkit's hidden name, or the one of earlier versions
    if index_path is None:
        return None
    try:
        expected = format_index(scan_offsets(path, format=fmt))
    except TypeError:
        return None
    with open(index_path, "rb") as file:
        if file.read(len(expected) + 1) != expected:
            return None
    return IndexFile(
        path=relative_path(index_path, root), sha256=hashlib.sha256(expected).hexdigest()
    )


__getattr__ = functools.partial(moved_attribute, __name__)  # 0.2's read_manifest
