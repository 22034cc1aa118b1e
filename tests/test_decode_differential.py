"""One decoding semantics: the single-record decoders and the batch parsers agree on every payload.

``decode_example``/``decode_sequence_example``/``decode_ofrecord`` and ``parse_examples``/
``parse_sequence_examples``/``parse_ofrecords`` are given the same structurally generated payloads (the
generators of ``test_wire.py``: packed, unpacked and mixed lists, empty lists and Features, oneof switches,
unknown fields and known fields of another wire type, repeated keys and Features messages, over-long varints,
negative and 10-byte integers, float NaN/inf/-0.0 bit patterns, non-UTF-8 names, malformed and cut payloads),
alone and in mixed batches. Both must refuse a payload with the same error class, or read the same keys,
kinds, dtypes and bit-identical values; protobuf's own parser is the oracle beside them, and TensorFlow's
``tf.io.parse_example`` for a few canonical Examples.
"""

from __future__ import annotations

import importlib.util
import struct
from typing import Any

import _protowire as pw
import google.protobuf.message
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wire import (
    NAME_POOL,
    Marks,
    feature_message,
    map_message,
    protobuf_features,
    structured_examples,
    structured_ofrecords,
)

import recordkit as rk
from recordkit._proto.tensorflow import example_pb2
from recordkit.errors import DecodeError

TF_DTYPES = {1: bytes, 2: np.float32, 3: np.int64}
OF_DTYPES = {1: bytes, 2: np.float32, 3: np.float64, 4: np.int32, 5: np.int64}
KIND_OF = {np.dtype(np.float32): 2, np.dtype(np.int64): 3}
OF_KIND_OF = {np.dtype(d): k for k, d in OF_DTYPES.items() if d is not bytes}
SLOW = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)


def outcome(call: Any) -> Any:
    """The result, or the class of the recordkit error raised (anything else propagates)."""
    try:
        return call()
    except DecodeError as exc:
        return type(exc)


def kind_of(value: Any, ofrecord: bool) -> int:
    """The Feature oneof field number of a decoded value (an empty float32 array may also be no list)."""
    if isinstance(value, list):
        return 1
    return (OF_KIND_OF if ofrecord else KIND_OF)[value.dtype]


def check_batch(payloads: list[bytes], ofrecord: bool) -> None:
    """Each payload decoded alone, and the batch parsed, agree (or both refuse with DecodeError)."""
    decode = rk.decode_ofrecord if ofrecord else rk.decode_example
    parse = rk.parse_ofrecords if ofrecord else rk.parse_examples
    dtypes = OF_DTYPES if ofrecord else TF_DTYPES
    decoded = [outcome(lambda p=p: decode(p)) for p in payloads]
    if any(d is DecodeError for d in decoded):  # every name asked for: the batch is refused too
        with pytest.raises(DecodeError) as info:
            parse(payloads, {name: rk.VarLen(bytes) for name in NAME_POOL})
        assert "data type doesn't match" not in str(info.value)
        return
    for name in sorted({n for d in decoded for n in d}):
        for kind in sorted({kind_of(d[name], ofrecord) for d in decoded if name in d}):
            rows = [r for r, d in enumerate(decoded) if kind_of(d.get(name, []), ofrecord) == kind]
            rows += [r for r, d in enumerate(decoded) if name not in d]
            out = parse([payloads[r] for r in rows], {name: rk.VarLen(dtypes[kind])})[name]
            assert out.dtype == np.dtype(object if kind == 1 else dtypes[kind])
            for k, r in enumerate(rows):
                want = decoded[r].get(name, [])
                got = out[k]
                if kind == 1:
                    assert got.tolist() == want, (name, r)
                else:
                    assert got.tobytes() == np.asarray(want, got.dtype).tobytes(), (name, r)


