"""Following files that are still being written: ``recordkit.follow`` and ``recordkit.io.Follower``.

The expectations come from outside the follower: record boundaries from the byte layout itself (parsed here
with ``struct``), records from TensorFlow-written golden files (and Python's ``zlib`` for the compressed
ones), event files from tensorboardX when it is installed. Real writers appending in another process are in
test_follow_writers.py.
"""

from __future__ import annotations

import gc
import os
import shutil
import struct
import threading
import warnings
import zlib
from pathlib import Path

import pytest

import recordkit as rk
from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    FileChangedError,
    UnsupportedOperationError,
)
from recordkit.formats import get_format
from recordkit.formats.tfrecord import frame
from recordkit.io import Follower

TFRECORD_GOLDEN = Path(__file__).resolve().parent / "data" / "golden" / "tfrecord"


def deflate(data: bytes, wbits: int) -> bytes:
    """``zlib.compress(data, wbits=wbits)``, which Python 3.10's zlib.compress does not take."""
    stream = zlib.compressobj(wbits=wbits)
    return stream.compress(data) + stream.flush()


def frame_ends(data: bytes, header: int, trailer: int, width: str) -> list[int]:
    """The end offset of every complete frame in ``data`` (a length of ``width`` at each frame's start)."""
    ends, pos = [], 0
    while pos + header <= len(data):
        (length,) = struct.unpack_from(width, data, pos)
        end = pos + header + length + trailer
        if end > len(data):
            break
        ends.append(end)
        pos = end
    return ends


def tfrecord_ends(data: bytes) -> list[int]:
    return frame_ends(data, 12, 4, "<Q")


def tfrecord_payloads(data: bytes) -> list[bytes]:
    starts = [0, *tfrecord_ends(data)][:-1]
    return [data[s + 12 : e - 4] for s, e in zip(starts, tfrecord_ends(data), strict=True)]


def tfevents_file(tmp_path: Path) -> Path:
    """A real event file written by tensorboardX (scalars, text, a histogram)."""
    tensorboardX = pytest.importorskip("tensorboardX")
    import numpy as np

    logdir = tmp_path / "tbx"
    writer = tensorboardX.SummaryWriter(str(logdir))
    for step in range(4):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.add_text("note", "a note", 4)
    writer.add_histogram("weights", np.arange(4.0), 5, bins=3)
    writer.close()
    (path,) = logdir.glob("events.out.tfevents.*")
    return path


