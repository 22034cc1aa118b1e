"""ArrayRecord, read against array_record's own reader: every writer option, every entry point.

The ``array-record`` wheel writes the files and reads them back as the oracle; the tests skip where it
cannot be installed (Windows, Apple Silicon).
"""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest
from _array_record import array_record_module, write_array_record
from _cli import run_cli

import recordkit as rk
from recordkit.data import Dataset
from recordkit.formats import _decompress, get_format
from recordkit.formats._highwayhash import highwayhash64
from recordkit.formats._riegeli import BLOCK, SIGNATURE
from recordkit.formats.arrayrecord import ArrayRecordFrameReader
from recordkit.formats.base import Source
from recordkit.testing import NoSeekBytesIO

array_record = array_record_module()

OPTIONS = [
    "",
    "group_size:1",
    "group_size:7",
    "group_size:1000",
    "zstd",
    "zstd:9",
    "brotli",
    "brotli:6",
    "snappy",
    "uncompressed",
    "uncompressed,group_size:5",
    "snappy,group_size:3",
    "pad_to_block_boundary:true",
    "pad_to_block_boundary:true,group_size:4,brotli",
    "window_log:20",
]


def _records(count: int = 60, seed: int = 0) -> list[bytes]:
    """Records of varied sizes: empty ones, small ones, and two that cross 64 KiB block boundaries."""
    rng = random.Random(seed)
    records = [rng.randbytes(rng.randrange(0, 300)) for _ in range(count)]
    records[5] = b""
    records[count // 3] = rng.randbytes(150_000)
    records[count * 2 // 3] = b"\x00" * 70_000
    return records


@pytest.mark.interop
@pytest.mark.parametrize("options", OPTIONS)
def test_reads_what_array_record_writes(tmp_path, options):
    records = _records()
    path = write_array_record(tmp_path / "data.array_record", records, options)
    oracle = array_record.ArrayRecordReader(path)
    expected = list(oracle.read_all())
    assert expected == records
    with rk.open(path) as reader:
        assert reader.format == "arrayrecord"
        assert len(reader) == oracle.num_records() == len(records)
        assert list(reader) == expected
        rng = random.Random(1)
        for i in rng.sample(range(len(records)), 20):
            assert reader[i] == expected[i]
        indices = [rng.randrange(len(records)) for _ in range(30)] + [59, 0, 59]
        assert reader.read(indices) == list(oracle.read(indices))
        assert list(reader.iter_from(33)) == expected[33:]


@pytest.mark.interop
def test_data_hashes_are_checked_by_default_and_can_be_turned_off(tmp_path, monkeypatch):
    records = _records(20)
    path = write_array_record(tmp_path / "data.array_record", records, "uncompressed,group_size:3")
    assert list(rk.open(path)) == records
    damaged = bytearray(Path(path).read_bytes())
    third = ArrayRecordFrameReader(Source(path="x", buffer=bytes(damaged))).offsets[2]
    damaged[third + 60] ^= 1  # inside the (uncompressed) records of chunk 2
    Path(path).write_bytes(damaged)
    with pytest.raises(rk.ChecksumError, match="data hash"):
        list(rk.open(path))
    with pytest.raises(rk.ChecksumError, match="data hash"):
        rk.open(path).read([7])
    monkeypatch.setattr(get_format("arrayrecord"), "check_data", False)
    assert list(rk.open(path)) != records  # the documented cost of turning them off


@pytest.mark.interop
def test_empty_file(tmp_path):
    path = write_array_record(tmp_path / "empty.array_record", [])
    with rk.open(path) as reader:
        assert len(reader) == 0
        assert list(reader) == []
    assert array_record.ArrayRecordReader(path).num_records() == 0


@pytest.mark.interop
def test_detected_without_suffix_and_from_a_stream(tmp_path):
    records = _records(30)
    path = write_array_record(tmp_path / "blob", records, "group_size:4")
    with rk.open(path) as reader:
        assert reader.format == "arrayrecord"
        assert list(reader) == records
    with open(path, "rb") as file:
        data = file.read()
    source = Source(path="stream", fileobj=NoSeekBytesIO(data))
    assert list(ArrayRecordFrameReader(source)) == records


@pytest.mark.interop
def test_dataset_map_dataset_and_cli(tmp_path, capsys):
    records = _records(40)
    path = write_array_record(tmp_path / "data.array_record", records, "group_size:6")
    assert list(Dataset(path)) == records
    assert sorted(Dataset(path, seed=2).shuffle()) == sorted(records)
    torch = pytest.importorskip("recordkit.integrations.torch", exc_type=ImportError)
    with torch.MapDataset(path) as dataset:
        assert len(dataset) == len(records)
        assert [dataset[i] for i in (39, 0, 17)] == [records[39], records[0], records[17]]
    result = run_cli(capsys, "count", path)
    assert result.code == 0, result.err
    assert "40" in result.out
    assert run_cli(capsys, "verify", path).code == 0
    for suffix in (".tfrecord", ".ffr"):
        out = tmp_path / f"copy{suffix}"
        result = run_cli(capsys, "convert", path, out, "--keep-payload")
        assert result.code == 0, result.err
        assert list(rk.open(out)) == records


def test_a_missing_decompressor_names_the_extra(tmp_path, monkeypatch):
    path = write_array_record(tmp_path / "z.array_record", [b"a", b"b"], "zstd")
    monkeypatch.setattr(_decompress, "_module", lambda name: None)
    _decompress.decompressor.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"recordkit\[arrayrecord\]"):
            rk.open(path)  # the footer itself is zstd-compressed
    finally:
        _decompress.decompressor.cache_clear()


# -- HighwayHash -----------------------------------------------------------------------------------

# The reference implementation's test vectors (google/highwayhash c/highwayhash_test.c): the hash of
# bytes 0, 1, ..., n-1 for n = 0..64 under the key 0x0706050403020100, ... 0x1F1E1D1C1B1A1918.
_KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0x1716151413121110, 0x1F1E1D1C1B1A1918)
_EXPECTED = [
    0x907A56DE22C26E53,
    0x7EAB43AAC7CDDD78,
    0xB8D0569AB0B53D62,
    0x5C6BEFAB8A463D80,
    0xF205A46893007EDA,
    0x2B8A1668E4A94541,
    0xBD4CCC325BEFCA6F,
    0x4D02AE1738F59482,
    0xE1205108E55F3171,
    0x32D2644EC77A1584,
    0xF6E10ACDB103A90B,
    0xC3BBF4615B415C15,
    0x243CC2040063FA9C,
    0xA89A58CE65E641FF,
    0x24B031A348455A23,
    0x40793F86A449F33B,
    0xCFAB3489F97EB832,
    0x19FE67D2C8C5C0E2,
    0x04DD90A69C565CC2,
    0x75D9518E2371C504,
    0x38AD9B1141D3DD16,
    0x0264432CCD8A70E0,
    0xA9DB5A6288683390,
    0xD7B05492003F028C,
    0x205F615AEA59E51E,
    0xEEE0C89621052884,
    0x1BFC1A93A7284F4F,
    0x512175B5B70DA91D,
    0xF71F8976A0A2C639,
    0xAE093FEF1F84E3E7,
    0x22CA92B01161860F,
    0x9FC7007CCF035A68,
    0xA0C964D9ECD580FC,
    0x2C90F73CA03181FC,
    0x185CF84E5691EB9E,
    0x4FC1F5EF2752AA9B,
    0xF5B7391A5E0A33EB,
    0xB9B84B83B4E96C9C,
    0x5E42FE712A5CD9B4,
    0xA150F2F90C3F97DC,
    0x7FA522D75E2D637D,
    0x181AD0CC0DFFD32B,
    0x3889ED981E854028,
    0xFB4297E8C586EE2D,
    0x6D064A45BB28059C,
    0x90563609B3EC860C,
    0x7AA4FCE94097C666,
    0x1326BAC06B911E08,
    0xB926168D2B154F34,
    0x9919848945B1948D,
    0xA2A98FC534825EBE,
    0xE9809095213EF0B6,
    0x582E5483707BC0E9,
    0x086E9414A88A6AF5,
    0xEE86B98D20F6743D,
    0xF89B7FF609B1C0A7,
    0x4C7D9CC19E22C3E8,
    0x9A97005024562A6F,
    0x5DD41CF423E6EBEF,
    0xDF13609C0468E227,
    0x6E0DA4F64188155A,
    0xB755BA4B50D7D4A1,
    0x887A3484647479BD,
    0xAB8EEBE9BF2139A0,
    0x75542C5D4CD2A6FF,
]


