"""Coverage-guided fuzzing with atheris (libFuzzer), as a complement to the mutation runner.

Install ``atheris`` (``pip install recordkit[fuzz]``), then from the repository root::

    python -m tests.fuzz.atheris_harness -atheris_runs=200000
    python -m tests.fuzz.atheris_harness corpus/ -max_total_time=600   # keep a corpus between runs

The first input byte picks what is fuzzed (a reader of one format and compression, or a payload
decoder); the rest is the file or payload. Any exception other than a recordkit error is a crash.
libFuzzer flags follow the script name.
"""

from __future__ import annotations

import contextlib
import io
import sys

import atheris
import numpy as np

import recordkit as rk
from recordkit import recover
from recordkit.compat import oneflow as rk_ofrecord
from recordkit.errors import RecordKitError

READERS = [
    ("tfrecord", ""),
    ("tfrecord", "gzip"),
    ("tfrecord", "zlib"),
    ("ofrecord", ""),
    ("ffrecord", ""),
]
SPECS = {"a": rk.VarLen(np.int64), "b": rk.FixedLen((2,), np.float32, default=0.0)}


def _read(data: bytes, fmt: str, compression: str) -> None:
    with rk.open(io.BytesIO(data), format=fmt, compression=compression) as reader:
        records = list(reader)
        if reader.supports_random_access:
            assert len(reader) == len(records)
            assert reader.read(range(len(records))) == records


def _decode(data: bytes) -> None:
    for call in (
        lambda: rk.decode_example(data),
        lambda: rk.decode_sequence_example(data),
        lambda: rk.decode_ofrecord(data),
        lambda: rk.parse_examples([data, data], SPECS),
        lambda: rk.parse_ofrecords([data], SPECS),
        lambda: rk.parse_sequence_examples(
            [data], {"a": rk.VarLen(bytes)}, {"s": rk.VarLen(np.int64)}
        ),
        lambda: rk_ofrecord.raw_decoder([data], "a", (3,), np.int32, truncate=True),
        lambda: rk_ofrecord.bytes_decoder([data], "a"),
    ):
        with contextlib.suppress(RecordKitError):
            call()


def test_one_input(raw: bytes) -> None:
    """The libFuzzer entry point."""
    if not raw:
        return
    choice, data = raw[0] % (len(READERS) + 2), raw[1:]
    with contextlib.suppress(RecordKitError):
        if choice < len(READERS):
            _read(data, *READERS[choice])
        elif choice == len(READERS):
            with recover.scan(io.BytesIO(data), format=READERS[raw[0] % 5][0], warn=False) as scan:
                list(scan)
        else:
            _decode(data)


def main() -> None:
    """Run libFuzzer with the command-line flags."""
    import warnings

    warnings.simplefilter("ignore", rk.RecordKitWarning)
    # recordkit is already imported (by the tests.fuzz package): instrument what is loaded.
    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
