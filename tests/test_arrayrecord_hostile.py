"""Hostile ArrayRecord input: crafted declared sizes (peak memory measured), and seeded bit flips.

Two campaigns:

* **Crafted sizes.** Files whose chunks are built here, with every hash recomputed so that only the sizes lie:
  a compressed block, a chunk header or the footer declares far more than the data holds (10**11 and 2 * 10**9
  bytes, 10**15 records), or a zstd frame's own content size does. Each is read in a child process that reports
  its peak resident memory after every read: every read must raise a ``CorruptRecordError`` and the peak must
  stay within :data:`PEAK_MB` of what the process held before. The same builder makes an honest file, which
  array_record's ``ArrayRecordReader`` must read as recordkit does (so the builder itself is checked).
* **Bit flips.** At least 1,000 seeded flips of written bytes, over files array_record wrote with zstd, Brotli,
  Snappy and no compression, in chunks of 1 to 65,536 records. Under the default settings recordkit either
  raises a ``CorruptRecordError`` or returns exactly the records written, by iteration, ``read(indices)`` and
  ``reader[i]``; where ``ArrayRecordReader`` (run in a child process) rejects a file, recordkit rejects it too.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _array_record import array_record_module, write_array_record

from recordkit.formats._highwayhash import highwayhash64
from recordkit.formats._riegeli import BLOCK, SIGNATURE

PEAK_MB = 150
"""The most a hostile file may add to a reading process's peak resident memory, in MiB."""

SIMPLE, PADDING = 0x72, 0x70
CODEC_BYTES = {"none": 0, "zstd": 0x7A, "brotli": 0x62, "snappy": 0x73}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _compress(codec: str, raw: bytes) -> bytes:
    cramjam = pytest.importorskip("cramjam")
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(raw))
    return bytes(getattr(cramjam, codec).compress(raw))


def _chunk(kind: int, data: bytes, num_records: int, decoded_size: int) -> bytes:
    """A chunk header (its hashes computed) and its data."""
    body = struct.pack(
        "<QQQQ", len(data), highwayhash64(data), kind | num_records << 8, decoded_size
    )
    return struct.pack("<Q", highwayhash64(body)) + body + data


def _simple_data(
    records: list[bytes],
    codec: str = "none",
    *,
    sizes_declared: int | None = None,
    values_declared: int | None = None,
    values_block: bytes | None = None,
) -> bytes:
    """A simple chunk's data; the compressed blocks may declare sizes of their own, or be given whole."""
    sizes = b"".join(_varint(len(r)) for r in records)
    values = b"".join(records)
    if codec != "none":
        declared = len(sizes) if sizes_declared is None else sizes_declared
        sizes = _varint(declared) + _compress(codec, sizes)
        if values_block is None:
            declared = len(values) if values_declared is None else values_declared
            values_block = _varint(declared) + _compress(codec, values)
        values = values_block
    return bytes([CODEC_BYTES[codec]]) + _varint(len(sizes)) + sizes + values


def _footer_records(
    entries: list[tuple[int, int, int]], meta: tuple[int, int] | None = None
) -> list:
    """ArrayRecord's footer: its metadata, then (offset, decoded size, records) per chunk."""
    chunks, records = meta or (len(entries), sum(e[2] for e in entries))
    metadata = _field(1, 1) + _field(2, chunks) + _field(3, records) + _field(4, b"group_size:1")
    out = [_field(1, metadata)]
    out += [_field(1, at) + _field(2, size) + _field(3, n) for at, size, n in entries]
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> bytes:
    """An ArrayRecord file whose footer begins past byte 40,000: its last block (the postscript) is reused."""
    array_record_module()
    path = tmp_path_factory.mktemp("template") / "t.array_record"
    return Path(
        write_array_record(path, [b"\x01" * 40_000], "uncompressed,group_size:1")
    ).read_bytes()


def _footer_at(template: bytes) -> int:
    from recordkit.formats.arrayrecord import ArrayRecordFrameReader
    from recordkit.formats.base import Source

    return ArrayRecordFrameReader(Source(path="t", buffer=template)).offsets[-1]