@pytest.mark.parametrize("n", range(65))
def test_highwayhash_reference_vectors(n):
    assert highwayhash64(bytes(range(n)), _KEY) == _EXPECTED[n]


@pytest.mark.parametrize("key", [_KEY, (1, 2, 3, 4), None])
def test_highwayhash_many_inputs_at_once_equal_one_at_a_time(key):
    from recordkit.formats._highwayhash import BATCH, RIEGELI_KEY, highwayhash64_many

    key = key or RIEGELI_KEY
    rng = random.Random(3)
    for count in (BATCH, BATCH + 1, 33, 200):
        # lengths around multiples of 32 (whole packets, every remainder) and a few long inputs
        items = [
            rng.randbytes(rng.choice([0, 1, 31, 32, 33, 63, 64, 65, rng.randrange(300)]))
            for _ in range(count)
        ]
        items[0] = rng.randbytes(70_000)
        assert highwayhash64_many(items, key) == [highwayhash64(item, key) for item in items]
        views = [memoryview(item) for item in items]
        assert highwayhash64_many(views, key) == [highwayhash64(item, key) for item in items]


def test_highwayhash_second_key_and_riegeli_signature():
    assert highwayhash64(bytes(range(128, 161)), (1, 2, 3, 4)) == 0x53C516CCE478CAD7
    # The signature's block header and chunk header hashes, under Riegeli's key.
    assert highwayhash64(SIGNATURE[8:24]) == int.from_bytes(SIGNATURE[:8], "little")
    assert highwayhash64(SIGNATURE[32:64]) == int.from_bytes(SIGNATURE[24:32], "little")


