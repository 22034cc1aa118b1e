"""recordkit.open: format and compression detection, sources, modes, readers over several files."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from _cli import run_cli

import recordkit as rk
from recordkit.errors import (
    NoLengthError,
    UnknownFormatError,
    UnsafePathError,
    UnsupportedOperationError,
)

RECORDS = [b"\x0a\x05hello", b"", b"\x0a\x02ab" * 50, bytes(range(256))]
NONEMPTY = [r for r in RECORDS if r]


def write(path: Path | str, records: list[bytes], **options: object) -> None:
    with rk.open(path, "w", **options) as writer:  # type: ignore[call-overload]
        writer.write_many(records)


@pytest.mark.parametrize(
    ("name", "fmt", "compression"),
    [
        ("a.tfrecord", "tfrecord", ""),
        ("a.tfrecords", "tfrecord", ""),
        ("a.tfrec", "tfrecord", ""),
        ("a.TFR", "tfrecord", ""),
        ("a.tfrecord.gz", "tfrecord", "gzip"),
        ("a.tfrecord.gzip", "tfrecord", "gzip"),
        ("a.tfrecord.zlib", "tfrecord", "zlib"),
        ("a.ofrecord", "ofrecord", ""),
        ("a.ffr", "ffrecord", ""),
    ],
)
def test_suffix_selects_format_and_compression(tmp_path, name, fmt, compression):
    records = NONEMPTY if fmt == "ofrecord" else RECORDS
    write(tmp_path / name, records)
    with rk.open(tmp_path / name) as reader:
        assert (reader.format, reader.compression) == (fmt, compression)
        assert list(reader) == records
        assert reader.supports_random_access == (compression == "")


@pytest.mark.parametrize(
    ("name", "fmt", "compression"),
    [
        ("a.tfrecord", "tfrecord", ""),
        ("a.tfrecord.gz", "tfrecord", "gzip"),
        ("a.tfrecord.zlib", "tfrecord", "zlib"),
        ("a.ofrecord", "ofrecord", ""),
        ("a.ffr", "ffrecord", ""),
    ],
)
def test_content_sniffing_without_suffix(tmp_path, name, fmt, compression):
    records = NONEMPTY if fmt == "ofrecord" else RECORDS
    write(tmp_path / name, records)
    os.rename(tmp_path / name, tmp_path / "part-00000")
    with rk.open(tmp_path / "part-00000") as reader:
        assert (reader.format, reader.compression) == (fmt, compression)
        assert list(reader) == records
    with open(tmp_path / "part-00000", "rb") as file, rk.open(file) as reader:
        assert (reader.format, reader.compression) == (fmt, compression)
        assert list(reader) == records


def test_large_ffrecord_header_is_sniffed(tmp_path):
    records = [bytes([i % 251]) for i in range(20000)]  # header of 240 KB, beyond the first read
    write(tmp_path / "big.ffr", records)
    os.rename(tmp_path / "big.ffr", tmp_path / "big")
    with rk.open(tmp_path / "big") as reader:
        assert reader.format == "ffrecord"
        assert reader[-1] == records[-1]


def test_tfrecord_named_file_with_gzip_content_is_detected(tmp_path):
    write(tmp_path / "a.tfrecord.gz", RECORDS)
    os.rename(tmp_path / "a.tfrecord.gz", tmp_path / "a.tfrecord")
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert reader.compression == "gzip"
        assert list(reader) == RECORDS


def test_undecidable_format(tmp_path):
    (tmp_path / "blob").write_bytes(b"this is not a record file at all")
    with pytest.raises(UnknownFormatError, match="ffrecord, ofrecord, tfrecord"):
        rk.open(tmp_path / "blob")
    with pytest.raises(UnknownFormatError):
        rk.open(tmp_path / "out.bin", "w")
    with pytest.raises(UnknownFormatError, match="nosuch"):
        rk.open(tmp_path / "blob", format="nosuch")


@pytest.mark.parametrize("mode", ["a", "rb", "wb", "x", ""])
def test_bad_mode(tmp_path, mode):
    with pytest.raises(ValueError, match="mode"):
        rk.open(tmp_path / "a.tfrecord", mode)


def test_options_for_the_other_mode_are_refused(tmp_path):
    write(tmp_path / "a.tfrecord", RECORDS)
    with pytest.raises(ValueError, match="writing"):
        rk.open(tmp_path / "a.tfrecord", n=3)
    with pytest.raises(ValueError, match="reading"):
        rk.open(tmp_path / "b.tfrecord", "w", lenient=True)
    with pytest.raises(ValueError, match="compression"):
        rk.open(tmp_path / "b.ffr", "w", compression="gzip")
    with pytest.raises(ValueError, match="level"):
        rk.open(tmp_path / "b.tfrecord", "w", level=3)
    with pytest.raises(ValueError, match="unknown compression"):
        rk.open(tmp_path / "b.tfrecord", "w", compression="lz4")
    assert not (tmp_path / "b.tfrecord").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB", "", "none", "NONE", "gzip"])
def test_tensorflow_compression_names(tmp_path, compression):
    write(tmp_path / "x.tfrecord", RECORDS, compression=compression)
    with rk.open(tmp_path / "x.tfrecord", compression=compression) as reader:
        assert list(reader) == RECORDS


def test_random_access_negative_indexes_slices_and_read_order(tmp_path):
    records = [b"r%d" % i for i in range(50)]
    for name in ("a.tfrecord", "a.ofrecord", "a.ffr"):
        write(tmp_path / name, records)
        with rk.open(tmp_path / name) as reader:
            assert len(reader) == 50
            assert reader[0] == b"r0"
            assert reader[-1] == b"r49"
            assert reader[-50] == b"r0"
            assert reader[10:13] == records[10:13]
            assert reader[::-7] == records[::-7]
            assert reader[45:100] == records[45:]
            assert reader.read([7, 3, 3, -1, 4]) == [b"r7", b"r3", b"r3", b"r49", b"r4"]
            assert reader.read([]) == []
            with pytest.raises(IndexError):
                reader[50]
            with pytest.raises(IndexError):
                reader[-51]
            with pytest.raises(TypeError):
                reader["1"]  # type: ignore[call-overload]


def test_read_checks_the_type_of_every_index(tmp_path):
    """A float, a string or None anywhere in read()'s list is refused as reader[i] refuses it."""
    import numpy as np

    records = [b"r%d" % i for i in range(5)]
    for name in ("a.tfrecord", "a.ofrecord", "a.ffr"):
        write(tmp_path / name, records)
        with rk.open(tmp_path / name) as reader, rk.open([tmp_path / name] * 2) as two:
            for bad in (2.5, 2.0, "2", None):
                for wanted in ([0, bad], [bad], [1, 0, bad, 3]):
                    for r in (reader, two):
                        with pytest.raises(TypeError):
                            r.read(wanted)
            assert reader.read([np.int64(4), 0, True]) == [b"r4", b"r0", b"r1"]


