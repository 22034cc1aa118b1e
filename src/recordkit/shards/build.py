"""Manifests for shards written by anything, and checking shards against their manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping
from typing import Any

from recordkit._index import format_index
from recordkit.errors import CorruptRecordError, ManifestError
from recordkit.formats.manifest import MANIFEST_NAME, Manifest, Shard, load_manifest
from recordkit.io import expand_sources, open_shard, scan_offsets, shard_path
from recordkit.shards.shardfile import describe_shard, file_sha256

__all__ = ["ShardCheck", "build_manifest", "verify_dataset"]

# tensorflow-datasets names shards "<name>-<split>.<format>-<i>-of-<n>"; the split is read from the name.
_TFDS_NAME = re.compile(r".+-(?P<split>[A-Za-z0-9_]+)\.[a-z_]+-[0-9]{5}-of-[0-9]{5}")


def build_manifest(
    directory: str | os.PathLike[str],
    *,
    format: str | None = None,
    split: str | None = None,
    checksum: bool = True,
    schema: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    save: bool = True,
) -> Manifest:
    """Describe the record files of a directory, written by anything (TF, Beam, Spark, Ray), in a manifest.

    Every record of every file is read and its checksum verified, so the counts are exact and a damaged
    shard is reported before it is listed.

    Parameters
    ----------
    directory
        A local directory. Its record files are taken as :func:`recordkit.open` lists them (hidden files
        and sidecar indexes left out, natural order).
    format
        Take only the files of this format (otherwise the files must all share one format).
    split
        The split of every shard. Default: the split an existing manifest of the directory gives the
        shard, else the one a tensorflow-datasets name says (``mnist-train.tfrecord-00000-of-00004``),
        else none.
    checksum
        Record each shard's SHA-256 (one more read of each file).
    schema, metadata
        Stored in the manifest as they are.
    save
        Write the manifest (``_recordkit_manifest.json`` in ``directory``), atomically.

    Raises
    ------
    ManifestError
        The files mix formats or compressions.
    CorruptRecordError
        A file is damaged.
    """
    directory = os.fspath(directory)
    files = [f for f in expand_sources(directory, format=format) if isinstance(f, str)]
    known_splits = _previous_splits(directory)
    shards: list[Shard] = []
    kinds: set[tuple[str, str]] = set()
    for path in files:
        own_split = split
        if own_split is None:
            name = os.path.relpath(path, directory).replace(os.sep, "/")
            own_split = known_splits.get(name) or _split_from_name(os.path.basename(path))
        shard, found_format, found_compression = describe_shard(
            path, root=directory, format=format, split=own_split, checksum=checksum
        )
        kinds.add((found_format, found_compression))
        shards.append(shard)
    if len(kinds) > 1:
        listed = ", ".join(f"{f} ({c or 'uncompressed'})" for f, c in sorted(kinds))
        raise ManifestError(
            f"the files mix formats or compressions ({listed}); one manifest describes one kind: "
            "pass format=",
            path=directory,
        )
    found_format, found_compression = kinds.pop() if kinds else (format or "tfrecord", "")
    manifest = Manifest(
        format=found_format,
        compression=found_compression,
        shards=tuple(shards),
        schema=schema,
        metadata=dict(metadata or {}),
    )
    if save:
        manifest.save(os.path.join(directory, MANIFEST_NAME))
    return manifest


def _previous_splits(directory: str) -> dict[str, str]:
    """The splits an existing manifest gives its shards: a rebuilt manifest keeps them."""
    try:
        previous = load_manifest(os.path.join(directory, MANIFEST_NAME))
    except (FileNotFoundError, ManifestError):
        return {}
    return {shard.path: shard.split for shard in previous.shards if shard.split is not None}


def _split_from_name(name: str) -> str | None:
    match = _TFDS_NAME.fullmatch(name)
    return match.group("split") if match else None


@dataclasses.dataclass(frozen=True)
class ShardCheck:
    """The outcome of checking one shard against its manifest.

    Attributes
    ----------
    shard
        The manifest's entry.
    path
        The shard file.
    problem
        What is wrong, or ``None`` when the shard matches its entry.
    error
        The error behind ``problem``, when one was raised (a damaged record, a missing file).
    """

    shard: Shard
    path: str
    problem: str | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        """Whether the shard matches its entry."""
        return self.problem is None


def verify_dataset(
    directory: str | os.PathLike[str], *, split: str | None = None, checksum: bool = True
) -> list[ShardCheck]:
    """Check every shard of a dataset directory against its manifest.

    For each shard: it exists, has the recorded size and SHA-256, every record's checksum is right, it
    holds the recorded number of records, and its sidecar index (if recorded) is the one recorded and
    describes the file.

    Parameters
    ----------
    directory
        The dataset directory, or its manifest file (a path ending in ``.json``).
    split
        Check only this split.
    checksum
        Also compare SHA-256 checksums (one more read of each file).

    Returns
    -------
    list of ShardCheck
        One per shard, in manifest order.

    Raises
    ------
    FileNotFoundError
        There is no manifest.
    ManifestError
        The manifest is malformed.
    """
    path = os.fspath(directory)
    manifest = load_manifest(path)
    if path.endswith(".json"):
        path = os.path.dirname(path) or "."
    if split is not None:
        manifest = manifest.select(split)
    return [_check(path, manifest, shard, checksum) for shard in manifest.shards]


def _check(directory: str, manifest: Manifest, shard: Shard, checksum: bool) -> ShardCheck:
    path = shard_path(directory, shard)
    try:
        problem = _problem(directory, manifest, shard, path, checksum)
    except CorruptRecordError as exc:  # ManifestError included
        where = f"record {exc.index} at byte {exc.offset}: " if exc.index is not None else ""
        return ShardCheck(shard, path, f"{where}{exc.reason} [{type(exc).__name__}]", exc)
    except OSError as exc:
        return ShardCheck(shard, path, f"{exc.strerror or exc} [{type(exc).__name__}]", exc)
    return ShardCheck(shard, path, problem)


def _problem(
    directory: str, manifest: Manifest, shard: Shard, path: str, checksum: bool
) -> str | None:
    with open_shard(
        directory, shard, format=manifest.format, compression=manifest.compression
    ) as reader:
        count = sum(1 for _ in reader)
    if count != shard.records:
        return f"holds {count} records; the manifest says {shard.records}"
    if checksum and shard.sha256 is not None and file_sha256(path)[1] != shard.sha256:
        return "its SHA-256 differs from the manifest's: the content changed"
    if shard.index is not None:
        return _index_problem(directory, manifest, shard, path)
    return None


def _index_problem(directory: str, manifest: Manifest, shard: Shard, path: str) -> str | None:
    assert shard.index is not None
    index_path = shard_path(directory, dataclasses.replace(shard, path=shard.index.path))
    try:
        with open(index_path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return f"its index {shard.index.path} is missing (reading it at random will scan it)"
    if hashlib.sha256(data).hexdigest() != shard.index.sha256:
        return f"its index {shard.index.path} differs from the one the manifest recorded"
    if data != format_index(scan_offsets(path, format=manifest.format)):
        return f"its index {shard.index.path} does not describe the file"
    return None
