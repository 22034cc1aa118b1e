"""recordkit.support.varints against protobuf's own varint encoder and decoder."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.internal import decoder, encoder

from recordkit.support.varints import VarintError, decode_all, decode_at

EDGES = [
    0,
    1,
    127,
    128,
    16383,
    16384,
    2**31 - 1,
    2**32,
    2**56 - 1,
    2**56,
    2**63 - 1,
    2**63,
    2**64 - 1,
]


def encode(value: int) -> bytes:
    out: list[bytes] = []
    encoder._VarintEncoder()(out.append, value, True)
    return b"".join(out)


def random_values(seed: int, n: int) -> list[int]:
    """Values of every length from 1 to 10 bytes, and the edges."""
    rng = np.random.default_rng(seed)
    shifts = rng.integers(0, 65, n).tolist()
    return [int.from_bytes(rng.bytes(8), "little") >> shift for shift in shifts] + EDGES


def as_array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8)


@pytest.mark.parametrize("seed", range(4))
def test_decode_all_reads_what_protobuf_writes(seed: int) -> None:
    values = random_values(seed, 500)
    encoded = [encode(v) for v in values]
    data = b"".join(encoded)
    got, starts = decode_all(as_array(data))
    assert got.dtype == np.uint64
    assert starts.dtype == np.int64
    assert got.tolist() == values
    assert starts.tolist() == np.cumsum([0] + [len(e) for e in encoded[:-1]]).tolist()
    # protobuf's decoder agrees on where each varint starts and what it holds
    pos, read = 0, []
    while pos < len(data):
        value, pos = decoder._DecodeVarint(data, pos)
        read.append(value)
    assert read == values


def test_decode_all_of_small_values_and_nothing() -> None:
    got, starts = decode_all(as_array(bytes(range(128))))
    assert got.tolist() == list(range(128))
    assert starts.tolist() == list(range(128))
    got, starts = decode_all(as_array(b""))
    assert got.dtype == np.uint64
    assert len(got) == 0
    assert len(starts) == 0


def test_decode_all_keeps_the_low_bit_of_a_tenth_byte_as_protobuf() -> None:
    data = b"\xff" * 9 + b"\x7f"  # a tenth byte over 1: protobuf keeps 64 bits
    assert decode_all(as_array(data))[0].tolist() == [decoder._DecodeVarint(data, 0)[0]]
    assert decode_all(as_array(data))[0].tolist() == [2**64 - 1]


def test_decode_all_accepts_overlong_encodings_within_the_limit() -> None:
    data = b"\x81\x80\x80\x00" + b"\x80" * 9 + b"\x00"  # 1 in four bytes, 0 in ten
    assert decode_all(as_array(data))[0].tolist() == [1, 0]


@pytest.mark.parametrize(
    ("data", "max_bytes", "offset", "truncated"),
    [
        (b"\x80", 10, 0, True),
        (b"\x01\x02\xff\xff", 10, 2, True),
        (b"\x05" + b"\xff" * 10 + b"\x01", 10, 1, False),
        (b"\x80" * 11 + b"\x00" + b"\x80", 10, 12, True),  # both: the end is reported
        (b"\x01" + b"\x80" * 5 + b"\x00", 5, 1, False),
    ],
)
def test_decode_all_refuses_malformed_buffers(
    data: bytes, max_bytes: int, offset: int, truncated: bool
) -> None:
    with pytest.raises(VarintError) as info:
        decode_all(as_array(data), max_bytes=max_bytes)
    assert (info.value.offset, info.value.truncated) == (offset, truncated)
    assert ("runs past" if truncated else f"longer than {max_bytes} bytes") in str(info.value)


def test_decode_at_reads_varints_among_other_bytes() -> None:
    values = random_values(7, 300)
    pieces, pos = [], []
    for i, value in enumerate(values):
        pieces.append(b"\xaa" * (i % 3))  # filler that would continue a varint
        pos.append(sum(map(len, pieces)))
        pieces.append(encode(value))
    data = as_array(b"".join(pieces))
    starts = np.array(pos, np.int64)
    got, after, good = decode_at(data, starts, len(data))
    assert good.all()
    assert got.tolist() == values
    assert (after - starts).tolist() == [len(encode(v)) for v in values]


@pytest.mark.parametrize("dense", [False, True])
def test_decode_at_marks_long_and_overrunning_varints(dense: bool) -> None:
    nine = encode(2**63 - 1)  # nine bytes
    ten = encode(2**63)
    chunks = [nine, ten, b"\x96\x01", b"\x96\x01", b"\x05"] + ([] if dense else [b"\x01"] * 20)
    data = as_array(b"".join(chunks))
    pos = np.cumsum([0] + [len(c) for c in chunks[:-1]]).astype(np.int64)
    end = np.full(len(pos), len(data), np.int64)
    end[3] = pos[3] + 1  # the varint runs past its end
    end[4] = pos[4]  # it starts at its end
    got, after, good = decode_at(data, pos, end, max_bytes=9)
    assert good.tolist() == [True, False, True, False, False] + [True] * (len(pos) - 5)
    assert got[0] == 2**63 - 1
    assert got[2] == 150
    assert after[2] == pos[2] + 2
    assert decode_at(data, pos, end)[2][1]  # ten bytes are allowed by default


def test_decode_at_positions_past_the_data_are_bad_not_errors() -> None:
    data = as_array(b"\x01\x80")
    pos = np.array([0, 1, 5], np.int64)
    got, _after, good = decode_at(data, pos, len(data))
    assert good.tolist() == [True, False, False]
    assert got[0] == 1