def write(path: Path, data: bytes, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(data)


# -- cut-point sweeps ---------------------------------------------------------------------------------


def sweep(
    data: bytes, name: str, tmp_path: Path, cuts: list[int], expected_at: object, **options: object
) -> None:
    """For each cut: a follower of the prefix yields exactly the complete records, then the rest once."""
    full = expected_at(len(data))  # type: ignore[operator]
    path = tmp_path / name
    for cut in cuts:
        write(path, data[:cut], "wb")
        with Follower(path, **options) as follower:  # type: ignore[arg-type]
            first = follower.poll()
            assert first == expected_at(cut), cut  # type: ignore[operator]
            assert follower.poll() == []
            write(path, data[cut:])
            assert first + follower.poll() == full, cut
            assert follower.poll() == []


def test_every_prefix_of_an_event_file_yields_its_complete_records(tmp_path: Path) -> None:
    data = tfevents_file(tmp_path).read_bytes()
    ends = tfrecord_ends(data)
    assert ends[-1] == len(data)
    assert len(ends) > 5
    payloads = tfrecord_payloads(data)

    def expected_at(cut: int) -> list[bytes]:
        return payloads[: sum(end <= cut for end in ends)]

    assert list(rk.open(str(next((tmp_path / "tbx").glob("events.*"))))) == payloads
    sweep(data, "events.out.tfevents.1.sweep", tmp_path, list(range(len(data) + 1)), expected_at)


def test_prefixes_of_a_tensorflow_tfrecord_yield_its_complete_records(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    ends = tfrecord_ends(data)
    payloads = tfrecord_payloads(data)
    # Cuts within 13 bytes of the record boundaries (inside the header, the payload's first bytes, the
    # trailer: each of them near the first 8 boundaries), and every 211th byte.
    near = [
        c for i, end in enumerate([0, *ends]) for c in range(end - 13, end + 14, 1 + 5 * (i > 8))
    ]
    cuts = sorted({c for c in near if 0 <= c <= len(data)} | set(range(0, len(data), 211)))

    def expected_at(cut: int) -> list[bytes]:
        return payloads[: sum(end <= cut for end in ends)]

    sweep(data, "cut.tfrecord", tmp_path, cuts, expected_at)
    # Without a name that says the format: detected from the content once 16 bytes are there.
    sweep(data, "cut-noname", tmp_path, cuts[::7], expected_at)


@pytest.mark.parametrize(
    ("name", "wbits"), [("examples.tfrecord.gz", 31), ("examples.tfrecord.zlib", 15)]
)
def test_prefixes_of_a_compressed_tensorflow_file(tmp_path: Path, name: str, wbits: int) -> None:
    data = (TFRECORD_GOLDEN / name).read_bytes()

    def expected_at(cut: int) -> list[bytes]:
        # What Python's zlib inflates from the prefix, cut into its complete frames.
        return tfrecord_payloads(zlib.decompressobj(wbits).decompress(data[:cut]))

    assert expected_at(len(data)) == tfrecord_payloads(
        (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    )
    cuts = [*range(64), *range(64, len(data), 311), len(data) - 1, len(data)]
    sweep(data, name, tmp_path, cuts, expected_at)


def test_prefixes_of_an_ofrecord_file(tmp_path: Path) -> None:
    records = [
        rk.encode_ofrecord({"label": [i], "name": [b"x" * (i * 13 % 50)]}) for i in range(25)
    ]
    path = tmp_path / "whole.ofrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    data = path.read_bytes()
    ends = frame_ends(data, 8, 0, "<q")
    assert len(ends) == len(records)
    assert ends[-1] == len(data)

    def expected_at(cut: int) -> list[bytes]:
        return records[: sum(end <= cut for end in ends)]

    sweep(data, "cut.ofrecord", tmp_path, list(range(len(data) + 1)), expected_at)
    sweep(data, "part-0", tmp_path, list(range(0, len(data) + 1, 5)), expected_at)


def test_one_follower_sees_a_file_grow_byte_by_byte(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "sequence_examples.tfrecord").read_bytes()
    ends = tfrecord_ends(data)
    payloads = tfrecord_payloads(data)
    path = tmp_path / "grow.tfrecord"
    path.write_bytes(b"")
    got: list[bytes] = []
    with Follower(path) as follower:
        for size in range(1, len(data) + 1):
            write(path, data[size - 1 : size])
            got += follower.poll()
            assert got == payloads[: sum(end <= size for end in ends)]
        assert follower.position == (len(payloads), len(data))
    assert got == payloads


# -- formats and names ------------------------------------------------------------------------------


def test_a_new_event_file_is_tfrecord_by_name(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1700000000.host.123.0"
    path.write_bytes(b"")
    with Follower(path) as follower:
        assert follower.format == "tfrecord"
        assert follower.poll() == []


def test_a_file_without_a_name_waits_for_enough_bytes_to_tell(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    path = tmp_path / "growing"
    path.write_bytes(b"")
    with Follower(path) as follower:
        assert follower.poll() == []
        assert follower.format is None
        write(path, data[:15])
        assert follower.poll() == []
        assert follower.format is None
        write(path, data[15:])
        assert follower.poll() == tfrecord_payloads(data)
        assert follower.format == "tfrecord"


def test_unrecognised_content_raises_once_4096_bytes_say_nothing(tmp_path: Path) -> None:
    path = tmp_path / "growing"
    path.write_bytes(b"\x00" * 4095)
    with Follower(path) as follower:
        assert follower.poll() == []
        write(path, b"\x00")
        with pytest.raises(rk.UnknownFormatError, match="format="):
            follower.poll()


def test_format_argument_overrides_detection(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    records = [rk.encode_ofrecord({"a": [i]}) for i in range(3)]
    path.write_bytes(b"".join(struct.pack("<q", len(r)) + r for r in records))
    with Follower(path, format="ofrecord") as follower:
        assert follower.poll() == records


def test_ffrecord_cannot_be_followed(tmp_path: Path) -> None:
    path = tmp_path / "data.ffr"
    with rk.open(path, "w") as writer:
        writer.write(b"x")
    with pytest.raises(UnsupportedOperationError, match="header"):
        Follower(path)
    with pytest.raises(UnsupportedOperationError, match="cannot be followed"):
        rk.follow(tmp_path / "data.ffr", format="ffrecord")


def test_urls_and_non_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOperationError, match="local"):
        Follower("s3://bucket/x.tfrecord")
    with pytest.raises(UnsupportedOperationError, match="regular file"):
        Follower(tmp_path, format="tfrecord")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsupportedOperationError, match="regular file"):
        Follower(tmp_path / "fifo", format="tfrecord")
    with pytest.raises(FileNotFoundError):
        Follower(tmp_path / "missing.tfrecord")
    with pytest.raises(ValueError, match="poll"):
        rk.follow(tmp_path / "missing.tfrecord", poll_interval=0)


def test_a_gzip_stream_is_followed_as_it_is_flushed(tmp_path: Path) -> None:
    # TensorFlow's flush of a GZIP writer (Z_PARTIAL_FLUSH) leaves every record written so far decodable.
    path = tmp_path / "log.tfrecord.gz"
    records = [os.urandom(n) for n in (0, 1, 100, 5000, 70000, 3)]
    with open(path, "wb") as raw, Follower(path) as follower:
        writer = get_format("tfrecord").writer(raw, compression="gzip")
        for record in records:
            writer.write(record)
            writer.flush()
            raw.flush()
            assert follower.poll() == [record]
        writer.close()
        raw.flush()
        assert follower.poll() == []
        # A second GZIP member appended later is read on.
        raw.write(deflate(frame(b"next"), wbits=31))
        raw.flush()
        assert follower.poll() == [b"next"]


# -- damage and changes -----------------------------------------------------------------------------


def test_a_corrupt_checksum_in_the_appended_part_is_located(tmp_path: Path) -> None:
    data = bytearray((TFRECORD_GOLDEN / "examples.tfrecord").read_bytes())
    ends = tfrecord_ends(bytes(data))
    payloads = tfrecord_payloads(bytes(data))
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(data[: ends[3]])
    with Follower(path) as follower:
        assert follower.poll() == payloads[:4]
        data[ends[5] + 20] ^= 0x40  # inside record 6's payload
        write(path, bytes(data[ends[3] :]))
        assert follower.poll() == payloads[4:6]  # the records before the damage first
        for _ in range(2):  # then the error, at every poll
            with pytest.raises(ChecksumError) as caught:
                follower.poll()
            assert (caught.value.path, caught.value.index) == (str(path), 6)
            assert caught.value.offset == ends[5] + 12  # TensorFlow's convention: the payload


def test_a_corrupt_length_checksum_does_not_wait_for_its_payload(tmp_path: Path) -> None:
    data = bytearray((TFRECORD_GOLDEN / "examples.tfrecord").read_bytes())
    ends = tfrecord_ends(bytes(data))
    data[ends[1] + 2] ^= 0x01  # record 2's length: its header checksum no longer matches
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(data[: ends[1] + 12])  # only the damaged header of record 2 is there
    with Follower(path) as follower:
        assert follower.poll() == tfrecord_payloads(bytes(data[: ends[1]]))
        with pytest.raises(ChecksumError, match="length checksum") as caught:
            follower.poll()
        assert (caught.value.index, caught.value.offset) == (2, ends[1])


def test_damaged_compressed_data_is_located(tmp_path: Path) -> None:
    frames = b"".join(frame(b"r%d" % i) for i in range(3))
    data = deflate(frames, wbits=15) + b"more"  # bytes after the end of a ZLIB stream
    path = tmp_path / "log.tfrecord.zlib"
    path.write_bytes(data)
    with Follower(path) as follower:
        assert follower.poll() == [b"r0", b"r1", b"r2"]
        with pytest.raises(CorruptRecordError, match="after the end") as caught:
            follower.poll()
        assert (caught.value.index, caught.value.offset) == (3, len(frames))


def test_a_replaced_file_raises_after_the_records_the_old_one_held(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    ends = tfrecord_ends(data)
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(data[: ends[2]])
    with Follower(path) as follower:
        assert len(follower.poll()) == 3
        write(path, data[ends[2] : ends[4]])  # appended to the old file, not yet read
        replacement = tmp_path / "new"
        replacement.write_bytes(data)
        os.replace(replacement, path)
        assert follower.poll() == tfrecord_payloads(data[: ends[4]])[3:]
        with pytest.raises(FileChangedError, match="replaced") as caught:
            follower.poll()
        assert (caught.value.index, caught.value.offset) == (5, ends[4])


def test_a_removed_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    shutil.copy(TFRECORD_GOLDEN / "sequence_examples.tfrecord", path)
    with Follower(path) as follower:
        assert follower.poll()
        path.unlink()
        with pytest.raises(FileChangedError, match="removed"):
            follower.poll()


def test_a_shrunk_file_raises(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    path = tmp_path / "x.tfrecord"
    path.write_bytes(data)
    with Follower(path) as follower:
        assert len(follower.poll()) == len(tfrecord_ends(data))
        os.truncate(path, 100)
        with pytest.raises(FileChangedError, match="shrank to 100 bytes") as caught:
            follower.poll()
        assert caught.value.offset == len(data)
        with pytest.raises(FileChangedError):
            follower.poll()


# -- the iterator -----------------------------------------------------------------------------------


def test_follow_ends_after_idle_timeout(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    path = tmp_path / "x.tfrecord"
    path.write_bytes(data + data[:30])  # and a partial record, which never completes
    assert list(rk.follow(path, idle_timeout=0.05, poll_interval=0.01)) == tfrecord_payloads(data)
    with rk.follow(path, idle_timeout=0, poll_interval=0.01) as records:
        assert sum(1 for _ in records) == len(tfrecord_ends(data))
        assert records.follower.closed


def test_follow_yields_records_appended_while_it_waits(tmp_path: Path) -> None:
    data = (TFRECORD_GOLDEN / "examples.tfrecord").read_bytes()
    ends = tfrecord_ends(data)
    path = tmp_path / "x.tfrecord"
    path.write_bytes(data[: ends[0] + 5])
    got: list[bytes] = []
    with rk.follow(path, poll_interval=0.005) as records:
        for record in records:
            got.append(record)
            if len(got) == 1:
                write(path, data[ends[0] + 5 :])
            if len(got) == len(ends):
                break
    assert got == tfrecord_payloads(data)


def test_close_from_another_thread_ends_a_waiting_iteration(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    shutil.copy(TFRECORD_GOLDEN / "sequence_examples.tfrecord", path)
    records = rk.follow(path, poll_interval=60)  # it would wait a minute between checks
    got: list[bytes] = []
    first = threading.Event()

    def consume() -> None:
        for record in records:
            got.append(record)
            first.set()

    thread = threading.Thread(target=consume)
    thread.start()
    assert first.wait(10)
    records.close()
    thread.join(10)
    assert not thread.is_alive()
    assert got == tfrecord_payloads((TFRECORD_GOLDEN / "sequence_examples.tfrecord").read_bytes())
    assert records.follower.poll() == []


def test_follow_raises_the_damage_after_the_records_before_it(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    shutil.copy(TFRECORD_GOLDEN / "corrupt_data_crc.tfrecord", path)
    got: list[bytes] = []
    with pytest.raises(ChecksumError) as caught, rk.follow(path, idle_timeout=0) as records:
        got.extend(records)
    with rk.open(path) as reader, pytest.raises(ChecksumError) as direct:
        list(reader)
    assert (caught.value.index, caught.value.offset) == (direct.value.index, direct.value.offset)
    assert len(got) == direct.value.index


def test_following_a_file_a_writer_has_not_closed_names_its_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "train.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write(b"first")
        writer.flush()
        with pytest.raises(
            FileNotFoundError, match=r"temporary name \.train\.tfrecord\.[0-9a-f]+\.tmp"
        ):
            rk.follow(path)
        with pytest.raises(FileNotFoundError, match="closed") as caught:
            Follower(path)
        assert caught.value.filename == str(path)
    assert list(rk.follow(path, idle_timeout=0)) == [b"first"]
    with pytest.raises(FileNotFoundError) as caught:
        Follower(tmp_path / "other.tfrecord")
    assert "temporary" not in str(caught.value)


def test_a_follow_left_by_break_releases_its_file(tmp_path):
    path = tmp_path / "two.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many([b"a", b"b"])
    gc.collect()
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    if before is None:
        pytest.skip("needs /proc/self/fd to count open files")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        for _ in rk.follow(path, idle_timeout=0.1):
            break
        gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before
