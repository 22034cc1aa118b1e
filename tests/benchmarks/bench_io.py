"""Contenders for the record-I/O benchmarks: sequential reads, random batched reads, writes, reader memory.

Every ``*_contender`` function returns a callable that does one timed pass and returns the number of records it
handled, or ``None`` when the library it needs is not installed. Functions for TensorFlow and vahidk
``tfrecord`` import their library themselves: the runner calls them only inside the worker process of that
library (the two register the same protobuf names and cannot share a process).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable

import numpy as np

Pass = Callable[[], int]

SUFFIX = {"tfrecord": ".tfrecord", "ffrecord": ".ffr", "ofrecord": ".ofrecord"}


def payloads(count: int, size: int, seed: int = 0) -> list[bytes]:
    """Return ``count`` deterministic pseudo-random payloads of ``size`` bytes."""
    blob = np.random.default_rng(seed).bytes(count * size)
    return [blob[i * size : (i + 1) * size] for i in range(count)]


def write_file(path: str, records: list[bytes]) -> None:
    """Write ``records`` with recordkit in the format named by the suffix of ``path``."""
    import recordkit as rk

    with rk.open(path, "w") as writer:
        writer.write_many(records)


def random_batches(count: int, batch: int, seed: int = 1) -> list[list[int]]:
    """A seeded permutation of ``range(count)`` cut into batches: every record is read once per pass."""
    order = np.random.default_rng(seed).permutation(count).tolist()
    return [order[i : i + batch] for i in range(0, count, batch)]


def _drain(iterable: object) -> int:
    count = 0
    for _ in iterable:  # type: ignore[attr-defined]
        count += 1
    return count


# -- sequential reading ----------------------------------------------------------------------------


def recordkit_read(path: str, check_crc: bool = True, zero_copy: bool = False) -> Pass:
    """Iterate over every record with ``recordkit.open`` (opened once per pass)."""
    import recordkit as rk

    def run() -> int:
        with rk.open(path, check_crc=check_crc, zero_copy=zero_copy) as reader:
            return _drain(reader)

    return run


def struct_loop_ofrecord(path: str) -> Pass:
    """The floor for OFRecord in Python: a bare ``mmap`` + ``struct.unpack_from`` loop, no checks at all."""
    unpack = struct.Struct("<q").unpack_from

    def run() -> int:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            size = len(buffer)
            pos = count = 0
            while pos < size:
                (length,) = unpack(buffer, pos)
                pos += 8
                _ = buffer[pos : pos + length]
                pos += length
                count += 1
            return count

    return run


def tf_record_iterator(path: str) -> Pass | None:
    """TensorFlow's C++ record reader behind ``tf.compat.v1.io.tf_record_iterator`` (checks CRCs)."""
    try:
        import tensorflow as tf
    except ImportError:
        return None

    def run() -> int:
        return _drain(tf.compat.v1.io.tf_record_iterator(path))

    return run


def tf_data_loop(path: str, limit: int) -> Pass | None:
    """An eager Python loop over ``tf.data.TFRecordDataset`` (first ``limit`` records: it is slow)."""
    try:
        import tensorflow as tf
    except ImportError:
        return None

    def run() -> int:
        return _drain(tf.data.TFRecordDataset(path).take(limit))

    return run


def vahidk_read(path: str) -> Pass | None:
    """vahidk ``tfrecord.reader.tfrecord_iterator``: yields views of one reused buffer, checks no CRC."""
    try:
        from tfrecord.reader import tfrecord_iterator
    except ImportError:
        return None

    def run() -> int:
        return _drain(tfrecord_iterator(path))

    return run


# -- random access ----------------------------------------------------------------------------------


