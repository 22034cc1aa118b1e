"""The dataset manifest: which shards make a dataset, and what each one holds.

A manifest is a JSON file, ``_recordkit_manifest.json`` by default, in the directory of the shards. Its
layout is documented byte by byte in ``docs/formats/manifest.md``. This module is what a reader needs of
one: the :class:`Manifest` and its entries, finding, parsing and validating the file, the paths of its
shards, and the words of the errors about a shard that differs from its listing. It imports only
:mod:`recordkit.io.sources` (URLs) and :mod:`recordkit.io.atomic` (for :meth:`Manifest.save`) of the io
package, so that :mod:`recordkit.io.resolve` and :mod:`recordkit.io.reader` can build on it. Building,
merging and committing manifests is :mod:`recordkit.datasets`' part.

The public names of this module whose home is :mod:`recordkit.datasets` (``Manifest``, ``Shard``,
``IndexFile``, ``Fingerprint``, ``MANIFEST_NAME``, ``load_manifest``) are imported from there.

The leading underscore of the file name follows the Hadoop convention that Spark, Ray Data and Dask apply
when they list a directory: files starting with ``_`` or ``.`` are metadata, never data.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

from recordkit.errors import ManifestError, UnknownFormatError
from recordkit.formats import get_format
from recordkit.io.atomic import write_atomically
from recordkit.io.sources import is_url, require_fsspec
from recordkit.support.moved import moved_attribute

__all__ = [
    "MANIFEST_VERSION",
    "TFDS_INFO",
    "changed_shard",
    "inside_path",
    "manifest_path",
    "sha256_of",
    "shard_count_error",
    "shard_listing",
    "shard_path",
]

MANIFEST_NAME = "_recordkit_manifest.json"
"""The manifest's file name in a dataset directory."""

MANIFEST_VERSION = 1
"""The layout version this recordkit writes, and the newest it reads."""

_KIND = "recordkit.manifest"
_COMPRESSIONS = {"none": "", "gzip": "gzip", "zlib": "zlib", "bzip2": "bzip2"}
_SHA256_LENGTH = 64
_HASH_BLOCK = 1 << 20
# A manifest names shards, not bulk data: anything larger is not one of ours.
_MAX_MANIFEST_BYTES = 256 << 20


@dataclasses.dataclass(frozen=True)
class IndexFile:
    """A shard's sidecar offset index, as the manifest records it.

    Attributes
    ----------
    path
        Relative to the manifest's directory, with ``/`` separators.
    sha256
        The SHA-256 of the index file's bytes (lowercase hex). A reader that finds the same checksum uses the
        index without walking the shard's record headers.
    """

    path: str
    sha256: str


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What a shard file's metadata said when the manifest described it: a cheap test that it is unchanged.

    A reader compares it (with the shard's size) to the file's ``stat()`` when it opens the shard. While
    they match, the manifest's record count and sidecar index are used as they are; when they differ (the
    file was rewritten, replaced, or copied to another place), or the manifest records none, the reader
    walks the shard's record headers before its first random access and raises
    :class:`~recordkit.errors.ManifestError` if they disagree with the manifest.

    Attributes
    ----------
    mtime_ns
        The file's modification time (``st_mtime_ns``).
    inode
        The file's inode number (``st_ino``): a file put in the shard's place by a rename has another.
    """

    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, info: os.stat_result) -> Fingerprint:
        """Return the fingerprint of a file from its ``os.stat()`` result."""
        return cls(mtime_ns=info.st_mtime_ns, inode=info.st_ino)

    def matches(self, info: os.stat_result) -> bool:
        """Whether a file's ``os.stat()`` result has this fingerprint."""
        return (self.mtime_ns, self.inode) == (info.st_mtime_ns, info.st_ino)


@dataclasses.dataclass(frozen=True)
class Shard:
    """One shard of a dataset.

    Attributes
    ----------
    path
        The shard file, relative to the manifest's directory, with ``/`` separators. Never absolute, never
        ``..``.
    records
        How many records it holds.
    size
        Its size in bytes.
    sha256
        The SHA-256 of its bytes (lowercase hex), or ``None`` when the writer did not compute one.
    split
        The split it belongs to (``"train"``, ``"test"``, ...), or ``None``.
    index
        Its sidecar index, or ``None``.
    fingerprint
        The file's modification time and inode when the manifest described it (:class:`Fingerprint`), or
        ``None`` (a manifest of an earlier version, a remote shard, a TFDS directory).
    """

    path: str
    records: int
    size: int
    sha256: str | None = None
    split: str | None = None
    index: IndexFile | None = None
    fingerprint: Fingerprint | None = None

    def relocated(self, prefix: str) -> Shard:
        """Return this shard with ``prefix/`` put before its paths (for a manifest one directory up)."""
        if not prefix:
            return self
        index = self.index
        if index is not None:
            index = dataclasses.replace(index, path=posixpath.join(prefix, index.path))
        return dataclasses.replace(self, path=posixpath.join(prefix, self.path), index=index)


