"""Files that change under an open reader: truncated, grown or replaced by another process.

A memory-mapped reader is killed by ``SIGBUS`` when it touches a page past the new end of a truncated file,
so the truncation cases run in a child process: a crash fails the test instead of ending the test run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import recordkit as rk
from recordkit.errors import TruncatedRecordError
from recordkit.formats import get_format
from recordkit.formats.base import Source

SUFFIXES = [".tfrecord", ".ofrecord", ".ffr"]
FORMATS = {".tfrecord": "tfrecord", ".ofrecord": "ofrecord", ".ffr": "ffrecord"}
SIZE = (
    16 * 1024
)  # several pages per record, so a cut inside the last one leaves whole pages past the end
COUNT = 24
RECORDS = [bytes([i]) * SIZE for i in range(COUNT)]


def _start(suffix: str, index: int, count: int = COUNT) -> int:
    """The offset of record ``index`` in a file of ``count`` records of SIZE bytes (from the framing)."""
    if suffix == ".tfrecord":
        return index * (SIZE + 16)
    if suffix == ".ofrecord":
        return index * (SIZE + 8)
    return 12 + 12 * count + index * SIZE


def _write(path, records=RECORDS):
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    return path


def _run_child(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter; return its output, failing on any exit status but 0."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


CHILD = r"""
import os, sys
import recordkit as rk
from recordkit.errors import TruncatedRecordError

path, how, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
reader = rk.open(path)
last = len(reader) - 1
first = reader[0]  # the reader has read from the file before it changes
os.truncate(path, keep)
try:
    if how == "iterate":
        list(reader)
    elif how == "index":
        reader[last]
    else:
        reader.read([0, last, 1])
except TruncatedRecordError as exc:
    print("caught", exc.index, exc.offset, exc.path == path)
    sys.exit(0)
print("no error")
sys.exit(3)
"""


@pytest.mark.parametrize("how", ["iterate", "index", "read"])
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_truncated_under_the_reader_raises_instead_of_crashing(tmp_path, suffix, how):
    path = _write(tmp_path / f"data{suffix}")
    cut = _start(suffix, COUNT - 1)
    output = _run_child(CHILD, os.fspath(path), how, str(cut + 100))
    assert output.split() == ["caught", str(COUNT - 1), str(cut), "True"]


LARGE_CHILD = r"""
import os, sys
import recordkit as rk
from recordkit.errors import TruncatedRecordError

path, keep = sys.argv[1], int(sys.argv[2])
reader = rk.open(path)
count = 0
try:
    for record in reader:
        if count == 0:
            os.truncate(path, keep)
        count += 1
except TruncatedRecordError as exc:
    print("caught", count, exc.index, exc.offset)
    sys.exit(0)
print("no error", count)
sys.exit(3)
"""


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_truncated_during_iteration_stops_at_the_cut(tmp_path, suffix):
    # 8 MiB: iteration reads it in several pieces, and the cut falls between two of them.
    count = 512
    path = _write(tmp_path / f"data{suffix}", [bytes([i % 256]) * SIZE for i in range(count)])
    index = 300
    start = _start(suffix, index, count)
    output = _run_child(LARGE_CHILD, os.fspath(path), str(start + 100))
    # Every record before the cut was yielded, then the cut one raised.
    assert output.split() == ["caught", str(index), str(index), str(start)]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_bytes_appended_after_opening_are_not_read(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}")
    with rk.open(path) as reader:
        assert len(reader) == COUNT
        with open(path, "ab") as file:
            file.write(b"\x07" * 3 * SIZE)
        assert list(reader) == RECORDS
        assert reader[-1] == RECORDS[-1]
        assert reader.read([COUNT - 1, 0]) == [RECORDS[-1], RECORDS[0]]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_replaced_by_rename_keeps_reading_the_old_one(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}")
    other = [b"new" * 10] * 5
    with rk.open(path) as reader:
        _write(tmp_path / f"next{suffix}", other)
        os.replace(tmp_path / f"next{suffix}", path)
        assert list(reader) == RECORDS
        assert reader.read([COUNT - 1, 3]) == [RECORDS[-1], RECORDS[3]]
    with rk.open(path) as reader:
        assert list(reader) == other


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_object_that_shrinks_raises(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}")
    cut = _start(suffix, COUNT - 1)
    with open(path, "rb") as file, rk.open(file, format=FORMATS[suffix]) as reader:
        assert reader[0] == RECORDS[0]
        os.truncate(path, cut + 10)
        with pytest.raises(TruncatedRecordError) as info:
            reader[COUNT - 1]
        assert (info.value.index, info.value.offset) == (COUNT - 1, cut)


def test_a_record_file_embedded_in_a_larger_file(tmp_path):
    path = tmp_path / "data.tfrecord"
    _write(path)
    prefix = b"some header of another format" * 7
    blob = tmp_path / "blob.bin"
    blob.write_bytes(prefix + path.read_bytes() + b"trailing bytes of the container")
    size = path.stat().st_size
    with open(blob, "rb") as file:
        file.seek(len(prefix))
        # The source starts where the file object was; the container's trailer is cut off by slicing
        # the size, as a caller that knows the embedded length would.
        source = Source(path=None, fileobj=file, seekable=True, size=size)
        frames = get_format("tfrecord").reader(source)
        assert list(frames) == RECORDS
        assert frames.read_many([5, 0]) == [RECORDS[5], RECORDS[0]]
        assert file.tell() == len(prefix)  # pread leaves the caller's position alone


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_closed_file_object_is_never_read_through_a_reused_descriptor(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}")
    file = open(path, "rb")  # noqa: SIM115 - closed by the test, under the reader
    reader = rk.open(file, format=FORMATS[suffix])
    assert reader[1] == RECORDS[1]
    file.close()
    with open(
        _write(tmp_path / f"other{suffix}", [b"x" * SIZE] * COUNT), "rb"
    ):  # may reuse the number
        for read in (lambda: reader[2], lambda: reader.read([2, 9]), lambda: list(reader)):
            with pytest.raises(ValueError, match="closed file"):
                read()
