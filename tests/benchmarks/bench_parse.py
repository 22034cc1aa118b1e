"""Measure batched Example parsing: recordkit against TensorFlow and vahidk ``tfrecord``.

Every contender parses the same in-memory serialized Examples (an int64 ``label``, 784 float32 ``image``
values and a 32-byte ``bytes`` feature) into batches of 256 with fixed-length specs. As in a training loop,
each batch is dropped once parsed (keeping every result alive would mostly measure page faults). Each figure is the
median of several repetitions over the whole set; the ratios compare the medians.

* ``recordkit``: :func:`recordkit.parse_examples` as users call it.
* ``recordkit (scanner)``: the same with the batch-template path switched off, i.e. every record walked by
  the pure-Python wire scanner (what records of irregular layout get).
* ``tensorflow``: eager ``tf.io.parse_example`` on a ``tf.constant`` batch of the serialized strings.
* ``vahidk tfrecord``: what its ``tfrecord_loader`` does per record after framing:
  ``Example.ParseFromString`` then ``reader.extract_feature_dict`` with a description.

TensorFlow and vahidk ``tfrecord`` both register ``tensorflow.Example`` in protobuf's default descriptor
pool and cannot be imported into one process, so each contender runs in its own subprocess of this
script, on the same records (written once to a temporary file). The contenders take turns, one timed pass
each, so that changes in machine load fall on all of them alike.

Run alone: ``python tests/benchmarks/bench_parse.py [--records 20480] [--repeat 7]``; the whole suite
(``python tests/benchmarks/run.py``) runs the same contenders through :func:`parse_pass`.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import recordkit as rk
from recordkit._proto.tensorflow import example_pb2
from recordkit.decode import columns as _columns

BATCH = 256


def make_records(count: int, seed: int = 0) -> list[bytes]:
    """Serialized Examples: label (int64), image (784 float32), raw (32 bytes)."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        ex = example_pb2.Example()
        feature = ex.features.feature
        feature["label"].int64_list.value.append(int(rng.integers(0, 1000)) if i % 2 else i % 10)
        feature["image"].float_list.value.extend(rng.random(784, dtype=np.float32).tolist())
        feature["raw"].bytes_list.value.append(rng.bytes(32))
        records.append(ex.SerializeToString())
    return records


def batches(records: list[bytes]) -> list[list[bytes]]:
    return [records[i : i + BATCH] for i in range(0, len(records), BATCH)]


def recordkit_spec() -> dict[str, rk.FixedLen]:
    """The features of :func:`make_records`, as recordkit's parsers are asked for them."""
    return {
        "label": rk.FixedLen((), np.int64),
        "image": rk.FixedLen((784,), np.float32),
        "raw": rk.FixedLen((), bytes),
    }


def tensorflow_spec(tf: Any) -> dict[str, Any]:
    """The features of :func:`make_records`, as ``tf.io.parse_example`` is asked for them."""
    return {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "image": tf.io.FixedLenFeature([784], tf.float32),
        "raw": tf.io.FixedLenFeature([], tf.string),
    }


def bench_recordkit(groups: list[list[bytes]]) -> Callable[[], None]:
    spec = recordkit_spec()

    def run() -> None:
        for group in groups:
            rk.parse_examples(group, spec)

    return run


def bench_recordkit_scanner(groups: list[list[bytes]]) -> Callable[[], None]:
    run = bench_recordkit(groups)

    def scanner_only() -> None:
        saved = _columns._MIN_TEMPLATE_GROUP
        _columns._MIN_TEMPLATE_GROUP = 1 << 62
        try:
            run()
        finally:
            _columns._MIN_TEMPLATE_GROUP = saved

    return scanner_only


def bench_tensorflow(groups: list[list[bytes]]) -> Callable[[], None] | None:
    try:
        import tensorflow as tf
    except ImportError:
        return None
    spec = tensorflow_spec(tf)
    tensors = [tf.constant(group) for group in groups]

    def run() -> None:
        for tensor in tensors:
            tf.io.parse_example(tensor, spec)

    return run


def bench_vahidk(groups: list[list[bytes]]) -> Callable[[], None] | None:
    try:
        from tfrecord import example_pb2 as vahidk_pb2
        from tfrecord import reader
    except ImportError:
        return None
    description = {"label": "int", "image": "float", "raw": "byte"}
    mapping = {"byte": "bytes_list", "float": "float_list", "int": "int64_list"}

    def run() -> None:
        for group in groups:
            for record in group:
                example = vahidk_pb2.Example()
                example.ParseFromString(record)
                reader.extract_feature_dict(example.features, description, mapping)

    return run


CONTENDERS = {
    "recordkit": bench_recordkit,
    "recordkit (scanner)": bench_recordkit_scanner,
    "tensorflow": bench_tensorflow,
    "vahidk tfrecord": bench_vahidk,
}


def parse_pass(name: str, data: str) -> Callable[[], int] | None:
    """Return one pass of contender ``name`` over the pickled records in ``data`` (``None``: not installed).

    The pass returns the number of records parsed; the benchmark suite (``run.py``) times it.
    """
    with open(data, "rb") as f:
        records = pickle.load(f)
    run = CONTENDERS[name](batches(records))
    if run is None:
        return None

    def one_pass() -> int:
        run()
        return len(records)

    return one_pass


def worker(name: str, data: str) -> None:
    """Serve one contender: load the records, then time one pass for every line read from stdin."""
    run = parse_pass(name, data)
    if run is None:
        print("absent", flush=True)
        return
    run()  # warm up
    print("ready", flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        count = run()
        print(count / (time.perf_counter() - start), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20480)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.data)
        return
    records = make_records(args.records)
    size = sum(map(len, records)) / len(records)
    print(
        f"{len(records)} Examples of {size:.0f} bytes, batches of {BATCH}, median of {args.repeat} runs"
    )
    samples: dict[str, list[float]] = {}
    with tempfile.NamedTemporaryFile(suffix=".pickle") as data:
        pickle.dump(records, data)
        data.flush()
        workers = {}
        for name in CONTENDERS:
            command = [sys.executable, __file__, "--worker", name, "--data", data.name]
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert process.stdout is not None
            if process.stdout.readline().strip() == "ready":
                workers[name] = process
                samples[name] = []
            else:
                process.wait()
                print(f"{name:22s} not installed")
        # Round-robin, so that a change in machine load affects every contender alike.
        for _ in range(args.repeat):
            for name, process in workers.items():
                assert process.stdin is not None
                assert process.stdout is not None
                process.stdin.write("go\n")
                process.stdin.flush()
                samples[name].append(float(process.stdout.readline()))
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    rates = {name: statistics.median(values) for name, values in samples.items()}
    for name, rate in rates.items():
        print(f"{name:22s} {rate:12,.0f} records/s")
    for peer in ("tensorflow", "vahidk tfrecord"):
        if peer in rates:
            for ours in ("recordkit", "recordkit (scanner)"):
                print(f"{ours} / {peer}: {rates[ours] / rates[peer]:.2f}x")


if __name__ == "__main__":
    main()
