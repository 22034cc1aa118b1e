"""Ray Data integration: read record files into a ``ray.data.Dataset``, write one back as shards.

* :func:`read_records` reads TFRecord, OFRecord and FFRecord files, directories, globs and dataset
  directories with a manifest, as rows of raw records (one ``bytes`` column) or, with a feature spec, as
  parsed columns. Large random-access shards are cut into several read tasks.
* :func:`write_records` writes one shard per write task, atomically, and the manifest once, when every
  task has finished.

Both are thin adapters over :mod:`recordkit.datasets.ranges` (planning, reading a range) and
:mod:`recordkit.datasets.tasks` (naming and committing shards), built on Ray's public extension points
(:class:`ray.data.Datasource` and :class:`ray.data.Datasink`). Needs ``pip install "recordkit[ray]"``.

Errors raised in a Ray task reach the caller wrapped by Ray: the exception raised by the Ray call is a
``ray.exceptions.RayTaskError`` whose class also derives from the original recordkit error class (so
``except recordkit.ChecksumError`` catches it), and :func:`recordkit_error` finds the original error in any
of Ray's wrappers.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from recordkit.datasets.damage import OnError, check_on_error, plan_reads_skipping
from recordkit.datasets.ranges import ReadRange, absolute_path, plan_reads
from recordkit.datasets.shardfile import write_shard
from recordkit.datasets.tasks import commit_manifest, prepare_output, task_shard_path
from recordkit.errors import RecordKitError
from recordkit.formats import get_format
from recordkit.integrations._reading import blocks, check_features, parse_block
from recordkit.io import is_url
from recordkit.io.manifest import Manifest, Shard
from recordkit.io.writer import check_writer
from recordkit.support.extras import needs
from recordkit.support.moved import renamed_arguments

with needs("recordkit.integrations.ray", "Ray Data", "ray", "'ray[data]>=2.9'"):
    import pyarrow as pa
    from ray.data import Datasink, Datasource, ReadTask, read_datasource
    from ray.data.block import BlockAccessor, BlockMetadata

if TYPE_CHECKING:
    import ray.data

    from recordkit.decode.specs import Spec

__all__ = ["RecordDatasink", "RecordDatasource", "read_records", "recordkit_error", "write_records"]

COLUMN = "bytes"
"""The column that holds the raw records, read or written."""


# -- reading -------------------------------------------------------------------------------------------


class RecordDatasource(Datasource):
    """A :class:`ray.data.Datasource` over record files; see :func:`read_records` for the parameters."""

    def __init__(
        self,
        sources: Any,
        *,
        format: str | None = None,
        split: str | None = None,
        features: Mapping[str, Spec] | None = None,
        check_crc: bool = True,
        records_per_range: int | None = None,
        column: str = COLUMN,
        on_error: OnError = "raise",
        max_skipped: int | None = None,
    ) -> None:
        check_on_error(on_error, max_skipped)
        self._skip = None if on_error == "raise" else max_skipped if max_skipped is not None else -1
        self._sources = sources
        self._format = format
        self._split = split
        self._features = dict(features) if features is not None else None
        if self._features is not None:
            check_features(self._features)
        self._check_crc = check_crc
        self._records_per_range = records_per_range
        self._column = column
        self._plans: dict[int, list[ReadRange]] = {}

    def _plan(self, min_ranges: int = 1) -> list[ReadRange]:
        if self._records_per_range is not None:
            min_ranges = 1
        if min_ranges not in self._plans:
            planner = plan_reads if self._skip is None else plan_reads_skipping
            planned = planner(
                self._sources,
                format=self._format,
                split=self._split,
                records_per_range=self._records_per_range,
                min_ranges=min_ranges,
            )
            self._plans[min_ranges] = [item.absolute() for item in planned]
        return self._plans[min_ranges]

    def get_name(self) -> str:
        """The name Ray shows for the read operator."""
        return "RecordKit"

    def estimate_inmemory_data_size(self) -> int | None:
        """The bytes of the files (or shards) to read: records take about as much room in memory."""
        sizes = [_range_bytes(item) for item in self._plan()]
        return None if None in sizes else sum(s for s in sizes if s is not None)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any = None,
    ) -> list[ReadTask]:
        """Cut the sources into at most ``parallelism`` read tasks (more when ``records_per_range`` asks).

        With ``records_per_range``, each planned range is a task. Otherwise random-access shards are cut so
        that there are about ``parallelism`` ranges, and consecutive ranges are grouped into that many
        tasks.
        """
        ranges = self._plan(max(1, parallelism))
        if self._records_per_range is not None:
            groups = [[item] for item in ranges]
        else:
            groups = _groups(ranges, max(1, parallelism))
        return [self._task(group, per_task_row_limit) for group in groups]

    def _task(self, group: list[ReadRange], limit: int | None) -> ReadTask:
        features, check_crc, column = self._features, self._check_crc, self._column
        skip = self._skip

        def read() -> Iterator[pa.Table]:
            for payload, batch in blocks(group, check_crc=check_crc, skip=skip):
                yield (
                    _raw_table(batch, column)
                    if features is None
                    else _parsed_table(batch, features, payload)
                )

        schema = pa.schema([(column, pa.binary())]) if features is None else None
        return _read_task(read, group, schema, limit)


def _read_task(
    read: Callable[[], Iterator[pa.Table]],
    group: list[ReadRange],
    schema: pa.Schema | None,
    limit: int | None,
) -> ReadTask:
    """A ReadTask with its metadata, for Ray before and after the schema left ``BlockMetadata`` (2.4x)."""
    counts = [item.records for item in group]
    sizes = [_range_bytes(item) for item in group]
    fields: dict[str, Any] = {
        "num_rows": None if None in counts else sum(c for c in counts if c is not None),
        "size_bytes": None if None in sizes else sum(s for s in sizes if s is not None),
        "exec_stats": None,
        "input_files": list(dict.fromkeys(item.path for item in group)),
    }
    if "schema" in {field.name for field in dataclasses.fields(BlockMetadata)}:
        return ReadTask(read, BlockMetadata(schema=schema, **fields))  # type: ignore[call-arg]
    return ReadTask(read, BlockMetadata(**fields), schema=schema, per_task_row_limit=limit)


def _groups(ranges: list[ReadRange], tasks: int) -> list[list[ReadRange]]:
    """Split ``ranges`` into at most ``tasks`` runs of consecutive ranges, of nearly equal length."""
    if not ranges:
        return []
    bounds = np.linspace(0, len(ranges), min(tasks, len(ranges)) + 1).round().astype(int)
    return [ranges[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _range_bytes(item: ReadRange) -> int | None:
    """The bytes a range occupies in its file: exact for whole files, proportional for parts."""
    if item.shard is not None:
        whole = item.shard.size
    elif is_url(item.path):
        return None
    else:
        whole = os.path.getsize(item.path)
    share = item.share()
    return None if share is None else round(whole * share)


def _binary_array(records: Sequence[bytes]) -> pa.Array:
    """An Arrow binary array of ``records``, built from two buffers (``pa.array`` is ~8x slower)."""
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    offsets = np.zeros(len(records) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    kind = pa.binary() if offsets[-1] < 2**31 else pa.large_binary()
    offsets = offsets.astype(np.int32) if kind == pa.binary() else offsets
    data = pa.py_buffer(b"".join(records))
    return pa.Array.from_buffers(kind, len(records), [None, pa.py_buffer(offsets), data])


def _raw_table(records: Sequence[bytes], column: str) -> pa.Table:
    return pa.table({column: _binary_array(records)})


# -- parsed columns ------------------------------------------------------------------------------------


def _parsed_table(
    records: list[bytes], features: Mapping[str, Spec], payload: str | None
) -> pa.Table:
    """Parse ``records`` into Arrow columns (:func:`~recordkit.integrations._reading.parse_block`)."""
    columns = parse_block(records, features, payload)
    return pa.table({name: _arrow_column(value) for name, value in columns.items()})


def _arrow_column(value: Any) -> pa.Array:
    """One parsed feature as an Arrow column: scalars plain, arrays as Ray tensors, Ragged as lists.

    Images of their own sizes (an ``Image`` spec without ``size``: a list of arrays) become a Ray tensor
    column of variable shape, even where a block's images happen to share one shape, so that every block
    has the same column type.
    """
    from recordkit.decode.specs import Ragged

    if isinstance(value, list):
        from ray.data.extensions import ArrowVariableShapedTensorArray

        return ArrowVariableShapedTensorArray.from_numpy(value)
    if isinstance(value, Ragged):
        assert isinstance(value.values, np.ndarray)  # Examples and OFRecords have one ragged level
        values = _flat_array(value.values)
        splits = value.row_splits
        if splits[-1] < 2**31:
            return pa.ListArray.from_arrays(pa.array(splits.astype(np.int32)), values)
        return pa.LargeListArray.from_arrays(pa.array(splits), values)
    if value.ndim == 1:
        return _flat_array(value)
    if value.dtype == object:  # bytes or str of a fixed shape: nested fixed-size lists
        flat = _flat_array(value.reshape(-1))
        for width in reversed(value.shape[1:]):
            flat = pa.FixedSizeListArray.from_arrays(flat, width)
        return flat
    block = BlockAccessor.batch_to_block({"value": value})
    return block.column("value").combine_chunks()


def _flat_array(values: np.ndarray[Any, Any]) -> pa.Array:
    if values.dtype != object:
        return pa.array(values)
    if len(values) and isinstance(values[0], str):
        return pa.array(values, pa.string())
    return _binary_array(values.tolist())


# -- writing -------------------------------------------------------------------------------------------


@renamed_arguments(path="dest", rows_per_shard="min_records")
class RecordDatasink(Datasink):  # type: ignore[type-arg]
    """A :class:`ray.data.Datasink` writing one shard per write task; see :func:`write_records`."""

    def __init__(
        self,
        dest: str | os.PathLike[str],
        *,
        format: str,
        compression: str = "",
        options: str | None = None,
        column: str = COLUMN,
        encode: Callable[[dict[str, Any]], Any] | str | None = None,
        prefix: str = "part",
        split: str | None = None,
        min_records: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        # Absolute: Ray's workers do not run in the driver's directory.
        self.path = absolute_path(dest)
        self.format = get_format(format).name
        self.compression = compression or ""
        self.options = options
        check_writer(self.format, compression=self.compression, options=options)
        self._column = column
        self._encode = _encoder(encode)
        self._prefix = prefix
        self._split = split
        self._min_records = min_records
        self._metadata = dict(metadata or {})
        self.manifest: Manifest | None = None

    def get_name(self) -> str:
        """The name Ray shows for the write operator."""
        return "RecordKit"

    @property
    def min_rows_per_write(self) -> int | None:
        """``min_records``: Ray gathers at least this many rows into each write task."""
        return self._min_records

    def on_write_start(self, schema: Any = None) -> None:
        """Ready the directory: create it, and delete an earlier write's manifest before shards change."""
        prepare_output(self.path)

    def write(self, blocks: Iterable[Any], ctx: Any) -> Shard | None:
        """Write this task's rows to its own shard, atomically; return the shard's entry."""
        target = task_shard_path(
            self.path,
            ctx.task_idx,
            format=self.format,
            compression=self.compression,
            prefix=self._prefix,
        )
        records = self._records(blocks)
        first = next(records, None)
        if first is None:
            return None
        return write_shard(
            itertools.chain([first], records),
            target,
            root=self.path,
            format=self.format,
            compression=self.compression,
            options=self.options,
            split=self._split,
        )

    def _records(self, blocks: Iterable[Any]) -> Iterator[Any]:
        for block in blocks:
            accessor = BlockAccessor.for_block(block)
            if self._encode is None:
                yield from _column_records(accessor.to_arrow(), self._column)
            else:
                yield from map(self._encode, accessor.iter_rows(public_row_format=True))

    def on_write_complete(self, write_result: Any) -> None:
        """Write the manifest of the shards every task returned, once."""
        shards = [shard for shard in write_result.write_returns if shard is not None]
        self.manifest = commit_manifest(
            self.path,
            shards,
            format=self.format,
            compression=self.compression,
            metadata=self._metadata,
        )


