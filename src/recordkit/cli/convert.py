"""``recordkit convert``: copy records between formats, optionally sharded and with payload conversion.

Records are copied byte for byte unless their payloads need converting: into an OFRecord file, Example
payloads become OFRecords (OneFlow reads nothing else); into a TFRecord file, OFRecord payloads become
Examples; ``--payload`` forces a target kind and ``--keep-payload`` copies every record as it is. Shards are contiguous runs of
the input (so reading the shards in order gives the input order back) whose sizes differ by at most one.
Shards written into a directory get their sidecar indexes and a manifest, as :class:`recordkit.ShardWriter`
writes them.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
from collections.abc import Iterator

import recordkit as rk
from recordkit.cli import parquet
from recordkit.cli.common import CliError, expand_inputs, open_reader, progress
from recordkit.cli.payload import convert_payload as convert_record
from recordkit.cli.payload import detect_payload
from recordkit.datasets.index import default_index_path
from recordkit.datasets.manifest import MANIFEST_NAME, Shard
from recordkit.datasets.shardfile import OpenShard
from recordkit.datasets.tasks import commit_manifest, prepare_output
from recordkit.formats import format_for_path

__all__ = ["DEFAULT_PATTERNS", "NATIVE_PAYLOADS", "run_convert", "shard_names", "shard_sizes"]

DEFAULT_PATTERNS = {
    "tfrecord": "part-{index:05d}-of-{count:05d}.tfrecord",
    "ofrecord": "part-{index}",
    "ffrecord": "PART_{index:05d}.ffr",
}
"""File names of shards written into a directory, per output format: TensorFlow's, OneFlow's and
ffrecord's usual naming. ``{index}`` counts from 0; ``{count}`` is the number of shards."""

_COMPRESSION_SUFFIX = {"gzip": ".gz", "zlib": ".zlib"}
_PAYLOAD_SAMPLE = 100


def shard_sizes(total: int, shards: int) -> list[int]:
    """Split ``total`` records into ``shards`` contiguous runs whose sizes differ by at most one.

    Examples
    --------
    >>> shard_sizes(10, 4)
    [3, 3, 2, 2]
    """
    base, extra = divmod(total, shards)
    return [base + (i < extra) for i in range(shards)]


def shard_names(pattern: str, count: int) -> list[str]:
    """Return the ``count`` file names ``pattern`` gives (``{index}`` and ``{count}`` filled in).

    Raises
    ------
    CliError
        The pattern does not format, or gives the same name twice.
    """
    try:
        names = [pattern.format(index=i, count=count) for i in range(count)]
    except (KeyError, IndexError, ValueError) as exc:
        raise CliError(
            f"bad --pattern {pattern!r} ({exc}): use the fields {{index}} and {{count}}, "
            "e.g. part-{index:05d}"
        ) from exc
    if len(set(names)) != len(names):
        raise CliError(f"--pattern {pattern!r} gives the same file name to several shards")
    return names


def _output_format(args: argparse.Namespace, directory: bool, source_format: str) -> str:
    if args.to:
        return str(rk.get_format(args.to).name)
    if not directory:
        found = format_for_path(args.dst)
        if found is not None:
            return str(found[0].name)
        raise CliError(f"cannot tell the output format from {args.dst!r}: pass --to FORMAT")
    return source_format


def _outputs(args: argparse.Namespace, source_format: str) -> tuple[str, list[str]]:
    """Return the output format and the output paths."""
    directory = (
        args.shards > 1
        or args.pattern is not None
        or os.path.isdir(args.dst)
        or args.dst.endswith(("/", os.sep))
    )
    fmt = _output_format(args, directory, source_format)
    if not directory:
        return fmt, [args.dst]
    pattern = args.pattern
    if pattern is None:
        pattern = DEFAULT_PATTERNS.get(fmt, "part-{index:05d}")
        pattern += _COMPRESSION_SUFFIX.get(args.compression or "", "")
    return fmt, [os.path.join(args.dst, name) for name in shard_names(pattern, args.shards)]


def _count(path: str, fmt: str | None) -> int:
    with open_reader(path, format=fmt) as reader:
        if reader.supports_random_access:
            return len(reader)
        return sum(1 for _ in reader)


def _records(paths: list[str], fmt: str | None) -> Iterator[bytes]:
    for path in paths:
        with open_reader(path, format=fmt) as reader:
            yield from reader


NATIVE_PAYLOADS = {"tfrecord": "example", "ofrecord": "ofrecord"}
"""The payload kind each output format is read with: TensorFlow parses TFRecord payloads as
``tf.train.Example`` and OneFlow parses OFRecord payloads as ``oneflow.OFRecord``. FFRecord has none (its
payloads are whatever the writer chose), so converting into FFRecord keeps the payloads."""


