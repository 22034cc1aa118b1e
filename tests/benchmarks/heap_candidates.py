"""The allocator candidates of docs/design.md, measured: batches of large records read and dropped in a loop.

Each candidate runs in a fresh process (glibc's thresholds are per process and cannot be reset)::

    python tests/benchmarks/heap_candidates.py            # 2,000 records of 100 KiB, 5 rounds

Candidates: ``glibc default`` (the threshold raise of :mod:`recordkit.support.heap` switched off), ``warm block``
(recordkit's choice: one 31 MiB block allocated and freed), ``mallopt`` (``M_TRIM_THRESHOLD`` set to
1 GiB through ctypes), and ``one buffer per batch`` (each batch read into one ``bytearray``, records
returned as ``memoryview`` slices of it). Loops: ``drop`` reads a batch and drops it at once; ``keep`` holds
each batch until the next one has been read, as a training loop does. Rates are payload GB/s, medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CANDIDATES = ("glibc default", "warm block", "mallopt", "one buffer per batch")


def _one_buffer_reader(path: str):  # type: ignore[no-untyped-def]
    """``read(indices)`` that fills one ``bytearray`` per batch and returns views into it."""
    import recordkit as rk

    reader = rk.open(path)
    frames = reader._frames[0]
    offsets, size = frames.offsets, frames.size
    fd = os.open(path, os.O_RDONLY)
    last = len(offsets) - 1

    def read(indices: list[int]) -> list[memoryview]:
        spans = [(offsets[i], offsets[i + 1] if i < last else size) for i in indices]
        buffer = bytearray(sum(end - start for start, end in spans))
        view = memoryview(buffer)
        records, at = [], 0
        for start, end in spans:
            piece = view[at : at + end - start]
            os.preadv(fd, (piece,), start)
            records.append(piece)
            at += end - start
        return records

    return read


def measure(candidate: str, path: str, count: int, rounds: int) -> dict[str, float]:
    """Rates of the drop and keep loops for one candidate (run in a fresh process)."""
    import numpy as np

    import recordkit as rk
    from recordkit.support import heap as _heap

    if candidate != "warm block":
        _heap._pending = False
    if candidate == "mallopt":
        import ctypes

        ctypes.CDLL(None).mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    read = _one_buffer_reader(path) if candidate == "one buffer per batch" else rk.open(path).read
    order = np.random.default_rng(1).permutation(count).tolist()
    batches = [order[i : i + 256] for i in range(0, count, 256)]
    total = os.path.getsize(path) - 12 - 12 * count

    def drop() -> float:
        began = time.perf_counter()
        for group in batches:
            read(group)
        return total / (time.perf_counter() - began) / 1e9

    def keep() -> float:
        began = time.perf_counter()
        held = None
        for group in batches:
            held = read(group)  # noqa: F841 - the previous batch is freed after the next is read
        return total / (time.perf_counter() - began) / 1e9

    drop(), keep()
    rates: dict[str, list[float]] = {"drop": [], "keep": []}
    for _ in range(rounds):
        rates["drop"].append(drop())
        rates["keep"].append(keep())
    return {loop: statistics.median(values) for loop, values in rates.items()}


def main() -> None:
    """Write the data, run each candidate in its own process, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--size", type=int, default=100 << 10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        candidate, path = args.measure
        print(json.dumps(measure(candidate, path, args.count, args.rounds)))
        return
    import numpy as np

    import recordkit as rk

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "large.ffr")
        blob = np.random.default_rng(0).bytes(args.count * args.size)
        with rk.open(path, "w") as writer:
            writer.write_many(blob[i * args.size : (i + 1) * args.size] for i in range(args.count))
        del blob
        print(
            f"{args.count:,} records of {args.size:,} bytes, read(256) random, medians of {args.rounds}"
        )
        print(f"{'candidate':<22} {'drop GB/s':>10} {'keep GB/s':>10}")
        for candidate in CANDIDATES:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--count",
                    str(args.count),
                    "--rounds",
                    str(args.rounds),
                    "--measure",
                    candidate,
                    path,
                ],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            rates = json.loads(done.stdout)
            print(f"{candidate:<22} {rates['drop']:>10.2f} {rates['keep']:>10.2f}")


if __name__ == "__main__":
    main()
