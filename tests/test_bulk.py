"""recordkit.formats.bulk against a plain record-by-record framing: the same records, the same errors.

The reference walks the length fields one record at a time and checksums every payload with
crcmod's CRC32C, checking in the order the bulk framer documents (every length checksum, then the tail,
then every payload checksum), so that the numpy paths (the predicted record starts, the payload CRCs
computed byte position by byte position) are compared with the simplest reading of the format.
"""

from __future__ import annotations

import struct

import crcmod.predefined
import numpy as np
import pytest

from recordkit.errors import ChecksumError, TruncatedRecordError
from recordkit.formats import bulk

# The reference CRC32C: crcmod's (a core dependency, so these tests run in every environment).
_crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def _masked(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return (
        length + struct.pack("<I", _masked(length)) + payload + struct.pack("<I", _masked(payload))
    )


def _reference(
    data: bytes, final: bool
) -> tuple[list[int], list[int], int] | tuple[type, int, int]:
    """(starts, lengths, end), or (error type, index, offset) of the error the bulk framer raises."""
    heads: list[int] = []
    pos = 0
    while pos + 16 <= len(data):
        stop = pos + 16 + struct.unpack_from("<Q", data, pos)[0]
        if stop > len(data):
            break
        heads.append(pos)
        pos = stop
    lengths = [struct.unpack_from("<Q", data, h)[0] for h in heads]
    for i, head in enumerate(heads):
        if _masked(data[head : head + 8]) != struct.unpack_from("<I", data, head + 8)[0]:
            return ChecksumError, i, head
    if pos < len(data):
        if (
            pos + 12 <= len(data)
            and _masked(data[pos : pos + 8]) != struct.unpack_from("<I", data, pos + 8)[0]
        ):
            return ChecksumError, len(heads), pos
        if final:
            return TruncatedRecordError, len(heads), pos
    for i, (head, n) in enumerate(zip(heads, lengths, strict=True)):
        payload = data[head + 12 : head + 12 + n]
        if _masked(payload) != struct.unpack_from("<I", data, head + 12 + n)[0]:
            return ChecksumError, i, head + 12
    return [h + 12 for h in heads], lengths, pos


def _check(data: bytes, final: bool) -> None:
    expected = _reference(data, final)
    if isinstance(expected[0], type):
        with pytest.raises(expected[0]) as caught:  # type: ignore[call-overload]
            bulk.tfrecord_frames(data, path="f", final=final)
        assert (caught.value.index, caught.value.offset) == expected[1:]
        return
    frames = bulk.tfrecord_frames(data, path="f", final=final)
    assert frames.starts.tolist() == expected[0]
    assert frames.lengths.tolist() == expected[1]
    assert frames.end == expected[2]
    unchecked = bulk.tfrecord_frames(data, check_crc=False, final=final)
    assert unchecked.starts.tolist() == expected[0]


def _payloads(rng: np.random.Generator, count: int, pattern: list[int]) -> list[bytes]:
    """``count`` random payloads whose lengths follow ``pattern`` (repeated), changed at random points."""
    lengths = [pattern[i % len(pattern)] for i in range(count)]
    for i in rng.integers(0, count, size=int(rng.integers(0, 4))).tolist():
        lengths[i] = int(rng.integers(0, 120))
    return [rng.bytes(n) for n in lengths]


@pytest.mark.parametrize("seed", range(12))
def test_periodic_and_broken_patterns_frame_like_the_reference(seed):
    rng = np.random.default_rng(seed)
    period = int(rng.integers(1, 20))
    pattern = rng.integers(0, 60, size=period).tolist()
    count = int(rng.integers(0, 3000))
    data = b"".join(_record(p) for p in _payloads(rng, count, pattern))
    for final in (True, False):
        _check(data, final)
        if data:
            cut = int(rng.integers(0, len(data)))
            _check(data[:cut], final)


@pytest.mark.parametrize("seed", range(6))
def test_random_lengths_frame_like_the_reference(seed):
    rng = np.random.default_rng(100 + seed)
    lengths = rng.integers(0, 300, size=int(rng.integers(1, 2000)))
    data = b"".join(_record(rng.bytes(int(n))) for n in lengths)
    _check(data, True)
    _check(data[: len(data) - 5], False)


@pytest.mark.parametrize("where", ["length", "length-crc", "payload", "payload-crc"])
@pytest.mark.parametrize("seed", range(4))
def test_damage_is_located_like_the_reference(where, seed):
    rng = np.random.default_rng(200 + seed)
    payloads = _payloads(rng, 2000, [7, 31])
    records = [_record(p) for p in payloads]
    data = bytearray(b"".join(records))
    victim = int(rng.integers(0, len(records)))
    head = sum(len(r) for r in records[:victim])
    n = len(payloads[victim])
    offset = {"length": 0, "length-crc": 9, "payload": 12 + n // 2, "payload-crc": 13 + n}[where]
    if where == "payload" and n == 0:
        offset = 0
    data[head + offset] ^= 0x10
    for final in (True, False):
        _check(bytes(data), final)


@pytest.mark.parametrize("first", range(0, 130, 32))
def test_payload_crcs_match_crcmods_crc32c_for_every_short_length(first, monkeypatch):
    """Lengths ``first`` to ``first + 31`` (0 included), each common enough to be checksummed with numpy
    (those over ``_VECTOR_LENGTH`` one by one)."""
    together: list[int] = []
    same_length = bulk._same_length_crcs

    def counted(data, starts, length):  # type: ignore[no-untyped-def]
        together.append(length)
        return same_length(data, starts, length)

    monkeypatch.setattr(bulk, "_same_length_crcs", counted)
    rng = np.random.default_rng(first)
    lengths = np.repeat(np.arange(first, first + 32), bulk._GROUP_MIN)
    rng.shuffle(lengths)
    payloads = [rng.bytes(int(n)) for n in lengths]
    data = b"".join(p + b"\0" * 4 for p in payloads) + b"\0" * 8
    starts = np.cumsum([0] + [len(p) + 4 for p in payloads[:-1]]).astype(np.int64)
    crcs = bulk._payload_crcs(data, starts, lengths.astype(np.int64))
    assert crcs.tolist() == [_crc32c(p) for p in payloads]
    assert sorted(together) == [n for n in range(first, first + 32) if n <= bulk._VECTOR_LENGTH]
