"""The batched wire decoder: protobuf's encoding and merge rules, and malformed payloads.

The oracle is protobuf's own parser (the generated classes in ``recordkit._proto``): whatever it reads
from a payload, parse_examples must read too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import struct

import _protowire as pw
import google.protobuf.message
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.decode import _wire
from recordkit.decode import columns as _columns
from recordkit.errors import DecodeError

# The Arrow output is compared too where pyarrow (the arrow extra) is installed.
HAS_ARROW = importlib.util.find_spec("pyarrow") is not None

SPECS = {
    "b": rk.VarLen(bytes),
    "f": rk.VarLen(np.float32),
    "i": rk.VarLen(np.int64),
}
TF_DTYPE = {pw.TF_BYTES: bytes, pw.TF_FLOAT: np.float32, pw.TF_INT64: np.int64}


def oracle(payload: bytes, name: str) -> tuple[str | None, list[object]]:
    """What protobuf itself reads for feature ``name``: its kind and values."""
    feature = example_pb2.Example.FromString(payload).features.feature
    if name not in feature:
        return None, []
    kind = feature[name].WhichOneof("kind")
    if kind is None:
        return None, []
    return kind, list(getattr(feature[name], kind).value)


def parsed(payload: bytes, name: str, dtype: object) -> list[object]:
    return rk.parse_examples([payload], {name: rk.VarLen(dtype)})[name][0].tolist()


def as_float32(values: list[float]) -> list[float]:
    return np.asarray(values, np.float32).tolist()


VALUES = {
    pw.TF_BYTES: [b"", b"x", b"\x00\xff" * 100],
    pw.TF_FLOAT: as_float32([0.0, -1.5, 3.25e38, 1e-40]),
    pw.TF_INT64: [0, 1, -1, 127, 128, 2**63 - 1, -(2**63), 300],
}


@pytest.mark.parametrize("kind", [pw.TF_FLOAT, pw.TF_INT64])
def test_packed_and_unpacked_lists_decode_identically(kind):
    values = VALUES[kind]
    packed = pw.example([pw.entry("v", pw.feature(kind, values, packed=True))])
    unpacked = pw.example([pw.entry("v", pw.feature(kind, values, packed=False))])
    assert packed != unpacked
    expected = oracle(unpacked, "v")[1]
    assert parsed(packed, "v", TF_DTYPE[kind]) == expected == values
    assert parsed(unpacked, "v", TF_DTYPE[kind]) == expected
    batch = rk.parse_examples(
        [packed, unpacked] * 8, {"v": rk.FixedLen((len(values),), TF_DTYPE[kind])}
    )
    assert (batch["v"] == np.asarray(values, TF_DTYPE[kind])).all()


@pytest.mark.parametrize(
    "kind",
    [pw.OF_FLOAT, pw.OF_DOUBLE, pw.OF_INT32, pw.OF_INT64],
    ids=["float", "double", "int32", "int64"],
)
def test_ofrecord_packed_and_unpacked_decode_identically(kind):
    values = (
        [0, 1, -1, 2**31 - 1, -(2**31), 5]
        if kind in (pw.OF_INT32, pw.OF_INT64)
        else [0.5, -2.0, 1e30]
    )
    records = [
        pw.features_payload([pw.entry("v", pw.feature(kind, values, packed=packed, ofrecord=True))])
        for packed in (True, False)
    ]
    message = record_pb2.OFRecord.FromString(records[1]).feature["v"]
    expected = list(getattr(message, message.WhichOneof("kind")).value)
    dtype = {
        pw.OF_FLOAT: np.float32,
        pw.OF_DOUBLE: np.float64,
        pw.OF_INT32: np.int32,
        pw.OF_INT64: np.int64,
    }[kind]
    out = rk.parse_ofrecords(records, {"v": rk.VarLen(dtype)})["v"]
    assert out[0].tolist() == out[1].tolist() == np.asarray(expected, dtype).tolist()
    assert out.dtype == dtype


def test_packed_and_unpacked_chunks_of_one_list_concatenate():
    chunks = (
        pw.delimited(1, pw.varint(1) + pw.varint(2))
        + pw.tag(1, 0) + pw.varint(3)
        + pw.delimited(1, pw.varint(4))
    )  # fmt: skip
    payload = pw.example([pw.entry("i", pw.delimited(pw.TF_INT64, chunks))])
    assert oracle(payload, "i")[1] == [1, 2, 3, 4]
    assert parsed(payload, "i", np.int64) == [1, 2, 3, 4]


def test_map_entries_in_any_order_and_value_before_key():
    entries = [
        pw.entry("i", pw.feature(pw.TF_INT64, [7, 8])),
        pw.entry("f", pw.feature(pw.TF_FLOAT, [0.5]), value_first=True),
        pw.entry("b", pw.feature(pw.TF_BYTES, [b"hello"])),
    ]
    results = []
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        payload = pw.example([entries[k] for k in order])
        out = rk.parse_examples([payload], SPECS)
        results.append({name: value[0].tolist() for name, value in out.items()})
    assert results[0] == {"i": [7, 8], "f": [0.5], "b": [b"hello"]}
    assert results[0] == results[1] == results[2]


def test_duplicate_map_keys_last_one_wins():
    payload = pw.example(
        [
            pw.entry("i", pw.feature(pw.TF_INT64, [1, 2, 3])),
            pw.entry("f", pw.feature(pw.TF_FLOAT, [1.0])),
            pw.entry("i", pw.feature(pw.TF_INT64, [9])),
        ]
    )
    assert oracle(payload, "i")[1] == [9]
    assert parsed(payload, "i", np.int64) == [9]


def test_features_field_written_twice_merges_the_maps():
    payload = pw.example([pw.entry("i", pw.feature(pw.TF_INT64, [1]))]) + pw.example(
        [pw.entry("f", pw.feature(pw.TF_FLOAT, [2.0])), pw.entry("i", pw.feature(pw.TF_INT64, [5]))]
    )
    assert oracle(payload, "i")[1] == [5]
    out = rk.parse_examples([payload], SPECS)
    assert out["i"][0].tolist() == [5]
    assert out["f"][0].tolist() == [2.0]


def test_oneof_last_kind_wins_and_same_kind_merges():
    value = (
        pw.feature(pw.TF_INT64, [1])
        + pw.feature(pw.TF_FLOAT, [2.0])
        + pw.feature(pw.TF_FLOAT, [3.0])
    )
    payload = pw.example([pw.entry("x", value)])
    assert oracle(payload, "x") == ("float_list", [2.0, 3.0])
    assert parsed(payload, "x", np.float32) == [2.0, 3.0]
    back = pw.example([pw.entry("x", value + pw.feature(pw.TF_INT64, [4]))])
    assert oracle(back, "x") == ("int64_list", [4])
    assert parsed(back, "x", np.int64) == [4]


def test_map_value_written_twice_is_merged():
    twice = pw.delimited(
        1,
        pw.delimited(1, b"i")
        + pw.delimited(2, pw.feature(pw.TF_INT64, [1]))
        + pw.delimited(2, pw.feature(pw.TF_INT64, [2])),
    )
    payload = pw.delimited(1, twice)
    assert oracle(payload, "i")[1] == [1, 2]
    assert parsed(payload, "i", np.int64) == [1, 2]


@pytest.mark.parametrize(
    "unknown", pw.UNKNOWN_FIELDS, ids=["varint", "fixed64", "bytes", "fixed32", "group"]
)
def test_unknown_fields_are_skipped_at_every_level(unknown):
    int_list = unknown + pw.delimited(1, pw.varint(5) + pw.varint(6)) + unknown
    feature = unknown + pw.delimited(pw.TF_INT64, int_list) + unknown
    entry = pw.delimited(1, pw.delimited(1, b"i") + pw.delimited(2, feature))
    payload = unknown + pw.delimited(1, unknown + entry + unknown) + unknown
    assert oracle(payload, "i")[1] == [5, 6]
    assert parsed(payload, "i", np.int64) == [5, 6]


@pytest.mark.parametrize("unknown", pw.UNKNOWN_FIELDS[:2], ids=["varint", "fixed64"])
def test_unknown_field_inside_a_map_entry_is_an_error(unknown):
    entry = pw.delimited(
        1, pw.delimited(1, b"i") + unknown + pw.delimited(2, pw.feature(pw.TF_INT64, [5]))
    )
    payload = pw.delimited(1, entry)
    assert oracle(payload, "i")[1] == []  # protobuf drops the entry; TensorFlow rejects the record
    with pytest.raises(DecodeError, match="map entry"):
        parsed(payload, "i", np.int64)


GOOD = pw.example(
    [pw.entry("i", pw.feature(pw.TF_INT64, [1, 2])), pw.entry("f", pw.feature(pw.TF_FLOAT, [1.0]))]
)

MALFORMED = {
    "truncated": GOOD[:-3],
    "truncated varint": pw.example([pw.entry("i", pw.delimited(pw.TF_INT64, b"\x0a\x02\x80\x80"))]),
    "varint over 10 bytes": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, b"\x0a\x0b" + b"\x80" * 10 + b"\x01"))]
    ),
    "unpacked varint over 10 bytes": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, b"\x08" + b"\xff" * 11 + b"\x01"))]
    ),
    "tag varint over 10 bytes": b"\xff" * 11 + b"\x01",
    "length past the end": b"\x0a\x7f" + GOOD[2:],
    "inner length past its message": pw.example([b"\x0a\x05\x0a\x09i"]),
    "entry key as varint": pw.example([pw.delimited(1, b"\x08\x01")]),
    "packed floats not a multiple of 4": pw.example(
        [pw.entry("f", pw.delimited(pw.TF_FLOAT, b"\x0a\x03abc"))]
    ),
    "packed varints end mid-varint": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, b"\x0a\x02\x01\x80"))]
    ),
    "invalid wire type 6": b"\x0e\x00",
    "invalid wire type 7": pw.example([b"\x0f"]),
    "field number 0": b"\x00\x00",
    "unterminated group": b"\x7b\x08\x01",
    "mismatched end group": b"\x7b\x74",
    "fixed64 past the end": pw.example([]) + b"\x79\x00\x00",
}


# A known field of another wire type than its own: protobuf keeps it as an unknown field and reads on.
VARINT_1, FIXED32_0 = b"\x08\x01", b"\x0d\x00\x00\x00\x00"
MISFITS = {
    "example field 1 as varint": VARINT_1 + GOOD,
    "features field 1 as varint": pw.example(
        [VARINT_1, pw.entry("i", pw.feature(pw.TF_INT64, [7]))]
    ),
    "feature list as fixed32": pw.example(
        [pw.entry("i", b"\x1d\x00\x00\x00\x00" + pw.feature(pw.TF_INT64, [3]))]
    ),
    "bytes value as varint": pw.example(
        [pw.entry("b", pw.delimited(pw.TF_BYTES, VARINT_1 + pw.delimited(1, b"x")))]
    ),
    "float value as varint": pw.example(
        [pw.entry("f", pw.delimited(pw.TF_FLOAT, VARINT_1 + pw.delimited(1, struct.pack("<f", 2))))]
    ),
    "int value as fixed32": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, FIXED32_0 + pw.delimited(1, pw.varint(4))))]
    ),
}


@pytest.mark.parametrize("payload", MISFITS.values(), ids=MISFITS.keys())
def test_a_known_field_of_another_wire_type_is_skipped_as_protobuf_skips_it(payload):
    names = {"b": bytes, "f": np.float32, "i": np.int64}
    want = {name: oracle(payload, name)[1] for name in names}
    assert any(want.values())
    for batch in ([payload], [payload] * 9):  # the scanner, then the batch template
        out = rk.parse_examples(batch, {name: rk.VarLen(dtype) for name, dtype in names.items()})
        assert {name: out[name][0].tolist() for name in names} == want
    decoded = rk.decode_example(payload)
    assert {name: list(decoded.get(name, [])) for name in names} == want


@pytest.mark.parametrize("payload", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_payload_raises_decode_error_with_its_index(payload):
    with pytest.raises(DecodeError) as info:
        rk.parse_examples([GOOD, GOOD, payload], SPECS)
    assert info.value.index == 2
    assert "record 2" in str(info.value)


@pytest.mark.parametrize(
    "payload",
    [b"\x0a\x05\x0a\x01i", b"\x0a\x07\x0a\x01i\x12\x02\x22\x05", b"\x0a\x04\x0a\x01i\x12", b"\x08"],
    ids=["entry past the end", "int32 list past its feature", "truncated entry", "map as varint"],
)
def test_malformed_ofrecord_raises_decode_error(payload):
    with pytest.raises(DecodeError) as info:
        rk.parse_ofrecords([payload], {"i": rk.VarLen(np.int32)})
    assert info.value.index == 0


def test_malformed_record_in_a_template_batch_is_reported():
    packed_ints = pw.delimited(1, pw.varint(1) + pw.varint(2))
    bad = GOOD.replace(packed_ints, pw.delimited(1, b"\x01\x82"))  # same length, ends mid-varint
    assert len(bad) == len(GOOD)
    assert bad != GOOD
    batch = [GOOD] * 20 + [bad] + [GOOD] * 5
    with pytest.raises(DecodeError) as info:
        rk.parse_examples(batch, SPECS)
    assert info.value.index == 20


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_decode_error(data):
    for parse in (rk.parse_examples, rk.parse_ofrecords):
        try:
            parse([data], SPECS)
        except DecodeError as exc:  # noqa: PERF203
            assert exc.index == 0  # noqa: PT017


@st.composite
def examples(draw):
    entries = []
    names = draw(st.lists(st.sampled_from(["i", "f", "b", "zz"]), max_size=5))
    for name in names:
        kind = draw(st.sampled_from([pw.TF_BYTES, pw.TF_FLOAT, pw.TF_INT64]))
        if kind == pw.TF_BYTES:
            values = draw(st.lists(st.binary(max_size=5), max_size=3))
        elif kind == pw.TF_FLOAT:
            values = draw(st.lists(st.floats(width=32, allow_nan=False), max_size=4))
        else:
            values = draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4))
        packed = draw(st.booleans())
        entries.append(
            pw.entry(name, pw.feature(kind, values, packed=packed), value_first=draw(st.booleans()))
        )
    return pw.example(entries)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(examples(), st.data())
def test_mutated_payloads_never_raise_anything_but_decode_error(payload, data):
    """Robustness against flipped bytes; whether each record is refused is checked against protobuf, both
    ways, by the structural tests below (a flipped name can make a feature one the specs do not ask for,
    whose value recordkit does not read)."""
    cut = data.draw(st.integers(0, len(payload)))
    flip = data.draw(st.integers(0, max(0, len(payload) - 1)))
    mutated = bytearray(payload)
    if mutated:
        mutated[flip] ^= data.draw(st.integers(1, 255))
    for candidate in (payload[:cut], bytes(mutated)):
        try:
            out = rk.parse_examples(
                [candidate],
                {name: rk.VarLen(TF_DTYPE[k]) for name, k in [("i", 3), ("f", 2), ("b", 1)]},
            )
        except DecodeError:
            continue
        try:
            example_pb2.Example.FromString(candidate)
        except google.protobuf.message.DecodeError:
            continue  # a broken value of a feature the specs do not ask for (see docs/parsing.md)
        for name in ("i", "f", "b"):
            expected_kind, values = oracle(candidate, name)
            if expected_kind is None:
                assert len(out[name][0]) == 0
            if expected_kind == {"i": "int64_list", "f": "float_list", "b": "bytes_list"}[name]:
                if name == "f":  # a flipped bit can make a NaN, and NaN != NaN in a list compare
                    np.testing.assert_array_equal(out[name][0], np.float32(as_float32(values)))
                else:
                    assert out[name][0].tolist() == values


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(examples(), min_size=1, max_size=6))
def test_kinds_that_do_not_match_the_spec_raise(payloads):
    specs = {"i": rk.VarLen(np.int64), "f": rk.VarLen(np.float32), "b": rk.VarLen(bytes)}
    expected_kinds = {"i": "int64_list", "f": "float_list", "b": "bytes_list"}
    mismatch = [
        index
        for index, payload in enumerate(payloads)
        for name in specs
        if oracle(payload, name)[0] not in (None, expected_kinds[name])
    ]
    if mismatch:
        with pytest.raises(DecodeError) as info:
            rk.parse_examples(payloads, specs)
        assert info.value.index in mismatch
        return
    out = rk.parse_examples(payloads, specs)
    for index, payload in enumerate(payloads):
        for name in specs:
            values = oracle(payload, name)[1]
            assert out[name][index].tolist() == (as_float32(values) if name == "f" else values)


@settings(max_examples=100)
@given(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6), max_size=6))
def test_decode_varints_matches_a_reference(rows):
    payloads = [b"".join(pw.varint(v) for v in row) for row in rows]
    data = np.frombuffer(b"".join(payloads), np.uint8)
    bounds = np.cumsum([0] + [len(p) for p in payloads]).astype(np.int64)
    values, counts = _wire.decode_varints(data, bounds)
    assert counts.tolist() == [len(row) for row in rows]
    assert values.tolist() == [v for row in rows for v in row]


def test_decode_varints_truncates_to_64_bits_like_protobuf():
    ten = b"\xff" * 9 + b"\x7f"  # 70 bits set: protobuf keeps the low 64
    data = np.frombuffer(ten, np.uint8)
    values, _ = _wire.decode_varints(data, np.array([0, 10], np.int64))
    assert values.tolist() == [-1]
    payload = pw.example([pw.entry("i", pw.delimited(pw.TF_INT64, pw.delimited(1, ten)))])
    assert oracle(payload, "i")[1] == [-1]


@st.composite
def same_layout_batches(draw):
    """Records with one layout, values differing, plus records that break the layout in various ways."""
    size = draw(st.integers(1, 4))
    count = draw(st.integers(8, 24))
    order = draw(st.permutations(["label", "image", "raw", "other"]))
    records = []
    for _ in range(count):
        values = {
            "label": pw.feature(pw.TF_INT64, [draw(st.integers(0, 127))]),
            "image": pw.feature(
                pw.TF_FLOAT, draw(st.lists(st.floats(width=32), min_size=size, max_size=size))
            ),
            "raw": pw.feature(pw.TF_BYTES, [draw(st.binary(min_size=3, max_size=3))]),
            "other": pw.feature(pw.TF_INT64, [draw(st.integers(0, 127))]),
        }
        records.append(pw.example([pw.entry(name, values[name]) for name in order]))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, count - 1))
        base = bytearray(records[at])
        where = draw(st.integers(0, len(base) - 1))
        base[where] ^= draw(st.integers(1, 255))
        if b"label" in base and b"image" in base and b"raw" in base:
            records[at] = bytes(base)
    return records


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(same_layout_batches())
def test_template_path_and_scanner_path_agree(records):
    specs = {"label": rk.VarLen(np.int64), "image": rk.VarLen(np.float32), "raw": rk.VarLen(bytes)}

    def run():
        try:
            out = rk.parse_examples(records, specs)
        except DecodeError as exc:
            return ("error", exc.index)
        return {
            name: (
                value.values.view(np.uint8).tobytes() if name == "image" else value.values.tolist(),
                value.row_splits.tolist(),
            )
            for name, value in out.items()
        }

    fast = run()
    saved = _columns._MIN_TEMPLATE_GROUP
    _columns._MIN_TEMPLATE_GROUP = 1 << 62
    try:
        slow = run()
    finally:
        _columns._MIN_TEMPLATE_GROUP = saved
    assert fast == slow


def test_only_wanted_features_are_read():
    broken_other = pw.delimited(1, pw.delimited(1, b"other") + pw.delimited(2, b"\x1a\x05\x0a\x09"))
    payload = pw.example([pw.entry("i", pw.feature(pw.TF_INT64, [3])), broken_other])
    assert parsed(payload, "i", np.int64) == [3]
    with pytest.raises(DecodeError):
        parsed(payload, "other", np.int64)


def test_fixed_width_values_are_little_endian():
    payload = pw.example(
        [pw.entry("f", pw.delimited(pw.TF_FLOAT, pw.delimited(1, struct.pack("<2f", 1.0, -2.0))))]
    )
    out = rk.parse_examples([payload], {"f": rk.FixedLen((2,), np.float32)})["f"]
    assert out.tolist() == [[1.0, -2.0]]
    assert out.dtype == np.float32
    assert out.dtype.isnative


# An unpacked list of one record beside a record whose list of the same kind is present but empty: the
# batch joins their chunks, and the record boundaries must stay where they are.
NEIGHBOUR_BATCHES = {
    "int64": (
        ["0a090a070a016112021a00", "0a0d0a0b0a016112061a0408050807"],
        np.int64,
    ),
    "float": (
        ["0a090a070a016112021200", "0a130a110a0161120c120a0d0000c03f0d00002040"],
        np.float32,
    ),
}


@pytest.mark.parametrize("name", NEIGHBOUR_BATCHES)
def test_an_unpacked_list_is_not_merged_with_a_neighbours_empty_list(name):
    hexes, dtype = NEIGHBOUR_BATCHES[name]
    batch = [bytes.fromhex(h) for h in hexes]
    expected = [oracle(payload, "a")[1] for payload in batch]
    assert expected[0] == []
    got = rk.parse_examples(batch, {"a": rk.VarLen(dtype)})["a"].to_list()
    assert got == expected
    with pytest.raises(DecodeError, match="record 0"):
        rk.parse_examples(batch, {"a": rk.FixedLen((), dtype)})
    # Many such pairs, in every order, through the same scanner path.
    rows = [batch[i % 2] for i in range(7)] + [batch[0]]
    got = rk.parse_examples(rows, {"a": rk.VarLen(dtype)})["a"].to_list()
    assert got == [oracle(payload, "a")[1] for payload in rows]


# A map entry whose Feature value is written twice; the second occurrence sets float_list and then
# bytes_list again: read as one message, the float_list clears the first occurrence's bytes.
ONEOF_SWITCH_IN_SECOND_VALUE = "0a1b0a190a016b12050a030a0161120d12060a040000803f0a030a0162"


def test_a_oneof_switch_inside_a_later_value_clears_the_earlier_one():
    payload = bytes.fromhex(ONEOF_SWITCH_IN_SECOND_VALUE)
    assert oracle(payload, "k") == ("bytes_list", [b"b"])
    assert rk.decode_example(payload) == {"k": [b"b"]}
    assert rk.parse_examples([payload], {"k": rk.VarLen(bytes)})["k"].to_list() == [[b"b"]]
    assert rk.parse_examples([payload] * 9, {"k": rk.VarLen(bytes)})["k"].to_list() == [[b"b"]] * 9


def _switching_value(first: bytes, second: bytes) -> bytes:
    """A Feature value written twice: ``first``, then a float_list and ``second`` in one occurrence."""
    return pw.delimited(2, first) + pw.delimited(2, pw.feature(pw.TF_FLOAT, [1.0]) + second)


def test_a_oneof_switch_inside_a_later_value_in_sequence_examples():
    value = _switching_value(
        pw.feature(pw.TF_INT64, [1, 2]), pw.delimited(pw.TF_INT64, pw.tag(1, 0) + pw.varint(3))
    )
    context = pw.delimited(1, pw.delimited(1, b"c") + value)
    step_a = (
        pw.feature(pw.TF_BYTES, [b"a"])
        + pw.feature(pw.TF_FLOAT, [2.0])
        + pw.feature(pw.TF_BYTES, [b"c"])
    )
    step_b = pw.feature(pw.TF_INT64, [4]) + pw.feature(pw.TF_BYTES, [b"b"])
    # The FeatureList value written twice: its steps are concatenated.
    lists_entry = pw.delimited(1, b"s") + pw.delimited(2, pw.delimited(1, step_a))
    lists_entry += pw.delimited(2, pw.delimited(1, step_b))
    payload = pw.delimited(1, context) + pw.delimited(2, pw.delimited(1, lists_entry))
    message = example_pb2.SequenceExample.FromString(payload)
    assert list(message.context.feature["c"].int64_list.value) == [3]
    steps = message.feature_lists.feature_list["s"].feature
    assert [list(step.bytes_list.value) for step in steps] == [[b"c"], [b"b"]]
    ctx, seq, _ = rk.parse_sequence_examples(
        [payload], {"c": rk.VarLen(np.int64)}, {"s": rk.VarLen(bytes)}
    )
    assert ctx["c"].to_list() == [[3]]
    assert seq["s"].to_list() == [[[b"c"], [b"b"]]]
    decoded_context, decoded_lists = rk.decode_sequence_example(payload)
    assert decoded_context["c"].tolist() == [3]
    assert decoded_lists == {"s": [[b"c"], [b"b"]]}


def test_a_oneof_switch_inside_a_later_value_in_ofrecords():
    value = _switching_value(
        pw.feature(pw.OF_INT32, [1, 2], ofrecord=True),
        pw.feature(pw.OF_INT32, [5, -6], packed=False, ofrecord=True),
    )
    payload = pw.delimited(1, pw.delimited(1, b"k") + value)
    message = record_pb2.OFRecord.FromString(payload)
    assert list(message.feature["k"].int32_list.value) == [5, -6]
    assert rk.decode_ofrecord(payload)["k"].tolist() == [5, -6]
    for batch in ([payload], [payload] * 9):
        got = rk.parse_ofrecords(batch, {"k": rk.VarLen(np.int64)})["k"].to_list()
        assert got == [[5, -6]] * len(batch)


@pytest.mark.parametrize("layout", ["packed-then-packed", "packed-then-unpacked"])
def test_a_packed_run_ending_inside_a_varint_is_refused_even_before_another_run(layout):
    rest = (
        pw.delimited(1, pw.varint(5))
        if layout == "packed-then-packed"
        else pw.tag(1, 0) + pw.varint(5)
    )
    payload = pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, pw.delimited(1, b"\x01\xff") + rest))]
    )
    with pytest.raises(google.protobuf.message.DecodeError):
        example_pb2.Example.FromString(payload)
    with pytest.raises(DecodeError, match="inside a varint"):
        rk.parse_examples([payload], {"i": rk.VarLen(np.int64)})


_FEATURE = pw.feature(pw.TF_INT64, [5])


def _groups(depth: int) -> bytes:
    return pw.tag(7, 3) * depth + pw.tag(7, 4) * depth


def _entry_with_key_field(key_field: bytes) -> bytes:
    return pw.delimited(1, pw.delimited(1, key_field + pw.delimited(2, _FEATURE)))


# Records at protobuf's limits (read) and one step past them (refused), and values a later field discards.
AT_THE_LIMIT = {
    "5-byte tag": _entry_with_key_field(b"\x8a\x80\x80\x80\x00\x01i"),
    "5-byte length": _entry_with_key_field(b"\x0a\x81\x80\x80\x80\x00i"),
    "largest field number": pw.example([pw.entry("i", _FEATURE)]) + pw.tag(2**29 - 1, 0) + b"\x01",
    "10-byte unknown varint": pw.example([pw.entry("i", _FEATURE)])
    + pw.tag(9, 0)
    + b"\xff" * 9
    + b"\x01",
    "groups 100 deep in the Example": pw.example([pw.entry("i", _FEATURE)]) + _groups(100),
    "groups 97 deep in a Feature": pw.example([pw.entry("i", _FEATURE + _groups(97))]),
    # protobuf skips a field number 0 inside a group as any other field (in a message it refuses one)
    "field number 0 inside a group": pw.example([pw.entry("i", _FEATURE)])
    + pw.tag(7, 3)
    + b"\x00\x01"
    + pw.tag(7, 4),
    "field number 0 inside a group in a Feature": pw.example(
        [pw.entry("i", _FEATURE + pw.tag(7, 3) + b"\x05abcd" + pw.tag(7, 4))]
    ),
}
PAST_THE_LIMIT = {
    "6-byte tag": _entry_with_key_field(b"\x8a\x80\x80\x80\x80\x00\x01i"),
    "6-byte length": _entry_with_key_field(b"\x0a\x81\x80\x80\x80\x80\x00i"),
    "tag above 2**32 - 1": pw.example([pw.entry("i", _FEATURE)]) + pw.varint(2**32 | 8) + b"\x01",
    "11-byte unknown varint": pw.example([pw.entry("i", _FEATURE)])
    + pw.tag(9, 0)
    + b"\xff" * 10
    + b"\x01",
    "groups 101 deep in the Example": pw.example([pw.entry("i", _FEATURE)]) + _groups(101),
    "groups 98 deep in a Feature": pw.example([pw.entry("i", _FEATURE + _groups(98))]),
    "groups 97 deep in a list": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, pw.delimited(1, b"\x05") + _groups(97)))]
    ),
    "field number 0 in a message": pw.example([pw.entry("i", _FEATURE)]) + b"\x00\x01",
    # a short list: decoded by the single-record decoders' loop, not the vectorised decoder
    "11-byte varint in a packed list": pw.example(
        [pw.entry("i", pw.delimited(pw.TF_INT64, pw.delimited(1, b"\xff" * 10 + b"\x01")))]
    ),
    "11-byte varint after others in a packed list": pw.example(
        [
            pw.entry(
                "i",
                pw.delimited(
                    pw.TF_INT64, pw.delimited(1, b"\x05\x85\x01" + b"\x80" * 10 + b"\x00")
                ),
            )
        ]
    ),
    "a name that is not UTF-8": pw.example([pw.entry("i", _FEATURE)])
    + pw.delimited(1, pw.delimited(1, pw.delimited(1, b"\xff") + pw.delimited(2, _FEATURE))),
    "a broken list a repeated name discards": pw.example(
        [
            pw.entry("i", pw.delimited(pw.TF_INT64, pw.delimited(1, b"\xff" * 10 + b"\x01"))),
            pw.entry("i", _FEATURE),
        ]
    ),
}


# protobuf before 7 still reads a length written in 6 bytes, and refuses a field number 0 inside a group;
# recordkit does as protobuf 7 does.
_PROTOBUF_MAJOR = int(google.protobuf.__version__.split(".")[0])
_REFUSED_SINCE_PROTOBUF_7 = {"6-byte length"}
_READ_SINCE_PROTOBUF_7 = {
    "field number 0 inside a group",
    "field number 0 inside a group in a Feature",
}


@pytest.mark.parametrize("name", AT_THE_LIMIT)
def test_records_at_protobufs_limits_are_read(name):
    payload = AT_THE_LIMIT[name]
    if name in _READ_SINCE_PROTOBUF_7 and _PROTOBUF_MAJOR < 7:
        with pytest.raises(google.protobuf.message.DecodeError):
            example_pb2.Example.FromString(payload)  # the documented difference with older protobuf
    else:
        assert oracle(payload, "i") == ("int64_list", [5])
    assert parsed(payload, "i", np.int64) == [5]
    assert rk.decode_example(payload)["i"].tolist() == [5]


@pytest.mark.parametrize("name", PAST_THE_LIMIT)
def test_records_past_protobufs_limits_are_refused(name):
    payload = PAST_THE_LIMIT[name]
    if name in _REFUSED_SINCE_PROTOBUF_7 and _PROTOBUF_MAJOR < 7:
        example_pb2.Example.FromString(payload)  # the documented difference with older protobuf
    else:
        with pytest.raises(google.protobuf.message.DecodeError):
            example_pb2.Example.FromString(payload)
    for batch in ([payload], [payload] * 9):
        with pytest.raises(DecodeError, match="record 0"):
            rk.parse_examples(batch, {"i": rk.VarLen(np.int64)})
    with pytest.raises(DecodeError):
        rk.decode_example(payload)


@pytest.mark.parametrize(
    "values",
    [b"\xff" * 10 + b"\x01", b"\x05\x85\x01" + b"\x80" * 10 + b"\x00"],
    ids=["alone", "after-others"],
)
def test_an_over_long_varint_in_a_short_packed_list_is_refused_by_every_decoder(values):
    of_feature = pw.delimited(pw.OF_INT64, pw.delimited(1, values))
    ofrecord = pw.entry("i", of_feature)
    with pytest.raises(google.protobuf.message.DecodeError):
        record_pb2.OFRecord.FromString(ofrecord)
    with pytest.raises(DecodeError):
        rk.decode_ofrecord(ofrecord)
    with pytest.raises(DecodeError, match="record 0"):
        rk.parse_ofrecords([ofrecord], {"i": rk.VarLen(np.int64)})
    step = pw.delimited(pw.TF_INT64, pw.delimited(1, values))
    feature_list = pw.delimited(1, pw.delimited(1, b"s") + pw.delimited(2, pw.delimited(1, step)))
    for sequence in (
        pw.delimited(2, feature_list),
        pw.delimited(1, pw.features_payload([pw.entry("c", step)])),
    ):
        with pytest.raises(google.protobuf.message.DecodeError):
            example_pb2.SequenceExample.FromString(sequence)
        with pytest.raises(DecodeError):
            rk.decode_sequence_example(sequence)
        with pytest.raises(DecodeError, match="record 0"):
            rk.parse_sequence_examples(
                [sequence], {"c": rk.VarLen(np.int64)}, {"s": rk.VarLen(np.int64)}
            )


def test_ofrecord_names_that_are_not_utf8_are_read_as_protobuf_reads_them():
    payload = pw.entry("i", pw.feature(pw.OF_INT64, [5], ofrecord=True))
    payload += pw.delimited(1, pw.delimited(1, b"\xff") + pw.delimited(2, b""))
    assert list(record_pb2.OFRecord.FromString(payload).feature["i"].int64_list.value) == [5]
    assert rk.parse_ofrecords([payload], {"i": rk.VarLen(np.int64)})["i"].to_list() == [[5]]
    with pytest.raises(DecodeError, match="UTF-8"):
        rk.decode_ofrecord(payload)


def test_a_broken_list_a_oneof_switch_discards_is_refused():
    broken = pw.delimited(pw.TF_INT64, pw.delimited(1, b"\xff" * 10 + b"\x01"))
    payload = pw.example([pw.entry("i", broken + pw.feature(pw.TF_BYTES, [b"x"]))])
    with pytest.raises(google.protobuf.message.DecodeError):
        example_pb2.Example.FromString(payload)
    for batch in ([payload], [payload] * 9):
        with pytest.raises(DecodeError, match="record 0"):
            rk.parse_examples(batch, {"i": rk.VarLen(bytes)})


def test_equally_long_records_of_several_layouts_each_get_a_template(monkeypatch):
    """Records of one length laid out differently (a longer name beside a shorter list) are read right,
    and each layout of the group is read through a template rather than record by record."""
    records = []
    for i in range(300):  # 100 of each layout: enough for a template of its own
        layout = i % 3  # name length and list length trade places; every record has the same length
        name = "n" * (4 + layout)
        tokens = list(range(1, 6 - layout))
        records.append(rk.encode_example({"name": name, "tokens": tokens, "id": i % 100}))
    assert len({len(r) for r in records}) == 1
    scanned = []
    scan = _wire.scan_example
    monkeypatch.setattr(_wire, "scan_example", lambda buf, *a: scanned.append(buf) or scan(buf, *a))
    batch = rk.parse_examples(
        records,
        {
            "name": rk.FixedLen((), str),
            "tokens": rk.VarLen(np.int64),
            "id": rk.FixedLen((), np.int64),
        },
    )
    # protobuf's own parser is the oracle
    expected = [example_pb2.Example.FromString(r).features.feature for r in records]
    assert batch["name"].tolist() == [e["name"].bytes_list.value[0].decode() for e in expected]
    assert batch["tokens"].to_list() == [list(e["tokens"].int64_list.value) for e in expected]
    assert batch["id"].tolist() == [e["id"].int64_list.value[0] for e in expected]
    assert (
        len(scanned) <= 3 * 2
    )  # a template per layout (plus its first scan), no record-by-record reads


# -- differential: structurally generated payloads, recordkit against protobuf ------------------------
#
# The generator writes Examples (and OFRecords) field by field, choosing among the encodings protobuf reads:
# empty map entries, entries without key or value or with either repeated, value before key, empty
# Features, empty lists, packed and unpacked numeric lists (in several runs), oneof switches inside one
# Feature, unknown fields of every wire type at every level, over-long tags and lengths, duplicated keys,
# repeated Features messages. Some payloads carry a malformation protobuf refuses (inside a feature value,
# a list, a map or the record), some are cut short, and some carry the encoding recordkit refuses on
# purpose although protobuf reads it (docs/parsing.md, "Where recordkit differs from protobuf"): an unknown
# field inside a map entry. Known fields with another wire type than their own are skipped, as protobuf does. Every name the generator writes is
# asked for, so recordkit reads every feature value (it skips only the values of features not asked for).

NAME_POOL = ["a", "b", "", "é"]
NOT_UTF8 = b"\xff\xfe"
TF_LISTS = {1: "bytes", 2: "f4", 3: "varint"}
OF_LISTS = {1: "bytes", 2: "f4", 3: "f8", 4: "varint32", 5: "varint"}
FLOAT_BITS = [0x00000000, 0x80000000, 0x3FC00000, 0x7F800000, 0xFF800000, 0x00000001, 0x7FC00000]


@dataclasses.dataclass
class Marks:
    """What the generator put in a payload besides the encodings protobuf and recordkit read alike."""

    deliberate: bool = False  # something recordkit refuses on purpose, though protobuf reads it
    # (an unknown field inside a map entry)
    broken: bool = False  # a malformation (protobuf refuses it)


def padded_varint(value: int, size: int) -> bytes:
    """``value`` as a varint of at least ``size`` bytes (over-long encodings are valid up to a limit)."""
    out = bytearray(pw.varint(value))
    while len(out) < size:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


@st.composite
def length_field(draw, number: int, payload: bytes) -> bytes:
    """A length-delimited field, its tag and length sometimes written longer than needed (at most 5)."""
    tag = padded_varint(number << 3 | 2, draw(st.sampled_from([0, 0, 0, 5])))
    return tag + padded_varint(len(payload), draw(st.sampled_from([0, 0, 0, 2, 5]))) + payload


@st.composite
def unknown_field(draw, known: frozenset[int]) -> bytes:
    """A valid field that the message does not define, of any wire type (a group too)."""
    number = draw(st.integers(1, 40).filter(lambda n: n not in known))
    wire_type = draw(st.sampled_from([0, 1, 2, 3, 5]))
    if wire_type == 0:
        return pw.tag(number, 0) + padded_varint(draw(st.integers(0, 2**64 - 1)), 0)
    if wire_type == 1:
        return pw.tag(number, 1) + draw(st.binary(min_size=8, max_size=8))
    if wire_type == 5:
        return pw.tag(number, 5) + draw(st.binary(min_size=4, max_size=4))
    if wire_type == 2:
        return pw.delimited(number, draw(st.binary(max_size=6)))
    inner = pw.tag(1, 0) + pw.varint(draw(st.integers(0, 300)))
    return pw.tag(number, 3) + inner + pw.tag(number, 4)


# Bytes protobuf refuses wherever they stand (field 15 is defined by no message here).
MALFORMED_ANYWHERE = [
    pw.tag(15, 0) + b"\xff" * 10 + b"\x01",  # a varint of 11 bytes
    pw.tag(0, 0) + b"\x00",  # field number 0
    pw.tag(15, 6),  # wire type 6
    pw.tag(15, 4),  # an end-group tag outside a group
    b"\x80\x80\x80\x80\x80\x01",  # a tag of 6 bytes
]
# Fields cut short: refused at the end of their message (elsewhere they would take in what follows).
MALFORMED_AT_THE_END = [
    pw.tag(15, 0) + b"\x80",  # a varint
    pw.tag(15, 2) + pw.varint(50) + b"ab",  # a length past the end
    pw.tag(15, 1) + b"\x00\x00",  # a fixed64
    pw.tag(15, 5),  # a fixed32
    pw.tag(15, 3) + pw.tag(1, 0) + b"\x01",  # a group never closed
    b"\x80",  # a tag
]


@st.composite
def malformed(draw, parts: list[bytes], marks: Marks) -> bytes:
    """Return ``parts`` joined, with a malformation protobuf refuses: anywhere among them, or at the end."""
    marks.broken = True
    if draw(st.booleans()):
        at = draw(st.integers(0, len(parts)))
        return b"".join([*parts[:at], draw(st.sampled_from(MALFORMED_ANYWHERE)), *parts[at:]])
    return b"".join(parts) + draw(st.sampled_from(MALFORMED_AT_THE_END))


def _finish(draw, parts: list[bytes], marks: Marks) -> bytes:
    """The message's fields joined, rarely with a malformation."""
    if draw(st.integers(0, 24)) == 0:
        return draw(malformed(parts, marks))
    return b"".join(parts)


