"""Measure recordkit's table functions: parsing to Arrow against parsing to numpy, and table encoding.

* **parse**: the same serialized Examples (an int64 ``label``, 16 float32 ``emb`` values, 0 to 8 int64
  ``tokens``, a ``str`` ``name`` and 16 ``raw`` bytes) parsed in batches with
  ``rk.parse_examples(batch, spec)`` (numpy) and ``rk.parse_examples(batch, spec, to="arrow")``.
* **encode**: a pyarrow table of the same columns serialized with ``rk.encode_examples(table)`` against a
  Python loop of ``rk.encode_example`` over the rows (values already as numpy arrays and Python scalars,
  so the loop measures encoding, not conversion).

Each figure is the median of ``--repeat`` passes over the whole set, wall-clock and CPU time of this
process (the CPU figure is the steadier one on a loaded machine); the contenders take turns, one pass
each, the first of each round alternating, so that changes in machine load fall on both alike. No figure
is asserted anywhere.

Run alone: ``python tests/benchmarks/bench_arrow.py [--records 100000] [--repeat 5] [--batch 0 1024]``
(``0``: all records in one call); the
suite (``python tests/benchmarks/run.py``) runs the same passes through :func:`parse_pass` and
:func:`encode_pass`.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import recordkit as rk

SPEC = {
    "label": rk.FixedLen((), np.int64),
    "emb": rk.FixedLen((16,), np.float32),
    "tokens": rk.VarLen(np.int64),
    "name": rk.FixedLen((), str),
    "raw": rk.FixedLen((), bytes),
}


def make_columns(count: int, seed: int = 0) -> dict[str, Any]:
    """The benchmark's columns: numpy arrays, and lists for the ragged and text ones."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, count)
    return {
        "label": rng.integers(0, 1000, count),
        "emb": rng.random((count, 16), dtype=np.float32),
        "tokens": [rng.integers(0, 30000, n) for n in lengths],
        "name": [f"item-{i}" for i in range(count)],
        "raw": [rng.bytes(16) for _ in range(count)],
    }


def _rows(columns: dict[str, Any]) -> list[dict[str, Any]]:
    count = len(columns["label"])
    return [
        {
            "label": int(columns["label"][i]),
            "emb": columns["emb"][i],
            "tokens": columns["tokens"][i],
            "name": columns["name"][i],
            "raw": columns["raw"][i],
        }
        for i in range(count)
    ]


def make_records(count: int, seed: int = 0) -> list[bytes]:
    """Serialized Examples of :func:`make_columns` (one rk.encode_example per row)."""
    return [rk.encode_example(row) for row in _rows(make_columns(count, seed))]


def _parse(batches: list[list[bytes]], to: str, spec: dict[str, Any] = SPEC) -> Callable[[], int]:
    def run() -> int:
        for batch in batches:
            rk.parse_examples(batch, spec, to=to)  # type: ignore[call-overload]
        return sum(map(len, batches))

    return run


# The records of the benchmark suite (tests/benchmarks/bench_parse.py's: label, image, raw).
SUITE_SPEC = {
    "label": rk.FixedLen((), np.int64),
    "image": rk.FixedLen((784,), np.float32),
    "raw": rk.FixedLen((), bytes),
}


def parse_pass(name: str, data: str, batch: int = 1024) -> Callable[[], int] | None:
    """One pass of ``name`` (``numpy`` or ``arrow``) over the suite's pickled records in ``data``."""
    if name == "arrow":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            return None
    with open(data, "rb") as f:
        records = pickle.load(f)
    batches = [records[i : i + batch] for i in range(0, len(records), batch)]
    return _parse(batches, name, SUITE_SPEC)


def encode_pass(name: str, count: int) -> Callable[[], int] | None:
    """One pass of ``name`` (``loop`` of rk.encode_example, or ``table``: rk.encode_examples)."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    columns = make_columns(count)
    if name == "loop":
        rows = _rows(columns)
        return lambda: len([rk.encode_example(row) for row in rows])
    table = pa.table(
        {
            **{k: columns[k] for k in ("label", "name", "raw")},
            "tokens": pa.array(columns["tokens"], pa.list_(pa.int64())),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(columns["emb"].reshape(-1)), 16),
        }
    ).select(list(SPEC))
    return lambda: len(rk.encode_examples(table))


def _medians(
    contenders: dict[str, Callable[[], int]], repeat: int
) -> dict[str, tuple[float, float]]:
    """Median wall-clock and CPU (this process) seconds of each contender, taking turns."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for run in contenders.values():
        run()  # warm-up
    order = list(contenders.items())
    for _ in range(repeat):
        order.reverse()  # who goes first alternates: the second of a pair runs on a warmer, fuller heap
        for name, run in order:
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {
        name: (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))
        for name, samples in times.items()
    }


def _line(label: str, seconds: tuple[float, float]) -> str:
    return f"  {label:<26}{seconds[0]:8.3f} s wall {seconds[1]:8.3f} s CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[0, 1024],
        help="records per parse_examples call; 0 means all of them in one call (default: 0 1024)",
    )
    args = parser.parse_args()
    records = make_records(args.records)
    for size in args.batch:
        size = size or len(records)
        batches = [records[i : i + size] for i in range(0, len(records), size)]
        parse = _medians(
            {"numpy": _parse(batches, "numpy"), "arrow": _parse(batches, "arrow")}, args.repeat
        )
        print(f"parse {args.records:,} Examples, {size:,} per call (median of {args.repeat}):")
        print(_line("parse_examples to numpy", parse["numpy"]))
        print(_line("parse_examples to Arrow", parse["arrow"]))
        wall, cpu = (parse["arrow"][i] / parse["numpy"][i] for i in (0, 1))
        print(f"  Arrow / numpy time ratio  {wall:8.2f}   wall {cpu:8.2f}   CPU")
    encoders = {name: encode_pass(name, args.records) for name in ("loop", "table")}
    encode = _medians({k: v for k, v in encoders.items() if v is not None}, args.repeat)
    print(f"encode {args.records:,} rows (median of {args.repeat}):")
    print(_line("loop of rk.encode_example", encode["loop"]))
    print(_line("rk.encode_examples(table)", encode["table"]))
    wall, cpu = (encode["loop"][i] / encode["table"][i] for i in (0, 1))
    print(f"  speed-up                  {wall:8.2f}x  wall {cpu:8.2f}x  CPU")


if __name__ == "__main__":
    main()