@pytest.mark.interop
def test_highwayhash_matches_every_hash_array_record_wrote(tmp_path):
    """Every chunk's data hash in a file array_record wrote (compressed and not) is what we compute."""
    for options in ("uncompressed,group_size:3", "zstd,group_size:2"):
        path = write_array_record(tmp_path / "h.array_record", _records(12), options)
        frame = ArrayRecordFrameReader(Source(path=path, buffer=Path(path).read_bytes()))
        for offset in frame.offsets:
            chunk = frame.chunks.chunk(offset)
            header = frame.chunks._gather(offset, 40, None)[0]
            assert highwayhash64(chunk.data) == int.from_bytes(header[16:24], "little")


# -- damage ----------------------------------------------------------------------------------------


def _read_all(data: bytes, *, check_data: bool = True) -> tuple[int, list[bytes]]:
    source = Source(path="damaged.array_record", buffer=data)
    reader = ArrayRecordFrameReader(source, check_data=check_data)
    return len(reader), list(reader)


@pytest.mark.interop
@pytest.mark.parametrize("options", ["uncompressed,group_size:2", "zstd,group_size:3", "snappy"])
def test_every_bit_flip_is_caught(tmp_path, options):
    """A flipped bit anywhere before the padding is an error or changes nothing, never other records."""
    records = [bytes([i]) * (i * 7 % 50) for i in range(12)]
    data = Path(write_array_record(tmp_path / "f.array_record", records, options)).read_bytes()
    frame = ArrayRecordFrameReader(Source(path="x", buffer=data))
    # The chunks' bytes: the data chunks, the footer and the postscript (not the padding after them).
    postscript = len(data) - BLOCK
    regions = [(64, frame.chunks.chunk(frame.offsets[-1]).end)]
    regions.append((postscript, frame.chunks.chunk(postscript).end))
    errors: list[rk.CorruptRecordError] = []
    for start, end in regions:
        for pos in range(start, end):
            damaged = bytearray(data)
            damaged[pos] ^= 1 << (pos % 8)
            try:
                result = _read_all(bytes(damaged))
            except rk.CorruptRecordError as exc:
                errors.append(exc)
                continue
            assert result == (len(records), records), f"bit flip at byte {pos} went unnoticed"
    assert errors
    assert all(e.path == "damaged.array_record" and e.offset is not None for e in errors)