def test_read_takes_numpy_index_arrays_but_not_masks(tmp_path):
    """A 1-D integer array reads as its list of ints; a boolean array is not a list of indexes."""
    import numpy as np

    records = [b"r%d" % i for i in range(6)]
    for name in ("a.tfrecord", "a.ffr"):
        write(tmp_path / name, records)
        reader = rk.open(tmp_path / name)
        order = np.random.default_rng(0).permutation(6)
        for dtype in (np.int64, np.int32, np.uint64, np.uint8):
            wanted = order.astype(dtype)
            assert reader.read(wanted) == [records[i] for i in order.tolist()]
        assert reader.read(order[::-2]) == [records[i] for i in order[::-2].tolist()]
        assert reader.read(np.array([-1, 0])) == [b"r5", b"r0"]
        assert reader.read(np.array([], np.int64)) == []
        with pytest.raises(TypeError, match="boolean mask"):
            reader.read(np.array([True, False, True]))
        with pytest.raises(IndexError):
            reader.read(np.array([0, 6]))
        reader.close()


def test_sequential_sources_refuse_random_access(tmp_path):
    write(tmp_path / "a.tfrecord.gz", RECORDS)
    with rk.open(tmp_path / "a.tfrecord.gz") as reader:
        for operation in (len, lambda r: r[0], lambda r: r.read([0]), lambda r: r[0:2]):
            with pytest.raises(UnsupportedOperationError, match="decompress"):
                operation(reader)
        assert list(reader) == RECORDS