@st.composite
def list_value(draw, encoding: str) -> bytes:
    if encoding == "bytes":
        return draw(st.binary(max_size=4))
    if encoding == "f4":
        return struct.pack("<I", draw(st.sampled_from(FLOAT_BITS)))
    if encoding == "f8":
        return struct.pack("<d", draw(st.floats(allow_nan=False)))
    return padded_varint(draw(st.integers(-(2**63), 2**63 - 1)), draw(st.sampled_from([0, 0, 10])))


@st.composite
def list_message(draw, encoding: str, marks: Marks) -> bytes:
    """A BytesList/FloatList/Int64List/... message: values packed, unpacked, mixed, or none."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["values", "values", "values", "unknown", "wrong", "bad"]))
        if choice == "values" and encoding == "bytes":
            parts.extend(
                draw(length_field(1, value))
                for value in draw(st.lists(list_value(encoding), max_size=3))
            )
        elif choice == "values":
            values = draw(st.lists(list_value(encoding), max_size=3))
            if draw(st.booleans()):  # packed (maybe an empty run)
                parts.append(draw(length_field(1, b"".join(values))))
            else:
                wire_type = {"f4": 5, "f8": 1}.get(encoding, 0)
                parts.extend(pw.tag(1, wire_type) + value for value in values)
        elif choice == "unknown":
            parts.append(draw(unknown_field(frozenset({1}))))
        elif choice == "wrong":  # field 1 with a wire type protobuf keeps as an unknown field
            wire_type = draw(st.sampled_from([0, 1, 5] if encoding == "bytes" else [1, 5]))
            if wire_type == {"f4": 5, "f8": 1}.get(encoding, 0):
                continue
            parts.append(pw.tag(1, wire_type) + b"\x01" * {0: 1, 1: 8, 5: 4}[wire_type])
        elif encoding != "bytes" and draw(st.integers(0, 3)) == 0:
            marks.broken = True
            if encoding in ("f4", "f8"):
                parts.append(pw.delimited(1, b"\x00" * 3))  # packed, not a whole number of values
            else:
                parts.append(pw.delimited(1, b"\x01\x80"))  # packed, ending inside a varint
    return _finish(draw, parts, marks)


@st.composite
def feature_message(draw, lists: dict[int, str], marks: Marks) -> bytes:
    """A Feature: no list, one, or several (a oneof switch, or the same list written again)."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["list", "list", "list", "unknown", "wrong"]))
        if choice == "list":
            kind = draw(st.sampled_from(sorted(lists)))
            parts.append(draw(length_field(kind, draw(list_message(lists[kind], marks)))))
        elif choice == "unknown":
            parts.append(draw(unknown_field(frozenset(lists))))
        else:  # a list field as a varint: skipped as an unknown field
            parts.append(pw.tag(draw(st.sampled_from(sorted(lists))), 0) + b"\x01")
    return _finish(draw, parts, marks)


