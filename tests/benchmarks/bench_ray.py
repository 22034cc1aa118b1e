"""Ray Data: recordkit.integrations.ray side by side with Ray's own ``read_tfrecords`` / ``write_tfrecords``.

Run from the repository root (needs ``ray[data]`` and TensorFlow, which Ray's TFRecord reader imports)::

    python tests/benchmarks/bench_ray.py                 # 1 and 2 Ray workers, 3 rounds
    python tests/benchmarks/bench_ray.py --quick         # small data, 1 worker count, 1 round

Two payload sizes, both ``tf.train.Example`` messages holding one bytes feature ``data`` (so that Ray's own
path, which converts Examples to and from columns, handles them): about 1 KiB and about 100 KiB. Each worker
count runs in a fresh process with ``ray.init(num_cpus=N)``. In each process, per size:

* the dataset (``--shards`` blocks, materialized) is written by ``write_records`` from a column of
  serialized Examples, by ``write_records(encode="example")`` from the ``data`` column, and by Ray's
  ``write_tfrecords`` from the ``data`` column: ``--shards`` TFRecord files each;
* Ray's shards are read back by ``read_records`` (raw records, CRC checks on), by ``read_records`` with a
  spec (the ``data`` column parsed from the Examples, CRC checks on), by Ray's ``read_tfrecords`` (which
  checks no CRC), and by Ray's ``read_binary_files``, which loads each file whole as one row: no framing,
  no parsing, the floor that Ray's own machinery sets for reading these bytes. Every read asks for one
  block per file (``override_num_blocks=--shards``, what Ray's file readers do anyway when there are fewer
  files than its default parallelism, but without the block splitting it then adds), and is consumed to
  the end with ``iter_batches(batch_size=None, batch_format="pyarrow")`` (whole blocks, no re-batching).

Each contender runs once to warm up (Ray's reader imports TensorFlow in each worker), then the contenders take
turns, one timed pass each per round; figures are medians. "ratio" is recordkit's rate divided by Ray's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

KIB = 1024
SIZES = {"1 KiB": (1 * KIB, 100_000), "100 KiB": (100 * KIB, 1_000)}
QUICK_SIZES = {"1 KiB": (1 * KIB, 5_000), "100 KiB": (100 * KIB, 100)}


def _payloads(size: int, count: int) -> list[bytes]:
    """Deterministic payloads: a counter and a repeated pattern, so that no two are equal."""
    pattern = bytes(range(256)) * (size // 256 + 1)
    return [i.to_bytes(8, "little") + pattern[i % 256 : i % 256 + size - 8] for i in range(count)]


def _datasets(size: int, count: int, shards: int) -> tuple[Any, Any]:
    """The same Examples as a column of serialized records and as a ``data`` column, materialized."""
    import pyarrow as pa
    import ray

    import recordkit as rk

    payloads = _payloads(size, count)
    records = [rk.encode_example({"data": payload}) for payload in payloads]
    serialized = ray.data.from_arrow(
        [pa.table({"bytes": pa.array(records[i::shards], pa.binary())}) for i in range(shards)]
    ).materialize()
    columns = ray.data.from_arrow(
        [pa.table({"data": pa.array(payloads[i::shards], pa.binary())}) for i in range(shards)]
    ).materialize()
    return serialized, columns


def _consume(dataset: Any) -> int:
    batches = dataset.iter_batches(batch_size=None, batch_format="pyarrow")
    return sum(batch.num_rows for batch in batches)


def _contenders(
    work: str, serialized: Any, columns: Any, count: int, shards: int
) -> dict[str, Any]:
    """Name -> (kind, recordkit or ray, a callable running one pass and returning its record count)."""
    import numpy as np
    import ray

    import recordkit as rk
    import recordkit.integrations.ray as rkray

    runs = {"n": 0}

    def fresh(name: str) -> str:
        runs["n"] += 1
        path = os.path.join(work, f"{name}-{runs['n']}")
        shutil.rmtree(path, ignore_errors=True)
        return path

    def rk_write() -> int:
        manifest = rkray.write_records(serialized, fresh("rk"), format="tfrecord")
        return sum(shard.records for shard in manifest.shards)

    def rk_write_encode() -> int:
        manifest = rkray.write_records(columns, fresh("rke"), format="tfrecord", encode="example")
        return sum(shard.records for shard in manifest.shards)

    def ray_write() -> int:
        columns.write_tfrecords(fresh("ray"))
        return count

    source = fresh("source")
    columns.write_tfrecords(source)
    files = sorted(os.path.join(source, name) for name in os.listdir(source))
    spec = {"data": rk.FixedLen((), np.object_)}
    blocks = {"override_num_blocks": shards}

    def floor() -> int:
        _consume(ray.data.read_binary_files(files, **blocks))
        return count  # one row per file

    return {
        "write": {
            "recordkit": rk_write,
            "recordkit encode='example'": rk_write_encode,
            "ray write_tfrecords": ray_write,
        },
        "read": {
            "recordkit": lambda: _consume(rkray.read_records(files, **blocks)),
            "recordkit features=": lambda: _consume(
                rkray.read_records(files, features=spec, **blocks)
            ),
            "ray read_tfrecords": lambda: _consume(ray.data.read_tfrecords(files, **blocks)),
            "floor: ray read_binary_files": floor,
        },
    }


def _time(run: Callable[[], int], expected: int) -> float:
    start = time.perf_counter()
    got = run()
    seconds = time.perf_counter() - start
    if got != expected:
        raise AssertionError(f"{got} records instead of {expected}")
    return seconds


def _child(cpus: int, shards: int, rounds: int, quick: bool) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    results: dict[str, Any] = {}
    work = tempfile.mkdtemp(
        prefix="bench-ray-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
    )
    try:
        for label, (size, count) in (QUICK_SIZES if quick else SIZES).items():
            serialized, columns = _datasets(size, count, shards)
            for case, contenders in _contenders(work, serialized, columns, count, shards).items():
                for run in contenders.values():
                    _time(run, count)  # warm-up
                samples: dict[str, list[float]] = {name: [] for name in contenders}
                for _ in range(rounds):
                    for name, run in contenders.items():
                        samples[name].append(_time(run, count))
                results[f"{case} {label}"] = {
                    "records": count,
                    "bytes": count * size,
                    "seconds": samples,
                }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        ray.shutdown()
    return results


def _report(cpus: int, results: dict[str, Any]) -> None:
    print(f"\n== {cpus} Ray worker(s) (ray.init(num_cpus={cpus})) ==")
    for case, result in results.items():
        medians = {name: statistics.median(s) for name, s in result["seconds"].items()}
        ray_name = next(name for name in medians if name.startswith("ray "))
        print(f"{case}:")
        for name, seconds in medians.items():
            rate = result["records"] / seconds
            mbps = result["bytes"] / seconds / 1e6
            ratio = "" if name.startswith("ray ") else f"  {medians[ray_name] / seconds:5.2f}x ray"
            print(f"  {name:28s} {rate / 1e3:8.1f}k rec/s {mbps:8.1f} MB/s{ratio}")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison for each worker count in a fresh process and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small data, 1 worker, 1 round")
    parser.add_argument("--json", help="also write the samples to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.workers, args.rounds = args.workers[:1], 1
    if args.child:
        results = _child(args.child, args.shards, args.rounds, args.quick)
        print("RESULT " + json.dumps(results))
        return 0
    report = {}
    for cpus in args.workers:
        command = [sys.executable, __file__, "--child", str(cpus), "--shards", str(args.shards)]
        command += ["--rounds", str(args.rounds)] + (["--quick"] if args.quick else [])
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            sys.stderr.write(done.stderr[-4000:])
            return 1
        report[cpus] = json.loads(lines[-1][len("RESULT ") :])
        _report(cpus, report[cpus])
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": sys.argv, "results": report}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