def _build(
    template: bytes,
    chunks: list[tuple[bytes, int, int]],
    *,
    meta: tuple[int, int] | None = None,
    counts: list[int] | None = None,
) -> bytes:
    """A file of ``chunks`` (chunk bytes, decoded size, records) in its first block, then the footer.

    A padding chunk fills the space up to where ``template``'s postscript says the footer is; the last block
    is ``template``'s. ``meta`` and ``counts`` override what the footer says.
    """
    footer_at = _footer_at(template)
    out = bytearray(SIGNATURE)
    entries = []
    for i, (chunk, decoded, records) in enumerate(chunks):
        entries.append((len(out), decoded, records if counts is None else counts[i]))
        out += chunk
    room = footer_at - len(out) - 40
    assert room >= 0, "the chunks do not fit before the template's footer"
    out += _chunk(PADDING, bytes(room), 0, 0)
    footer = _footer_records(entries, meta)
    out += _chunk(SIMPLE, _simple_data(footer), len(footer), sum(map(len, footer)))
    assert len(out) <= BLOCK
    out += bytes(BLOCK - len(out))
    return bytes(out) + template[BLOCK:]


def _honest(records: list[bytes], codec: str) -> tuple[bytes, int, int]:
    data = _simple_data(records, codec)
    size = sum(map(len, records))
    return _chunk(SIMPLE, data, len(records), size), size, len(records)


@pytest.mark.interop
def test_the_builder_makes_files_array_record_reads(tmp_path, template):
    array_record = array_record_module()
    records = [b"a" * 100, b"", b"record %d" % 7]
    for codec in CODEC_BYTES:
        path = tmp_path / f"{codec}.array_record"
        path.write_bytes(
            _build(template, [_honest(records[:2], codec), _honest(records[2:], codec)])
        )
        assert list(array_record.ArrayRecordReader(str(path)).read_all()) == records
        import recordkit as rk

        assert list(rk.open(path)) == records


@pytest.mark.interop
@pytest.mark.parametrize("codec", ["zstd", "brotli", "snappy"])
def test_a_block_that_inflates_short_is_an_error_not_zero_padding(tmp_path, template, codec):
    import recordkit as rk

    # The record sizes, the chunk header and the block all say one record of 18 bytes; the block holds 8.
    block = _varint(18) + _compress(codec, b"record 0")
    data = _simple_data([bytes(18)], codec, values_block=block)
    path = tmp_path / "short.array_record"
    path.write_bytes(_build(template, [(_chunk(SIMPLE, data, 1, 18), 18, 1)]))
    for read in (lambda: list(rk.open(path)), lambda: rk.open(path)[0]):
        with pytest.raises(
            rk.CorruptRecordError, match=r"(8 bytes, not the 18|cannot decompress)"
        ) as caught:
            read()
        assert (caught.value.path, caught.value.index, caught.value.offset) == (str(path), 0, 64)


@pytest.mark.parametrize("backend", ["cramjam", "zstandard"])
def test_bounded_output_grows_to_what_the_data_really_holds(backend):
    from recordkit.formats import _decompress

    zstandard = pytest.importorskip("zstandard")
    into = _decompress._cramjam("zstd") if backend == "cramjam" else _decompress._zstandard()
    if into is None:
        pytest.skip(f"{backend} is not installed")
    raw = bytes(range(256)) * (
        40 * _decompress.EAGER // 256
    )  # 40 MiB from a few KiB: several retries
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(raw)
    assert _decompress.GUESS * len(frame) < len(raw)
    assert _decompress.bounded(into, frame, len(raw)) == raw
    for wrong in (len(raw) - 1, len(raw) + 1, 10**12):
        with pytest.raises(_decompress.DecompressionFailed):
            _decompress.bounded(into, frame, wrong)


@pytest.mark.interop
@pytest.mark.parametrize("where", ["footer", "postscript"])
def test_damage_to_the_footer_or_postscript_says_which(tmp_path, where):
    import recordkit as rk

    records = [b"record %d" % i for i in range(50)]
    data = bytearray(
        Path(write_array_record(tmp_path / "f.array_record", records, "group_size:1")).read_bytes()
    )
    # The postscript chunk begins at the last block's boundary, its header after the block header.
    at = _footer_at(bytes(data)) if where == "footer" else len(data) - BLOCK
    data[at + (60 if where == "footer" else 84)] ^= 0x10  # inside the chunk's data
    path = tmp_path / "damaged.array_record"
    path.write_bytes(data)
    with pytest.raises(rk.ChecksumError, match=f"the ArrayRecord {where} ") as caught:
        rk.open(path)
    assert caught.value.offset == at
    assert caught.value.reason.startswith(f"the ArrayRecord {where} ")


_LIAR = 10**11


def _zstd_frame_claiming(content_size: int, raw: bytes) -> bytes:
    """A zstd frame of ``raw`` whose header declares ``content_size`` (a four-byte field)."""
    zstandard = pytest.importorskip("zstandard")
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=True).compress(raw))
    descriptor = frame[4]
    assert descriptor >> 6 == 2, "expected a four-byte content size field"
    assert descriptor & 0x20, "expected a single-segment frame"
    frame[5:9] = content_size.to_bytes(4, "little")
    return bytes(frame)