def test_list_of_files_and_directory_have_global_indexes(tmp_path):
    parts = [[b"a0", b"a1", b"a2"], [], [b"c0"], [b"d0", b"d1"]]
    for number, records in enumerate(parts):
        write(tmp_path / f"part-{number}.ffr", records)
    (tmp_path / "notes.txt").write_text("ignored")
    flat = [r for records in parts for r in records]
    with rk.open(tmp_path) as reader:
        assert reader.path == os.fspath(tmp_path)
        assert [Path(p).name for p in reader.paths] == [f"part-{i}.ffr" for i in range(4)]
        assert list(reader) == flat
        assert len(reader) == 6
        assert [reader[i] for i in range(-6, 6)] == flat + flat
        assert reader.read([5, 0, 3, 2, 4]) == [flat[i] for i in (5, 0, 3, 2, 4)]
        assert reader[2:5] == flat[2:5]
    paths = [tmp_path / "part-3.ffr", tmp_path / "part-0.ffr"]
    with rk.open(paths) as reader:
        assert list(reader) == parts[3] + parts[0]
        assert reader[2] == b"a0"


def test_empty_directory(tmp_path):
    (tmp_path / "sub.tfrecord").mkdir()  # a directory is never a record file
    (tmp_path / "a.tfrecord.idx").write_text("")  # nor a sidecar index
    with pytest.raises(FileNotFoundError, match="no record files") as caught:
        rk.open(tmp_path)
    assert caught.value.filename == os.fspath(tmp_path)
    with pytest.raises(FileNotFoundError, match="no ffrecord files"):
        rk.open(tmp_path, format="ffrecord")


def test_reading_after_close_raises(tmp_path):
    write(tmp_path / "a.tfrecord", RECORDS)
    reader = rk.open(tmp_path / "a.tfrecord")
    reader.close()
    reader.close()
    assert reader.closed
    for operation in (iter, len, lambda r: r[0], lambda r: r.read([0])):
        with pytest.raises(ValueError, match="closed"):
            operation(reader)


def test_writing_after_close_raises(tmp_path):
    writer = rk.open(tmp_path / "a.tfrecord", "w")
    writer.write(b"x")
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"y")
    with pytest.raises(ValueError, match="closed"):
        writer.write_many([b"y"])
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert list(reader) == [b"x"]


def test_write_accepts_bytes_likes_and_messages(tmp_path):
    class Message:
        def SerializeToString(self) -> bytes:
            return b"message"

    items = [b"bytes", bytearray(b"bytearray"), memoryview(b"memoryview"), Message()]
    with rk.open(tmp_path / "a.tfrecord", "w") as writer:
        for item in items:
            writer.write(item)
        assert writer.write_many(items) == 4
        assert writer.count == 8
        with pytest.raises(TypeError, match="encode"):
            writer.write("text")
        with pytest.raises(TypeError):
            writer.write(12)
    expected = [b"bytes", b"bytearray", b"memoryview", b"message"] * 2
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert list(reader) == expected


def test_numpy_arrays_are_written_as_their_bytes(tmp_path):
    np = pytest.importorskip("numpy")
    data = np.arange(10, dtype=np.uint8)
    with rk.open(tmp_path / "a.ffr", "w") as writer:
        writer.write(data)
        writer.write(np.arange(3, dtype="<i4")[::2])  # non-contiguous: copied
    with rk.open(tmp_path / "a.ffr") as reader:
        assert reader[0] == bytes(range(10))
        assert reader[1] == (0).to_bytes(4, "little") + (2).to_bytes(4, "little")


def test_writer_to_file_object_leaves_it_open(tmp_path):
    buffer = io.BytesIO()
    with rk.open(buffer, "w", format="tfrecord") as writer:
        writer.write(b"abc")
    assert not buffer.closed
    buffer.seek(0)
    with rk.open(buffer) as reader:
        assert list(reader) == [b"abc"]
    assert not buffer.closed