@st.composite
def map_entry(draw, lists: dict[int, str], marks: Marks, not_utf8: bool) -> bytes:
    """A map entry: any number of keys and values (0, 1 or 2 of each), in any order."""
    names = [*NAME_POOL, NOT_UTF8] if not_utf8 else NAME_POOL
    keys = [
        draw(length_field(1, name if isinstance(name, bytes) else name.encode()))
        for name in draw(st.lists(st.sampled_from(names), max_size=2))
    ]
    values = [
        draw(length_field(2, draw(feature_message(lists, marks))))
        for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2])))
    ]
    fields = draw(st.permutations(keys + values))
    if draw(st.integers(0, 15)) == 0:  # protobuf drops such an entry, recordkit refuses the record
        marks.deliberate = True
        fields.insert(draw(st.integers(0, len(fields))), draw(unknown_field(frozenset({1, 2}))))
    return draw(length_field(1, b"".join(fields)))


@st.composite
def map_message(draw, lists: dict[int, str], marks: Marks, not_utf8: bool) -> bytes:
    """A Features message (or an OFRecord): map entries, maybe empty ones, and other fields."""
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        choice = draw(st.sampled_from(["entry"] * 6 + ["empty", "unknown", "wrong"]))
        if choice == "entry":
            parts.append(draw(map_entry(lists, marks, not_utf8)))
        elif choice == "empty":
            parts.append(b"\x0a\x00")
        elif choice == "unknown":
            parts.append(draw(unknown_field(frozenset({1}))))
        else:  # field 1 as a varint: skipped as an unknown field
            parts.append(pw.tag(1, 0) + b"\x01")
    return _finish(draw, parts, marks)