def _column_records(table: pa.Table, column: str) -> Iterator[Any]:
    if column not in table.column_names:
        raise KeyError(
            f"the dataset has no column {column!r} (it has {table.column_names}); name the column "
            "of records with column=, or pass encode="
        )
    for chunk in table.column(column).chunks:
        if not (pa.types.is_binary(chunk.type) or pa.types.is_large_binary(chunk.type)):
            raise TypeError(f"column {column!r} holds {chunk.type}, not binary records")
        yield from chunk.to_pylist()


def _encoder(encode: Callable[[dict[str, Any]], Any] | str | None) -> Callable[..., Any] | None:
    if encode is None or callable(encode):
        return encode
    from recordkit.decode.messages import encode_example, encode_ofrecord

    encoders = {"example": encode_example, "ofrecord": encode_ofrecord}
    if encode not in encoders:
        raise ValueError(f"encode must be a callable, 'example' or 'ofrecord', not {encode!r}")
    return encoders[encode]


# -- the entry points ----------------------------------------------------------------------------------


def read_records(
    sources: Any,
    *,
    format: str | None = None,
    split: str | None = None,
    features: Mapping[str, Spec] | None = None,
    check_crc: bool = True,
    records_per_range: int | None = None,
    override_num_blocks: int | None = None,
    column: str = COLUMN,
    on_error: OnError = "raise",
    max_skipped: int | None = None,
    **ray_options: Any,
) -> ray.data.Dataset:
    """Read record files into a Ray dataset.

    Parameters
    ----------
    sources
        What :func:`recordkit.open` accepts: files, directories, globs, fsspec URLs, a dataset directory
        with a manifest (or a tensorflow-datasets directory), or a list. Files are read on the Ray
        workers, which must be able to open them.
    format
        ``"tfrecord"``, ``"ofrecord"`` or ``"ffrecord"``, when suffixes and content do not tell.
    split
        A dataset directory's split.
    features
        The feature spec (feature name -> :class:`~recordkit.FixedLen`, :class:`~recordkit.VarLen` or
        :class:`~recordkit.Image`), named as in :func:`recordkit.parse_examples`. Without it, each row
        holds one record, as ``bytes``, in the column ``column``. With it, records are parsed per batch
        with :func:`recordkit.parse_examples` (:func:`recordkit.parse_ofrecords` for files the workers
        find to be OFRecord files) into one column per feature: scalars as plain columns, fixed shapes as
        Ray tensor columns, ``bytes`` and ``str`` of a fixed shape as fixed-size lists, VarLen features
        as Arrow lists (Ray's numpy batches show them as object arrays of 1-D arrays). Images are decoded
        on the workers into ``uint8`` arrays: with ``size``, a Ray tensor column of shape ``(height,
        width, channels)``; without, a Ray tensor column of variable shape, each row its image's own
        ``(H, W, channels)``. ``FixedLenSequence`` raises ``TypeError``.
    check_crc
        Verify every record's checksum.
    records_per_range
        Cut random-access shards (FFRecord files, and shards listed in a manifest) into read ranges of at
        most this many records (as :func:`recordkit.datasets.plan_reads` does), each range one read task.
        Default: about as many tasks as Ray's read parallelism.
    override_num_blocks
        Ray's read parallelism (the number of read tasks wanted), as for Ray's own readers.
    column
        The name of the column of raw records.
    on_error, max_skipped
        ``"skip"``: skip damaged records and go on at the next intact one, as
        :class:`recordkit.data.Dataset` does (see "Training through damage" in the docs); each read task
        warns about each damaged file with a :class:`~recordkit.errors.DataLossWarning` (in the worker's
        log) and raises the error once it has skipped more than ``max_skipped`` records and damaged
        ranges. Errors of parsing ``features`` are not skipped.
    **ray_options
        Passed to :func:`ray.data.read_datasource` (``concurrency``, ``num_cpus``, ``ray_remote_args``...).

    Returns
    -------
    ray.data.Dataset
        Lazy: files are read when the dataset is consumed, and errors surface then (see the module).

    Raises
    ------
    ManifestError
        The dataset's manifest is unreadable, or names another format (raised while planning, here).
    UnknownFormatError
        A file's format cannot be told, or the files mix formats or compressions (as for
        :func:`recordkit.open`).
    """
    source = RecordDatasource(
        sources,
        format=format,
        split=split,
        features=features,
        check_crc=check_crc,
        records_per_range=records_per_range,
        column=column,
        on_error=on_error,
        max_skipped=max_skipped,
    )
    dataset: ray.data.Dataset = read_datasource(
        source, override_num_blocks=override_num_blocks, **ray_options
    )
    return dataset


