"""Manifests for shards written by anything, and checking shards against their manifest."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import itertools
import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

from recordkit.datasets.shardfile import describe_shard, file_sha256
from recordkit.errors import CorruptRecordError, ManifestError, UnsupportedOperationError
from recordkit.io import open as open_records
from recordkit.io.index import format_index, index_paths
from recordkit.io.manifest import (
    MANIFEST_NAME,
    Manifest,
    Shard,
    load_manifest,
    shard_listing,
    shard_path,
)
from recordkit.io.reader import open_shard
from recordkit.io.resolve import expand_sources, find_dataset
from recordkit.io.sources import is_url, require_fsspec
from recordkit.io.writer import scan_offsets, write_index

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
    FileNotFoundError
        The directory holds no record file (of ``format``).
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
            tfds_name = _TFDS_NAME.fullmatch(os.path.basename(path))
            own_split = known_splits.get(name) or (tfds_name and tfds_name["split"])
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
    # expand_sources raised FileNotFoundError for a directory without record files: there is one kind.
    found_format, found_compression = kinds.pop()
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
    describes the file. A tensorflow-datasets directory is checked against its ``dataset_info.json``: each
    shard it lists exists, its records' checksums are right, and it holds the number of records
    ``shardLengths`` gives (TFDS records no sizes or checksums of the files).

    Parameters
    ----------
    directory
        The dataset directory (with a ``_recordkit_manifest.json`` or a tensorflow-datasets
        ``dataset_info.json``), or its manifest file (a path ending in ``.json``).
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
        The manifest is malformed (or, for a TFDS directory, a shard it lists is missing).
    """
    path, manifest = load_dataset(directory)
    if split is not None:
        manifest = manifest.select(split)
    return [_check(path, manifest, shard, checksum) for shard in manifest.shards]


def load_dataset(directory: str | os.PathLike[str]) -> tuple[str, Manifest]:
    """Return ``(directory, manifest)`` of a dataset: every split, as :func:`recordkit.open` finds it.

    A directory with a ``_recordkit_manifest.json``, one prepared by tensorflow-datasets (its
    ``dataset_info.json`` made into a manifest, see :func:`recordkit.io.tfds.manifest_from_tfds`), or
    a manifest file.

    Raises
    ------
    FileNotFoundError
        There is neither a manifest nor a ``dataset_info.json``.
    ManifestError
        It is malformed.
    """
    path = os.fspath(directory)
    found = find_dataset(path, all_splits=True)
    if found is None:
        raise FileNotFoundError(
            errno.ENOENT,
            f"no dataset manifest ({MANIFEST_NAME}) nor tensorflow-datasets dataset_info.json",
            path,
        )
    return found


def _check(directory: str, manifest: Manifest, shard: Shard, checksum: bool) -> ShardCheck:
    path = shard_path(directory, shard)
    try:
        problem = _problem(directory, manifest, shard, path, checksum)
    except CorruptRecordError as exc:  # ManifestError included
        where = f"record {exc.index} at byte {exc.offset}: " if exc.index is not None else ""
        return ShardCheck(shard, path, f"{where}{exc.reason} [{type(exc).__name__}]", exc)
    except OSError as exc:
        return ShardCheck(shard, path, f"{exc.strerror or exc} [{type(exc).__name__}]", exc)
    # What differs from the manifest without an error being raised is tagged as the readers would raise it.
    return ShardCheck(shard, path, None if problem is None else f"{problem} [ManifestError]")


def _problem(
    directory: str, manifest: Manifest, shard: Shard, path: str, checksum: bool
) -> str | None:
    listing = shard_listing(manifest)
    with open_shard(
        directory, shard, format=manifest.format, compression=manifest.compression, listing=listing
    ) as reader:
        # Read to its end, the shard is checked against the count it is listed with: a ManifestError
        # (recordkit.io.manifest.shard_count_error) says how many it holds, who says otherwise,
        # and the remedy.
        for _ in reader:
            pass
    if checksum and shard.sha256 is not None and file_sha256(path)[1] != shard.sha256:
        return "its SHA-256 differs from the manifest's: the content changed"
    if shard.index is not None:
        return _index_problem(directory, manifest, shard, path)
    return None