@dataclasses.dataclass(frozen=True)
class Manifest:
    """The shards of a dataset, their format, and optional schema and metadata.

    Attributes
    ----------
    format
        The record format of every shard: a registered format, see
        :func:`~recordkit.formats.available_formats` (its registered name, e.g. ``"tfrecord"``).
    compression
        The whole-file compression of every shard: ``""`` (none), ``"gzip"``, ``"zlib"`` or ``"bzip2"``
        (read only).
    shards
        The shards, in reading order.
    schema
        The feature schema (a JSON object, as ``recordkit info --json`` prints it), or ``None``.
    metadata
        Anything the writer chose to record (a JSON object).
    """

    format: str
    compression: str = ""
    shards: tuple[Shard, ...] = ()
    schema: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def records(self) -> int:
        """The number of records in all shards."""
        return sum(shard.records for shard in self.shards)

    @property
    def splits(self) -> list[str]:
        """The split names, in the order their first shard appears (empty when no shard has a split)."""
        return list(dict.fromkeys(s.split for s in self.shards if s.split is not None))

    def select(self, split: str | None) -> Manifest:
        """Return the manifest of one split.

        ``split=None`` returns the whole manifest when it has at most one split.

        Raises
        ------
        ManifestError
            The split does not exist; or ``split=None`` and there are several (reading train and test
            together by accident is never what a user wants).
        """
        splits = self.splits
        if split is None:
            if len(splits) > 1:
                raise ManifestError(
                    f"the dataset has the splits {', '.join(splits)}: choose one with split="
                )
            return self
        if split not in splits:
            have = f"the splits {', '.join(splits)}" if splits else "no splits"
            raise ManifestError(f"the dataset has no split {split!r}; it has {have}")
        return dataclasses.replace(self, shards=tuple(s for s in self.shards if s.split == split))

    def to_json(self) -> str:
        """Return the manifest as JSON text (the layout of ``docs/formats/manifest.md``)."""
        document: dict[str, Any] = {
            "kind": _KIND,
            "version": MANIFEST_VERSION,
            "format": self.format,
            "compression": self.compression or "none",
            "records": self.records,
            "shards": [_shard_json(shard) for shard in self.shards],
        }
        if self.schema is not None:
            document["schema"] = self.schema
        if self.metadata:
            document["metadata"] = self.metadata
        return json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, path: str | None = None) -> Manifest:
        """Parse and validate manifest JSON.

        Raises
        ------
        ManifestError
            The text is not a manifest of a version this recordkit reads, or any field is malformed.
        """
        return _parse(_json_document(text, path), path)

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the manifest atomically to ``path``: a ``.json`` file, or a directory (created if needed)
        to hold ``MANIFEST_NAME``; locally or at an fsspec URL (uploaded whole, so readers see the old
        manifest or the new one).

        Returns
        -------
        str
            The file written.
        """
        target = manifest_path(path)
        if not is_url(target):
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        write_atomically(target, self.to_json().encode("utf-8"))
        return target


def _no_constant(name: str) -> None:
    """``NaN`` and ``Infinity`` are Python's JSON extensions, not JSON: a manifest holding one is refused."""
    raise ValueError(f"{name} is not a JSON value")


def sha256_of(file: BinaryIO) -> tuple[int, str]:
    """Read a binary file to its end; return how many bytes it held and their SHA-256 (lowercase hex)."""
    digest = hashlib.sha256()
    size = 0
    while block := file.read(_HASH_BLOCK):
        digest.update(block)
        size += len(block)
    return size, digest.hexdigest()