def _payload_kinds(
    args: argparse.Namespace, sources: list[str], fmt: str
) -> tuple[str, str] | None:
    """The (source, target) payload kinds to convert between, or ``None`` to copy records as they are.

    ``--payload`` names the target; otherwise it is the output format's native payload kind, and a
    source of the other message kind (Example or OFRecord) is converted to it. Payloads OneFlow could
    not read (SequenceExamples, raw bytes) are refused in an OFRecord output unless ``--keep-payload``.
    """
    if args.keep_payload:
        return None
    target = args.payload or NATIVE_PAYLOADS.get(fmt)
    if target is None:
        return None
    with open_reader(sources[0], format=args.format) as reader:
        sample = list(itertools.islice(reader, _PAYLOAD_SAMPLE))
        prefer = reader.format
    source = detect_payload(sample, prefer=prefer)
    if args.payload is not None:
        return source or target, target
    if source is None or source == target:
        return None
    if source in ("example", "ofrecord"):
        return source, target
    if target == "ofrecord":
        what = "SequenceExamples" if source == "sequence_example" else "not Examples nor OFRecords"
        raise CliError(
            f"the records of {sources[0]} are {what}: OneFlow cannot read them in an OFRecord "
            "file, and only Example payloads convert to OFRecords; pass --keep-payload to copy "
            "them as they are"
        )
    return None


def _parquet_source(
    args: argparse.Namespace, sources: list[str]
) -> tuple[str, list[str], int, Iterator[bytes]]:
    """The output format and paths, row count and records of Parquet inputs (rows to Examples or
    OFRecords)."""
    fmt, outputs = _outputs(args, "tfrecord")
    ofrecord = args.payload == "ofrecord" or (args.payload is None and fmt == "ofrecord")
    records = parquet.parquet_records(sources, ofrecord=ofrecord, lossy=args.lossy)
    return fmt, outputs, parquet.parquet_rows(sources), records


def _to_parquet(args: argparse.Namespace, sources: list[str]) -> int:
    """Write the records of ``sources`` as one Parquet table to ``args.dst``."""
    if args.shards > 1 or args.pattern is not None or args.compression not in (None, "none"):
        raise CliError(
            "a Parquet output is one file: --shards, --pattern and --compression do not apply"
        )
    if args.payload is not None or args.keep_payload:
        raise CliError(
            "--payload and --keep-payload do not apply to a Parquet output: Example and OFRecord "
            "payloads are parsed to columns"
        )
    with open_reader(sources[0], format=args.format) as reader:
        prefer = reader.format
    rows = parquet.write_parquet(args.dst, lambda: _records(sources, args.format), prefer=prefer)
    if not args.quiet:
        print(f"wrote {rows} rows to {args.dst}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    """Run ``recordkit convert``; return the exit status."""
    sources = expand_inputs(args.src, format=args.format, split=args.split, whole_datasets=True)
    if os.path.abspath(args.dst) in {os.path.abspath(src) for src in sources}:
        raise CliError(f"{args.dst} is also an input; write to another path")
    from_parquet = [parquet.is_parquet(path) for path in sources]
    if any(from_parquet) and not all(from_parquet):
        raise CliError("Parquet inputs cannot be mixed with record files")
    if parquet.is_parquet(args.dst) and not args.to:
        if all(from_parquet):
            raise CliError("the inputs are Parquet already: convert them to a record format")
        if not args.force and os.path.exists(args.dst):
            raise CliError(f"{args.dst} exists; pass --force to overwrite")
        return _to_parquet(args, sources)
    kinds = None
    if all(from_parquet):
        if args.keep_payload:
            raise CliError("--keep-payload does not apply to Parquet inputs: rows have no payload")
        fmt, outputs, total, records = _parquet_source(args, sources)
    else:
        with open_reader(sources[0], format=args.format) as reader:
            source_format = reader.format
        fmt, outputs = _outputs(args, source_format)
        kinds = _payload_kinds(args, sources, fmt)
        total = sum(_count(path, args.format) for path in sources)
        records = _records(sources, args.format)
    directory = len(outputs) > 1 or outputs[0] != args.dst
    if not args.force:
        existing = [path for path in outputs if os.path.exists(path)]
        if directory and os.path.exists(os.path.join(args.dst, MANIFEST_NAME)):
            existing.insert(0, os.path.join(args.dst, MANIFEST_NAME))
        if existing:
            raise CliError(f"{existing[0]} exists; pass --force to overwrite")
    sizes = shard_sizes(total, len(outputs))
    if directory:
        # The old manifest goes now; the shards it named and the new one does not go at the commit.
        prepare_output(args.dst)
    records = progress(records, total=total, desc="convert", enabled=not args.quiet)
    written: list[str] = []
    entries: list[Shard] = []
    compression = ""
    index = 0
    try:
        for path, size in zip(outputs, sizes, strict=True):
            n = size if fmt == "ffrecord" else None
            shard = OpenShard(
                path,
                root=args.dst if directory else None,
                format=fmt,
                compression=args.compression,
                n=n,
                index=directory,
            )
            compression = shard.compression
            try:
                for record in itertools.islice(records, size):
                    if kinds is not None:
                        record = convert_record(record, *kinds, lossy=args.lossy, index=index)
                    shard.write(record)
                    index += 1
            except BaseException:
                shard.abort()
                raise
            entries.append(shard.close())
            written.append(path)
        if directory:
            commit_manifest(args.dst, entries, format=fmt, compression=compression)
    except BaseException:
        for path in written:
            os.remove(path)
            with contextlib.suppress(FileNotFoundError):
                os.remove(default_index_path(path))
        raise
    if not args.quiet:
        where = outputs[0] if len(outputs) == 1 else f"{len(outputs)} {fmt} files in {args.dst}"
        print(f"wrote {total} records to {where}")
    return 0
