"""Contenders for the ArrayRecord write and read-back cases of the suite (run.py).

Writing: ``rk.open(path, "w", format="arrayrecord", options=...)`` + ``write_many`` against array_record's
``ArrayRecordWriter(path, options)`` + ``write`` per record, the same in-memory payloads, each pass a new file.
Reading: the same records written once by each (:func:`write_data`), each file read whole by recordkit
(``list(rk.open(path))``) and by array_record (``ArrayRecordReader(path).read_all()``), so that the rows show
whether a file recordkit wrote reads as fast as one array_record wrote. The array_record contenders run in
the ``array_record`` worker process, recordkit's in its own; an array_record that is not installed skips them.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable

Pass = Callable[[], int]
ZSTD3 = "group_size:1,zstd:3"  # TFDS's options, and array_record's defaults


def _array_record() -> tuple[type, type] | None:
    try:
        from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
    except ImportError:
        return None
    return ArrayRecordReader, ArrayRecordWriter


def _payloads(count: int, size: int) -> list[bytes]:
    from bench_io import payloads

    return payloads(count, size, seed=3)


def write_data(directory: str, count: int, size: int) -> dict[str, str]:
    """Write ``count`` records of ``size`` bytes with ``ZSTD3`` by recordkit and by array_record (if it is
    installed); return the paths by writer."""
    import recordkit as rk

    records = _payloads(count, size)
    paths = {"recordkit": os.path.join(directory, "recordkit-written.array_record")}
    with rk.open(paths["recordkit"], "w", format="arrayrecord", options=ZSTD3) as writer:
        writer.write_many(records)
    classes = _array_record()
    if classes is not None:
        paths["array_record"] = os.path.join(directory, "array_record-written.array_record")
        writer = classes[1](paths["array_record"], ZSTD3)
        for record in records:
            writer.write(record)
        writer.close()
    return paths


def recordkit_write(directory: str, count: int, size: int, options: str | None) -> Pass:
    """``rk.open(path, "w", format="arrayrecord", options=options)`` + ``write_many``."""
    import recordkit as rk

    records = _payloads(count, size)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "recordkit.array_record")

    def run() -> int:
        with rk.open(path, "w", format="arrayrecord", options=options) as writer:
            return writer.write_many(records)

    return run


def hash_floor(directory: str, count: int, size: int, options: str | None) -> Pass:
    """The floor of any writer built on recordkit's HighwayHash: hashing the chunk data of ``count``
    one-record chunks (each record compressed as ``options`` would), and nothing else.

    Riegeli stores a HighwayHash-64 of every chunk's data; the C++ writer computes it with SIMD,
    recordkit with numpy (:func:`~recordkit.formats._highwayhash.highwayhash64_many`). The data is
    compressed once, outside the timing.
    """
    from recordkit.formats._arrayrecord_write import ArrayRecordFrameWriter
    from recordkit.formats._highwayhash import highwayhash64_many

    records = _payloads(count, size)
    writer = ArrayRecordFrameWriter(io.BytesIO(), options)
    chunks = (
        [chunk[1] for chunk in writer._encode(records)] if writer.options.group_size == 1 else []
    )
    writer.abort()

    def run() -> int:
        for at in range(0, len(chunks), 4096):
            highwayhash64_many(chunks[at : at + 4096])
        return len(records)

    return run


def array_record_write(directory: str, count: int, size: int, options: str | None) -> Pass | None:
    """``ArrayRecordWriter(path, options)`` (``ArrayRecordWriter(path)`` without options) + ``write`` per
    record."""
    classes = _array_record()
    if classes is None:
        return None
    writer_class = classes[1]
    records = _payloads(count, size)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "array_record.array_record")

    def run() -> int:
        writer = writer_class(path) if options is None else writer_class(path, options)
        for record in records:
            writer.write(record)
        writer.close()
        return len(records)

    return run


def recordkit_read(path: str | None) -> Pass | str:
    """``list(rk.open(path))``: every record, default checks."""
    import recordkit as rk

    if path is None:
        return "array_record is not installed (it writes this file)"

    def run() -> int:
        with rk.open(path) as reader:
            return len(list(reader))

    return run


def array_record_read(path: str | None) -> Pass | str | None:
    """``ArrayRecordReader(path).read_all()``."""
    classes = _array_record()
    if classes is None or path is None:
        return None
    reader_class = classes[0]

    def run() -> int:
        reader = reader_class(path)
        count = len(reader.read_all())
        reader.close()
        return count

    return run