@pytest.mark.interop
def test_flips_in_headers_and_data_name_the_record_and_offset(tmp_path):
    records = _records(20)
    data = Path(
        write_array_record(tmp_path / "f.array_record", records, "uncompressed,group_size:4")
    ).read_bytes()
    frame = ArrayRecordFrameReader(Source(path="x", buffer=data))
    third = frame.offsets[2]  # the chunk of records 8..11
    header = bytearray(data)
    header[third + 10] ^= 4  # inside data_size
    with pytest.raises(rk.ChecksumError, match="chunk header hash") as caught:
        _read_all(bytes(header), check_data=False)
    assert (caught.value.index, caught.value.offset) == (8, third)
    payload = bytearray(data)
    payload[third + 60] ^= 1  # inside the chunk's (uncompressed) data
    with pytest.raises(rk.ChecksumError, match="data hash") as caught:
        _read_all(bytes(payload))
    assert (caught.value.index, caught.value.offset) == (8, third)
    # Without the data hash an uncompressed value's flipped bit cannot be seen: the documented limit.
    assert _read_all(bytes(payload), check_data=False)[1] != records
    block = bytearray(data)
    block[BLOCK + 12] ^= 1  # the block header inside record 17's chunk
    with pytest.raises(rk.ChecksumError, match="block header hash") as caught:
        _read_all(bytes(block), check_data=False)
    assert caught.value.offset == BLOCK