def _crafted(template: bytes) -> dict[str, bytes]:
    """Files whose sizes lie, by name; each chunk's hashes are right."""
    one = [b"record 0" * 40]
    files = {}
    for codec in ("zstd", "brotli", "snappy"):
        for declared in (_LIAR, 2 * 10**9):
            # the values block and the chunk header agree on a size the data cannot produce
            data = _simple_data(one, codec, values_declared=declared)
            files[f"block-{codec}-{declared}"] = _build(
                template, [(_chunk(SIMPLE, data, 1, declared), declared, 1)]
            )
        # the values block alone lies; the header says the truth
        data = _simple_data(one, codec, values_declared=_LIAR)
        files[f"block-vs-header-{codec}"] = _build(
            template, [(_chunk(SIMPLE, data, 1, 320), 320, 1)]
        )
        # the record sizes block lies
        data = _simple_data(one, codec, sizes_declared=_LIAR)
        files[f"sizes-{codec}"] = _build(template, [(_chunk(SIMPLE, data, 1, 320), 320, 1)])
    # a zstd frame whose own header declares 4 GB where Riegeli declares the truth
    raw = bytes(70_000)  # long enough for a four-byte content size field
    block = _varint(len(raw)) + _zstd_frame_claiming(0xFFFFFFF0, raw)
    data = _simple_data([raw], "zstd", values_block=block)
    files["zstd-frame"] = _build(template, [(_chunk(SIMPLE, data, 1, len(raw)), len(raw), 1)])
    # chunk level: the header claims 2**50 records where the footer says 1, or both claim 10**15
    data = _simple_data(one, "zstd")
    files["chunk-records"] = _build(template, [(_chunk(SIMPLE, data, 2**50, 320), 320, 1)])
    files["footer-records"] = _build(template, [(_chunk(SIMPLE, data, 10**15, 320), 320, 10**15)])
    # footer level: its metadata claims 10**15 records or chunks
    honest = _honest(one, "zstd")
    files["footer-meta-records"] = _build(template, [honest], meta=(1, 10**15))
    files["footer-meta-chunks"] = _build(template, [honest], meta=(10**15, 1))
    files["footer-count"] = _build(template, [honest], counts=[2**62])
    return files