def check_oracle(payload: bytes, marks: Marks, ofrecord: bool) -> None:
    """The decoders read what protobuf reads, or refuse what it refuses (and what recordkit refuses)."""
    want = protobuf_features(payload, ofrecord)
    got = outcome(lambda: (rk.decode_ofrecord if ofrecord else rk.decode_example)(payload))
    if want is None or marks.deliberate:
        assert got is DecodeError, payload.hex()
        return
    assert isinstance(got, dict), payload.hex()
    assert sorted(got) == sorted(want)
    for name, (kind, values) in want.items():
        value = got[name]
        if kind == 1:
            assert value == values
        elif kind == 0:
            assert value.dtype == np.float32
            assert value.size == 0
        else:
            dtype = (OF_DTYPES if ofrecord else TF_DTYPES)[kind]
            assert value.dtype == dtype
            expected = np.array(values, dtype) if dtype != np.int32 else np.array(values, np.int64)
            assert value.tobytes() == expected.astype(dtype).tobytes() or (
                np.isnan(value).any() and np.array_equal(value, expected, equal_nan=True)
            )


@SLOW
@given(st.lists(structured_examples(), min_size=1, max_size=4), st.integers(1, 10))
def test_examples_decode_and_parse_alike(cases, repeat):
    for payload, marks in cases:
        check_oracle(payload, marks, ofrecord=False)
    payloads = [payload for payload, _ in cases]
    check_batch(payloads, ofrecord=False)
    check_batch(payloads[:1] * repeat + payloads, ofrecord=False)  # a template group, then mixed


@SLOW
@given(st.lists(structured_ofrecords(), min_size=1, max_size=4), st.integers(1, 10))
def test_ofrecords_decode_and_parse_alike(cases, repeat):
    for payload, marks in cases:
        check_oracle(payload, marks, ofrecord=True)
    payloads = [payload for payload, _ in cases]
    check_batch(payloads, ofrecord=True)
    check_batch(payloads[:1] * repeat + payloads, ofrecord=True)


@st.composite
def sequence_examples(draw) -> tuple[bytes, Marks]:
    """A SequenceExample: a context, and feature lists whose steps are generated Features."""
    marks = Marks()
    context = draw(map_message({1: "bytes", 2: "f4", 3: "varint"}, marks, False))
    entries = []
    for name in draw(st.lists(st.sampled_from(NAME_POOL), max_size=3)):
        steps = [
            pw.delimited(1, draw(feature_message({1: "bytes", 2: "f4", 3: "varint"}, marks)))
            for _ in range(draw(st.integers(0, 3)))
        ]
        entries.append(pw.entry(name, b"".join(steps)))
    return pw.delimited(1, context) + pw.delimited(2, b"".join(entries)), marks


@SLOW
@given(sequence_examples())
def test_sequence_examples_decode_and_parse_alike(case):
    payload, marks = case
    try:
        message: Any = example_pb2.SequenceExample.FromString(payload)
    except google.protobuf.message.DecodeError:
        message = None
    got = outcome(lambda: rk.decode_sequence_example(payload))
    if message is None or marks.deliberate:
        assert got is DecodeError
        for dtype in TF_DTYPES.values():
            specs = {name: rk.VarLen(dtype) for name in NAME_POOL}
            assert (
                outcome(lambda s=specs: rk.parse_sequence_examples([payload], s, s)) is DecodeError
            )
        return
    context, lists = got
    assert sorted(lists) == sorted(message.feature_lists.feature_list)
    for name, steps in lists.items():
        assert len(steps) == len(message.feature_lists.feature_list[name].feature)
        kinds = {kind_of(step, False) for step in steps}
        if len(kinds) != 1:
            continue
        (kind,) = kinds
        spec = {name: rk.VarLen(TF_DTYPES[kind])}
        parsed = rk.parse_sequence_examples([payload] * 2, {}, spec)[1][name]
        for row in range(2):
            assert len(parsed[row]) == len(steps)
            for got, want in zip(parsed[row], steps, strict=True):
                if kind == 1:
                    assert got.tolist() == want
                else:
                    assert got.tobytes() == want.tobytes()
    for name, value in context.items():
        kind = kind_of(value, False)
        parsed = rk.parse_sequence_examples([payload], {name: rk.VarLen(TF_DTYPES[kind])})[0]
        got = parsed[name][0]
        assert got.tolist() == value if kind == 1 else got.tobytes() == value.tobytes()