@pytest.mark.interop
def test_reading_in_order_yields_every_record_before_the_first_damaged_chunk(tmp_path):
    # One record per chunk, so a window read at once holds many chunks: a damaged chunk in its middle must
    # not cost the records before it, and a damaged chunk before that one is the one named.
    records = _records(200)
    path = write_array_record(tmp_path / "w.array_record", records, "zstd,group_size:1")
    data = Path(path).read_bytes()
    offsets = ArrayRecordFrameReader(Source(path="x", buffer=data)).offsets

    def read(damaged: bytearray, check_data: bool) -> tuple[list[bytes], rk.ChecksumError]:
        got: list[bytes] = []
        reader = ArrayRecordFrameReader(
            Source(path="d", buffer=bytes(damaged)), check_data=check_data
        )
        with pytest.raises(rk.ChecksumError) as caught:
            got.extend(reader)
        return got, caught.value

    damaged = bytearray(data)
    damaged[offsets[150] + 10] ^= 4  # chunk 150's header (its data_size)
    got, error = read(damaged, False)
    assert (error.index, error.offset, got) == (150, offsets[150], records[:150])
    assert "chunk header hash" in error.reason
    size = int.from_bytes(data[offsets[40] + 8 : offsets[40] + 16], "little")
    damaged[offsets[40] + 40 + size // 2] ^= 1  # chunk 40's data: only its data hash tells
    got, error = read(damaged, True)
    assert (error.index, error.offset, got) == (40, offsets[40], records[:40])
    assert "data hash" in error.reason
    reader = ArrayRecordFrameReader(Source(path="d", buffer=bytes(damaged)), check_data=True)
    chunks, failure = reader.chunks.chunks(reader.offsets[:-1], reader.starts[:-1])
    assert [chunk.begin for chunk in chunks] == list(offsets[:40])
    assert failure is not None
    assert failure.index == 40


@pytest.mark.interop
def test_truncated_files_raise_typed_errors(tmp_path):
    records = _records(30)
    path = write_array_record(tmp_path / "t.array_record", records, "group_size:4")
    data = Path(path).read_bytes()
    for cut in [
        *range(0, 200, 7),
        *range(BLOCK - 30, BLOCK + 30, 5),
        len(data) - BLOCK,
        len(data) - 1,
    ]:
        with pytest.raises(rk.CorruptRecordError) as caught:
            _read_all(data[:cut])
        assert caught.value.path == "damaged.array_record"
    (tmp_path / "cut.array_record").write_bytes(data[: len(data) - 100])
    with pytest.raises(rk.TruncatedRecordError, match="64 KiB blocks") as caught:
        rk.open(tmp_path / "cut.array_record")
    assert caught.value.path == os.fspath(tmp_path / "cut.array_record")


# -- TFDS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A dataset tfds prepares as array_record, three shards per split."""
    import importlib.resources
    import importlib.util
    import sys

    tfds = pytest.importorskip("tensorflow_datasets")
    with pytest.MonkeyPatch.context() as patch:
        if importlib.util.find_spec("importlib_resources") is None:
            patch.setitem(sys.modules, "importlib_resources", importlib.resources)
        builder = tfds.testing.DummyDatasetSharedGenerator(
            data_dir=os.fspath(tmp_path_factory.mktemp("tfds")), file_format="array_record"
        )
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    return builder


@pytest.mark.interop
def test_tfds_array_record_splits_read_as_tfds_data_sources(prepared, capsys):
    for name, split in prepared.info.splits.items():
        source = prepared.as_data_source(split=name)
        expected = [int(source[i]["x"]) for i in range(len(source))]
        files = [os.path.join(prepared.data_dir, f) for f in split.filenames]
        raw = [r for f in files for r in array_record.ArrayRecordReader(f).read_all()]
        with rk.open(prepared.data_dir, split=name) as reader:
            assert reader.format == "arrayrecord"
            assert len(reader) == split.num_examples
            records = list(reader)
            assert records == raw
            assert reader.read([3, 0]) == [raw[3], raw[0]]
        assert [int(rk.decode_example(r)["x"][0]) for r in records] == expected
        assert list(Dataset(prepared.data_dir, split=name)) == raw
        result = run_cli(capsys, "count", prepared.data_dir, "--split", name)
        assert result.code == 0, result.err
        assert str(split.num_examples) in result.out


@pytest.mark.interop
def test_chunks_of_many_records_and_long_sizes(tmp_path):
    """Chunks of 64 records and more (their sizes decoded with numpy), with sizes of one to three bytes."""
    rng = random.Random(3)
    records = [rng.randbytes(rng.choice((0, 5, 127, 128, 300, 20_000))) for _ in range(700)]
    for options in ("group_size:1000", "uncompressed,group_size:64", "snappy,group_size:100"):
        path = write_array_record(tmp_path / "many.array_record", records, options)
        with rk.open(path) as reader:
            assert list(reader) == records
            assert reader.read([699, 0, 350]) == [records[699], records[0], records[350]]


def test_footer_entries_in_any_encoding():
    """The footer's entries decode alike in the usual encoding (with numpy) and in others (one by one)."""
    from recordkit.formats.arrayrecord import _entries

    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes(out + bytes([n]))

    def entry(*pairs: tuple[int, int]) -> bytes:
        return b"".join(varint(key) + varint(value) for key, value in pairs)

    usual = [entry((8, 64 + 300 * i), (16, 5), (24, i)) for i in range(70)]
    odd = [
        entry((24, 2), (8, 70_000)),  # fields out of order
        entry((8, 1), (8, 90_000), (24, 1)),  # a repeated field: the last wins
        b"",  # every field absent
        entry((8 | 0x80, 5)),  # a two-byte key (field 17, unknown: ignored)
    ]
    for messages, expected in (
        (usual, ([64 + 300 * i for i in range(70)], list(range(70)))),
        (usual[:1] + odd, ([64, 70_000, 90_000, -1, -1], [0, 2, 1, 0, 0])),
    ):
        values = b"meta" + b"".join(messages)
        bounds = [0, 4]
        for message in messages:
            bounds.append(bounds[-1] + len(message))
        offsets, counts = _entries(values, bounds)
        assert (offsets.tolist(), counts.tolist()) == expected


@pytest.mark.interop
def test_cli_verify_checks_data_hashes_and_info_names_the_footer(tmp_path, capsys):
    """`recordkit verify` checks the data hashes, as plain reads do; `info` and `index` say footer."""
    records = _records(20)
    path = write_array_record(tmp_path / "data.array_record", records, "uncompressed,group_size:4")
    result = run_cli(capsys, "info", path)
    assert result.code == 0, result.err
    assert "in the file footer" in result.out
    assert "header" not in result.out.split("index")[1]
    assert "in the footer" in run_cli(capsys, "index", path).out
    frame = ArrayRecordFrameReader(Source(path=path, buffer=Path(path).read_bytes()))
    data = bytearray(Path(path).read_bytes())
    data[frame.offsets[2] + 60] ^= 1  # inside the (uncompressed) data of the chunk of records 8..11
    Path(path).write_bytes(bytes(data))
    with pytest.raises(rk.ChecksumError, match="data hash"):
        list(rk.open(path))
    fmt = get_format("arrayrecord")
    fmt.check_data = False
    try:
        result = run_cli(
            capsys, "verify", path
        )  # verify checks them even where reads are told not to
        assert not fmt.check_data  # and leaves the format as it found it
    finally:
        fmt.check_data = True
    assert result.code == 1
    assert "data hash" in result.out
    assert "record 8" in result.out


@pytest.mark.interop
@pytest.mark.parametrize("options", ["group_size:100", "uncompressed,group_size:30"])
def test_random_reads_across_chunks_and_the_cache_bound(tmp_path, options):
    """``r[i]`` and ``read()`` slice records out of cached chunks, and the cache keeps to its byte budget."""
    records = [random.Random(i).randbytes(i % 97) for i in range(1000)]
    path = write_array_record(tmp_path / "data.array_record", records, options)
    oracle = array_record.ArrayRecordReader(path)
    frame = ArrayRecordFrameReader(Source(path=path, buffer=Path(path).read_bytes()))
    count = len(frame.offsets) - 1
    sizes = [sum(map(len, records[a:b])) for a, b in itertools.pairwise(frame.starts)]
    frame.cache_bytes = 2 * max(sizes) + 1000  # room for about two chunks of these
    read = []
    real_chunk = frame.chunks.chunk

    def counted_chunk(offset, index=None):
        read.append(offset)
        return real_chunk(offset, index)

    frame.chunks.chunk = counted_chunk
    rng = random.Random(3)
    indices = [rng.randrange(len(records)) for _ in range(300)] + [0, 999, 0]
    for i in indices:
        assert frame.read_at(i) == oracle.read([i])[0]
        numbers, used = frame.cached_chunks
        assert 1 <= len(numbers) <= count // 2  # chunks were dropped
        assert used <= frame.cache_bytes
        assert numbers[-1] == frame._locate(i)  # the chunk read last is the most recently used
    assert frame.read_many(indices) == list(oracle.read(indices))
    assert frame.cached_chunks[1] <= frame.cache_bytes
    frame.cache_bytes = 1 << 30  # every chunk fits: each is decoded once more at most
    read.clear()
    for i in indices:
        assert frame.read_at(i) == records[i]
    assert len(read) == len(set(read)) <= count
    assert sorted(frame.cached_chunks[0]) == list(range(count))
    frame.cache_bytes = 0  # the chunk read last is kept even over the budget
    assert frame.read_at(500) == records[500]
    assert frame.cached_chunks[0] == [frame._locate(500)]
