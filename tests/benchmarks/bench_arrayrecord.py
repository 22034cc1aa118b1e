"""Read ArrayRecord files with recordkit beside array_record's own reader, in one run.

Files are written once by array_record's ``ArrayRecordWriter`` into a temporary directory: ``--records``
records of 20 to 80 random bytes, with ``group_size:1`` and zstd (array_record's default options, and what
tensorflow-datasets writes: one record per chunk), and with ``group_size:65536`` and zstd (few large chunks).
For each file the contenders are timed on the same operations:

* ``open``: open the file and take its length (recordkit reads the postscript and the footer);
* ``read all``: every record in file order (recordkit: ``list(reader)``; array_record: ``read_all()``);
* ``r[i] x N``: ``--random`` records one by one at random indices (``reader[i]``; array_record: ``read([i])``);
* ``read(idx)``: the same indices in one call (``reader.read(indices)``; array_record: ``read(indices)``).

recordkit runs with its default checks (the header and data hashes, as Riegeli's reader checks), with the
data hashes turned off (``get_format("arrayrecord").check_data = False``) and with ``check_crc=False``. What each reads is
compared with array_record's before any timing. The contenders take turns, one timed pass each per round; the
figures are medians, the ratios each recordkit row's median time over array_record's.

Run: ``python tests/benchmarks/bench_arrayrecord.py [--records 200000] [--repeat 3] [--profile]``.
``--profile`` prints cProfile's top functions of one recordkit read-all pass per file instead of timing.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import recordkit as rk
from recordkit.formats import get_format

LAYOUTS = {
    "group_size:1,zstd": "group_size:1,zstd",
    "group_size:65536,zstd": "group_size:65536,zstd",
}
CHECKS = ("default", "check_data=False", "check_crc=False")


def write(path: str, records: list[bytes], options: str) -> str:
    """Write ``records`` with array_record's writer."""
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(path, options)
    for record in records:
        writer.write(record)
    writer.close()
    return path


@contextlib.contextmanager
def checks(mode: str) -> Iterator[bool]:
    """Set the data-hash switch for ``mode``; yield the ``check_crc`` to open with."""
    fmt: Any = get_format("arrayrecord")
    fmt.check_data = mode == "default"
    try:
        yield mode != "check_crc=False"
    finally:
        fmt.check_data = True


def recordkit_ops(path: str, mode: str, indices: list[int]) -> dict[str, Callable[[], Any]]:
    """The timed operations of recordkit in check mode ``mode``."""

    def opened() -> Any:
        with checks(mode) as crc:
            return rk.open(path, format="arrayrecord", check_crc=crc)

    def open_len() -> int:
        with opened() as reader:
            return len(reader)

    def read_all() -> list[bytes]:
        with opened() as reader:
            return list(reader)

    def one_by_one() -> list[bytes]:
        with opened() as reader:
            return [reader[i] for i in indices]

    def batch() -> list[bytes]:
        with opened() as reader:
            return list(reader.read(indices))

    return {"open": open_len, "read all": read_all, "r[i] x N": one_by_one, "read(idx)": batch}


def array_record_ops(path: str, indices: list[int]) -> dict[str, Callable[[], Any]]:
    """The same operations with array_record's ``ArrayRecordReader``."""
    from array_record.python.array_record_module import ArrayRecordReader

    def open_len() -> int:
        reader = ArrayRecordReader(path)
        n = int(reader.num_records())
        reader.close()
        return n

    def read_all() -> list[bytes]:
        reader = ArrayRecordReader(path)
        out = list(reader.read_all())
        reader.close()
        return out

    def one_by_one() -> list[bytes]:
        reader = ArrayRecordReader(path)
        out = [reader.read([i])[0] for i in indices]
        reader.close()
        return out

    def batch() -> list[bytes]:
        reader = ArrayRecordReader(path)
        out = list(reader.read(indices))
        reader.close()
        return out

    return {"open": open_len, "read all": read_all, "r[i] x N": one_by_one, "read(idx)": batch}


def profile(path: str) -> None:
    """Print cProfile's top functions of one default recordkit read-all pass."""
    ops = recordkit_ops(path, "default", [])
    profiler = cProfile.Profile()
    profiler.runcall(ops["read all"])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table per file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--random", type=int, default=2000, help="indices read at random")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(0)
    records = [rng.randbytes(rng.randrange(20, 81)) for _ in range(args.records)]
    indices = [rng.randrange(args.records) for _ in range(args.random)]
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in LAYOUTS.items():
            path = write(
                os.path.join(tmp, f"{name.replace(':', '')}.array_record"), records, options
            )
            size = os.path.getsize(path) / 1e6
            print(f"\n{name}: {args.records} records, {size:.1f} MB")
            if args.profile:
                profile(path)
                continue
            contenders = {"array_record": array_record_ops(path, indices)}
            for mode in CHECKS:
                contenders[f"recordkit {mode}"] = recordkit_ops(path, mode, indices)
            expected = {op: fn() for op, fn in contenders["array_record"].items()}
            for label, ops in contenders.items():  # warm-up, and the results compared
                for op, fn in ops.items():
                    if fn() != expected[op]:
                        print(f"{label} {op}: differs from array_record", file=sys.stderr)
                        return 1
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.repeat):
                for label, ops in contenders.items():
                    for op, fn in ops.items():
                        start = time.perf_counter()
                        fn()
                        times.setdefault((label, op), []).append(time.perf_counter() - start)
            ops_names = list(contenders["array_record"])
            print(f"  {'':26}" + "".join(f"{op:>22}" for op in ops_names))
            base = {op: statistics.median(times["array_record", op]) for op in ops_names}
            for label in contenders:
                cells = []
                for op in ops_names:
                    t = statistics.median(times[label, op])
                    ratio = "" if label == "array_record" else f" ({t / base[op]:.1f}x)"
                    cells.append(f"{t * 1e3:.1f} ms{ratio}".rjust(22))
                print(f"  {label:26}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