@st.composite
def structured_examples(draw) -> tuple[bytes, Marks]:
    """A serialized tf.train.Example (its Features written 0 to 2 times) and what it carries."""
    marks = Marks()
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["features"] * 4 + ["unknown", "wrong"]))
        if choice == "features":
            parts.append(draw(length_field(1, draw(map_message(TF_LISTS, marks, True)))))
        elif choice == "unknown":
            parts.append(draw(unknown_field(frozenset({1}))))
        else:  # field 1 as a varint: skipped as an unknown field
            parts.append(pw.tag(1, 0) + b"\x01")
    return _maybe_cut(draw, _finish(draw, parts, marks), marks), marks


def _maybe_cut(draw, payload: bytes, marks: Marks) -> bytes:
    """Sometimes cut the payload short (not one marked deliberate: the cut could remove the mark)."""
    if payload and not marks.deliberate and draw(st.integers(0, 7)) == 0:
        marks.broken = True  # maybe: a cut between two fields leaves a valid record
        return payload[: draw(st.integers(0, len(payload) - 1))]
    return payload


@st.composite
def structured_ofrecords(draw) -> tuple[bytes, Marks]:
    """A serialized OFRecord (no non-UTF-8 names: recordkit skips them unread, see docs/parsing.md)."""
    marks = Marks()
    return _maybe_cut(draw, draw(map_message(OF_LISTS, marks, False)), marks), marks


