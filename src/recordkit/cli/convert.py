"""``recordkit convert`` and ``recordkit reshard``: copy records between formats, optionally sharded and with
payload conversion; write a dataset again as M shards, optionally shuffled.

Records are copied byte for byte unless their payloads need converting: into an OFRecord file, Example
payloads become OFRecords (OneFlow reads nothing else); into a TFRecord file, OFRecord payloads become
Examples; ``--payload`` forces a target kind and ``--keep-payload`` copies every record as it is. Shards are contiguous runs of
the input (so reading the shards in order gives the input order back) whose sizes differ by at most one.
Shards written into a directory get their sidecar indexes and a manifest, as :class:`recordkit.ShardWriter`
writes them. A tensorflow-datasets directory given whole (no ``--split``) into a directory is converted to a
TFDS directory of the ``--to`` format by :func:`recordkit.datasets.tfds.convert_tfds`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
from collections.abc import Iterator

import recordkit as rk
from recordkit.cli.common import CliError, InputPath, expand_inputs, progress, resolve_input
from recordkit.cli.parquet import is_parquet, parquet_records, parquet_rows, write_parquet
from recordkit.cli.payload import convert_payload
from recordkit.datasets import (
    MANIFEST_NAME,
    Manifest,
    Shard,
    commit_manifest,
    prepare_output,
    reshard,
    write_shard,
)
from recordkit.datasets.resharding import shard_sizes
from recordkit.datasets.tfds import convert_tfds
from recordkit.decode.payloads import detect_payload
from recordkit.formats import format_for_path
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD
from recordkit.io import ResolvedSources
from recordkit.io.index import default_index_path
from recordkit.io.sources import resolve_format
from recordkit.io.tfds import is_tfds_directory

_COMPRESSION_SUFFIX = {"gzip": ".gz", "zlib": ".zlib"}
_PAYLOAD_SAMPLE = 100


_OLD_FIELDS = {"index": "shard", "count": "num_shards"}
"""The shard-name fields ``--pattern`` once had, and the ones that replace them (:class:`~recordkit.ShardWriter`'s
spelling)."""


def _outputs(args: argparse.Namespace, source_format: str) -> tuple[str, list[str]]:
    """Return the output format and the output paths.

    A directory's shards are named by ``--pattern``, else by the output format's
    :attr:`~recordkit.formats.base.RecordFormat.shard_pattern` (with the compression's suffix).
    """
    sharded = args.shards > 1 or args.pattern is not None
    directory = sharded or os.path.isdir(args.dst) or args.dst.endswith(("/", os.sep))
    if args.to or directory:
        fmt = rk.get_format(args.to or source_format)
    else:
        found = format_for_path(args.dst)
        if found is None:
            raise CliError(f"cannot tell the output format from {args.dst!r}: pass --to FORMAT")
        fmt = found[0]
    if not fmt.capabilities.writable:
        writable = ", ".join(rk.available_formats(writable=True))
        named = f"--to {args.to}" if args.to else args.dst
        raise CliError(
            f"{named}: recordkit reads {fmt.name} files but does not write them; convert to a format it "
            f"writes ({writable}): pass --to FORMAT, or name DST with its suffix (out.tfrecord)"
        )
    if not directory:
        return fmt.name, [args.dst]
    pattern, given = args.pattern, "--pattern"
    if pattern is None:
        pattern = fmt.shard_pattern + _COMPRESSION_SUFFIX.get(args.compression or "", "")
        given = f"shard_pattern of the {fmt.name} format"
    fields = "use the fields {shard} (from 0) and {num_shards}, e.g. part-{shard:05d}"
    try:
        names = [pattern.format(shard=i, num_shards=args.shards) for i in range(args.shards)]
    except KeyError as exc:
        old = _OLD_FIELDS.get(str(exc.args[0]))
        hint = f": {{{exc.args[0]}}} is now {{{old}}}" if old is not None else ""
        raise CliError(f"bad {given} {pattern!r} (unknown field {exc}{hint}): {fields}") from exc
    except (IndexError, ValueError) as exc:
        raise CliError(f"bad {given} {pattern!r} ({exc}): {fields}") from exc
    if len(set(names)) != len(names):
        raise CliError(f"{given} {pattern!r} gives the same file name to several shards")
    return fmt.name, [os.path.join(args.dst, name) for name in names]


def _records(paths: list[InputPath]) -> Iterator[bytes]:
    for path in paths:
        with path.open() as reader:
            yield from reader


def _sample(path: InputPath) -> tuple[list[bytes], str | None]:
    """The first records of ``path``, and the payload kind of its format."""
    with path.open() as reader:
        return list(itertools.islice(reader, _PAYLOAD_SAMPLE)), rk.get_format(reader.format).payload


def _payload_kinds(
    args: argparse.Namespace, sources: list[InputPath], fmt: str
) -> tuple[str, str] | None:
    """The (source, target) payload kinds to convert between, or ``None`` to copy records as they are.

    ``--payload`` names the target; otherwise it is the output format's payload kind
    (:attr:`~recordkit.formats.base.RecordFormat.payload`), and a source of the other message kind
    (Example or OFRecord) is converted to it. Payloads OneFlow could not read (SequenceExamples, raw
    bytes) are refused in an OFRecord output unless ``--keep-payload``.
    """
    target = None if args.keep_payload else args.payload or rk.get_format(fmt).payload
    if target is None:
        return None
    sample, prefer = _sample(sources[0])
    source = detect_payload(sample, prefer=prefer)
    if args.payload is not None:
        return source or target, target
    if source is None or source == target:
        return None
    if source in (EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD):
        return source, target
    if target == OFRECORD_PAYLOAD:
        what = "SequenceExamples" if source == "sequence_example" else "not Examples nor OFRecords"
        raise CliError(
            f"the records of {sources[0]} are {what}: OneFlow cannot read them in an OFRecord "
            "file, and only Example payloads convert to OFRecords; pass --keep-payload to copy "
            "them as they are"
        )
    return None


def _to_parquet(args: argparse.Namespace, sources: list[InputPath]) -> int:
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
    rows = write_parquet(args.dst, lambda: _records(sources), prefer=_sample(sources[0])[1])
    if not args.quiet:
        print(f"wrote {rows} rows to {args.dst}")
    return 0


def _write(
    args: argparse.Namespace, fmt: str, outputs: list[str], total: int, records: Iterator[bytes]
) -> None:
    """Write ``records`` into ``outputs``, contiguous runs whose sizes differ by at most one.

    Shards written into a directory get their sidecar indexes and a manifest; if one fails, those
    written before it are removed.
    """
    directory = len(outputs) > 1 or outputs[0] != args.dst
    if directory:
        # The old manifest goes now; the shards it named and the new one does not go at the commit.
        prepare_output(args.dst)
    root = args.dst if directory else None
    options = {"root": root, "format": fmt, "compression": args.compression, "index": directory}
    options["options"] = args.options
    entries: list[Shard] = []
    try:
        for path, size in zip(outputs, shard_sizes(total, len(outputs)), strict=True):
            entries.append(write_shard(itertools.islice(records, size), path, n=size, **options))
        if directory:
            compression = resolve_format(None, outputs[0], fmt, args.compression)[1]
            commit_manifest(args.dst, entries, format=fmt, compression=compression or "")
    except BaseException:
        for path in outputs[: len(entries)]:
            os.remove(path)
            with contextlib.suppress(FileNotFoundError):
                os.remove(default_index_path(path))
        raise


def _convert_tfds(args: argparse.Namespace) -> int:
    """Convert the TFDS directory ``args.src[0]`` into the TFDS directory ``args.dst`` (``--to``)."""
    given = {
        "--shards": args.shards > 1,
        "--pattern": args.pattern is not None,
        "--compression": args.compression not in (None, "none"),
        "--payload": args.payload is not None,
        "--keep-payload": args.keep_payload,
        "--lossy": args.lossy,
    }
    if any(given.values()):
        options = ", ".join(name for name, value in given.items() if value)
        raise CliError(
            f"{options}: a TFDS directory is converted shard for shard, its records unchanged and "
            "uncompressed (pass --split SPLIT to copy one split as records)"
        )
    if not args.to:
        raise CliError(
            f"{args.src[0]} is a TFDS directory: pass --to FORMAT (tfrecord, arrayrecord) to convert it "
            "into a TFDS directory, or --split SPLIT to copy one split"
        )
    if not args.force and os.path.isdir(args.dst) and os.listdir(args.dst):
        raise CliError(f"{args.dst} exists; pass --force to overwrite")
    manifest = convert_tfds(
        args.src[0], args.dst, format=args.to, options=args.options, overwrite=args.force
    )
    if not args.quiet:
        records = sum(shard.records for shard in manifest.shards)
        shards = f"{len(manifest.shards)} {manifest.format} shards ({', '.join(manifest.splits)})"
        print(f"wrote {records} records in {shards} to {args.dst}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    """Run ``recordkit convert``; return the exit status."""
    tfds = len(args.src) == 1 and args.split is None and is_tfds_directory(args.src[0])
    if tfds and format_for_path(args.dst) is None:
        return _convert_tfds(args)
    sources = expand_inputs(args.src, format=args.format, split=args.split, whole_datasets=True)
    if os.path.abspath(args.dst) in {os.path.abspath(src) for src in sources}:
        raise CliError(f"{args.dst} is also an input; write to another path")
    from_parquet = [is_parquet(path) for path in sources]
    if any(from_parquet) and not all(from_parquet):
        raise CliError("Parquet inputs cannot be mixed with record files")
    if is_parquet(args.dst) and not args.to:
        if all(from_parquet):
            raise CliError("the inputs are Parquet already: convert them to a record format")
        if not args.force and os.path.exists(args.dst):
            raise CliError(f"{args.dst} exists; pass --force to overwrite")
        return _to_parquet(args, sources)
    if all(from_parquet):
        if args.keep_payload:
            raise CliError("--keep-payload does not apply to Parquet inputs: rows have no payload")
        fmt, outputs = _outputs(args, "tfrecord")
        ofrecord = (args.payload or rk.get_format(fmt).payload) == OFRECORD_PAYLOAD
        total = parquet_rows(sources)
        records = parquet_records(sources, ofrecord=ofrecord, lossy=args.lossy)
    else:
        with sources[0].open() as reader:
            fmt, outputs = _outputs(args, reader.format)
        kinds = _payload_kinds(args, sources, fmt)
        total = sum(path.count_records() for path in sources)
        records = _records(sources)
        if kinds is not None:
            records = (
                convert_payload(record, *kinds, lossy=args.lossy, index=index)
                for index, record in enumerate(records)
            )
    manifest = [] if outputs == [args.dst] else [os.path.join(args.dst, MANIFEST_NAME)]
    existing = [path for path in manifest + outputs if not args.force and os.path.exists(path)]
    if existing:
        raise CliError(f"{existing[0]} exists; pass --force to overwrite")
    records = progress(records, total=total, desc="convert", enabled=not args.quiet)
    _write(args, fmt, outputs, total, records)
    if not args.quiet:
        where = outputs[0] if len(outputs) == 1 else f"{len(outputs)} {fmt} files in {args.dst}"
        print(f"wrote {total} records to {where}")
    return 0


def run_reshard(args: argparse.Namespace) -> int:
    """Run ``recordkit reshard``: :func:`recordkit.datasets.reshard` with a progress bar; return the status."""
    sources = resolve_input(
        args.src if len(args.src) > 1 else args.src[0], format=args.format, split=args.split
    )
    try:
        manifest = _reshard(args, sources)
    except FileExistsError as exc:
        if args.force:  # what --force does not replace: a file, a directory holding other files
            raise CliError(str(exc)) from None
        raise CliError(f"{args.dst} exists; pass --force to overwrite") from exc
    if not args.quiet:
        total = sum(shard.records for shard in manifest.shards)
        print(
            f"wrote {total} records to {len(manifest.shards)} {manifest.format} shards in {args.dst}"
        )
    return 0


def _reshard(args: argparse.Namespace, sources: ResolvedSources) -> Manifest:
    return reshard(
        sources,
        args.dst,
        shards=args.shards,
        shuffle=args.shuffle,
        seed=args.seed,
        format=args.to,
        compression=args.compression,
        options=args.options,
        overwrite=args.force,
        memory_bytes=args.memory << 20,
        progress=lambda records, total: progress(
            records, total=total, desc="reshard", enabled=not args.quiet
        ),
    )