_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import recordkit as rk
    from recordkit.data import Dataset

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

    READS = {
        "iterate": lambda p: list(rk.open(p)),
        "index": lambda p: rk.open(p)[0],
        "read": lambda p: rk.open(p).read([0]),
        "dataset": lambda p: list(Dataset(p)),
    }
    base = peak()
    out = {}
    for path in sys.argv[1:]:
        for name, read in READS.items():
            try:
                read(path)
                result = "no error"
            except rk.CorruptRecordError as exc:
                result = type(exc).__name__ + ": " + str(exc)
            except Exception as exc:  # reported, then failed by the test
                result = "UNTYPED " + type(exc).__name__ + ": " + str(exc)
            out[path + " " + name] = [result, peak() - base]
    print(json.dumps(out))
    """
)


@pytest.mark.interop
def test_crafted_sizes_raise_typed_errors_in_little_memory(tmp_path, template):
    paths = []
    for name, data in _crafted(template).items():
        path = tmp_path / f"{name}.array_record"
        path.write_bytes(data)
        paths.append(str(path))
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *paths],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"the reading process died ({done.returncode}): {done.stderr[-2000:]}"
    )
    results = json.loads(done.stdout)
    assert len(results) == 4 * len(paths)
    for what, (result, grown) in results.items():
        name = Path(what.split(" ")[0]).stem
        assert result.split(":")[0] in {"CorruptRecordError", "HeaderError", "ChecksumError"}, (
            f"{name} ({what.split(' ')[1]}): {result}"
        )
        assert grown <= PEAK_MB, f"{name} ({what.split(' ')[1]}) grew the peak by {grown} MiB"
        assert str(Path(what.split(" ")[0])) in result or "Dataset" in what


# -- bit flips ----------------------------------------------------------------------------------------

CODECS = ("zstd", "brotli", "snappy", "uncompressed")
GROUP_SIZES = (1, 3, 100, 65536)
FLIPS_PER_FILE = 64
BIG_RECORD_FLIPS = 40


def _flip_records(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    records = [rng.randbytes(rng.randrange(0, 200)) for _ in range(40)]
    records[3] = b""
    records[7] = b"compressible " * 20
    return records


_ORACLE = textwrap.dedent(
    """
    import hashlib, json, sys
    from array_record.python.array_record_module import ArrayRecordReader

    out = {}
    for path in sys.argv[1:]:
        try:
            reader = ArrayRecordReader(path)
            records = list(reader.read_all())
            out[path] = hashlib.sha256(repr(records).encode()).hexdigest()
        except Exception as exc:
            out[path] = "error: " + type(exc).__name__
    print(json.dumps(out))
    """
)


def _oracle(paths: list[str]) -> dict[str, str]:
    """What ArrayRecordReader makes of each file: a digest of its records, or ``error: ...``."""
    done = subprocess.run(
        [sys.executable, "-c", _ORACLE, *paths],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, str] = json.loads(done.stdout)
    return found


def _digest(records: list[bytes]) -> str:
    import hashlib

    return hashlib.sha256(repr(records).encode()).hexdigest()


def _recordkit_reads(path: str, count: int, rng: random.Random) -> list[list[bytes] | str]:
    """recordkit's records by iteration, ``read(indices)`` and ``reader[i]``, or the error's class name."""
    import recordkit as rk

    indices = list(range(count))
    rng.shuffle(indices)

    def by_read():
        got = rk.open(path).read(indices)
        return [got[indices.index(i)] for i in range(count)]

    def by_index():
        reader = rk.open(path)
        return [reader[i] for i in range(count)]

    def attempt(read):
        try:
            return read()
        except rk.CorruptRecordError as exc:
            return exc

    results: list[list[bytes] | str] = []
    for read in (lambda: list(rk.open(path)), by_read, by_index):
        found = attempt(read)
        if isinstance(found, Exception):
            assert found.path == path, repr(found)
            assert found.offset is not None, repr(found)
            found = type(found).__name__
        results.append(found)
    return results


def _flipped_files(tmp_path: Path) -> list[tuple[str, list[bytes]]]:
    """Every flipped file (path, the records written), seeded."""
    rng = random.Random(2026)
    files = []
    cases = [(codec, group) for codec in CODECS for group in GROUP_SIZES]
    cases.append(("zstd", 65536))  # with a record over 64 KiB, crossing block boundaries
    for n, (codec, group) in enumerate(cases):
        records = _flip_records(n)
        flips = FLIPS_PER_FILE
        if n == len(cases) - 1:
            records[20] = random.Random(n).randbytes(70_000)
            flips = BIG_RECORD_FLIPS
        options = f"{codec},group_size:{group}"
        path = write_array_record(tmp_path / f"w{n}.array_record", records, options)
        data = Path(path).read_bytes()
        # Most flips fall where the chunks are (the first block up to the footer's end, and the postscript
        # chunk); the rest anywhere, padding included.
        ends = len(data) - BLOCK + 200, _footer_end(data)
        for k in range(flips):
            if k % 5 == 4:
                pos = rng.randrange(len(data))
            elif k % 5 == 3:
                pos = rng.randrange(len(data) - BLOCK, ends[0])
            else:
                pos = rng.randrange(ends[1])
            damaged = bytearray(data)
            damaged[pos] ^= 1 << rng.randrange(8)
            flipped = tmp_path / f"w{n}-{k}-{pos}.array_record"
            flipped.write_bytes(damaged)
            files.append((str(flipped), records))
    return files


def _footer_end(data: bytes) -> int:
    from recordkit.formats.arrayrecord import ArrayRecordFrameReader
    from recordkit.formats.base import Source

    frame = ArrayRecordFrameReader(Source(path="x", buffer=data))
    return frame.chunks.chunk(frame.offsets[-1]).end


@pytest.mark.interop
def test_a_thousand_bit_flips_never_return_wrong_records(tmp_path):
    array_record_module()
    files = _flipped_files(tmp_path)
    assert len(files) >= 1000
    oracle = _oracle([path for path, _ in files])
    rng = random.Random(7)
    rejected = agreed = stricter = 0
    for path, records in files:
        results = _recordkit_reads(path, len(records), rng)
        for result in results:
            assert isinstance(result, str) or result == records, f"{path}: wrong records"
        oracle_ok = oracle[path] == _digest(records)
        if not oracle_ok:
            assert all(isinstance(r, str) for r in results), (
                f"{path}: ArrayRecordReader says {oracle[path]}, recordkit returned records"
            )
            rejected += 1
        elif all(r == records for r in results):
            agreed += 1
        else:
            stricter += 1
    # Both kinds of flip occur: ones that damage records and ones that land in padding.
    assert rejected > 500, (rejected, agreed, stricter)
    assert agreed > 50, (rejected, agreed, stricter)