def protobuf_features(payload: bytes, ofrecord: bool) -> dict[str, tuple[int, list[object]]] | None:
    """What protobuf reads: name -> (the oneof's field number, 0 for none; values), or None if refused."""
    try:
        if ofrecord:
            entries = record_pb2.OFRecord.FromString(payload).feature
        else:
            entries = example_pb2.Example.FromString(payload).features.feature
    except google.protobuf.message.DecodeError:
        return None
    out = {}
    for name, feature in entries.items():
        kind = feature.WhichOneof("kind")
        if kind is None:
            out[name] = (0, [])
        else:
            number = feature.DESCRIPTOR.fields_by_name[kind].number
            out[name] = (number, list(getattr(feature, kind).value))
    return out


def recordkit_features(
    records: list[bytes], ofrecord: bool
) -> list[dict[str, tuple[int, list[object]]]] | DecodeError:
    """What the batch reader (numpy and Arrow paths alike) reads for every name of the pool."""
    try:
        columns = _columns.collect(records, NAME_POOL, ofrecord=ofrecord)
    except DecodeError as exc:
        return exc
    rows: list[dict[str, tuple[int, list[object]]]] = [{} for _ in records]
    for name, column in columns.items():
        for kind, pieces in column.pieces.items():
            piece_rows, counts, values = _columns.merge_pieces(pieces)
            starts = np.concatenate([[0], np.cumsum(counts)])
            for k, row in enumerate(piece_rows.tolist()):
                rows[row][name] = (kind, values[starts[k] : starts[k + 1]].tolist())
        for row in range(len(records)):
            rows[row].setdefault(name, (0, []))
    return rows


