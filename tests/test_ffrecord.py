"""FFRecord: golden files written by HFAiLab's ffrecord, damaged files, the writer, the drop-in API."""

from __future__ import annotations

import hashlib
import io
import pickle

import numpy as np
import pytest

import recordkit as rk
from recordkit.compat import ffrecord
from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    HeaderError,
    LegacyFormatWarning,
    TruncatedRecordError,
)

VALID = ["empty.ffr", "one.ffr", "varied.ffr", "pickled.ffr", "packed.ffr"]
DAMAGED = {
    "corrupt_payload.ffr": ChecksumError,
    "corrupt_header.ffr": ChecksumError,
    "truncated.ffr": HeaderError,
    "truncated_last_sample.ffr": ChecksumError,
    "trailing_garbage.ffr": ChecksumError,
    "unfinished.ffr": HeaderError,
}


def _sha(records):
    return [hashlib.sha256(bytes(r)).hexdigest() for r in records]


def _samples(entry):
    """Rebuild the samples of a golden file from its manifest (hex, or the documented content rule)."""
    if "content_rule" in entry:
        return [
            hashlib.shake_256(b"ffrecord-golden-varied-%d" % i).digest(length)
            for i, length in enumerate(entry["lengths"])
        ]
    return [bytes.fromhex(h) for h in entry["hex"]]


@pytest.mark.parametrize("name", VALID)
def test_golden_files_read_to_their_hashes(golden_dir, ffrecord_manifest, name):
    entry = ffrecord_manifest["files"][name]
    with rk.open(golden_dir / "ffrecord" / name) as reader:
        records = list(reader)
        assert len(reader) == entry["records"]
        assert reader.read(range(len(reader))) == records
    assert _sha(records) == entry["sha256"]


@pytest.mark.parametrize("name", VALID)
def test_rewriting_golden_samples_is_byte_identical(golden_dir, ffrecord_manifest, tmp_path, name):
    entry = ffrecord_manifest["files"][name]
    samples = _samples(entry)
    assert _sha(samples) == entry["sha256"]
    expected = (golden_dir / "ffrecord" / name).read_bytes()
    for n in (None, len(samples)):
        with rk.open(tmp_path / name, "w", n=n) as writer:
            writer.write_many(samples)
        assert (tmp_path / name).read_bytes() == expected
    buffer = io.BytesIO()  # unknown n and a file object: samples are assembled at close
    with rk.open(buffer, "w", format="ffrecord") as writer:
        writer.write_many(samples)
    assert buffer.getvalue() == expected


def test_multi_directory_reads_as_one(golden_dir, ffrecord_manifest, tmp_path):
    entry = ffrecord_manifest["files"]["multi/"]
    with rk.open(golden_dir / "ffrecord" / "multi") as reader:
        assert len(reader) == entry["records"]
        assert _sha(reader) == entry["sha256"]
        assert reader[-1].hex() == entry["hex"][-1]
        assert [r.hex() for r in reader.read([9, 0, 4])] == [entry["hex"][i] for i in (9, 0, 4)]
    samples = [bytes.fromhex(h) for h in entry["hex"]]
    ffrecord.dump(samples, tmp_path / "multi", nfiles=3)
    for part in entry["parts"]:
        written = (tmp_path / "multi" / part).read_bytes()
        assert hashlib.sha256(written).hexdigest() == entry["parts"][part]["file_sha256"]


@pytest.mark.parametrize(("name", "error"), sorted(DAMAGED.items()))
def test_damaged_golden_files_raise(golden_dir, name, error):
    def read_all() -> list[bytes]:
        with rk.open(golden_dir / "ffrecord" / name) as reader:
            return list(reader)

    with pytest.raises(error) as caught:
        read_all()
    assert caught.value.path.endswith(name)


