"""FFRecord iteration and batched read(): damage is found at the right sample, after every good one before it."""

import struct

import pytest

import recordkit as rk
from recordkit.errors import ChecksumError


def _write(path, records):
    with rk.open(path, "w") as writer:
        writer.write_many(records)


def _offset_of(path, index):
    with open(path, "rb") as f:
        count = struct.unpack("<q", f.read(12)[4:])[0]
        f.seek(12 + 4 * count + 8 * index)
        return struct.unpack("<q", f.read(8))[0]


def _damage(path, index):
    offset = _offset_of(path, index)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return offset


def _read_until_error(path):
    """Iterate until the reader raises; return what it yielded before and the error."""
    seen = []
    with rk.open(path) as reader:
        records = iter(reader)
        with pytest.raises(ChecksumError) as caught:
            seen.extend(records)  # keeps what was appended before the error
    return seen, caught.value


@pytest.fixture
def small(tmp_path, rng):
    records = [rng.randbytes(rng.randrange(1, 40)) for _ in range(700)]
    path = tmp_path / "small.ffr"
    _write(path, records)
    return path, records


def test_small_samples_iterate_and_read_back_exactly(small, rng):
    path, records = small
    with rk.open(path) as reader:
        assert list(reader) == records
        indices = [rng.randrange(len(records)) for _ in range(300)] + [len(records) - 1, 0]
        assert reader.read(indices) == [records[i] for i in indices]
        assert reader.read([]) == []


@pytest.mark.parametrize("bad", [0, 255, 256, 300, 698, 699])
def test_iteration_yields_every_good_sample_before_the_damaged_one(small, bad):
    path, records = small
    offset = _damage(path, bad)
    seen, error = _read_until_error(path)
    assert seen == records[:bad]
    assert (error.index, error.offset) == (bad, offset)


@pytest.mark.parametrize("bad", [0, 300, 699])
def test_batched_read_names_the_damaged_sample(small, bad):
    path, records = small
    offset = _damage(path, bad)
    with rk.open(path) as reader:
        good = [i for i in range(len(records)) if i != bad]
        assert reader.read(good) == [records[i] for i in good]
        with pytest.raises(ChecksumError) as caught:
            reader.read([*good[:50], bad, *good[50:]])
        assert (caught.value.index, caught.value.offset) == (bad, offset)
    with rk.open(path, check_crc=False) as reader:
        damaged = reader.read([bad])[0]
        assert damaged != records[bad]
        assert len(damaged) == len(records[bad])


def test_large_samples_stop_at_the_damaged_one_too(tmp_path, rng):
    records = [rng.randbytes(rng.randrange(5000, 9000)) for _ in range(40)]
    path = tmp_path / "large.ffr"
    _write(path, records)
    offset = _damage(path, 17)
    seen, error = _read_until_error(path)
    assert seen == records[:17]
    assert (error.index, error.offset) == (17, offset)