def manifest_path(path: str | os.PathLike[str]) -> str:
    """Return the manifest file meant by ``path``.

    A path ending in ``.json`` is the manifest file itself; anything else is a directory, whose manifest is
    ``MANIFEST_NAME`` inside it.
    """
    path = os.fspath(path)
    return path if path.endswith(".json") else _join(path, MANIFEST_NAME)


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest file (or the manifest of a directory), local or at an fsspec URL.

    Raises
    ------
    FileNotFoundError
        There is no manifest there.
    ManifestError
        It is malformed.
    """
    target = manifest_path(path)
    return _parse(_read_json(target, "a manifest"), target)


def _read_json(path: str, what: str) -> Any:
    """The JSON document of a small file, local or at an fsspec URL (a manifest, a ``dataset_info.json``).

    Raises
    ------
    ManifestError
        It is larger than a listing of shards can be, not UTF-8, or not JSON (``NaN`` is not JSON).
    """
    opener = require_fsspec().open if is_url(path) else open
    with opener(path, "rb") as file:
        data = file.read(_MAX_MANIFEST_BYTES + 1)
    if len(data) > _MAX_MANIFEST_BYTES:
        raise ManifestError(f"larger than {_MAX_MANIFEST_BYTES} bytes: not {what}", path=path)
    try:
        return _json_document(data.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise ManifestError("not UTF-8 text", path=path) from None


def _json_document(text: str | bytes, path: str | None) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"not valid JSON ({exc})", path=path) from None


# -- what lists a dataset's shards, and the errors about a shard that differs from its listing -------

TFDS_INFO = "dataset_info.json"
"""The file in which tensorflow-datasets lists a prepared dataset's shards (read as a manifest)."""


def shard_listing(manifest: Manifest | None) -> str | None:
    """Return ``"dataset_info.json"`` for a manifest made from a tensorflow-datasets directory, else ``None``.

    What lists a dataset's shards decides what an error about a changed shard says: a recordkit manifest is
    described again by ``recordkit manifest build``; a TFDS directory's ``dataset_info.json`` is TFDS's own.
    """
    return TFDS_INFO if manifest is not None and "tfds" in manifest.metadata else None


def changed_shard(listing: str | None) -> tuple[str, str]:
    """Who lists a shard (for "... says N"), and what to do about a shard that changed since.

    ``listing`` is :func:`shard_listing`'s answer for the manifest.
    """
    if listing == TFDS_INFO:
        return TFDS_INFO, (
            "it changed after tensorflow-datasets prepared the dataset: restore the shard, or prepare "
            "the dataset again with tfds (dataset_info.json is TFDS's own record of its shards)"
        )
    return "the manifest", (
        "it changed after the manifest was written (recordkit manifest build describes it again; "
        "recordkit verify DIR --salvage repairs a damaged shard in place)"
    )


def shard_count_error(
    path: str | None, shard: int, found: int, expected: int, listing: str | None
) -> ManifestError:
    """The error for a dataset's shard that holds ``found`` records where its listing says ``expected``.

    Every reader and command that counts a shard builds its error here, so each gives the same words and
    the remedy that fits what lists the shard: ``recordkit manifest build`` (or ``verify DIR --salvage``)
    for a recordkit manifest, restoring the shard or preparing the dataset again with tfds for a
    tensorflow-datasets directory (``listing`` is :func:`shard_listing`'s answer).
    """
    lister, remedy = changed_shard(listing)
    return ManifestError(
        f"the shard holds {found} records, but {lister} says {expected}: {remedy}",
        path=path,
        shard=shard,
    )


def shard_path(directory: str, shard: Shard) -> str:
    """Return the path (or URL) of a manifest's shard, given the manifest's directory."""
    return _join(directory, shard.path)


def _join(directory: str, relative: str) -> str:
    """``relative`` (``/`` separators) inside ``directory``, a local path or a URL."""
    if is_url(directory):
        return directory.rstrip("/") + "/" + relative
    return os.path.join(directory, *relative.split("/"))


# -- JSON layout -----------------------------------------------------------------------------------


def _shard_json(shard: Shard) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": shard.path, "records": shard.records, "bytes": shard.size}
    if shard.sha256 is not None:
        entry["sha256"] = shard.sha256
    if shard.split is not None:
        entry["split"] = shard.split
    if shard.index is not None:
        entry["index"] = dataclasses.asdict(shard.index)
    if shard.fingerprint is not None:
        entry["fingerprint"] = dataclasses.asdict(shard.fingerprint)
    return entry


def inside_path(path: str) -> bool:
    """Whether ``path`` is a relative path inside a dataset's directory, with ``/`` separators (no ``..``,
    no empty, ``.`` or drive part): what a manifest (or ``dataset_info.json``) may name a file by."""
    return not (
        path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(part in ("", ".", "..") for part in path.split("/"))
        or (len(path) > 1 and path[1] == ":")
    )


