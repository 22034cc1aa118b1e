"""Dask benchmark: ``recordkit.integrations.dask`` writing and reading shards on a ``LocalCluster``, beside a peer reader.

Run from the repository root (needs ``dask[bag]`` and ``distributed``; vahidk ``tfrecord`` for the peer)::

    python tests/benchmarks/bench_dask.py            # 4 shards of 100 MB in all, per record size
    python tests/benchmarks/bench_dask.py --quick    # tiny data, 1 round: checks that it runs

For each record size (1 KiB and 100 KiB, deterministic pseudo-random payloads) and for a cluster of 1 and
then 2 worker processes (one thread each), it times:

* ``write``: ``recordkit.integrations.dask.write_records`` of a persisted bag (the records already in the workers'
  memory, one partition per shard) to TFRecord shards with their indexes, manifest included;
* ``read``: ``recordkit.integrations.dask.read_records`` of that directory (checksums checked, and not);
* ``peer read``: a bag of the same TFRecord files' records made with
  ``dask.bag.from_sequence(files, npartitions=len(files)).map_partitions(...)`` over vahidk's
  ``tfrecord.reader.tfrecord_iterator`` (which checks no checksum; its records are copied to ``bytes``
  because it yields views of one reused buffer).

Both bags hold each partition's records as a list, and every read then reduces on the workers (count and
bytes per partition): gathering every record in this process would time ``distributed``'s transfer of
many small objects, whichever library read them.
Contenders take turns, one pass each per round, after a warm-up pass; figures are medians. MB/s counts
payload bytes (10^6).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

KIB = 1024


def _payload(i: int, size: int) -> bytes:
    """A deterministic pseudo-random record of ``size`` bytes (made on the worker)."""
    import numpy as np

    return np.random.default_rng(i).bytes(size)


def _totals(records: list[Any]) -> list[tuple[int, int]]:
    return [(len(records), sum(len(record) for record in records))]


def _vahidk_partition(files: list[str]) -> list[bytes]:
    from tfrecord.reader import tfrecord_iterator

    return [bytes(view) for path in files for view in tfrecord_iterator(path)]


def _sum(parts: list[tuple[int, int]]) -> tuple[int, int]:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def contenders(out: str, bag: Any) -> dict[str, Callable[[], tuple[int, int]]]:
    """The timed passes: each returns (records, payload bytes) it handled."""
    import dask.bag as db

    import recordkit.integrations.dask as rkd

    def write() -> tuple[int, int]:
        manifest = rkd.write_records(bag, out, format="tfrecord")
        return manifest.records, sum(s.size for s in manifest.shards)

    def read(check_crc: bool) -> Callable[[], tuple[int, int]]:
        def run() -> tuple[int, int]:
            records = rkd.read_records(out, check_crc=check_crc)
            return _sum(records.map_partitions(_totals).compute())

        return run

    def peer() -> tuple[int, int]:
        files = sorted(
            os.path.join(out, name) for name in os.listdir(out) if name.endswith(".tfrecord")
        )
        plan = db.from_sequence(files, npartitions=len(files))
        return _sum(plan.map_partitions(_vahidk_partition).map_partitions(_totals).compute())

    found = {"write": write, "read": read(True), "read, check_crc=False": read(False)}
    try:
        import tfrecord  # noqa: F401
    except ImportError:
        print("  (vahidk tfrecord is not installed: no peer row)")
    else:
        found["peer read: vahidk tfrecord_iterator"] = peer
    return found


def measure(workers: int, sizes: dict[int, int], shards: int, rounds: int, root: str) -> list[dict]:
    """Start a cluster of ``workers`` processes; for each record size (and count), time every contender
    ``rounds`` times; stop the cluster."""
    import dask.bag as db
    from distributed import Client, LocalCluster

    rows = []
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        for size, count in sizes.items():
            bag = db.range(count, npartitions=shards).map(_payload, size).persist()
            out = os.path.join(root, f"{size}-{workers}")
            timed = _rounds(contenders(out, bag), rounds, count)
            shutil.rmtree(out)
            for name, median in timed.items():
                rows.append(
                    {
                        "workers": workers,
                        "size": size,
                        "case": name,
                        "records_per_s": count / median,
                        "mb_per_s": count * size / median / 1e6,
                    }
                )
    return rows


def _rounds(
    passes: dict[str, Callable[[], tuple[int, int]]], rounds: int, count: int
) -> dict[str, float]:
    """Run the passes in turns; round 0 warms up (and writes the files the readers read). Medians."""
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    for round_number in range(rounds + 1):
        for name, run in passes.items():
            start = time.perf_counter()
            records, _ = run()
            if round_number:
                seconds[name].append(time.perf_counter() - start)
            assert records == count, (name, records, count)
    return {name: statistics.median(samples) for name, samples in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny data, 1 round")
    parser.add_argument("--shards", type=int, default=4, help="shards (= partitions) per write")
    parser.add_argument(
        "--rounds", type=int, default=None, help="timed rounds (default 3; 1 quick)"
    )
    parser.add_argument(
        "--malloc-trim-threshold",
        type=int,
        default=None,
        help="MALLOC_TRIM_THRESHOLD_ for the workers (distributed's nannies set 65536 by default)",
    )
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    total = 2 << 20 if args.quick else 100_000_000
    import dask
    import distributed

    if args.malloc_trim_threshold is not None:
        key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
        dask.config.set({key: args.malloc_trim_threshold})

    print(
        f"dask {dask.__version__}, distributed {distributed.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; {args.shards} shards, {rounds} rounds; "
        "workers' MALLOC_TRIM_THRESHOLD_="
        f"{dask.config.get('distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_', None)}"
    )
    print(f"{'records':>8} {'workers':>7}  {'case':<38} {'records/s':>10} {'MB/s':>8}")
    sizes = {size: max(args.shards, total // size) for size in (1 * KIB, 100 * KIB)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as root:
        for workers in (1, 2):
            rows += measure(workers, sizes, args.shards, rounds, root)
    rows.sort(key=lambda row: (row["size"], row["workers"]))
    for row in rows:
        print(
            f"{row['size'] // KIB:>5} KiB {row['workers']:>7}  {row['case']:<38} "
            f"{row['records_per_s']:>10,.0f} {row['mb_per_s']:>8,.1f}"
        )


if __name__ == "__main__":
    main()