@renamed_arguments(ds="data", path="dest", rows_per_shard="min_records")
def write_records(
    data: ray.data.Dataset,
    dest: str | os.PathLike[str],
    *,
    format: str,
    compression: str | None = None,
    options: str | None = None,
    column: str = COLUMN,
    encode: Callable[[dict[str, Any]], Any] | str | None = None,
    prefix: str = "part",
    split: str | None = None,
    min_records: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    **ray_options: Any,
) -> Manifest:
    """Write a Ray dataset as a directory of shards with a manifest.

    Each write task writes its rows to ``dest/<prefix>-<task>.<suffix>`` (:func:`recordkit.datasets.
    task_shard_path`), atomically and with the sidecar index of a TFRecord or OFRecord shard; a task that
    is retried writes the same file again. Once every task has finished, the manifest
    (``_recordkit_manifest.json``) is written, naming each shard once. Tasks without rows write no shard.

    Parameters
    ----------
    data
        The Ray dataset to write.
    dest
        The directory (created if needed; a local path or an fsspec URL). A manifest an earlier write left
        there is deleted before any shard is written, so a write that fails leaves no manifest. Once the
        new manifest is written, the shards (and indexes) the old one named and the new one does not are
        deleted; other files in the directory are not touched.
    format, compression
        The shards' format and compression (``"gzip"``/``"zlib"``, TFRecord only).
    options
        The format's writer option string (ArrayRecord's ``"group_size:1,zstd:3"``), as for
        :func:`recordkit.open` in mode ``"w"``; checked here, before any task runs.
    column
        The binary column whose values are the records, when ``encode`` is not given.
    encode
        Make each record from its row (a dict of column -> value) instead: a callable returning bytes or a
        protobuf message, or ``"example"`` / ``"ofrecord"`` for :func:`recordkit.encode_example` /
        :func:`recordkit.encode_ofrecord` of the whole row.
    prefix
        The shard file names' prefix.
    split
        The split recorded for every shard.
    min_records
        Ray's ``min_rows_per_write``: each task (so each shard) gets at least this many rows, except the
        last. Ray cannot cap a shard, hence a minimum where :class:`~recordkit.ShardWriter` takes
        ``max_records``.
    metadata
        JSON values stored in the manifest.
    **ray_options
        Passed to :meth:`ray.data.Dataset.write_datasink` (``concurrency``, ``ray_remote_args``).

    Returns
    -------
    Manifest
        The manifest written.
    """
    sink = RecordDatasink(
        dest,
        format=format,
        compression=compression or "",
        options=options,
        column=column,
        encode=encode,
        prefix=prefix,
        split=split,
        min_records=min_records,
        metadata=metadata,
    )
    data.write_datasink(sink, **ray_options)
    assert sink.manifest is not None  # on_write_complete ran, or write_datasink raised
    return sink.manifest


def recordkit_error(error: BaseException) -> RecordKitError | None:
    """Return the recordkit error behind an exception raised by Ray, or ``None`` when there is none.

    Ray re-raises a task's exception as ``ray.exceptions.RayTaskError`` (whose ``cause`` is the
    original) and Ray Data may wrap that again; this follows ``cause``, ``__cause__`` and ``__context__``.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, RecordKitError) and not _is_ray_wrapper(current):
            return current
        pending.extend([getattr(current, "cause", None), current.__cause__, current.__context__])
    return None


def _is_ray_wrapper(error: BaseException) -> bool:
    return type(error).__module__.startswith("ray.")
