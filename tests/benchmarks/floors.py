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
The floors and recordkit need no peer: when a peer is missing (TensorFlow not installed, the C++ ffrecord
not built), its part still runs without it and says why the peer is skipped. The CRC32C floors use the
CRC32C function recordkit itself uses (google-crc32c when installed).
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
        versus = f"{results[peer] / ns:>8.2f}x" if peer in results else f"{'-':>9}"
        print(f"{name:<34}{ns:>10.0f}{versus}")


def _peer(
    contenders: dict[str, Pass], peer: str, make: Callable[[], Pass], missing: str | None
) -> None:
    """Put the peer first among ``contenders``, or say why it is skipped (``missing``)."""
    if missing is not None:
        print(f"{peer} skipped: {missing}")
        return
    contenders[peer] = make()


def ffrecord_part(directory: str, count: int, rounds: int, missing: str | None = None) -> None:
    """Random ``read(256)`` of 1 KiB samples: the C++ ffrecord, recordkit and the floors."""
    import numpy as np

    import recordkit as rk
    from recordkit.compat.ffrecord import FileReader
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

    def peer() -> Pass:
        import ffrecord

        return batched(ffrecord.FileReader(path, check_data=True).read)

    peer_name = "ffrecord C++ read(256)"
    contenders: dict[str, Pass] = {}
    _peer(contenders, peer_name, peer, missing)
    contenders |= {
        "rk.open read(256)": batched(rk.open(path).read),
        "rk.open(zero_copy) read(256)": batched(rk.open(path, zero_copy=True).read),
        "recordkit.compat.ffrecord read(256)": batched(FileReader(path, check_data=True).read),
        "floor: pread": floor(lambda start, crc: pread(fd, SIZE, start)),
        "floor: pread + crc": floor(pread_crc),
        "floor: mmap copy + crc": floor(mmap_crc),
        "floor: view + crc": floor(view_crc),
    }
    _print(
        f"FFRecord read(256), {count:,} x {SIZE} B samples in random order, batches held until the next",
        peer_name,
        _rounds(contenders, rounds),
        1.3,
    )


def tfrecord_part(directory: str, count: int, rounds: int, missing: str | None = None) -> None:
    """Sequential reads of 1 KiB records: TensorFlow's iterator, recordkit and the floors."""
    import numpy as np

    import recordkit as rk
    from recordkit.formats import _crc

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
    crc32c = _crc.crc32c
    print(f"CRC32C: {_crc.CRC32C_BACKEND}")
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

    def peer() -> Pass:
        import tensorflow as tf

        return iterate(lambda: tf.compat.v1.io.tf_record_iterator(path))

    contenders: dict[str, Pass] = {}
    _peer(contenders, "tf_record_iterator", peer, missing)
    contenders |= {
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


def ffrecord_write_part(
    directory: str, count: int, rounds: int, missing: str | None = None
) -> None:
    """Writing 100 KiB samples: the C++ writer (given ``n``), recordkit without and with ``n``, the floors."""
    import numpy as np

    import recordkit as rk
    from recordkit.compat.ffrecord import FileWriter
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

    def peer() -> Pass:
        import ffrecord

        return written(with_n(ffrecord.FileWriter))

    peer_name = "ffrecord C++ FileWriter (n given)"
    contenders: dict[str, Pass] = {}
    _peer(contenders, peer_name, peer, missing)
    contenders |= {
        "rk.open(path, 'w') (no n)": written(without_n),
        "recordkit.compat.ffrecord FileWriter (n)": written(with_n(FileWriter)),
        "floor: crc + write": written(crc_and_write),
        "floor: crc + write + copy (no n)": written(crc_write_and_copy),
    }
    _print(
        f"FFRecord write, {count:,} x {size} B samples; without n the header's size is unknown until the end",
        peer_name,
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
    parser.add_argument("--peer-missing", metavar="WHY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    parts = args.part or list(PARTS)
    if args.in_process:
        directory = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            for part in parts:
                print(f"\n== {part}: --count {args.count:,}, medians of {args.rounds} rounds")
                PARTS[part](directory, args.count, args.rounds, args.peer_missing)
        finally:
            for name in os.listdir(directory):
                os.remove(os.path.join(directory, name))
            os.rmdir(directory)
        return
    import reference_ffrecord

    for part in parts:
        env = dict(os.environ)
        missing = None
        if part == "tfrecord" and importlib.util.find_spec("tensorflow") is None:
            missing = "TensorFlow is not installed"
        if part.startswith("ffrecord"):
            pythonpath, why = reference_ffrecord.build(build=not args.no_build)
            if pythonpath is None:
                missing = why
            else:
                env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [pythonpath, env.get("PYTHONPATH")])
                )
        command = [sys.executable, __file__, "--in-process", "--part", part]
        command += ["--rounds", str(args.rounds), "--count", str(args.count)]
        if missing is not None:
            command += ["--peer-missing", missing]
        # Flushed first: the part's process writes to the same stdout.
        sys.stdout.flush()
        subprocess.run(command, check=True, env=env)


if __name__ == "__main__":
    main()
