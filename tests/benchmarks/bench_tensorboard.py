"""Measure scalars from one TensorBoard event file to a DataFrame: recordkit against tbparse and EventAccumulator.

The event file holds ``--scalars`` legacy scalar summaries (``simple_value``, as PyTorch's and tensorboardX's
``SummaryWriter.add_scalar`` write them) under two tags, written once into a temporary directory by
``recordkit.tensorboard``'s own protobuf classes. Each contender turns the whole file into a pandas DataFrame
of step, wall time and value per tag:

* ``recordkit``: ``recordkit.tensorboard.scalars(path)`` (checksums checked);
* ``tbparse``: ``tbparse.SummaryReader(path, extra_columns={"wall_time"}).scalars``;
* ``EventAccumulator``: tensorboard's ``EventAccumulator(path, size_guidance={"scalars": 0})`` (0 keeps every
  scalar), ``Reload()``, then ``Scalars(tag)`` of each tag into one DataFrame.

The values are compared (the same (tag, step, wall_time, value) rows from every contender) before any timing.
The contenders take turns, one timed pass each per round, so that changes in machine load fall on all of them
alike; the figures are medians, and the ratios printed are each peer's median time over recordkit's.

Run: ``python tests/benchmarks/bench_tensorboard.py [--scalars 1000000] [--repeat 3]``. The target: at least
10x tbparse and 3x EventAccumulator at 10**6 scalars.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import recordkit as rk
from recordkit._proto.tensorboard import event_pb2

TAGS = ("loss", "accuracy")


def write_events(directory: str, count: int) -> str:
    """An event file of ``count`` scalars, the tags alternating, as PyTorch's SummaryWriter writes them."""
    path = os.path.join(directory, "events.out.tfevents.1700000000.bench.1.0")
    template = event_pb2.Event()
    records = [event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    rng = np.random.default_rng(0)
    values = rng.random(count, dtype=np.float32).tolist()
    for i in range(count):
        template.Clear()
        template.wall_time = 1.7e9 + i * 1e-3
        template.step = i // 2
        template.summary.value.add(tag=TAGS[i % 2], simple_value=values[i])
        records.append(template.SerializeToString())
    with rk.open(path, "w", format="tfrecord") as writer:
        writer.write_many(records)
    return path


def with_recordkit(path: str) -> Any:
    import recordkit.tensorboard

    return recordkit.tensorboard.scalars(path)


def with_tbparse(path: str) -> Any:
    import tbparse

    return tbparse.SummaryReader(path, extra_columns={"wall_time"}).scalars


def with_event_accumulator(path: str) -> Any:
    import pandas as pd
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(path, size_guidance={"scalars": 0})
    accumulator.Reload()
    frames = []
    for tag in accumulator.Tags()["scalars"]:
        events = accumulator.Scalars(tag)
        frames.append(
            pd.DataFrame(
                {
                    "tag": tag,
                    "step": [e.step for e in events],
                    "wall_time": [e.wall_time for e in events],
                    "value": [e.value for e in events],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def canonical(frame: Any) -> Any:
    """The rows as (tag, step, wall_time, value), sorted, for comparing contenders."""
    table = frame[["tag", "step", "wall_time", "value"]].astype({"tag": str, "value": np.float64})
    return table.sort_values(["tag", "step"], kind="stable").reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    contenders: dict[str, Callable[[str], Any]] = {"recordkit": with_recordkit}
    for name, module, run in (
        ("tbparse", "tbparse", with_tbparse),
        ("EventAccumulator", "tensorboard", with_event_accumulator),
    ):
        try:
            __import__(module)
        except ImportError:
            print(f"{name} skipped: {module} is not installed")
            continue
        contenders[name] = run
    with tempfile.TemporaryDirectory() as tmp:
        path = write_events(tmp, args.scalars)
        size = os.path.getsize(path)
        print(f"{args.scalars} scalars, {size / 1e6:.1f} MB, {args.repeat} rounds")
        expected = canonical(with_recordkit(path))  # also warms the page cache
        assert len(expected) == args.scalars
        for name, run in contenders.items():
            found = canonical(run(path))
            if not found.equals(expected):
                print(f"{name}: values differ from recordkit's", file=sys.stderr)
                return 1
        print("values: equal across " + ", ".join(contenders))
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, run in contenders.items():
                start = time.perf_counter()
                run(path)
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["recordkit"])
    for name, samples in times.items():
        median = statistics.median(samples)
        ratio = median / base
        print(
            f"{name:18} {median:8.3f} s  {args.scalars / median / 1e6:6.2f} M scalars/s  "
            f"recordkit {ratio:5.1f}x faster"
            if name != "recordkit"
            else f"{name:18} {median:8.3f} s  {args.scalars / median / 1e6:6.2f} M scalars/s"
        )
    for name, goal in (("tbparse", 10.0), ("EventAccumulator", 3.0)):
        if name in times:
            ratio = statistics.median(times[name]) / base
            verdict = "met" if ratio >= goal else "NOT met"
            print(f"target: >= {goal:.0f}x {name}: {ratio:.1f}x ({verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