def same_values(got: list[object], want: list[object], encoding: str) -> bool:
    if encoding == "f4":
        return np.array_equal(np.float32(got), np.float32(want), equal_nan=True)
    if encoding == "varint32":
        return [v & 0xFFFFFFFF for v in got] == [v & 0xFFFFFFFF for v in want]
    return got == want


def check_against_protobuf(payload: bytes, marks: Marks, *, ofrecord: bool) -> None:
    """recordkit refuses the record exactly when protobuf does (or on purpose), else reads the same."""
    lists = OF_LISTS if ofrecord else TF_LISTS
    want = protobuf_features(payload, ofrecord)
    for records in ([payload], [payload] * 9):  # the scanner, then the batch template
        got = recordkit_features(records, ofrecord)
        if want is None or marks.deliberate:
            assert isinstance(got, DecodeError), (payload.hex(), want)
            continue
        assert not isinstance(got, DecodeError), (payload.hex(), str(got))
        for row in got:
            for name in NAME_POOL:
                kind, values = want.get(name, (0, []))
                assert row[name][0] == kind, (payload.hex(), name)
                assert same_values(row[name][1], values, lists.get(kind, "")), (payload.hex(), name)
    decode = rk.decode_ofrecord if ofrecord else rk.decode_example
    if want is None or marks.deliberate:
        with pytest.raises(DecodeError):
            decode(payload)
        return
    # The public entry points, numpy and Arrow, with the dtypes of the kinds protobuf found.
    dtypes = (
        {1: bytes, 2: np.float32, 3: np.float64, 4: np.int32, 5: np.int64}
        if ofrecord
        else {1: bytes, 2: np.float32, 3: np.int64}
    )
    specs = {name: rk.VarLen(dtypes.get(want.get(name, (0,))[0], np.int64)) for name in NAME_POOL}
    parse = rk.parse_ofrecords if ofrecord else rk.parse_examples
    outputs = [parse([payload] * 9, specs)]
    if HAS_ARROW:
        outputs.append(parse([payload] * 9, specs, to="arrow"))
    for name in NAME_POOL:
        kind, values = want.get(name, (0, []))
        for out in outputs:
            rows = out[name].to_list() if isinstance(out, dict) else out.column(name).to_pylist()
            assert all(same_values(row, values, lists.get(kind, "")) for row in rows), name
    decoded = decode(payload)  # the single-record decoder reads what protobuf reads
    assert sorted(decoded) == sorted(want)
    for name, (kind, values) in want.items():
        got = decoded[name]
        assert (got if kind == 1 else got.tolist()) == values or same_values(
            got.tolist(), values, lists[kind]
        ), name
        assert kind or (got.dtype == np.float32 and got.size == 0), name


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(structured_examples())
def test_examples_are_refused_and_read_as_protobuf_refuses_and_reads_them(case):
    check_against_protobuf(*case, ofrecord=False)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(structured_ofrecords())