def _index_problem(directory: str, manifest: Manifest, shard: Shard, path: str) -> str | None:
    assert shard.index is not None
    index_path = shard_path(directory, dataclasses.replace(shard, path=shard.index.path))
    opener = require_fsspec().open if is_url(index_path) else open
    try:
        with opener(index_path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return f"its index {shard.index.path} is missing (reading it at random will scan it)"
    if hashlib.sha256(data).hexdigest() != shard.index.sha256:
        return f"its index {shard.index.path} differs from the one the manifest recorded"
    if data != format_index(scan_offsets(path, format=manifest.format)):
        return f"its index {shard.index.path} does not describe the file"
    return None


# -- repairing a dataset in place ---------------------------------------------------------------------

DAMAGED_SUFFIX = ".damaged"
"""A damaged shard is kept aside as ``.<name>.damaged`` (hidden: no reader of the directory takes it)."""


@dataclasses.dataclass(frozen=True)
class ShardRepair:
    """What :func:`repair_dataset` did to one shard that failed its check.

    Attributes
    ----------
    check
        The failed check.
    action
        ``"salvaged"`` (the intact records were copied into a new shard under the same name),
        ``"described"`` (the records were intact: only the manifest entry and the index were rewritten), or
        ``"missing"`` (nothing to repair from: the entry is kept, and reading still reports the shard).
    shard
        The new manifest entry (the old one when ``action`` is ``"missing"``).
    kept
        Where the damaged original was moved (``.<name>.damaged``), or ``None``.
    report
        The salvage report (records recovered, byte ranges skipped), or ``None``.
    """

    check: ShardCheck
    action: str
    shard: Shard
    kept: str | None = None
    report: Any = None


def repair_dataset(
    directory: str | os.PathLike[str], *, checksum: bool = True
) -> tuple[list[ShardCheck], list[ShardRepair]]:
    """Check a dataset directory against its manifest and repair, in place, every shard that fails.

    A shard whose records are damaged is salvaged (:func:`recordkit.recover.salvage`): its intact records
    are written to a new file under the shard's name, and the original is kept aside as
    ``.<name>.damaged`` (a hidden name, which recordkit, Ray, Spark and Dask pass by; delete it once you
    no longer need it). A shard whose records are intact but which differs from its entry (another tool
    rewrote it, or its index is stale) keeps its bytes. Either way its sidecar index is rebuilt when the
    manifest recorded one, and its entry is described anew (record count, size, SHA-256, index, the same
    split). The manifest is then rewritten, atomically, so ``recordkit.open(directory)`` reads the intact
    records with no further step. A missing shard cannot be repaired: its entry stays, and reading the
    dataset still reports it.

    Parameters
    ----------
    directory
        A local dataset directory with a ``_recordkit_manifest.json``, or its manifest file.
    checksum
        Compare SHA-256 checksums when checking (as :func:`verify_dataset`), and record them.

    Returns
    -------
    tuple
        The checks of every shard (:func:`verify_dataset`'s, before the repair) and one
        :class:`ShardRepair` per shard that failed.

    Raises
    ------
    UnsupportedOperationError
        The directory is a tensorflow-datasets one (its ``dataset_info.json`` is TFDS's record, which
        recordkit does not rewrite), or remote.
    """
    path = os.fspath(directory)
    root, manifest = load_dataset(path)
    if shard_listing(manifest) is not None:
        raise UnsupportedOperationError(
            f"{path} is a tensorflow-datasets directory: its shards are listed by dataset_info.json, "
            "which only TFDS writes. Restore the shard, or prepare the dataset again with tfds "
            "(recordkit verify SHARD --salvage OUT copies one shard's intact records elsewhere)"
        )
    if "://" in root:
        raise UnsupportedOperationError(f"{path}: only a local dataset is repaired in place")
    checks = [_check(root, manifest, shard, checksum) for shard in manifest.shards]
    repairs = [_repair(root, manifest, check, checksum) for check in checks if not check.ok]
    if any(repair.action != "missing" for repair in repairs):
        new = {repair.check.shard.path: repair.shard for repair in repairs}
        shards = tuple(new.get(shard.path, shard) for shard in manifest.shards)
        target = path if path.endswith(".json") else os.path.join(root, MANIFEST_NAME)
        dataclasses.replace(manifest, shards=shards).save(target)
    return checks, repairs


def _repair(root: str, manifest: Manifest, check: ShardCheck, checksum: bool) -> ShardRepair:
    path, old = check.path, check.shard
    if not os.path.isfile(path):
        return ShardRepair(check, "missing", old)
    kept = report = None
    try:
        describe_shard(path, root=root, format=manifest.format, compression=manifest.compression)
    except CorruptRecordError:
        report, salvaged = _salvage(path, manifest)
        kept = _aside(path)
        try:  # a second name for the original, so that the shard's own name is replaced atomically
            os.link(path, kept)
        except OSError:  # a file system without hard links
            shutil.copy2(path, kept)
        os.replace(salvaged, path)
    for index_path in index_paths(path):  # they describe the old file
        with contextlib.suppress(FileNotFoundError):
            os.remove(index_path)
    if old.index is not None:
        write_index(path, format=manifest.format, hidden=True)
    shard, _, _ = describe_shard(
        path,
        root=root,
        format=manifest.format,
        compression=manifest.compression,
        split=old.split,
        checksum=checksum,
    )
    return ShardRepair(check, "salvaged" if kept else "described", shard, kept, report)


def _salvage(path: str, manifest: Manifest) -> tuple[Any, str]:
    """Write the intact records of ``path`` to a hidden file beside it; return the report and the file."""
    from recordkit.recover import scan

    directory, name = os.path.split(path)
    salvaged = os.path.join(directory, f".salvaged-{name}")
    with scan(
        path, format=manifest.format, compression=manifest.compression, warn=False
    ) as records:
        # The manifest's format and compression, whatever the name says: the shard's entry keeps them.
        with open_records(
            salvaged, "w", format=manifest.format, compression=manifest.compression or "none"
        ) as writer:
            writer.write_many(records)
        report = records.report
    return report, salvaged


def _aside(path: str) -> str:
    """A free hidden name beside ``path`` for its damaged original: ``.<name>.damaged`` (then ``-1``, ...)."""
    directory, name = os.path.split(path)
    first = os.path.join(directory, f".{name}{DAMAGED_SUFFIX}")
    later = (f"{first}-{number}" for number in itertools.count(1))
    return next(c for c in itertools.chain([first], later) if not os.path.lexists(c))