def recordkit_read_batches(path: str, count: int, batch: int, shuffled: bool = True) -> Pass:
    """``reader.read(indices)`` over batches of ``batch`` indexes covering every record once.

    The reader is opened (and a TFRecord/OFRecord offset index built) before timing starts.
    """
    import recordkit as rk

    reader = rk.open(path)
    if len(reader) != count:
        raise RuntimeError(f"{path} holds {len(reader)} records, expected {count}")
    if shuffled:
        groups = random_batches(count, batch)
    else:
        groups = [list(range(i, min(i + batch, count))) for i in range(0, count, batch)]
    read = reader.read

    def run() -> int:
        total = 0
        for group in groups:
            total += len(read(group))
        return total

    return run


def recordkit_index_scan(path: str) -> Pass:
    """Open a TFRecord/OFRecord file and count its records: the header-only scan behind random access."""
    import recordkit as rk

    def run() -> int:
        with rk.open(path) as reader:
            return len(reader)

    return run


# -- writing ----------------------------------------------------------------------------------------


def _output(directory: str, name: str) -> str:
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, name)


def recordkit_write(directory: str, count: int, size: int) -> Pass:
    """``write_many`` of in-memory payloads to a new TFRecord file (atomic rename on close)."""
    import recordkit as rk

    records = payloads(count, size, seed=2)
    path = _output(directory, "recordkit.tfrecord")

    def run() -> int:
        with rk.open(path, "w") as writer:
            writer.write_many(records)
        return len(records)

    return run


def tf_write(directory: str, count: int, size: int) -> Pass | None:
    """``tf.io.TFRecordWriter.write`` once per record."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    records = payloads(count, size, seed=2)
    path = _output(directory, "tensorflow.tfrecord")

    def run() -> int:
        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
        return len(records)

    return run


def vahidk_write(directory: str, count: int, size: int) -> Pass | None:
    """vahidk ``tfrecord.writer.TFRecordWriter`` framing of raw payloads.

    Its ``write`` takes a feature dict and serializes an Example first; to compare framing alone this
    runs the framing half of ``write`` (length, ``masked_crc`` of the length, payload, ``masked_crc`` of
    the payload) through the writer's own file and ``masked_crc``.
    """
    try:
        from tfrecord.writer import TFRecordWriter
    except ImportError:
        return None
    records = payloads(count, size, seed=2)
    path = _output(directory, "vahidk.tfrecord")
    pack_length = struct.Struct("<Q").pack
    masked_crc = TFRecordWriter.masked_crc

    def run() -> int:
        writer = TFRecordWriter(path)
        write = writer.file.write
        for record in records:
            length = pack_length(len(record))
            write(length)
            write(masked_crc(length))
            write(record)
            write(masked_crc(record))
        writer.close()
        return len(records)

    return run


# -- memory -----------------------------------------------------------------------------------------


def reader_memory(path: str, count: int) -> dict[str, float]:
    """Measure the Python heap a random-access reader over ``path`` holds (run in a fresh process).

    ``tracemalloc`` counts every Python allocation (the offset tables, the index scan's temporaries) but
    not the memory map, whose pages belong to the page cache. Returns the peak while opening, counting and
    reading a random batch, and what the open reader still holds afterwards, in bytes and per record.
    """
    import gc
    import tracemalloc

    import recordkit as rk

    indices = np.random.default_rng(3).integers(0, count, 256).tolist()
    # Warm up on a one-record file of the same format, so that lazy imports and first-use caches are not
    # counted as the reader's memory.
    warm = path + ".warm" + os.path.splitext(path)[1]
    write_file(warm, [b"warm"])
    with rk.open(warm) as reader:
        reader.read([0])
    os.remove(warm)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    reader = rk.open(path)
    if len(reader) != count:
        raise RuntimeError(f"{path} holds {len(reader)} records, expected {count}")
    batch = reader.read(indices)
    del batch
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    reader.close()
    return {
        "records": count,
        "peak_bytes": peak - base,
        "held_bytes": held - base,
        "peak_bytes_per_record": (peak - base) / count,
        "held_bytes_per_record": (held - base) / count,
    }
