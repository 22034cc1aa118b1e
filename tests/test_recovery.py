"""recordkit.recover: intact records come back, damaged ranges are reported, nothing wrong is returned."""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import random
import struct
import sys
import warnings
import zlib

import pytest
from _array_record import array_record_module, write_array_record
from conftest import GOLDEN_DIR, load_manifest
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit import recover
from recordkit.errors import DataLossWarning, UnknownFormatError, UnsupportedOperationError
from recordkit.formats import _crc
from recordkit.formats import rangecrc as _rangecrc
from recordkit.formats.tfrecord import frame

RECORDS = [f"record-{i}:".encode() * (i % 7 + 1) for i in range(30)]


def _file_bytes(records, fmt, compression=""):
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format=fmt, compression=compression) as writer:
        writer.write_many(records)
    return buffer.getvalue()


def _scan(data, fmt, **options):
    with recover.scan(io.BytesIO(data), format=fmt, warn=False, **options) as records:
        return list(records), records.report


def _of_payload(i):
    return rk.encode_ofrecord({"id": [i], "text": [f"sample {i}".encode()]})


def _frame_size(fmt):
    return {"tfrecord": 16, "ofrecord": 8}[fmt]


def test_clean_file_recovers_everything_without_a_warning(tmp_path):
    path = tmp_path / "a.tfrecord"
    path.write_bytes(_file_bytes(RECORDS, "tfrecord"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with recover.scan(path) as records:
            assert list(records) == RECORDS
    assert records.report.clean
    assert records.report.records == len(RECORDS)
    assert "nothing damaged" in records.report.summary()


def test_a_damaged_record_is_skipped_reported_and_warned_about(tmp_path):
    data = bytearray(_file_bytes(RECORDS, "tfrecord"))
    start = sum(16 + len(r) for r in RECORDS[:5])
    data[start + 14] ^= 0x10  # a payload byte of record 5
    path = tmp_path / "a.tfrecord"
    path.write_bytes(bytes(data))
    with recover.scan(path) as records, pytest.warns(DataLossWarning, match="skipped 1 damaged"):
        got = list(records)
    assert got == RECORDS[:5] + RECORDS[6:]
    (skipped,) = records.report.skipped
    assert (skipped.start, skipped.end, skipped.index) == (start, start + 16 + len(RECORDS[5]), 5)
    assert skipped.reason == "payload checksum mismatch"


@pytest.mark.parametrize("fmt", ["tfrecord", "ofrecord"])
@pytest.mark.parametrize("damage", ["garbage", "length", "deleted"])
def test_sequential_formats_resynchronise_after_damage(fmt, damage):
    records = [_of_payload(i) for i in range(12)] if fmt == "ofrecord" else RECORDS
    data = bytearray(_file_bytes(records, fmt))
    k = 4
    start = sum(_frame_size(fmt) + len(r) for r in records[:k])
    if damage == "garbage":
        data[start:start] = b"\x01garbage!"  # inserted between two records
        expected = records
    elif damage == "length":
        data[start + 3] ^= 0x40  # record k's length
        expected = records[:k] + records[k + 1 :]
    else:
        del data[start + 10 : start + 12]  # two bytes out of record k
        expected = records[:k] + records[k + 1 :]
    got, report = _scan(bytes(data), fmt)
    assert got == expected
    assert len(report.skipped) == 1
    assert report.skipped[0].start == start
    assert report.skipped[0].index == k
    # Recovered frames and skipped ranges cover the file exactly.
    assert sum(_frame_size(fmt) + len(r) for r in got) + report.bytes_skipped == len(data)


@pytest.mark.parametrize("fmt", ["tfrecord", "ofrecord"])
def test_truncated_sequential_file_keeps_every_complete_record(fmt):
    records = [_of_payload(i) for i in range(6)] if fmt == "ofrecord" else RECORDS[:6]
    data = _file_bytes(records, fmt)
    cut = len(data) - len(records[-1]) // 2 - 3
    got, report = _scan(data[:cut], fmt)
    assert got == records[:-1]
    (skipped,) = report.skipped
    assert skipped.end == cut
    assert "end of the file" in skipped.reason


@pytest.mark.parametrize("name", ["corrupt_data_crc", "corrupt_length_crc", "truncated"])
def test_golden_damaged_tfrecord_files(name):
    manifest = load_manifest("tfrecord")
    entry = manifest["files"][f"{name}.tfrecord"]
    with recover.scan(GOLDEN_DIR / "tfrecord" / f"{name}.tfrecord", warn=False) as records:
        got = list(records)
    intact = manifest["files"]["examples.tfrecord"]["sha256"]
    valid_before = entry["valid_records_before_fault"]
    assert len(got) >= valid_before
    for record in got:  # nothing recovered is anything but an intact original record
        assert hashlib.sha256(record).hexdigest() in intact
    assert not records.report.clean


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_file_with_damaged_records_resynchronises(compression):
    plain = bytearray(_file_bytes(RECORDS, "tfrecord"))
    start = sum(16 + len(r) for r in RECORDS[:3])
    plain[start + 1] ^= 0x01
    compress = gzip.compress if compression == "gzip" else zlib.compress
    got, report = _scan(compress(bytes(plain)), "tfrecord", compression=compression)
    assert got == RECORDS[:3] + RECORDS[4:]
    assert report.compression == compression
    assert report.lost_compressed_bytes == 0


def test_damaged_gzip_stream_keeps_what_decompressed_and_counts_the_rest():
    data = bytearray(gzip.compress(_file_bytes(RECORDS * 50, "tfrecord"), mtime=0))
    data[len(data) // 2] ^= 0xFF
    got, report = _scan(bytes(data), "tfrecord", compression="gzip")
    assert got == (RECORDS * 50)[: len(got)]
    assert report.lost_compressed_bytes > 0
    assert "could not be read" in report.summary()


def test_ffrecord_golden_files_lose_only_their_damaged_samples():
    manifest = load_manifest("ffrecord")
    varied = manifest["files"]["varied.ffr"]
    with recover.scan(GOLDEN_DIR / "ffrecord" / "corrupt_payload.ffr", warn=False) as records:
        got = list(records)
    bad = manifest["files"]["corrupt_payload.ffr"]["bad_samples"]
    expected = [h for i, h in enumerate(varied["sha256"]) if i not in bad]
    assert [hashlib.sha256(r).hexdigest() for r in got] == expected
    assert [s.index for s in records.report.skipped] == bad
    with recover.scan(GOLDEN_DIR / "ffrecord" / "truncated.ffr", warn=False) as records:
        got = list(records)
    assert [hashlib.sha256(r).hexdigest() for r in got] == varied["sha256"][:60]
    assert records.report.skipped[0].index == 60


def test_ffrecord_trailing_garbage_keeps_the_last_sample():
    with recover.scan(GOLDEN_DIR / "ffrecord" / "trailing_garbage.ffr", warn=False) as records:
        assert list(records) == [b"hello ffrecord"]
    (skipped,) = records.report.skipped
    assert (skipped.start, skipped.end) == (38, 42)


def test_ffrecord_unfinished_file_is_reported_not_silently_empty():
    with recover.scan(GOLDEN_DIR / "ffrecord" / "unfinished.ffr", warn=False) as records:
        assert list(records) == []
    assert records.report.bytes_skipped == 53 - 12


def test_ffrecord_damaged_count_is_reported_as_a_total_loss():
    data = bytearray(_file_bytes(RECORDS, "ffrecord"))
    data[4:12] = (2**62).to_bytes(8, "little")
    got, report = _scan(bytes(data), "ffrecord")
    assert got == []
    assert report.bytes_skipped == len(data)


def test_ofrecord_golden_part_with_a_damaged_record(ofrecord_golden):
    part = min(ofrecord_golden.glob("*/*/*of_record-0"))
    with rk.open(part, format="ofrecord") as reader:
        expected = list(reader)
    data = bytearray(part.read_bytes())
    data[20:20] = b"\xff" * 9
    got, report = _scan(bytes(data), "ofrecord")
    assert got == expected[1:]  # the damaged first record no longer decodes
    (skipped,) = report.skipped
    assert (skipped.start, skipped.end) == (0, 8 + len(expected[0]) + 9)


def test_salvage_writes_only_intact_records(tmp_path):
    data = bytearray(_file_bytes(RECORDS, "tfrecord"))
    data[100] ^= 0x01
    src = tmp_path / "damaged.tfrecord"
    src.write_bytes(bytes(data))
    dst = tmp_path / "fixed.tfrecord"
    with pytest.warns(DataLossWarning):
        report = recover.salvage(src, dst)
    with rk.open(dst) as reader:
        fixed = list(reader)
    assert len(fixed) == report.records == len(RECORDS) - 1
    assert set(fixed) <= set(RECORDS)
    assert src.read_bytes() == bytes(data)  # the source is untouched


@pytest.mark.parametrize("fmt", ["tfrecord", "ofrecord", "ffrecord"])
def test_salvage_and_scan_warnings_point_at_the_callers_line(tmp_path, fmt):
    """The DataLossWarning of salvage, whose records a writer inside recordkit consumes, names the line
    that called salvage, as scan's names the caller's loop."""
    data = bytearray(_file_bytes(RECORDS, fmt))
    data[len(data) // 2] ^= 0x01
    src = tmp_path / f"damaged.{fmt}"
    src.write_bytes(bytes(data))
    with pytest.warns(DataLossWarning) as caught:
        recover.salvage(src, tmp_path / f"fixed.{fmt}")
    assert [w.filename for w in caught] == [__file__]
    with pytest.warns(DataLossWarning) as caught, recover.scan(src) as records:
        for _ in records:
            pass
    assert [w.filename for w in caught] == [__file__]


def test_salvage_of_an_unknown_format_creates_nothing(tmp_path):
    src = tmp_path / "mystery.bin"
    src.write_bytes(b"not a record file at all")
    with pytest.raises(UnknownFormatError):
        recover.salvage(src, tmp_path / "out.tfrecord")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mystery.bin"]


def test_a_scan_is_iterated_once():
    with recover.scan(io.BytesIO(frame(b"x")), format="tfrecord") as records:
        list(records)
        with pytest.raises(ValueError, match="only once"):
            list(records)


@settings(max_examples=40, deadline=None)
@given(
    records=st.lists(st.binary(max_size=60), min_size=1, max_size=12),
    fmt=st.sampled_from(["tfrecord", "ffrecord"]),
    data=st.data(),
)
def test_recovery_returns_every_undamaged_record_and_nothing_else(records, fmt, data):
    encoded = bytearray(_file_bytes(records, fmt))
    header = 12 + 12 * len(records) if fmt == "ffrecord" else 0
    if len(encoded) == header:
        return
    a = data.draw(st.integers(header, len(encoded) - 1))
    b = data.draw(st.integers(a + 1, min(len(encoded), a + 40)))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    original = bytes(encoded[a:b])
    while bytes(encoded[a:b]) == original:
        encoded[a:b] = rng.randbytes(b - a)
    got, report = _scan(bytes(encoded), fmt)
    # Every record whose bytes lie outside the damage comes back, in order, and nothing else does.
    pos, untouched = header, []
    for record in records:
        size = len(record) + (16 if fmt == "tfrecord" else 0)
        body = (pos, pos + size)
        if body[1] <= a or body[0] >= b:
            untouched.append(record)
        pos += size
    it = iter(got)
    assert all(any(record == g for g in it) for record in untouched), "an intact record was lost"
    assert all(record in records for record in got), "a recovered record is not an original"
    assert report.records == len(got)


def test_a_cut_gzip_stream_is_reported_even_at_a_record_boundary():
    data = gzip.compress(_file_bytes(RECORDS, "tfrecord"), mtime=0)
    got, report = _scan(data[:-8], "tfrecord", compression="gzip")  # the trailer is gone
    assert got == RECORDS
    assert report.stream_truncated
    assert not report.clean
    assert "cut short" in report.summary()


# -- damaged GZIP/ZLIB streams -------------------------------------------------------------------------

_WBITS = {"gzip": 31, "zlib": 15}
_COMPRESS = {"gzip": lambda data: gzip.compress(data, mtime=0), "zlib": zlib.compress}
_MANY = [f"record {i} ".encode() * (i % 13 + 3) for i in range(100)]


def _inflated_before(compressed, compression):
    """What zlib itself inflates from ``compressed``, intact bytes cut before the damage (the oracle)."""
    try:
        return zlib.decompressobj(_WBITS[compression]).decompress(compressed)
    except zlib.error:  # damage zlib sees in the prefix itself (a flipped header byte)
        return b""


def _records_within(records, length):
    """How many of ``records`` (as TFRecord frames from offset 0) end within ``length`` bytes."""
    end = count = 0
    for record in records:
        end += 16 + len(record)
        if end > length:
            break
        count += 1
    return count


def test_salvage_keeps_every_record_when_only_the_gzip_trailer_is_damaged(tmp_path):
    data = bytearray(_file_bytes(_MANY, "tfrecord", "gzip"))
    data[-1] ^= 0x01  # the member's ISIZE: every deflate byte is intact
    src = tmp_path / "damaged.tfrecord.gz"
    src.write_bytes(bytes(data))
    with pytest.warns(DataLossWarning, match="could not be read"):
        report = recover.salvage(src, tmp_path / "fixed.tfrecord")
    with rk.open(tmp_path / "fixed.tfrecord") as reader:
        assert list(reader) == _MANY
    assert report.records == 100
    assert 0 < report.lost_compressed_bytes <= 8


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_every_record_inflated_before_a_damaged_byte_is_recovered(compression):
    data = _file_bytes(_MANY, "tfrecord", compression)
    header = (
        10 if compression == "gzip" else 2
    )  # gzip's MTIME/XFL/OS bytes are not checked by anyone
    rng = random.Random(len(data))
    positions = {header, len(data) - 1, len(data) - 4, len(data) - 5, len(data) // 2}
    positions.update(rng.sample(range(header, len(data)), 25))
    for at in sorted(positions):
        damaged = bytearray(data)
        damaged[at] ^= 1 << rng.randrange(8)
        got, report = _scan(bytes(damaged), "tfrecord", compression=compression)
        intact = _records_within(_MANY, len(_inflated_before(data[:at], compression)))
        assert got[:intact] == _MANY[:intact], f"damage at compressed byte {at}"
        assert all(record in _MANY for record in got)
        assert not report.clean


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_a_cut_compressed_stream_keeps_every_record_inflated_before_the_cut(compression):
    data = _file_bytes(_MANY, "tfrecord", compression)
    for cut in sorted({1, 11, len(data) // 3, len(data) // 2, len(data) - 9, len(data) - 1}):
        got, report = _scan(data[:cut], "tfrecord", compression=compression)
        intact = _records_within(_MANY, len(_inflated_before(data[:cut], compression)))
        assert got == _MANY[:intact], f"cut after {cut} compressed bytes"
        assert report.stream_truncated or report.lost_compressed_bytes


def _read_until_error(records, error):
    """The records read before ``error``, which must end the iteration."""
    got: list[bytes] = []
    with pytest.raises(error):
        got.extend(records)  # extend keeps what came before the error
    return got


@pytest.mark.interop
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("where", ["last byte", "middle"])
def test_normal_reader_yields_at_least_what_tensorflow_yields_from_a_damaged_stream(
    tmp_path, compression, where
):
    tf = pytest.importorskip("tensorflow")
    rng = random.Random(7)
    records = [rng.randbytes(rng.randrange(1000, 60000)) for _ in range(150)]
    data = bytearray(_file_bytes(records, "tfrecord", compression))
    data[-1 if where == "last byte" else len(data) // 2] ^= 0x55
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(bytes(data))
    by_tf = _read_until_error(
        (r.numpy() for r in tf.data.TFRecordDataset(str(path), compression.upper())),
        tf.errors.DataLossError,
    )
    with rk.open(path, compression=compression) as reader:
        ours = _read_until_error(reader, rk.errors.CorruptRecordError)
    assert ours[: len(by_tf)] == by_tf == records[: len(by_tf)]
    assert len(ours) >= len(by_tf)
    got, _ = _scan(bytes(data), "tfrecord", compression=compression)
    assert got[: len(ours)] == ours


# -- crafted inputs: recovery time stays linear in the file size ---------------------------------------


def _tfrecord_header(length):
    packed = struct.pack("<Q", length)
    return packed + struct.pack("<I", _crc.masked_crc32c(packed))


def _crafted_tfrecord(size):
    """One junk byte, then valid length headers back to back, each claiming half the file."""
    return b"\x01" + _tfrecord_header(size // 2) * ((size - 1) // 12)


def _crafted_ffrecord(size):
    """A valid header of size/24 samples whose offsets alternate: every other sample spans the file."""
    count = size // 24
    start = 12 + 12 * count
    offsets = [start if i % 2 == 0 else size for i in range(count)]
    head = struct.pack("<q", count) + struct.pack(f"<{count}I", *[7] * count)
    head += struct.pack(f"<{count}q", *offsets)
    head = struct.pack("<I", zlib.crc32(head)) + head
    return head + bytes(size - len(head))


def _crafted_ofrecord(size):
    """One junk byte, then 8-byte lengths back to back, each claiming half the file."""
    return b"\x01" + struct.pack("<q", size // 2) * (size // 8)


class _WorkCounter:
    """Counts, while installed, the work a recovery scan does, in units that do not depend on the machine.

    ``hashed``: bytes checksummed one by one; ``ranges``: ranges checksummed through prefix CRCs (each a
    fixed number of numpy steps); ``lines``: Python lines executed inside recordkit. A scan that is linear
    in the file's size keeps each of them proportional to it; the quadratic scans this guards against
    hashed each overlapping frame in full (16x the bytes per 4x the size) or tried each candidate in Python.
    """

    def __init__(self, monkeypatch):
        self.hashed = self.ranges = self.lines = 0
        crc32, extend, masked = zlib.crc32, _crc.crc32c_extend, _crc.masked_crc32c
        ranged = _rangecrc.RangeCRC.crcs

        def counting_crc32(data, crc=0):
            self.hashed += len(data)
            return crc32(data, crc)

        def counting_extend(crc, data):
            self.hashed += len(data)
            return extend(crc, data)

        def counting_masked(data):
            self.hashed += len(data)
            return masked(data)

        def counting_crcs(ranges, starts, stops):
            self.ranges += len(starts)
            return ranged(ranges, starts, stops)

        monkeypatch.setattr(zlib, "crc32", counting_crc32)
        monkeypatch.setattr(_crc, "crc32c_extend", counting_extend)
        monkeypatch.setattr(_crc, "masked_crc32c", counting_masked)
        monkeypatch.setattr(_rangecrc.RangeCRC, "crcs", counting_crcs)

    def scan(self, data, fmt):
        """The ``(hashed, ranges, lines)`` work of recovering ``data``."""
        package = rk.__path__[0]

        def in_recordkit(frame, event, arg):
            if event == "line":
                self.lines += 1
            return in_recordkit

        def calls(frame, event, arg):
            return in_recordkit if frame.f_code.co_filename.startswith(package) else None

        self.hashed = self.ranges = self.lines = 0
        previous = sys.gettrace()
        sys.settrace(calls)
        try:
            _scan(data, fmt)
        finally:
            sys.settrace(previous)
        return self.hashed, self.ranges, self.lines


# Work is counted rather than timed, so the check holds on any machine. Sizes are small because line
# tracing is slow; a quadratic scan is as visible at 64 KiB as at 1 MiB when nothing is timed.
@pytest.mark.parametrize(
    ("fmt", "craft", "small"),
    [
        ("tfrecord", _crafted_tfrecord, 64 << 10),
        ("ffrecord", _crafted_ffrecord, 64 << 10),
        ("ofrecord", _crafted_ofrecord, 16 << 10),
    ],
)
def test_crafted_overlapping_frames_are_recovered_in_linear_work(monkeypatch, fmt, craft, small):
    counter = _WorkCounter(monkeypatch)
    small_work = counter.scan(craft(small), fmt)
    large_work = counter.scan(craft(4 * small), fmt)
    for name, at_small, at_large in zip(
        ("hashed", "ranges", "lines"), small_work, large_work, strict=True
    ):
        assert at_large <= 4.5 * max(at_small, 1), (name, at_small, at_large)
    hashed, ranges, lines = large_work
    size = 4 * small
    assert hashed <= 3 * size, large_work
    assert ranges <= size // 8, large_work
    assert lines <= 16 * size, large_work


def test_an_intact_record_after_crafted_tfrecord_headers_is_found():
    crafted = _crafted_tfrecord(1 << 16)
    data = frame(b"first") + crafted + frame(b"the intact record")
    got, report = _scan(data, "tfrecord")
    assert got == [b"first", b"the intact record"]
    (skipped,) = report.skipped
    assert (skipped.start, skipped.end) == (21, 21 + len(crafted))


@pytest.mark.parametrize("backend", sorted(_crc.crc32c_extend_backends()))
def test_incremental_crc32c_matches_the_whole_for_every_backend(backend):
    extend = _crc.crc32c_extend_backends()[backend]
    data = random.Random(3).randbytes(5000)
    for cut in (0, 1, 17, 4096, 5000):
        assert extend(extend(0, data[:cut]), data[cut:]) == _crc.crc32c(data)


@settings(max_examples=30, deadline=None)
@given(data=st.binary(min_size=16, max_size=20000), seed=st.integers(0, 2**32))
def test_range_crcs_equal_direct_checksums(data, seed):
    from recordkit.formats import rangecrc as _rangecrc

    rng = random.Random(seed)
    starts = [rng.randrange(len(data) + 1) for _ in range(40)]
    stops = [rng.randrange(start, len(data) + 1) for start in starts]
    for poly, extend, direct in (
        (_rangecrc.CRC32C_POLY, _crc.crc32c_extend, _crc.crc32c),
        (_rangecrc.CRC32_POLY, lambda crc, piece: zlib.crc32(piece, crc), zlib.crc32),
    ):
        got = _rangecrc.RangeCRC(data, extend, poly).crcs(starts, stops).tolist()
        assert got == [direct(data[a:b]) for a, b in zip(starts, stops, strict=True)]


@settings(max_examples=30, deadline=None)
@given(records=st.lists(st.binary(max_size=40), max_size=8), junk=st.binary(max_size=64))
def test_vectorised_header_search_matches_a_byte_by_byte_check(records, junk):
    from recordkit.formats.rangecrc import tfrecord_headers

    data = junk + b"".join(frame(r) for r in records) + junk
    if len(data) < 12:
        return
    expected = [
        p
        for p in range(len(data) - 11)
        if _crc.masked_crc32c(data[p : p + 8]) == struct.unpack_from("<I", data, p + 8)[0]
    ]
    assert tfrecord_headers(data, 0, len(data) - 11).tolist() == expected


def test_salvage_refuses_a_destination_named_for_another_format(tmp_path):
    source = tmp_path / "damaged.ffr"
    with rk.open(source, "w") as writer:
        writer.write_many([b"a", b"b", b"c"])
    with pytest.raises(UnsupportedOperationError, match="ffrecord"):
        recover.salvage(source, tmp_path / "fixed.tfrecord", warn=False)
    assert not (tmp_path / "fixed.tfrecord").exists()
    report = recover.salvage(source, tmp_path / "fixed.ffr", warn=False)
    assert report.records == 3
    assert list(rk.open(tmp_path / "fixed.ffr")) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_recovery_of_a_cut_stream_keeps_output_zlib_held_back(monkeypatch, compression):
    # With a small step, zlib often stops at the step's limit having taken in all its input, holding the
    # rest of that input's output back; at a cut, nothing more comes to push it out.
    monkeypatch.setattr(recover, "_READ_CHUNK", 12)
    records = [bytes([i]) * (i % 9) for i in range(40)]
    plain = b"".join(frame(r) for r in records)
    data = gzip.compress(plain, mtime=0) if compression == "gzip" else zlib.compress(plain)
    for cut in range(1, len(data) - 8):
        inflater = zlib.decompressobj(31 if compression == "gzip" else 15)
        inflated = b"".join(inflater.decompress(data[i : i + 1]) for i in range(cut))
        ends = itertools.accumulate(16 + len(r) for r in records)
        expected = [r for r, end in zip(records, ends, strict=True) if end <= len(inflated)]
        with recover.scan(
            io.BytesIO(data[:cut]), format="tfrecord", compression=compression, warn=False
        ) as found:
            assert list(found) == expected, cut


# -- ArrayRecord (read only): its intact chunks salvaged into the format the copy's name says ----------------


def _chunk_table(path):
    """The offsets of the data chunks (then the footer's) and their first records' numbers."""
    with rk.open(path) as reader:
        frames = reader._frames[0]
        return list(frames.offsets), list(frames.starts)


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


@pytest.mark.interop
@pytest.mark.parametrize(
    "options", ["group_size:1", "group_size:7,brotli", "uncompressed,group_size:3"]
)
def test_array_record_salvage_keeps_the_chunks_around_a_damaged_one(tmp_path, options):
    rng = random.Random(3)
    records = [rng.randbytes(rng.randrange(0, 2000)) for _ in range(200)]
    source = tmp_path / "bad.array_record"
    oracle = array_record_module().ArrayRecordReader(write_array_record(source, records, options))
    assert list(oracle.read_all()) == records
    offsets, starts = _chunk_table(source)
    _flip(source, offsets[4] + 45)  # inside chunk 4's data (past its 40-byte header)
    with pytest.raises(rk.CorruptRecordError):
        list(rk.open(source))
    with pytest.warns(DataLossWarning):
        report = recover.salvage(source, tmp_path / "rescued.array_record")
    lost = range(starts[4], starts[5])
    expected = [record for i, record in enumerate(records) if i not in lost]
    assert list(rk.open(tmp_path / "rescued.array_record")) == expected
    # array_record reads the rescued copy too (it is written in the source's format).
    rescued = array_record_module().ArrayRecordReader(str(tmp_path / "rescued.array_record"))
    assert list(rescued.read_all()) == expected
    assert report.format == "arrayrecord"
    assert report.records == len(expected)
    [gap] = report.skipped
    assert (gap.start, gap.end, gap.index) == (offsets[4], offsets[5], starts[4])
    assert "data hash" in gap.reason


@pytest.mark.interop
def test_array_record_salvage_walks_the_chunks_when_the_footer_is_damaged_or_cut(tmp_path):
    rng = random.Random(4)
    records = [rng.randbytes(rng.randrange(0, 3000)) for _ in range(300)]
    source = tmp_path / "data.array_record"
    write_array_record(source, records, "group_size:1")
    whole = source.read_bytes()
    offsets, _ = _chunk_table(source)
    footer = offsets[-1]
    damaged = tmp_path / "footer.array_record"
    damaged.write_bytes(whole)
    _flip(damaged, footer + 10)  # the footer's chunk header
    with recover.scan(damaged, warn=False) as found:
        assert list(found) == records  # every data chunk, and not the footer's entries
    [gap] = found.report.skipped
    assert (gap.start, gap.end) == (footer, len(whole))
    assert "footer" in gap.reason
    cut = tmp_path / "cut.array_record"
    cut.write_bytes(whole[:-100])  # the postscript cut off: the footer is found by its shape
    with recover.scan(cut, warn=False) as found:
        assert list(found) == records
    assert found.report.skipped[-1].end == len(whole) - 100
    cut.write_bytes(whole[: offsets[-3] + 30])  # into the last data chunk but one
    with recover.scan(cut, warn=False) as found:
        assert list(found) == records[:-2]
    assert "ends inside" in found.report.skipped[-1].reason


@pytest.mark.interop
def test_array_record_salvage_writes_the_source_format_and_refuses_another_name(tmp_path):
    source = tmp_path / "bad.array_record"
    write_array_record(source, [b"a", b"b"], "")
    for name in ("rescued.tfrecord", "rescued.ffr"):
        with pytest.raises(UnsupportedOperationError, match="salvage writes the source's format"):
            recover.salvage(source, tmp_path / name, warn=False)
        assert not (tmp_path / name).exists()