# -- bit patterns and TensorFlow ----------------------------------------------------------------------

FLOAT_BITS = [0x7FC00001, 0x7F800001, 0xFFC00000, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001]
INTS = [0, -1, 1, 2**63 - 1, -(2**63), 300, -300]


def bits_record(packed: bool) -> bytes:
    """An Example with float bit patterns, extreme integers, odd bytes and an empty list."""
    raw = [struct.pack("<I", bits) for bits in FLOAT_BITS]
    floats = pw.delimited(1, b"".join(raw)) if packed else b"".join(pw.tag(1, 5) + r for r in raw)
    entries = [
        pw.entry("f", pw.delimited(pw.TF_FLOAT, floats)),
        pw.entry("i", pw.feature(pw.TF_INT64, INTS, packed=packed)),
        pw.entry("b", pw.feature(pw.TF_BYTES, [b"", b"\xff\xfe", "é".encode()])),
        pw.entry("e", pw.feature(pw.TF_INT64, [])),
    ]
    return pw.example(entries)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
def test_float_bit_patterns_and_extreme_integers_agree(packed):
    payload = bits_record(packed)
    decoded = rk.decode_example(payload)
    assert decoded["f"].view(np.uint32).tolist() == FLOAT_BITS
    assert decoded["i"].tolist() == INTS
    assert decoded["b"] == [b"", b"\xff\xfe", "é".encode()]
    assert decoded["e"].dtype == np.int64
    assert decoded["e"].size == 0
    specs = {"f": rk.VarLen(np.float32), "i": rk.VarLen(np.int64), "b": rk.VarLen(bytes)}
    for batch in ([payload], [payload] * 9):
        out = rk.parse_examples(batch, specs)
        for row in range(len(batch)):
            assert out["f"][row].tobytes() == decoded["f"].tobytes()
            assert out["i"][row].tolist() == INTS
            assert out["b"][row].tolist() == decoded["b"]
    message = example_pb2.Example.FromString(payload).features.feature
    assert list(message["i"].int64_list.value) == INTS


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_tensorflow_reads_canonical_examples_as_both_engines_do():
    import tensorflow as tf

    payloads = [bits_record(True), pw.example([pw.entry("i", pw.feature(pw.TF_INT64, [5]))])]
    specs = {"f": rk.VarLen(np.float32), "i": rk.VarLen(np.int64), "b": rk.VarLen(bytes)}
    ours = rk.parse_examples(payloads, specs)
    theirs = tf.io.parse_example(
        payloads,
        {
            "f": tf.io.VarLenFeature(tf.float32),
            "i": tf.io.VarLenFeature(tf.int64),
            "b": tf.io.VarLenFeature(tf.string),
        },
    )
    for name in specs:
        values = theirs[name].values.numpy()
        assert ours[name].values.tobytes() == values.tobytes() or (
            ours[name].values.tolist() == values.tolist()
        )
        rows = tf.math.bincount(
            tf.cast(theirs[name].indices[:, 0], tf.int32), minlength=len(payloads)
        ).numpy()
        assert ours[name].row_lengths().tolist() == rows.tolist()
        for row, payload in enumerate(payloads):
            decoded = rk.decode_example(payload).get(name)
            want = [] if decoded is None else decoded
            got = ours[name][row]
            assert got.tolist() == (want if isinstance(want, list) else want.tolist()) or (
                got.tobytes() == np.asarray(want).tobytes()
            )