def test_corrupt_payload_locates_the_sample(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["corrupt_payload.ffr"]
    with rk.open(golden_dir / "ffrecord" / "corrupt_payload.ffr") as reader:
        assert reader[49]
        with pytest.raises(ChecksumError) as caught:
            reader[50]
    assert caught.value.index == entry["bad_samples"][0] == 50
    assert caught.value.offset == 26216 - 5


def test_check_crc_false_returns_what_ffrecord_returns(golden_dir, ffrecord_manifest):
    for name in ("corrupt_payload.ffr", "trailing_garbage.ffr", "truncated_last_sample.ffr"):
        said = ffrecord_manifest["files"][name]["ffrecord_says"]["check_data=False"]["read_one"]
        with rk.open(golden_dir / "ffrecord" / name, check_crc=False) as reader:
            assert _sha(reader) == said


def test_truncated_file_error_names_the_sample_cut_short(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["truncated.ffr"]
    cut = entry["valid_records_before_fault"]
    source = ffrecord_manifest["files"][entry["derived_from"]]
    with pytest.raises(HeaderError) as caught:
        rk.open(golden_dir / "ffrecord" / "truncated.ffr")
    assert caught.value.index == cut == 60
    assert caught.value.offset == source["offsets"][cut]
    assert "past the end" in str(caught.value)


def test_legacy_file_warns_and_still_checks_samples(golden_dir, tmp_path):
    with (
        pytest.warns(LegacyFormatWarning),
        rk.open(golden_dir / "ffrecord" / "legacy_zero_meta_crc.ffr") as r,
    ):
        assert r[0] == b"hello ffrecord"
    data = bytearray((golden_dir / "ffrecord" / "legacy_zero_meta_crc.ffr").read_bytes())
    data[-1] ^= 1
    (tmp_path / "bad.ffr").write_bytes(bytes(data))
    with (
        pytest.warns(LegacyFormatWarning),
        rk.open(tmp_path / "bad.ffr") as reader,
        pytest.raises(ChecksumError),
    ):
        reader[0]


@pytest.mark.parametrize(
    ("header", "size_after", "message"),
    [
        ((-1).to_bytes(8, "little", signed=True), 0, "declares -1"),
        ((10**15).to_bytes(8, "little"), 0, "declares"),
    ],
)
def test_impossible_counts(tmp_path, header, size_after, message):
    (tmp_path / "x.ffr").write_bytes(b"\1\2\3\4" + header + bytes(size_after))
    with pytest.raises(HeaderError, match=message):
        rk.open(tmp_path / "x.ffr")


def test_short_file_is_truncated(tmp_path):
    (tmp_path / "x.ffr").write_bytes(b"\1\2\3")
    with pytest.raises(TruncatedRecordError):
        rk.open(tmp_path / "x.ffr")


def _header(crcs, offsets, *, meta=None):
    from array import array

    from recordkit.formats.ffrecord import build_header

    header = build_header(array("I", crcs), array("q", offsets))
    return header if meta is None else meta.to_bytes(4, "little") + header[4:]


def test_decreasing_offsets_are_refused(tmp_path):
    (tmp_path / "x.ffr").write_bytes(_header([0, 0], [36, 30]) + b"abc")
    with pytest.raises(HeaderError, match="decrease") as caught:
        rk.open(tmp_path / "x.ffr")
    assert caught.value.index == 1


def test_first_offset_must_follow_the_header(tmp_path):
    (tmp_path / "x.ffr").write_bytes(_header([0], [40]) + bytes(10))
    with pytest.raises(HeaderError, match="right after the header"):
        rk.open(tmp_path / "x.ffr")


def test_writer_count_mismatch_leaves_no_file(tmp_path):
    with pytest.raises(ValueError, match="n=3"), rk.open(tmp_path / "x.ffr", "w", n=3) as writer:
        writer.write_many([b"a", b"b"])
    assert list(tmp_path.iterdir()) == []
    with rk.open(tmp_path / "x.ffr", "w", n=1) as writer:
        writer.write(b"a")
        with pytest.raises(ValueError, match="n=1"):
            writer.write(b"b")
    with rk.open(tmp_path / "x.ffr") as reader:
        assert list(reader) == [b"a"]


def test_stream_reading(golden_dir, ffrecord_manifest):
    from recordkit.testing import NoSeekBytesIO

    data = (golden_dir / "ffrecord" / "varied.ffr").read_bytes()
    with rk.open(NoSeekBytesIO(data), format="ffrecord") as reader:
        assert _sha(reader) == ffrecord_manifest["files"]["varied.ffr"]["sha256"]
    with (
        rk.open(NoSeekBytesIO(data[:-10]), format="ffrecord") as reader,
        pytest.raises(CorruptRecordError),
    ):
        list(reader)


def _damaged_files():
    """FFRecord files damaged by structure, each with the samples the intact file held."""
    from recordkit.formats.ffrecord import build_header  # noqa: F401 - used through _header

    samples = [b"alpha", b"", b"gamma" * 5]
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="ffrecord") as writer:
        writer.write_many(samples)
    good = buffer.getvalue()
    zero = _header([], [])
    return {
        "zero samples then data": (zero + b"leftover", []),
        "zero samples then one byte": (zero + b"\0", []),
        "trailing bytes": (good + b"!", samples),
        "last sample cut": (good[:-3], samples),
        "middle sample cut": (good[: len(good) - 26], samples),
        "header cut": (good[:20], samples),
        "count too large": (good[:4] + (99).to_bytes(8, "little") + good[12:], samples),
        "header checksum damaged": (bytes([good[0] ^ 1]) + good[1:], samples),
        "payload damaged": (good[:-1] + bytes([good[-1] ^ 1]), samples),
    }


def _outcome(source):
    """The samples a reader yields from ``source`` and the recordkit error it ends with (or None)."""
    got = []
    try:
        with rk.open(source, format="ffrecord") as reader:
            got.extend(reader)
    except CorruptRecordError as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("case", list(_damaged_files()))
def test_streams_and_seekable_files_agree_on_damage(tmp_path, case):
    from recordkit.testing import NoSeekBytesIO

    data, samples = _damaged_files()[case]
    (tmp_path / "x.ffr").write_bytes(data)
    outcomes = {
        "path": _outcome(tmp_path / "x.ffr"),
        "seekable": _outcome(io.BytesIO(data)),
        "stream": _outcome(NoSeekBytesIO(data)),
    }
    for how, (got, error) in outcomes.items():
        assert error is not None, f"{how} read the damaged file without an error"
        assert got == samples[: len(got)], f"{how} returned a sample that was never written"
    assert outcomes["path"][0] == outcomes["seekable"][0]


def test_a_stream_declaring_zero_samples_with_data_after_it_is_a_header_error():
    from recordkit.testing import NoSeekBytesIO

    data = _header([], []) + b"data the header does not describe"
    for source in (io.BytesIO(data), NoSeekBytesIO(data)):
        with pytest.raises(HeaderError, match="declares 0 samples") as caught:
            list(rk.open(source, format="ffrecord"))
        assert caught.value.offset == 12
    assert list(rk.open(NoSeekBytesIO(_header([], [])), format="ffrecord")) == []


# -- the drop-in API ------------------------------------------------------------------------------


def test_dropin_reader_matches_ffrecords_types(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["varied.ffr"]
    with ffrecord.FileReader(golden_dir / "ffrecord" / "varied.ffr", check_data=True) as reader:
        assert reader.n == 100
        batch = reader.read([3, 1, 99])
        assert all(isinstance(a, np.ndarray) for a in batch)
        assert all(a.dtype == np.uint8 for a in batch)
        assert all(a.flags.writeable for a in batch)
        assert _sha(batch) == [entry["sha256"][i] for i in (3, 1, 99)]
        one = reader.read_one(2)
        assert one.dtype == np.uint8
        assert hashlib.sha256(one.tobytes()).hexdigest() == entry["sha256"][2]
        assert list(reader.get_offsets(0)[:3]) == entry["offsets"][:3]
        assert list(reader.get_checksums(0)[:3]) == entry["crc32"][:3]
        reader.validate()
        with pytest.raises(IndexError):
            reader.read_one(100)
        clone = pickle.loads(pickle.dumps(reader))
        assert clone.read_one(2).tobytes() == one.tobytes()
        clone.close()


@pytest.mark.parametrize("files", [1, 3])
def test_dropin_reader_takes_negative_indexes_as_rk_open_does(tmp_path, files):
    paths = []
    for part in range(files):
        path = tmp_path / f"PART_{part:05d}.ffr"
        with rk.open(path, "w") as writer:
            writer.write_many([b"part %d sample %d" % (part, i) for i in range(4)])
        paths.append(path)
    source = paths[0] if files == 1 else tmp_path
    wanted = [-1, 0, -4 * files, 2, -2]
    with rk.open(source) as expected, ffrecord.FileReader(source) as reader:
        assert [a.tobytes() for a in reader.read(wanted)] == expected.read(wanted)
        assert reader.read_one(-1).tobytes() == expected[-1]
        assert reader.read_one(-4 * files).tobytes() == expected[0]
        assert [a.tobytes() for a in reader.read(iter([-1]))] == [expected[-1]]
        for bad in (-4 * files - 1, 4 * files):
            with pytest.raises(IndexError, match="out of range"):
                reader.read_one(bad)
            with pytest.raises(IndexError, match="out of range"):
                reader.read([0, bad])


def test_dropin_reader_on_a_directory(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["multi/"]
    reader = ffrecord.FileReader(str(golden_dir / "ffrecord" / "multi"))
    assert reader.n == 10
    assert [a.tobytes().hex() for a in reader.read(range(10))] == entry["hex"]
    reader.close()


def test_dropin_reader_raises_recordkit_errors(golden_dir):
    with pytest.raises(ChecksumError):
        ffrecord.FileReader(golden_dir / "ffrecord" / "corrupt_header.ffr")
    reader = ffrecord.FileReader(golden_dir / "ffrecord" / "corrupt_payload.ffr", check_data=True)
    with pytest.raises(ChecksumError):
        reader.read([49, 50])
    reader.close()


def test_dropin_writer(tmp_path, golden_dir):
    with ffrecord.FileWriter(tmp_path / "one.ffr", 1) as writer:
        writer.write_one(np.frombuffer(b"hello ffrecord", dtype=np.uint8))
        assert writer.count == 1
    assert (tmp_path / "one.ffr").read_bytes() == (golden_dir / "ffrecord" / "one.ffr").read_bytes()
    writer = ffrecord.FileWriter(tmp_path / "short.ffr", 3)
    writer.write_one(b"abc")
    with pytest.raises(ValueError, match="n=3"):
        writer.close()
    assert not (tmp_path / "short.ffr").exists()


def test_dump_single_file(tmp_path, golden_dir):
    ffrecord.dump([b"hello ffrecord"], tmp_path / "one.ffr", nfiles=1)
    assert (tmp_path / "one.ffr").read_bytes() == (golden_dir / "ffrecord" / "one.ffr").read_bytes()


def test_dropin_get_offsets_ends_with_the_file_size(golden_dir, ffrecord_manifest):
    path = golden_dir / "ffrecord" / "varied.ffr"
    entry = ffrecord_manifest["files"]["varied.ffr"]
    with ffrecord.FileReader(path) as reader:
        offsets = reader.get_offsets(0)
        checksums = reader.get_checksums(0)
    assert offsets.dtype == np.int64
    assert checksums.dtype == np.uint32
    assert len(offsets) == reader.n + 1
    assert len(checksums) == reader.n
    assert list(offsets[:-1]) == entry["offsets"]
    assert offsets[-1] == path.stat().st_size
    assert list(checksums) == entry["crc32"]


def test_dropin_validate_checks_headers_as_the_reference_does(golden_dir):
    # The reference's validate() verifies each header checksum; samples are checked as they are read.
    with ffrecord.FileReader(
        golden_dir / "ffrecord" / "corrupt_payload.ffr", check_data=False
    ) as r:
        r.validate()
    header = golden_dir / "ffrecord" / "corrupt_header.ffr"
    with ffrecord.FileReader(header, check_data=False) as r, pytest.raises(ChecksumError):
        r.validate()


def test_dropin_samples_are_writable_and_independent(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["varied.ffr"]
    with ffrecord.FileReader(golden_dir / "ffrecord" / "varied.ffr") as reader:
        batch = reader.read([5, 5, 6])
        batch[0][:] = 0
        assert _sha([batch[1]]) == [entry["sha256"][5]]
        assert _sha(reader.read([5])) == [entry["sha256"][5]]
        one = reader.read_one(7)
        one[:] = 1
        assert _sha([reader.read_one(7)]) == [entry["sha256"][7]]
    with pytest.raises(ValueError, match="closed"):
        reader.read([0])


def test_dropin_reads_across_files_in_any_order(golden_dir, ffrecord_manifest):
    entry = ffrecord_manifest["files"]["multi/"]
    with ffrecord.FileReader(golden_dir / "ffrecord" / "multi") as reader:
        order = [9, 0, 5, 5, 3, 8, 1]
        assert [a.tobytes().hex() for a in reader.read(order)] == [entry["hex"][i] for i in order]
        assert reader.read([]) == []


@pytest.mark.interop
def test_dropin_api_matches_the_cpp_reference(golden_dir, tmp_path):
    reference = pytest.importorskip("ffrecord")  # HFAiLab's C++ ffrecord, when built
    paths = [golden_dir / "ffrecord" / name for name in ("varied.ffr", "one.ffr", "packed.ffr")]
    theirs = reference.FileReader([str(p) for p in paths], True)
    ours = ffrecord.FileReader(paths, True)
    try:
        assert ours.n == theirs.n
        assert list(ours.fnames) == list(theirs.fnames)
        for i in range(len(paths)):
            np.testing.assert_array_equal(ours.get_offsets(i), theirs.get_offsets(i))
            np.testing.assert_array_equal(ours.get_checksums(i), theirs.get_checksums(i))
            assert ours.get_offsets(i).dtype == theirs.get_offsets(i).dtype
            assert ours.get_checksums(i).dtype == theirs.get_checksums(i).dtype
        order = [ours.n - 1, 0, 3, 3, 100, 50]
        for a, b in zip(ours.read(order), theirs.read(order), strict=True):
            assert a.dtype == b.dtype
            assert a.shape == b.shape
            assert a.flags.writeable == b.flags.writeable
            assert a.tobytes() == b.tobytes()
        assert ours.read_one(4).tobytes() == theirs.read_one(4).tobytes()
        assert ours.validate() is theirs.validate() is None
        public = {name for name in dir(theirs) if not name.startswith("_")}
        assert public <= {name for name in dir(ours) if not name.startswith("_")}
    finally:
        ours.close()
        theirs.close()


def _write_without_n(path, samples):
    with rk.open(path, "w", format="ffrecord") as writer:
        writer.write_many(samples)
    return path.read_bytes()


def test_writing_without_n_needs_no_temporary_directory(tmp_path, monkeypatch):
    import tempfile

    samples = [b"a" * 70_000, b"", b"bc" * 10, b"d" * 200_000]
    expected = io.BytesIO()
    with rk.open(expected, "w", format="ffrecord", n=len(samples)) as writer:
        writer.write_many(samples)
    # The samples wait beside the output, not in $TMPDIR (another disk, maybe full or missing).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no such directory"))
    assert _write_without_n(tmp_path / "x.ffr", samples) == expected.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.ffr"]


def test_writing_without_n_copies_in_user_space_when_the_kernel_cannot(tmp_path, monkeypatch):
    import os

    samples = [bytes([i]) * (i * 1000) for i in range(40)]
    kernel = _write_without_n(tmp_path / "kernel.ffr", samples)
    calls = []

    def refuse(*args):
        calls.append(args)
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    assert _write_without_n(tmp_path / "user.ffr", samples) == kernel
    assert calls
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="ffrecord") as writer:
        writer.write_many(samples)
    assert buffer.getvalue() == kernel
    with rk.open(tmp_path / "user.ffr") as reader:
        assert list(reader) == samples


def test_the_legacy_format_warning_points_at_the_line_of_the_user(golden_dir):
    legacy = golden_dir / "ffrecord" / "legacy_zero_meta_crc.ffr"
    with pytest.warns(LegacyFormatWarning, match="legacy_zero_meta_crc.ffr") as caught:
        rk.open(legacy).close()
    with pytest.warns(LegacyFormatWarning) as also:
        assert len(rk.open(legacy)) == 1
    assert {warning.filename for warning in [*caught, *also]} == {__file__}


def test_read_into_fills_the_buffers_it_is_given(tmp_path):
    """FFRecordFrameReader.read_into: the drop-in's reading, from a local file and from a file object."""
    records = [b"alpha", b"", b"gamma" * 1000, b"delta"]
    path = tmp_path / "a.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    data = bytearray(path.read_bytes())
    with (
        rk.open(path) as reader,
        rk.open(io.BytesIO(bytes(data)), format="ffrecord") as from_object,
    ):
        for frames in (reader.frame_reader(0), from_object.frame_reader(0)):
            got = frames.read_into([3, 0, 1, 2, 0], bytearray)
            assert all(type(buffer) is bytearray for buffer in got)
            assert got == [records[i] for i in (3, 0, 1, 2, 0)]
    start = int.from_bytes(data[12 + 4 * 4 + 8 * 2 : 12 + 4 * 4 + 8 * 3], "little")
    data[start] ^= 1  # a payload byte of sample 2
    path.write_bytes(bytes(data))
    with rk.open(path) as reader:
        with pytest.raises(ChecksumError) as info:
            reader.frame_reader(0).read_into([2], bytearray)
        assert (info.value.index, info.value.offset) == (2, start)
    with rk.open(path, check_crc=False) as reader:
        assert reader.frame_reader(0).read_into([2], bytearray)[0] == bytes(
            data[start : start + 5000]
        )


def test_the_dropin_keeps_its_short_import_line() -> None:
    """``from recordkit.ffrecord import ...`` is the drop-in's import line; it is the compat module itself."""
    import recordkit.compat.ffrecord
    from recordkit import ffrecord
    from recordkit.ffrecord import FileReader

    assert ffrecord is recordkit.compat.ffrecord
    assert FileReader is recordkit.compat.ffrecord.FileReader
