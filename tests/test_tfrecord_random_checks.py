"""TFRecord random access remembers length checksums by length: a damaged one is still caught."""

from array import array

import pytest

import recordkit as rk
from recordkit.errors import ChecksumError
from recordkit.formats import get_format
from recordkit.formats.base import Source
from recordkit.formats.tfrecord import frame
from recordkit.io import write_index


@pytest.mark.parametrize(("where", "offset_in_frame"), [(8, 0), (0 + 12 + 30, 12)])
def test_damage_after_the_lengths_were_remembered(tmp_path, rng, where, offset_in_frame):
    records = [rng.randbytes(30) for _ in range(10)]
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"".join(map(frame, records)))
    write_index(path)
    with rk.open(path) as reader:
        assert reader.read(range(10)) == records  # every header checked once: the length is known
    start = 5 * (30 + 16)
    data = bytearray(path.read_bytes())
    data[start + where] ^= 0x01
    # The offset table as it stands after a first scan, given directly: no header walk runs again.
    offsets = array("q", range(0, 10 * 46 + 1, 46))
    frames = get_format("tfrecord").reader(
        Source(path=str(path), buffer=bytes(data)), offsets=offsets
    )
    assert frames.read_many([4, 6]) == [records[4], records[6]]
    with pytest.raises(ChecksumError) as caught:
        frames.read_many([4, 5])
    assert (caught.value.index, caught.value.offset) == (5, start + offset_in_frame)


def test_a_damaged_length_checksum_is_found_when_the_index_is_checked(tmp_path, rng):
    records = [rng.randbytes(30) for _ in range(10)]
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"".join(map(frame, records)))
    write_index(path)
    start = 5 * (30 + 16)
    data = bytearray(path.read_bytes())
    data[start + 8] ^= 0x01
    path.write_bytes(bytes(data))
    with rk.open(path) as reader, pytest.raises(ChecksumError) as caught:
        reader.read([4, 6])
    assert (caught.value.index, caught.value.offset) == (5, start)