def test_memory_url_random_access_uses_ranged_reads(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    records = [b"%05d" % i * 20 for i in range(200)]
    with rk.open("memory://bucket/data.tfrecord", "w") as writer:
        writer.write_many(records)
    with rk.open("memory://bucket/data.tfrecord") as reader:
        source = reader._opened[0].source
        spans: list[tuple[int, int]] = []
        original = source._fetch  # type: ignore[attr-defined]

        def counting_fetch(asked: list[tuple[int, int]]) -> list[bytes]:
            spans.extend(asked)
            return original(asked)

        source._fetch = counting_fetch  # type: ignore[attr-defined]
        assert len(reader) == 200  # no index: the headers are read once, in windows
        spans.clear()
        assert reader[150] == records[150]
        assert reader.read([3, 4, 5]) == records[3:6]
        assert sorted(end - start for start, end in spans) == [116, 3 * 116]  # the records' frames
        assert list(reader) == records
    fs = fsspec.filesystem("memory")
    fs.rm("/bucket", recursive=True)


def test_missing_fsspec_hint(monkeypatch):
    import sys

    # A None entry is what an import of a package that is not installed meets.
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(ImportError, match=r"recordkit\[remote\]"):
        rk.open("s3://bucket/x.tfrecord")


def test_a_dropped_reader_releases_its_file(tmp_path):
    import gc

    write(tmp_path / "a.ffr", RECORDS)
    reader = rk.open(tmp_path / "a.ffr")
    file = reader._opened[0].resources[-1]
    assert reader[0] == RECORDS[0]
    del reader
    gc.collect()
    assert file.closed


# -- a reader used only through its iterator -------------------------------------------------------

FORMAT_NAMES = ["a.tfrecord", "a.tfrecord.gz", "a.tfrecord.zlib", "a.ofrecord", "a.ffr"]


def records_for(name: str) -> list[bytes]:
    return NONEMPTY if name.endswith(".ofrecord") else RECORDS


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_an_iterator_keeps_its_unnamed_reader_alive(tmp_path, name):
    import gc

    records = records_for(name)
    write(tmp_path / name, records)
    path = tmp_path / name
    assert [r for r in rk.open(path)] == records  # noqa: C416 - the comprehension is what is tested
    assert next(iter(rk.open(path))) == records[0]
    got = []
    for record in rk.open(path):
        gc.collect()  # the reader must survive a collection while its iterator is in use
        got.append(record)
    assert got == records
    iterator = iter(rk.open(path))
    gc.collect()
    assert list(iterator) == records


@pytest.mark.parametrize("name", ["a.tfrecord", "a.ofrecord", "a.ffr"])
def test_files_are_released_when_reader_and_iterator_are_gone(tmp_path, name):
    import gc

    write(tmp_path / name, records_for(name))
    reader = rk.open(tmp_path / name)
    resource = reader._opened[0].resources[-1]
    iterator = iter(reader)
    next(iterator)
    del reader
    gc.collect()
    assert not resource.closed  # the iterator still needs it
    del iterator
    gc.collect()
    assert resource.closed


# -- the compression a suffix names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "compression"),
    [("x.tfrecord.gz", "gzip"), ("x.tfrecord.gzip", "gzip"), ("x.tfrecord.zlib", "zlib")],
)
def test_a_compression_suffix_holds_when_format_is_given(tmp_path, name, compression):
    import gzip
    import zlib

    path = tmp_path / name
    with rk.open(path, "w", format="tfrecord") as writer:
        assert writer.compression == compression
        writer.write_many(RECORDS)
    raw = path.read_bytes()
    plain = gzip.decompress(raw) if compression == "gzip" else zlib.decompress(raw)
    with rk.open(io.BytesIO(plain), format="tfrecord") as reader:
        assert list(reader) == RECORDS
    with rk.open(path, format="tfrecord") as reader:
        assert reader.compression == compression
        assert list(reader) == RECORDS
    # compression= still says otherwise
    with rk.open(path, "w", format="tfrecord", compression="none") as writer:
        writer.write_many(RECORDS)
    with rk.open(path, format="tfrecord", compression="") as reader:
        assert reader.compression == ""
        assert list(reader) == RECORDS


def test_a_compression_suffix_the_format_cannot_honour_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"gzip.*compression="):
        rk.open(tmp_path / "x.ffr.gz", "w", format="ffrecord")
    assert os.listdir(tmp_path) == []
    with rk.open(tmp_path / "x.ffr.gz", "w", format="ffrecord", compression="none") as writer:
        writer.write(b"x")
    with rk.open(tmp_path / "x.ffr.gz", format="ffrecord", compression="none") as reader:
        assert list(reader) == [b"x"]


