"""Large TFRecord payloads skip the writer's join buffer: the bytes on disk must not change."""

import gzip

import pytest

import recordkit as rk
from recordkit.formats.tfrecord import frame


@pytest.mark.parametrize("suffix", [".tfrecord", ".tfrecord.gz"])
def test_mixed_sizes_through_write_and_write_many_frame_in_order(tmp_path, rng, suffix):
    sizes = [0, 5, 1 << 16, 3, (1 << 16) - 1, 200_000, 7, 1 << 17]
    records = [rng.randbytes(size) for size in sizes]
    path = tmp_path / ("a" + suffix)
    with rk.open(path, "w") as writer:
        writer.write(records[0])
        writer.write(records[2])  # large, straight after a buffered small one
        writer.write_many(records[3:6])
        writer.flush()
        writer.write(records[1])
        writer.write_many(records[6:])
        assert writer.count == len(records)
    order = [0, 2, 3, 4, 5, 1, 6, 7]
    expected = b"".join(frame(records[i]) for i in order)
    data = path.read_bytes()
    assert (gzip.decompress(data) if suffix.endswith(".gz") else data) == expected
    with rk.open(path) as reader:
        assert list(reader) == [records[i] for i in order]