def test_ofrecords_are_refused_and_read_as_protobuf_refuses_and_reads_them(case):
    check_against_protobuf(*case, ofrecord=True)


# An empty map entry (0a 00: no key, no value) is the feature "" with no list set, wherever it stands: last
# in the map too, where it ends the record.
EMPTY_ENTRY = b"\x0a\x00"


@pytest.mark.parametrize("last", [True, False], ids=["last", "first"])
def test_an_empty_map_entry_is_read_wherever_it_stands(last):
    entries = [pw.entry("i", pw.feature(pw.TF_INT64, [1, 2]))]
    entries.insert(len(entries) if last else 0, EMPTY_ENTRY)
    payload = pw.example(entries)
    assert oracle(payload, "i") == ("int64_list", [1, 2])
    assert oracle(payload, "") == (None, [])
    specs = {"i": rk.VarLen(np.int64), "": rk.VarLen(np.int64)}
    for batch in ([payload], [payload] * 9):
        out = rk.parse_examples(batch, specs)
        assert out["i"].to_list() == [[1, 2]] * len(batch)
        assert out[""].to_list() == [[]] * len(batch)
        if HAS_ARROW:
            table = rk.parse_examples(batch, specs, to="arrow")
            assert table.column("i").to_pylist() == [[1, 2]] * len(batch)
    assert rk.decode_example(payload)["i"].tolist() == [1, 2]
    assert rk.parse_examples([pw.example([EMPTY_ENTRY])], specs)["i"].to_list() == [[]]


