"""How fast *any* pure-Python reader could be, beside the peers: the floors behind the small-record targets.

For 1 KiB records the targets ask recordkit to be 1.3x the C++ ffrecord (``read(256)``, random order) and
1.5x TensorFlow's ``tf_record_iterator``. This script runs, in one process per peer and with the contenders
taking turns round by round, the peer, recordkit, and loops that do *less* than any correct reader must:
offsets and lengths computed beforehand, no bounds or header checks, no generator, no error paths. If such a
floor is already slower than the target, no pure-Python reader built on the same calls can meet it::

    python tests/benchmarks/floors.py                  # every part, 7 rounds
    python tests/benchmarks/floors.py --part ffrecord  # needs the C++ ffrecord (reference_ffrecord.py)
    python tests/benchmarks/floors.py --part ffrecord-write

The floors, per record:

* ``pread``: one ``os.pread`` per record, nothing else (the minimum of a reader that does not map the file);
* ``pread + crc``: the same and the record's CRC compared (the minimum of a checked reader);
* ``mmap copy + crc``: a ``bytes`` slice of an ``mmap`` and its CRC (no system call per record);
* ``view + crc``: a ``memoryview`` slice of an ``mmap`` and its CRC (what ``zero_copy=True`` must do);
* ``slice + crc32c``: TFRecord payloads sliced out of a ``bytes`` holding the whole file, CRC32C compared;
* ``crc32c alone``: only google-crc32c's call on ready-made 1 KiB payloads;
* ``crc + write``: writing 100 KiB samples with their CRCs, the header's room reserved (what a writer
  given ``n`` must do);
* ``crc + write + copy (no n)``: the same into a spill file, then copied after the header inside the
  kernel (``os.copy_file_range``): the least a writer that holds no samples in memory must do without ``n``.

Each row prints ns per record and the peer's time divided by the row's (above 1: faster than the peer).
"""

from __future__ import annotations

import argparse
import importlib.util
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

Pass = Callable[[], int]
SIZE = 1024
BATCH = 256


def _rounds(contenders: dict[str, Pass], rounds: int) -> dict[str, float]:
    """Median ns per record of each contender; one warm-up pass, then one timed pass each per round."""
    for run in contenders.values():
        run()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            start = time.perf_counter_ns()
            count = run()
            samples[name].append((time.perf_counter_ns() - start) / count)
    return {name: statistics.median(values) for name, values in samples.items()}


def _print(title: str, peer: str, results: dict[str, float], target: float) -> None:
    print(f"\n{title} (target: {target}x {peer})")
    print(f"{'contender':<34}{'ns/record':>10}{'vs peer':>9}")
    for name, ns in results.items():
        print(f"{name:<34}{ns:>10.0f}{results[peer] / ns:>8.2f}x")


def ffrecord_part(directory: str, count: int, rounds: int) -> None:
    """Random ``read(256)`` of 1 KiB samples: the C++ ffrecord, recordkit and the floors."""
    import ffrecord
    import numpy as np

    import recordkit as rk
    from recordkit.ffrecord import FileReader
    from recordkit.formats._crc import crc32

    path = os.path.join(directory, "floor.ffr")
    rng = np.random.default_rng(0)
    blob = rng.bytes(count * SIZE)
    with rk.open(path, "w", format="ffrecord") as writer:
        writer.write_many(blob[i * SIZE : (i + 1) * SIZE] for i in range(count))
    order = rng.permutation(count).tolist()
    batches = [order[i : i + BATCH] for i in range(0, count, BATCH)]
    frames = rk.open(path)._frames[0]
    offsets, crcs = list(frames.offsets), list(frames.crcs)
    spans = [[(offsets[i], crcs[i]) for i in batch] for batch in batches]
    fd = os.open(path, os.O_RDONLY)
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapped)
    pread = os.pread

    def batched(read: Callable[[list[int]], list[object]]) -> Pass:
        def run() -> int:
            held = None
            for batch in batches:
                held = read(batch)
            del held
            return count

        return run

    def floor(one: Callable[[int, int], object]) -> Pass:
        def run() -> int:
            held = None
            for batch in spans:
                held = [one(start, crc) for start, crc in batch]
            del held
            return count

        return run

    def pread_crc(start: int, crc: int) -> bytes:
        data = pread(fd, SIZE, start)
        if crc32(data) != crc:
            raise AssertionError
        return data

    def mmap_crc(start: int, crc: int) -> bytes:
        data = mapped[start : start + SIZE]
        if crc32(data) != crc:
            raise AssertionError
        return data

    def view_crc(start: int, crc: int) -> memoryview:
        data = view[start : start + SIZE]
        if crc32(data) != crc:
            raise AssertionError
        return data

    contenders = {
        "ffrecord C++ read(256)": batched(ffrecord.FileReader(path, check_data=True).read),
        "rk.open read(256)": batched(rk.open(path).read),
        "rk.open(zero_copy) read(256)": batched(rk.open(path, zero_copy=True).read),
        "recordkit.ffrecord read(256)": batched(FileReader(path, check_data=True).read),
        "floor: pread": floor(lambda start, crc: pread(fd, SIZE, start)),
        "floor: pread + crc": floor(pread_crc),
        "floor: mmap copy + crc": floor(mmap_crc),
        "floor: view + crc": floor(view_crc),
    }
    _print(
        f"FFRecord read(256), {count:,} x {SIZE} B samples in random order, batches held until the next",
        "ffrecord C++ read(256)",
        _rounds(contenders, rounds),
        1.3,
    )