class _Fields:
    """Typed access to one JSON object, raising :class:`ManifestError` with the field's location."""

    def __init__(self, value: Any, where: str, path: str | None, shard: int | None = None) -> None:
        self.where, self.path, self.shard = where, path, shard
        if not isinstance(value, dict):
            raise self.error(f"{where} must be a JSON object")
        self.value: dict[str, Any] = value

    def error(self, message: str) -> ManifestError:
        return ManifestError(message, path=self.path, shard=self.shard)

    def get(self, key: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
        if key not in self.value:
            if required:
                raise self.error(f"{self.where} has no {key!r}")
            return None
        value = self.value[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(f"{self.where}: {key!r} has the wrong type ({type(value).__name__})")
        return value

    def child(self, key: str, where: str) -> _Fields | None:
        """The object in field ``key`` (optional), with typed access; ``where`` names it in errors."""
        value = self.get(key, dict, required=False)
        return None if value is None else _Fields(value, where, self.path, self.shard)

    def count(self, key: str) -> int:
        value: int = self.get(key, int)
        if value < 0:
            raise self.error(f"{self.where}: {key!r} is negative")
        return value

    def digest(self, key: str, *, required: bool) -> str | None:
        value: str | None = self.get(key, str, required=required)
        if value is not None and (
            len(value) != _SHA256_LENGTH or value.strip("0123456789abcdef") != ""
        ):
            raise self.error(f"{self.where}: {key!r} is not a lowercase hex SHA-256")
        return value

    def relative_path(self, key: str) -> str:
        value: str = self.get(key, str)
        if not inside_path(value):
            raise self.error(
                f"{self.where}: {key!r} must be a relative path inside the manifest's directory, "
                f"with / separators, not {value!r}"
            )
        return value


def _parse(document: Any, path: str | None) -> Manifest:
    top = _Fields(document, "the manifest", path)
    if top.value.get("kind") != _KIND:
        raise top.error(f'not a recordkit manifest (no "kind": "{_KIND}")')
    version = top.get("version", int)
    if version < 1 or version > MANIFEST_VERSION:
        raise top.error(
            f"manifest version {version}; this recordkit reads versions 1 to {MANIFEST_VERSION}"
        )
    compression = _COMPRESSIONS.get(top.get("compression", str))
    if compression is None:
        raise top.error(f"unknown compression {top.value['compression']!r}")
    shards_json: Sequence[Any] = top.get("shards", list)
    shards = tuple(_parse_shard(entry, path, i) for i, entry in enumerate(shards_json))
    seen: set[str] = set()
    for i, shard in enumerate(shards):
        if shard.path in seen:
            raise ManifestError(f"the shard {shard.path} is listed twice", path=path, shard=i)
        seen.add(shard.path)
    manifest = Manifest(
        format=_format_name(top),
        compression=compression,
        shards=shards,
        schema=top.get("schema", dict, required=False),
        metadata=top.get("metadata", dict, required=False) or {},
    )
    total = top.get("records", int, required=False)
    if total is not None and total != manifest.records:
        raise top.error(f"says {total} records, but its shards hold {manifest.records}")
    return manifest


def _format_name(top: _Fields) -> str:
    """The manifest's format under its registered name (``"TFRecord"`` is ``"tfrecord"``)."""
    written: str = top.get("format", str)
    try:
        return get_format(written).name
    except UnknownFormatError as exc:
        raise top.error(f"{exc}: register the format before reading its dataset") from None


def _parse_shard(entry: Any, path: str | None, i: int) -> Shard:
    fields = _Fields(entry, f"shard {i}", path, i)
    index = fingerprint = None
    if (index_fields := fields.child("index", f"the index of shard {i}")) is not None:
        index = IndexFile(
            path=index_fields.relative_path("path"),
            sha256=index_fields.digest("sha256", required=True) or "",
        )
    if (stat := fields.child("fingerprint", f"the fingerprint of shard {i}")) is not None:
        fingerprint = Fingerprint(mtime_ns=stat.get("mtime_ns", int), inode=stat.count("inode"))
    return Shard(
        path=fields.relative_path("path"),
        records=fields.count("records"),
        size=fields.count("bytes"),
        sha256=fields.digest("sha256", required=False),
        split=fields.get("split", str, required=False),
        index=index,
        fingerprint=fingerprint,
    )


__getattr__ = functools.partial(
    moved_attribute, __name__
)  # 0.2's merge_manifests (recordkit.formats.manifest)
