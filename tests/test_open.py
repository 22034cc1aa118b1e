"""recordkit.open: format and compression detection, sources, modes, readers over several files."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

import recordkit as rk
from recordkit.errors import UnknownFormatError, UnsupportedOperationError

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
    with pytest.raises(FileNotFoundError, match="ffr"):
        rk.open(tmp_path)


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
        reads: list[int] = []
        original = reader._opened[0].source.fileobj.read  # type: ignore[union-attr]

        def counting_read(n: int = -1) -> bytes:
            reads.append(n)
            return original(n)

        reader._opened[0].source.fileobj.read = counting_read  # type: ignore[union-attr]
        assert reader[150] == records[150]
        assert reader.read([3, 4, 5]) == records[3:6]
        assert all(0 <= n < 20000 for n in reads)
        assert list(reader) == records
    fs = fsspec.filesystem("memory")
    fs.rm("/bucket", recursive=True)


def test_missing_fsspec_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_fsspec(name: str, *args: object, **kwargs: object) -> object:
        if name == "fsspec":
            raise ImportError("no fsspec")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_fsspec)
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