def tfrecord_part(directory: str, count: int, rounds: int) -> None:
    """Sequential reads of 1 KiB records: TensorFlow's iterator, recordkit and the floors."""
    import google_crc32c
    import numpy as np
    import tensorflow as tf

    import recordkit as rk

    path = os.path.join(directory, "floor.tfrecord")
    blob = np.random.default_rng(0).bytes(count * SIZE)
    with rk.open(path, "w") as writer:
        writer.write_many(blob[i * SIZE : (i + 1) * SIZE] for i in range(count))
    with open(path, "rb") as file:
        whole = file.read()
    frame = 16 + SIZE
    spans = [
        (at + 12, at + 12 + SIZE, struct.unpack_from("<I", whole, at + 12 + SIZE)[0])
        for at in range(0, len(whole), frame)
    ]
    payloads = [whole[start:end] for start, end, _ in spans]
    crc32c = google_crc32c.value
    delta = 0xA282EAD8

    def iterate(make: Callable[[], object]) -> Pass:
        def run() -> int:
            n = 0
            for _ in make():  # type: ignore[attr-defined]
                n += 1
            return n

        return run

    def slice_crc() -> int:
        for start, end, stored in spans:
            data = whole[start:end]
            crc = crc32c(data)
            if (((crc >> 15) | (crc << 17)) + delta) & 0xFFFFFFFF != stored:
                raise AssertionError
        return count

    def slice_only() -> int:
        for start, end, _ in spans:
            whole[start:end]
        return count

    def crc_alone() -> int:
        for data in payloads:
            crc32c(data)
        return count

    contenders = {
        "tf_record_iterator": iterate(lambda: tf.compat.v1.io.tf_record_iterator(path)),
        "rk.open iterate": iterate(lambda: rk.open(path)),
        "floor: slice + crc32c": slice_crc,
        "floor: slice, no check": slice_only,
        "floor: crc32c alone": crc_alone,
    }
    _print(
        f"TFRecord sequential read, {count:,} x {SIZE} B records, CRCs checked",
        "tf_record_iterator",
        _rounds(contenders, rounds),
        1.5,
    )


def ffrecord_write_part(directory: str, count: int, rounds: int) -> None:
    """Writing 100 KiB samples: the C++ writer (given ``n``), recordkit without and with ``n``, the floors."""
    import ffrecord
    import numpy as np

    import recordkit as rk
    from recordkit.ffrecord import FileWriter
    from recordkit.formats._crc import crc32

    size = 100 * SIZE
    count = max(1, count // 100)
    blob = np.random.default_rng(1).bytes(count * size)
    samples = [blob[i * size : (i + 1) * size] for i in range(count)]
    path = os.path.join(directory, "written.ffr")
    spill = os.path.join(directory, "spill.bin")

    def written(write: Callable[[], None]) -> Pass:
        def run() -> int:
            write()
            os.remove(path)
            return count

        return run

    def with_n(writer_class: Callable[[str, int], object]) -> Callable[[], None]:
        def write() -> None:
            writer: Any = writer_class(path, count)
            for sample in samples:
                writer.write_one(sample)
            writer.close()

        return write

    def without_n() -> None:
        with rk.open(path, "w", format="ffrecord") as writer:
            writer.write_many(samples)

    def crc_and_write() -> None:
        for sample in samples:
            crc32(sample)
        with open(path, "wb") as file:
            file.write(bytes(12 + 12 * count))
            file.writelines(samples)

    def crc_write_and_copy() -> None:
        for sample in samples:
            crc32(sample)
        with open(spill, "wb") as file:
            file.writelines(samples)
        with open(spill, "rb") as source, open(path, "wb") as target:
            target.write(bytes(12 + 12 * count))
            target.flush()
            start, total, done = target.tell(), count * size, 0
            while done < total:
                done += os.copy_file_range(
                    source.fileno(), target.fileno(), total - done, done, start + done
                )
        os.remove(spill)

    contenders = {
        "ffrecord C++ FileWriter (n given)": written(with_n(ffrecord.FileWriter)),
        "rk.open(path, 'w') (no n)": written(without_n),
        "recordkit.ffrecord FileWriter (n)": written(with_n(FileWriter)),
        "floor: crc + write": written(crc_and_write),
        "floor: crc + write + copy (no n)": written(crc_write_and_copy),
    }
    _print(
        f"FFRecord write, {count:,} x {size} B samples; without n the header's size is unknown until the end",
        "ffrecord C++ FileWriter (n given)",
        _rounds(contenders, rounds),
        1.0,
    )


PARTS = {
    "ffrecord": ffrecord_part,
    "ffrecord-write": ffrecord_write_part,
    "tfrecord": tfrecord_part,
}


def main() -> None:
    """Run the parts, each in a process of its own (TensorFlow is not imported beside the C++ ffrecord)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=tuple(PARTS), action="append")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="skip the FFRecord parts unless the C++ ffrecord is built",
    )
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    parts = args.part or list(PARTS)
    if args.in_process:
        directory = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            for part in parts:
                print(f"\n== {part}: --count {args.count:,}, medians of {args.rounds} rounds")
                PARTS[part](directory, args.count, args.rounds)
        finally:
            for name in os.listdir(directory):
                os.remove(os.path.join(directory, name))
            os.rmdir(directory)
        return
    import reference_ffrecord

    for part in parts:
        env = dict(os.environ)
        if part == "tfrecord" and importlib.util.find_spec("tensorflow") is None:
            print("\ntfrecord part skipped: TensorFlow is not installed")
            continue
        if part.startswith("ffrecord"):
            pythonpath, why = reference_ffrecord.build(build=not args.no_build)
            if pythonpath is None:
                print(f"\n{part} part skipped: {why}")
                continue
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
        command = [sys.executable, __file__, "--in-process", "--part", part]
        command += ["--rounds", str(args.rounds), "--count", str(args.count)]
        subprocess.run(command, check=True, env=env)


if __name__ == "__main__":
    main()
