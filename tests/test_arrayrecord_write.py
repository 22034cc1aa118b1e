"""Writing ArrayRecord files, checked by readers nobody here wrote: array_record's ``ArrayRecordReader``,
Grain's ``ArrayRecordDataSource``, and, for uncompressed files, byte equality with ``ArrayRecordWriter``."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import pytest

import recordkit as rk
from recordkit.errors import OptionsError, UnsupportedOperationError
from recordkit.formats import get_format

module = pytest.importorskip("array_record.python.array_record_module")

OPTIONS = [
    "",
    "group_size:1,zstd",
    "group_size:7",
    "group_size:65536",
    "uncompressed",
    "snappy",
    "brotli",
    "brotli:1,group_size:7",
    "zstd:5,window_log:12",
    "zstd,window_log:auto",
    "uncompressed,pad_to_block_boundary:true",
    "group_size:7,snappy,pad_to_block_boundary:true",
    "pad_to_block_boundary:false,transpose:false",
]


def records(count: int = 120) -> list[bytes]:
    """Empty records, records over 64 KiB, and many small ones that cross block boundaries."""
    rng = random.Random(count)
    made = [b"", rng.randbytes(70_000), b"", rng.randbytes(200_000), b"x" * 100_000]
    made += [rng.randbytes(rng.randint(0, 3000)) for _ in range(count)]
    return made


def write(path: str, data: list[bytes], options: str | None) -> None:
    with rk.open(path, "w", format="arrayrecord", options=options) as writer:
        writer.write_many(data)


def their_records(path: str) -> list[bytes]:
    reader = module.ArrayRecordReader(path)
    try:
        count = reader.num_records()
        return list(reader.read_all()) if count else []
    finally:
        reader.close()


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("count", [0, 1, 120])
def test_array_record_reads_what_recordkit_wrote(tmp_path, options, count):
    path = str(tmp_path / "x.array_record")
    data = records()[:count] if count < 5 else records(count)
    write(path, data, options)
    assert their_records(path) == data
    with rk.open(path) as reader:
        assert list(reader) == data
        assert reader.read([len(data) - 1, 0]) == [data[-1], data[0]] if data else True


@pytest.mark.parametrize("options", ["group_size:1,zstd", "group_size:7,brotli", "snappy"])
def test_many_batches_in_flight_keep_their_order(tmp_path, options, monkeypatch):
    """Batches of about 64 KiB: dozens pass through the two writer threads, and ``write`` and
    ``write_many`` mix."""
    from recordkit.formats import _arrayrecord_write

    monkeypatch.setattr(_arrayrecord_write, "BATCH_BYTES", 1 << 16)
    data = records(2000)
    path = str(tmp_path / "x.array_record")
    with rk.open(path, "w", format="arrayrecord", options=options) as writer:
        for record in data[:700]:
            writer.write(record)
        writer.write_many(data[700:1500])
        writer.flush()
        writer.write_many(iter(data[1500:]))
    assert their_records(path) == data


@pytest.mark.parametrize(
    "options", ["uncompressed", "uncompressed,group_size:7,pad_to_block_boundary:true"]
)
@pytest.mark.parametrize("count", [0, 120])
def test_uncompressed_files_are_byte_for_byte_array_records(tmp_path, options, count):
    data = records(count) if count else []
    ours, theirs = tmp_path / "ours.array_record", str(tmp_path / "theirs.array_record")
    write(str(ours), data, options)
    writer = module.ArrayRecordWriter(theirs, options)
    for record in data:
        writer.write(record)
    writer.close()
    assert ours.read_bytes() == (tmp_path / "theirs.array_record").read_bytes()


def test_grain_reads_at_random(tmp_path):
    try:
        from grain.python import ArrayRecordDataSource
    except ImportError:  # newer Grain
        ArrayRecordDataSource = pytest.importorskip("grain.sources").ArrayRecordDataSource
    paths = [str(tmp_path / f"part-{i}.array_record") for i in range(2)]
    data = [records(50), records(30)[::-1]]
    write(paths[0], data[0], "group_size:1")
    write(paths[1], data[1], "group_size:7,snappy")
    source = ArrayRecordDataSource(paths)
    every = data[0] + data[1]
    assert len(source) == len(every)
    order = random.Random(0).sample(range(len(every)), len(every))
    assert [source[i] for i in order] == [every[i] for i in order]


def test_verify_and_random_access(tmp_path):
    path = str(tmp_path / "x.array_record")
    data = records(300)
    write(path, data, "group_size:7")
    with rk.open(path) as reader:
        assert len(reader) == len(data)
        assert [reader[i] for i in (3, 1, 200, 304)] == [data[i] for i in (3, 1, 200, 304)]
    done = subprocess.run(
        [sys.executable, "-m", "recordkit", "verify", path],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_footer_records_the_options_as_array_record_spells_them():
    fmt = get_format("arrayrecord")
    assert str(fmt.writer(io.BytesIO()).options) == (
        "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,"
        "max_parallelism:1"
    )
    options = fmt.writer(io.BytesIO(), options="brotli,group_size:9", level=2).options
    assert str(options).startswith(
        "group_size:9,transpose:false,pad_to_block_boundary:false,brotli:2"
    )


@pytest.mark.parametrize(
    "options",
    ["group_size:0", "zstd:23", "brotli:12", "snappy:3", "window_log:9", "bogus", "zstd,brotli"],
)
def test_bad_options_are_refused(options, tmp_path):
    with pytest.raises(OptionsError):
        get_format("arrayrecord").writer(io.BytesIO(), options=options)
    with pytest.raises(ValueError, match=r"(?i)option"):  # and array_record refuses them too
        module.ArrayRecordWriter(str(tmp_path / "theirs.array_record"), options)


def test_a_level_beside_another_level_in_the_options_is_refused():
    with pytest.raises(OptionsError, match="level=7"):
        get_format("arrayrecord").writer(io.BytesIO(), options="zstd:5", level=7)


def test_transposed_writing_and_whole_file_compression_are_refused(tmp_path):
    with pytest.raises(UnsupportedOperationError, match="transpose"):
        get_format("arrayrecord").writer(io.BytesIO(), options="transpose:true")
    with pytest.raises(ValueError, match="compress"):
        rk.open(str(tmp_path / "x.array_record.gz"), "w", format="arrayrecord")
    with pytest.raises(OptionsError):
        rk.open(str(tmp_path / "x.tfrecord"), "w", options="zstd")


def test_a_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "x.array_record"
    writer = rk.open(str(path), "w")
    with pytest.raises(KeyError), writer:  # noqa: PT012 - the failure is inside the with block
        writer.write_many(records(2000))
        raise KeyError("stop")
    assert list(tmp_path.iterdir()) == []


def test_shard_writer_and_convert(tmp_path):
    data = records(40)
    with rk.ShardWriter(
        str(tmp_path / "ds" / "part-{shard:05d}.array_record"), max_records=20
    ) as w:
        w.write_many(data)
    with rk.open(str(tmp_path / "ds")) as reader:
        assert list(reader) == data
    source = str(tmp_path / "in.tfrecord")
    with rk.open(source, "w") as writer:
        writer.write_many(data)
    target = str(tmp_path / "out.array_record")
    done = subprocess.run(
        [sys.executable, "-m", "recordkit", "convert", source, target, "--to", "arrayrecord"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert their_records(target) == data