def test_an_empty_map_entry_ends_an_ofrecord_and_a_sequence_example():
    ofrecord = pw.entry("k", pw.feature(pw.OF_INT32, [5], ofrecord=True)) + EMPTY_ENTRY
    assert list(record_pb2.OFRecord.FromString(ofrecord).feature["k"].int32_list.value) == [5]
    for batch in ([ofrecord], [ofrecord] * 9):
        got = rk.parse_ofrecords(batch, {"k": rk.VarLen(np.int32)})["k"].to_list()
        assert got == [[5]] * len(batch)
    context = pw.delimited(1, pw.entry("c", pw.feature(pw.TF_INT64, [3])) + EMPTY_ENTRY)
    lists = pw.delimited(2, pw.entry("s", pw.delimited(1, pw.feature(pw.TF_BYTES, [b"x"]))))
    for payload in (
        context + lists,
        lists + context,
        context + lists + pw.delimited(2, EMPTY_ENTRY),
    ):
        message = example_pb2.SequenceExample.FromString(payload)
        assert list(message.context.feature["c"].int64_list.value) == [3]
        ctx, seq, _ = rk.parse_sequence_examples(
            [payload], {"c": rk.VarLen(np.int64)}, {"s": rk.VarLen(bytes)}
        )
        assert ctx["c"].to_list() == [[3]]
        assert seq["s"].to_list() == [[[b"x"]]]
