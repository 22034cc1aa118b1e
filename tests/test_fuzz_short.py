"""A short fuzz run in the normal suite: damaged files and payloads end in a result or a recordkit error.

The long run is ``python -m tests.fuzz --cases 100000`` (see ``tests/fuzz/__init__.py``).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest
from conftest import SEED
from fuzz import TARGETS, run_target
from fuzz.targets import NonSeekable, all_targets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.compat import oneflow as rk_ofrecord
from recordkit.errors import LegacyFormatWarning, RecordKitError

CASES = 150


@pytest.mark.parametrize("name", TARGETS)
def test_damaged_inputs_end_in_a_result_or_a_recordkit_error(name):
    summary = run_target(all_targets()[name], CASES, seed=SEED, timeout=60.0)
    assert summary.cases == CASES
    assert not summary.failures, "\n".join(
        [*summary.lines(), *(failure.trace for failure in summary.failures[:3])]
    )
    # The damage must not be so heavy that nothing is ever read.
    assert summary.outcomes["ok"] > 0


def _read_all(reader):
    records = list(reader)
    if reader.supports_random_access:
        assert len(reader) == len(records)
        assert [reader[i] for i in range(len(records))] == records
    return records


fuzz_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@fuzz_settings
@given(data=st.binary(max_size=300), fmt=st.sampled_from(["tfrecord", "ofrecord", "ffrecord"]))
def test_random_bytes_as_a_record_file(data, fmt):
    for source in (io.BytesIO(data), NonSeekable(data)):
        with contextlib.suppress(RecordKitError), rk.open(source, format=fmt) as reader:
            _read_all(reader)


@fuzz_settings
@given(data=st.binary(max_size=300), compression=st.sampled_from(["gzip", "zlib"]))
def test_random_bytes_as_a_compressed_tfrecord(data, compression):
    with (
        contextlib.suppress(RecordKitError),
        rk.open(io.BytesIO(data), format="tfrecord", compression=compression) as reader,
    ):
        list(reader)


@fuzz_settings
@given(
    records=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=5),
    fmt=st.sampled_from(["tfrecord", "ofrecord", "ffrecord"]),
    cut=st.integers(min_value=0),
    value=st.sampled_from([0, -1, 2**62, 2**63 - 1]),
    at=st.integers(min_value=0),
)
def test_hostile_field_in_a_valid_file(records, fmt, cut, value, at):
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format=fmt) as writer:
        writer.write_many(records)
    data = bytearray(buffer.getvalue())
    at %= max(len(data) - 7, 1)
    data[at : at + 8] = value.to_bytes(8, "little", signed=True)
    data = data[: len(data) - cut % (len(data) + 1)]
    with (
        warnings.catch_warnings(),
        contextlib.suppress(RecordKitError),
    ):
        # A zeroed FFRecord header checksum marks a legacy file: a warning, then every sample is checked.
        warnings.simplefilter("ignore", LegacyFormatWarning)
        with rk.open(io.BytesIO(bytes(data)), format=fmt) as reader:
            _read_all(reader)


@fuzz_settings
@given(data=st.binary(max_size=200))
def test_random_bytes_as_payloads(data):
    decoders = [rk.decode_example, rk.decode_sequence_example, rk.decode_ofrecord]
    for decode in decoders:
        with contextlib.suppress(RecordKitError):
            decode(data)
    specs = {"a": rk.VarLen(np.int64), "b": rk.FixedLen((2,), np.float32, default=0.0)}
    calls = [
        lambda: rk.parse_examples([data], specs),
        lambda: rk.parse_ofrecords([data], specs),
        lambda: rk.parse_sequence_examples(
            [data], {"a": rk.VarLen(bytes)}, {"s": rk.VarLen(np.int64)}
        ),
        lambda: rk_ofrecord.raw_decoder([data], "a", (3,), np.int32, truncate=True),
        lambda: rk_ofrecord.bytes_decoder([data], "a"),
    ]
    for call in calls:
        with contextlib.suppress(RecordKitError):
            call()
