"""Ray Data: how recordkit.integrations.ray's reads and writes scale with the number of Ray workers.

Run from the repository root (needs ``ray[data]``; TensorFlow is not needed, so this runs where only Ray
can be installed, e.g. a many-core machine without network)::

    python tests/benchmarks/bench_ray_scaling.py --workers 1 2 4 8 16

For each worker count, in a fresh process with ``ray.init(num_cpus=N)``: ``--shards`` blocks of serialized
``tf.train.Example`` records (about 1 KiB and about 100 KiB, as in ``bench_ray.py``) are written by
``write_records`` as TFRecord shards, then read back by ``read_records`` (CRC checks on) and by Ray's
``read_binary_files`` (each file whole as one row: the floor Ray's own machinery sets), each read counted
on the workers. Medians of
``--rounds`` timed passes after a warm-up; "x1" is the rate over the same contender's rate with one worker.
The side-by-side comparison with Ray's own TFRecord reader and writer is ``bench_ray.py``.
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
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_ray import _consume as _consume_in_driver
from bench_ray import _payloads, _time

KIB = 1024
SIZES = {"1 KiB": (1 * KIB, 400_000), "100 KiB": (100 * KIB, 4_000)}
QUICK_SIZES = {"1 KiB": (1 * KIB, 5_000), "100 KiB": (100 * KIB, 100)}


def _rows(batch: Any) -> Any:
    import pyarrow as pa

    return pa.table({"n": [batch.num_rows]})


def _consume_on_workers(dataset: Any) -> int:
    """Count the rows on the workers: each read task's blocks go to a fused row count, not to the driver.

    Pulling every block into the driver (``--consume driver``, as ``bench_ray.py`` and a training loop do)
    measures the driver's one process, which does not scale with the workers.
    """
    counted = dataset.map_batches(_rows, batch_format="pyarrow", batch_size=None)
    return int(counted.sum("n"))


def _child(cpus: int, shards: int, rounds: int, quick: bool, consume: str) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    work = tempfile.mkdtemp(
        prefix="bench-ray-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
    )
    try:
        sizes = QUICK_SIZES if quick else SIZES
        return {
            label: _measure(work, size, count, shards, rounds, consume)
            for label, (size, count) in sizes.items()
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        ray.shutdown()


def _measure(
    work: str, size: int, count: int, shards: int, rounds: int, consume: str
) -> dict[str, Any]:
    import pyarrow as pa
    import ray

    import recordkit as rk
    import recordkit.integrations.ray as rkray

    records = [rk.encode_example({"data": payload}) for payload in _payloads(size, count)]
    blocks = [pa.table({"bytes": pa.array(records[i::shards], pa.binary())}) for i in range(shards)]
    dataset = ray.data.from_arrow(blocks).materialize()
    del records, blocks
    runs = {"n": 0}
    _consume = _consume_in_driver if consume == "driver" else _consume_on_workers

    def write() -> int:
        runs["n"] += 1
        path = os.path.join(work, f"w{runs['n']}")
        manifest = rkray.write_records(dataset, path, format="tfrecord")
        shutil.rmtree(path, ignore_errors=True)
        return sum(shard.records for shard in manifest.shards)

    source = os.path.join(work, "source")
    rkray.write_records(dataset, source, format="tfrecord")
    files = sorted(os.path.join(source, n) for n in os.listdir(source) if n.endswith(".tfrecord"))
    contenders = {
        "write_records": (write, count),
        "read_records": (
            lambda: _consume(rkray.read_records(files, override_num_blocks=shards)),
            count,
        ),
        "floor: read_binary_files": (
            lambda: _consume(ray.data.read_binary_files(files, override_num_blocks=shards)),
            len(files),
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for run, expected in contenders.values():
        _time(run, expected)  # warm-up
    for _ in range(rounds):
        for name, (run, expected) in contenders.items():
            samples[name].append(_time(run, expected))
    shutil.rmtree(source, ignore_errors=True)
    return {"records": count, "bytes": count * size, "seconds": samples}


def _table(report: dict[int, dict[str, Any]]) -> None:
    base = min(report)
    for label in report[base]:
        print(f"\n{label}:")
        print(f"  {'contender':26s}" + "".join(f"{n:>16d}" for n in report) + "  (workers)")
        for name in report[base][label]["seconds"]:
            cells = []
            for cpus in report:
                result = report[cpus][label]
                seconds = statistics.median(result["seconds"][name])
                first = statistics.median(report[base][label]["seconds"][name])
                mbps = result["bytes"] / seconds / 1e6
                cells.append(f"{mbps:7.0f} MB/s x{first / seconds:4.1f}")
            print(f"  {name:26s}" + "".join(f"{c:>16s}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    """Run each worker count in a fresh process and print MB/s and the speed-up over one worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small data, 1 round")
    parser.add_argument(
        "--consume",
        choices=("workers", "driver"),
        default="workers",
        help="count the rows read on the workers, or pull every block into the driver",
    )
    parser.add_argument("--json", help="also write the samples to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = 1
    if args.child:
        result = _child(args.child, args.shards, args.rounds, args.quick, args.consume)
        print("RESULT " + json.dumps(result))
        return 0
    report: dict[int, dict[str, Any]] = {}
    for cpus in args.workers:
        command = [sys.executable, __file__, "--child", str(cpus), "--shards", str(args.shards)]
        command += ["--rounds", str(args.rounds), "--consume", args.consume]
        command += ["--quick"] if args.quick else []
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        report[cpus] = json.loads(line[len("RESULT ") :])
        print(f"{cpus} workers: " + line[len("RESULT ") :], flush=True)
    print(
        f"\n== recordkit.integrations.ray, {args.shards} TFRecord shards, CRC checks on; os.cpu_count() = {os.cpu_count()}"
    )
    _table(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
