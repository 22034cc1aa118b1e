"""Dask integration: read record files as a ``dask.bag.Bag``, write a bag as a dataset of shards.

Install it with ``pip install "recordkit[dask]"``::

    import recordkit as rk
    import recordkit.integrations.dask as rkd

    bag = rkd.read_records("data/train/", decode=rk.decode_example)
    examples = bag.filter(lambda example: example["label"][0] == 1)

    rkd.write_records(bag.map(rk.encode_example), "data/ones/", format="ffrecord")

With ``features=`` (a feature spec, as for Ray's reader), each item is one record parsed into a dict of
feature name -> value.

:func:`read_records` makes one partition per read range of :func:`recordkit.datasets.plan_reads`: one per
file, and several per large random-access shard. Nothing is read until the bag is computed, and then each
partition is read by the worker that computes it.

:func:`write_records` writes each partition as one shard (``part-00000.tfrecord``, ...) and, once every
partition is written, the manifest ``_recordkit_manifest.json`` that lists them. Each shard appears under
its name only when it is complete, so a worker that dies mid-write leaves no partial shard, and the task
that Dask retries writes it again. See ``docs/dask.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recordkit.support.extras import needs
from recordkit.support.moved import renamed_arguments

with needs("recordkit.integrations.dask", "Dask bags", "dask", "'dask[bag]'"):
    import dask
    import dask.bag

from recordkit.datasets import tasks
from recordkit.datasets.damage import OnError, check_on_error, plan_reads_skipping
from recordkit.datasets.ranges import ReadRange, absolute_path, plan_reads
from recordkit.datasets.shardfile import write_shard
from recordkit.formats import get_format
from recordkit.formats.base import normalize_compression
from recordkit.integrations._reading import blocks, check_features, parse_block
from recordkit.io.manifest import Manifest, Shard
from recordkit.io.writer import check_writer

if TYPE_CHECKING:
    from recordkit.decode.specs import Spec

__all__ = ["read_records", "write_records"]


def read_records(
    sources: Any,
    *,
    format: str | None = None,
    split: str | None = None,
    check_crc: bool = True,
    records_per_range: int | None = None,
    features: Mapping[str, Spec] | None = None,
    decode: Callable[[bytes], Any] | None = None,
    on_error: OnError = "raise",
    max_skipped: int | None = None,
) -> dask.bag.Bag:
    """Read record files as a bag: one partition per file, or per range of a large random-access shard.

    Parameters
    ----------
    sources
        What :func:`recordkit.open` accepts: files, directories, glob patterns, fsspec URLs, a dataset
        directory with a manifest, or a list of them. The workers must be able to open the same paths; a
        relative local path is relative to the calling process's working directory.
    format
        The record format, when suffixes and content do not tell.
    split
        The split of a dataset directory whose manifest has several.
    check_crc
        Verify each record's checksum while reading.
    records_per_range
        Split each random-access shard whose count is known (a manifest's shards, FFRecord files) into
        read ranges of at most this many records (as :func:`recordkit.datasets.plan_reads` does), each
        range one partition. Default: 100,000. TFRecord and OFRecord files without a
        manifest, and compressed files, are one partition each: their count is only known by reading them.
    features
        The feature spec (feature name -> :class:`~recordkit.FixedLen`, :class:`~recordkit.VarLen` or
        :class:`~recordkit.Image`), as for Ray's :func:`recordkit.integrations.ray.read_records`: the
        records are parsed on the worker, a block at a time, with :func:`recordkit.parse_examples`
        (:func:`recordkit.parse_ofrecords` for files the worker finds to be OFRecord files), and each item
        is one record's row, a dict of feature name -> value: a scalar, an array of the spec's shape, a 1-D
        array for a VarLen feature, a ``(H, W, channels)`` ``uint8`` array for an image. ``FixedLenSequence``
        raises ``TypeError``.
    decode
        A function applied to each record (``bytes``) on the worker, e.g. :func:`recordkit.decode_example`
        (not with ``features``). Default: the items are the records' bytes.
    on_error, max_skipped
        ``"skip"``: skip damaged records and go on at the next intact one, as
        :class:`recordkit.data.Dataset` does (see "Training through damage" in the docs); each partition
        warns about its damaged file with a :class:`~recordkit.errors.DataLossWarning` and raises the error
        once it has skipped more than ``max_skipped`` records and damaged ranges. Errors of ``decode``
        and of parsing ``features`` are not skipped.

    Returns
    -------
    dask.bag.Bag
        The records (or their rows, or what ``decode`` returns), in file order. Computing a partition raises recordkit's
        errors for damaged data (:class:`~recordkit.CorruptRecordError` and its subclasses, e.g.
        :class:`~recordkit.ManifestError` for a shard that changed since its manifest was written).

    Notes
    -----
    Listing the files, reading the manifest and reading FFRecord headers (to count their records) happen
    on the calling machine, when the bag is made; no record is read there.
    """
    check_on_error(on_error, max_skipped)
    if features is not None:
        if decode is not None:
            raise ValueError("pass features= or decode=, not both")
        check_features(features)
    planner = plan_reads if on_error == "raise" else plan_reads_skipping
    planned = planner(sources, format=format, split=split, records_per_range=records_per_range)
    ranges = [item.absolute() for item in planned]
    if not ranges:
        return dask.bag.from_sequence([], npartitions=1)
    plan = dask.bag.from_sequence(ranges, npartitions=len(ranges))
    skip = None if on_error == "raise" else max_skipped if max_skipped is not None else -1
    return plan.map_partitions(
        _read_partition, check_crc=check_crc, features=features, decode=decode, skip=skip
    )


def _read_partition(
    items: Sequence[ReadRange],
    *,
    check_crc: bool,
    features: Mapping[str, Spec] | None,
    decode: Callable[[bytes], Any] | None,
    skip: int | None = None,
) -> list[Any]:
    """Read the range(s) of one partition (there is one) into a list: records, rows or decoded records.

    ``skip``: ``None`` raises on damage, else damage is skipped up to that many (``-1``: no limit).
    """
    out: list[Any] = []
    for payload, block in blocks(items, check_crc=check_crc, skip=skip):
        if features is not None:
            columns = parse_block(block, features, payload).items()
            out.extend({name: value[i] for name, value in columns} for i in range(len(block)))
        else:
            out.extend(block if decode is None else map(decode, block))
    return out


@renamed_arguments(bag="data", path="dest")
def write_records(
    data: dask.bag.Bag,
    dest: str | os.PathLike[str],
    *,
    format: str,
    compression: str | None = None,
    level: int | None = None,
    options: str | None = None,
    encode: Callable[[Any], Any] | None = None,
    prefix: str = "part",
    index: bool = True,
    split: str | None = None,
    schema: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    fsync: bool = False,
    compute: bool = True,
) -> Any:
    """Write a bag as a dataset directory: one shard per partition, then the manifest.

    Parameters
    ----------
    data
        The bag of records: ``bytes`` (or bytes-like objects, or protobuf messages), or items that
        ``encode`` turns into them.
    dest
        The dataset directory (a local path or an fsspec URL), created if missing. The workers must be able
        to write there; a relative local path is relative to the calling process's working directory.
    format, compression, level, options
        As for :func:`recordkit.open` in mode ``"w"`` (``options``: a format's writer option string,
        ArrayRecord's ``"group_size:1,zstd:3"``), checked here before any task runs.
    encode
        A function applied to each item on the worker, returning the record, e.g.
        :func:`recordkit.encode_example`.
    prefix
        Partition ``i`` is written to ``<dest>/<prefix>-<i:05d><suffix>``
        (:func:`recordkit.datasets.task_shard_path`).
    index
        Also write the sidecar offset index of each uncompressed TFRecord or OFRecord shard.
    split
        The split every shard belongs to, recorded in the manifest.
    schema, metadata
        JSON objects stored in the manifest.
    fsync
        Flush each shard and the manifest to stable storage.
    compute
        Write now and return the manifest; with ``False``, return a ``dask.delayed`` object that does the
        whole write when it is computed (and then returns the manifest).

    Returns
    -------
    Manifest or dask.delayed.Delayed
        The manifest written, which lists every shard once, in partition order.

    Notes
    -----
    A manifest already in the directory is deleted before the first shard is written, and the new one is
    written only after every partition has been written. If a partition fails for good (its ``encode``
    raises, say), no manifest is written; the shards of the partitions that succeeded stay in the
    directory, unlisted. Once the new manifest is written, the shards (and indexes) that the earlier
    write's manifest named and the new one does not (it had more partitions) are deleted, so other tools
    reading every file of the directory see only the new dataset; files no manifest named are never
    touched.
    """
    directory = absolute_path(dest)
    fmt = get_format(format)
    comp = normalize_compression(compression or "")
    check_writer(fmt.name, compression=comp, level=level, options=options)
    settings = {"format": fmt.name, "compression": comp, "level": level, "options": options}
    settings.update(index=index, split=split, fsync=fsync)
    ready = dask.delayed(tasks.prepare_output, pure=False)(directory)
    entries = [
        dask.delayed(_write_partition, pure=False)(
            part, ready, number, encode=encode, prefix=prefix, options=settings
        )
        for number, part in enumerate(data.to_delayed())
    ]
    manifest = dask.delayed(_commit, pure=False)(
        entries, ready, format=fmt.name, compression=comp, schema=schema, metadata=metadata
    )
    return manifest.compute() if compute else manifest


def _write_partition(
    records: Sequence[Any],
    directory: str,
    number: int,
    *,
    encode: Callable[[Any], Any] | None,
    prefix: str,
    options: Mapping[str, Any],
) -> Shard:
    """Write partition ``number`` to its shard, atomically; return the shard's manifest entry."""
    target = tasks.task_shard_path(
        directory,
        number,
        format=options["format"],
        compression=options["compression"],
        prefix=prefix,
    )
    items = records if encode is None else map(encode, records)
    return write_shard(items, target, root=directory, **options)


def _commit(entries: list[Shard], directory: str, **options: Any) -> Manifest:
    """Write the manifest of the shards of every partition (the write's last task)."""
    return tasks.commit_manifest(directory, entries, **options)