@pytest.mark.interop
def test_tensorflow_reads_a_gz_written_with_format(tmp_path):
    tf = pytest.importorskip("tensorflow")
    path = tmp_path / "x.tfrecord.gz"
    with rk.open(path, "w", format="tfrecord") as writer:
        writer.write_many(RECORDS)
    dataset = tf.data.TFRecordDataset(str(path), compression_type="GZIP")
    assert [t.numpy() for t in dataset] == RECORDS


def test_convert_to_a_gz_name_compresses(tmp_path):
    import gzip

    from recordkit.cli import main

    write(tmp_path / "a.tfrecord", RECORDS)
    assert (
        main(["convert", "-q", str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord.gz")]) == 0
    )
    plain = gzip.decompress((tmp_path / "b.tfrecord.gz").read_bytes())
    assert plain == (tmp_path / "a.tfrecord").read_bytes()


# -- pickling readers -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_a_pickled_reader_reopens_its_file(tmp_path, name):
    import pickle

    records = records_for(name)
    write(tmp_path / name, records)
    with rk.open(tmp_path / name, check_crc=False, lenient=True) as reader:
        copy = pickle.loads(pickle.dumps(reader))
    with copy:
        assert (copy.format, copy.compression) == (reader.format, reader.compression)
        assert copy.path == reader.path
        assert copy.paths == reader.paths
        assert list(copy) == records
        frames = copy._frames[0]
        assert (frames.check_crc, frames.lenient) == (False, True)


def test_a_pickled_directory_reader_keeps_its_files_and_options(tmp_path):
    import pickle

    write(tmp_path / "part-1", [b"b"], format="ofrecord")
    write(tmp_path / "part-0", [b"a"], format="ofrecord")
    write_index_for = tmp_path / "part-0.idx"
    with rk.open(tmp_path, format="ofrecord", index=False) as reader:
        copy = pickle.loads(pickle.dumps(reader))
    with copy:
        assert copy.path == os.fspath(tmp_path)
        assert list(copy) == [b"a", b"b"]
        assert copy.format == "ofrecord"
    assert not write_index_for.exists()


def test_pickling_a_reader_over_a_file_object_or_closed_reader_says_why(tmp_path):
    import pickle

    write(tmp_path / "a.tfrecord", RECORDS)
    with (
        open(tmp_path / "a.tfrecord", "rb") as file,
        rk.open(file) as reader,
        pytest.raises(TypeError, match="file object"),
    ):
        pickle.dumps(reader)
    reader = rk.open(tmp_path / "a.tfrecord")
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(reader)


# -- sequential readers: len() and indexing ---------------------------------------------------------


def test_len_of_a_sequential_reader_raises_the_public_no_length_error(tmp_path):
    write(tmp_path / "a.tfrecord.gz", RECORDS)
    with rk.open(tmp_path / "a.tfrecord.gz") as reader:
        with pytest.raises(NoLengthError, match=r"len\(\)") as caught:
            len(reader)
        assert isinstance(caught.value, TypeError)
        assert isinstance(caught.value, UnsupportedOperationError)
        assert type(caught.value).__module__ == "recordkit.errors"
        assert list(reader) == RECORDS  # list() asks len() first and must fall back


def test_indexing_a_sequential_reader_speaks_of_random_access(tmp_path):
    write(tmp_path / "a.tfrecord.gz", RECORDS)
    with rk.open(tmp_path / "a.tfrecord.gz") as reader:
        for operation in (lambda r: r[0], lambda r: r[-1], lambda r: r[0:2], lambda r: r.read([0])):
            with pytest.raises(UnsupportedOperationError) as caught:
                operation(reader)
            assert not isinstance(caught.value, NoLengthError)
            message = str(caught.value)
            assert "len()" not in message
            assert "random access" in message
            assert "a.tfrecord.gz" in message


# -- sources: a file, a directory, a glob, a list ---------------------------------------------------


def write_parts(folder: Path, suffix: str, counts: list[int], **options: object) -> list[bytes]:
    """Write ``part-<i><suffix>`` for each count (numbers unpadded); return every record in natural order."""
    folder.mkdir(exist_ok=True)
    everything = []
    for i, n in enumerate(counts):
        records = [b"%d:%d" % (i, j) for j in range(n)]
        write(folder / f"part-{i}{suffix}", records, **options)
        everything += records
    return everything


@pytest.mark.parametrize("suffix", [".tfrecord", ".tfrecord.gz", ".ofrecord", ".ffr"])
def test_a_directory_of_any_format_reads_in_natural_order(tmp_path, suffix):
    folder = tmp_path / "data"
    records = write_parts(folder, suffix, [2, 0, 3, 1, 1, 1, 1, 1, 1, 1, 2])  # part-10 after part-9
    (folder / ".hidden.tfrecord").write_bytes(b"not read")
    (folder / "README.txt").write_text("not a record file")
    (folder / "sub").mkdir()
    with rk.open(folder) as reader:
        assert reader.path == os.fspath(folder)
        assert [Path(p).name for p in reader.paths] == [f"part-{i}{suffix}" for i in range(11)]
        assert list(reader) == records
    fmt = rk.open(folder / f"part-0{suffix}").format
    with rk.open(folder, format=fmt) as reader:
        assert list(reader) == records


def test_format_picks_its_files_from_a_mixed_directory(tmp_path):
    tf = write_parts(tmp_path / "d", ".tfrecord", [2, 1])
    ff = [b"ff"]
    write(tmp_path / "d" / "z.ffr", ff)
    with pytest.raises(UnknownFormatError, match=r"mix formats.*format="):
        rk.open(tmp_path / "d")
    with rk.open(tmp_path / "d", format="tfrecord") as reader:
        assert list(reader) == tf
    with rk.open(tmp_path / "d", format="FFRecord") as reader:
        assert list(reader) == ff
    with pytest.raises(FileNotFoundError, match="ofrecord"):
        rk.open(tmp_path / "d", format="ofrecord")
    from recordkit.data import Dataset

    assert list(Dataset(tmp_path / "d")) == tf + ff  # a Dataset reads each file with its own format
    assert list(Dataset(tmp_path / "d", format="ffrecord")) == ff


def test_a_directory_of_oneflow_part_files(tmp_path):
    folder = tmp_path / "of"
    folder.mkdir()
    records = [rk.encode_ofrecord({"i": [i]}) for i in range(6)]
    for i, (start, stop) in enumerate([(0, 2), (2, 5), (5, 6)]):
        write(folder / f"part-{i}", records[start:stop], format="ofrecord")
    for i in range(3):
        rk.io.write_index(folder / f"part-{i}", format="ofrecord")  # sidecars are not records
    with rk.open(folder, format="ofrecord") as reader:
        assert [Path(p).name for p in reader.paths] == ["part-0", "part-1", "part-2"]
        assert list(reader) == records
    with rk.open(folder) as reader:  # recognised by content
        assert list(reader) == records


def test_globs_and_lists_of_sources(tmp_path):
    a = write_parts(tmp_path / "a", ".tfrecord", [1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    b = write_parts(tmp_path / "b", ".tfrecord", [2])
    with rk.open(tmp_path / "a" / "*.tfrecord") as reader:
        assert reader.path == os.fspath(tmp_path / "a" / "*.tfrecord")
        assert list(reader) == a
        assert len(reader) == len(a)
    with rk.open([tmp_path / "b", os.fspath(tmp_path / "a" / "part-1?.tfrecord")]) as reader:
        assert list(reader) == b + a[-1:]
    with pytest.raises(FileNotFoundError, match="nothing"):
        rk.open(tmp_path / "a" / "nothing-*.tfrecord")
    with pytest.raises(ValueError, match="no sources"):
        rk.open([])


def test_a_link_out_of_a_directory_is_refused(tmp_path):
    outside = tmp_path / "outside.tfrecord"
    write(outside, [b"x"])
    folder = tmp_path / "d"
    folder.mkdir()
    write(folder / "a.tfrecord", [b"a"])
    (folder / "b.tfrecord").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        rk.open(folder)
    with rk.open([folder / "a.tfrecord", folder / "b.tfrecord"]) as reader:
        assert list(reader) == [b"a", b"x"]


def test_every_entry_point_expands_sources_alike(tmp_path):
    from recordkit.compat.ffrecord import FileReader
    from recordkit.data import Dataset
    from recordkit.io import expand_sources

    write_parts(tmp_path / "tf", ".tfrecord", [1, 1])
    write_parts(tmp_path / "ff", ".ffr", [1, 2])
    for source in (tmp_path / "tf", os.fspath(tmp_path / "tf" / "*.tfrecord")):
        files = expand_sources(source)
        assert Dataset(source).files == files
        with rk.open(source) as reader:
            assert reader.paths == files
    ff_files = expand_sources(tmp_path / "ff")
    assert FileReader(tmp_path / "ff").fnames == ff_files
    assert FileReader(os.fspath(tmp_path / "ff" / "part-*.ffr")).fnames == ff_files


def test_ffrecord_file_reader_keeps_ffrecords_order_by_name(tmp_path):
    from recordkit.compat.ffrecord import FileReader

    write_parts(tmp_path / "ff", ".ffr", [1] * 11)
    (tmp_path / "ff" / "other.tfrecord").write_bytes(b"")
    reader = FileReader(tmp_path / "ff")
    names = [Path(p).name for p in reader.fnames]
    assert names == sorted(f"part-{i}.ffr" for i in range(11))  # part-10 before part-2, as ffrecord
    assert bytes(reader.read_one(2)) == b"10:0"
    reader.close()


# -- TensorBoard event files, named by their name (a new one is 0 bytes) ------------------------------


def test_an_empty_event_file_opens_as_an_empty_tfrecord(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.host.42.0"
    path.write_bytes(b"")
    for lenient in (False, True):
        with rk.open(path, lenient=lenient) as reader:
            assert list(reader) == []
            assert reader.format == "tfrecord"


def test_event_files_are_named_tfrecord_and_read_by_name(tmp_path: Path) -> None:
    from recordkit.formats import format_for_path

    found = format_for_path(os.path.join("logs", "run", "events.out.tfevents.1.host.v2"))
    assert found is not None
    assert found[0].name == "tfrecord"
    assert format_for_path("no-events.out.tfevents.1") is None
    path = tmp_path / "events.out.tfevents.1700000000.host"
    with rk.open(tmp_path / "x.tfrecord", "w") as writer:
        writer.write_many([b"a", b"bc"])
    path.write_bytes((tmp_path / "x.tfrecord").read_bytes() + b"\x05\x00")  # cut in a header
    with rk.open(path, lenient=True) as reader:
        assert list(reader) == [b"a", b"bc"]


def test_a_directory_of_runs_says_its_subdirectories_are_not_read(tmp_path):
    (tmp_path / "run-a").mkdir()
    with rk.open(tmp_path / "run-a" / "part.tfrecord", "w") as writer:
        writer.write(b"x")
    with pytest.raises(FileNotFoundError, match=r"subdirectories are not read.*\*/\*"):
        rk.open(tmp_path)
    assert list(rk.open(f"{tmp_path}/*/*")) == [b"x"]


@pytest.mark.parametrize("name", rk.available_formats())
def test_every_suffix_is_a_format_name_and_every_name_a_suffix(name):
    fmt = rk.get_format(name)
    for suffix in fmt.extensions:
        assert rk.get_format(suffix[1:]) is fmt, suffix
        assert rk.get_format(suffix[1:].upper()) is fmt, suffix
    for known in (fmt.name, *fmt.aliases):
        assert rk.get_format(known) is fmt, known
        if known.replace("_", "").isalnum():
            found = rk.formats.format_for_path(f"data.{known}")
            assert found is not None, known
            assert found[0] is fmt, known


def test_ffrecord_by_its_name_as_a_suffix_and_its_suffix_as_a_name(tmp_path, capsys):
    write(tmp_path / "x.ffrecord", NONEMPTY)
    with rk.open(tmp_path / "x.ffrecord") as reader:
        assert (reader.format, list(reader)) == ("ffrecord", NONEMPTY)
    write(tmp_path / "y.bin", NONEMPTY, format="ffr")
    with rk.open(tmp_path / "y.bin", format="FFR") as reader:
        assert (reader.format, list(reader)) == ("ffrecord", NONEMPTY)
    result = run_cli(capsys, "convert", tmp_path / "x.ffrecord", tmp_path / "z.bin", "--to", "ffr")
    assert result.code == 0, result.err
    assert rk.open(tmp_path / "z.bin", format="ffrecord").format == "ffrecord"
    assert list(rk.open(tmp_path / "z.bin", format="ffrecord")) == NONEMPTY
