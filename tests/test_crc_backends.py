"""The CRC-32 backends used for FFRecord: each one must give zlib's values, and the fastest one is chosen."""

import zlib

import pytest

import recordkit as rk
from recordkit.formats import _crc

CRC32_CHECK = 0xCBF43926  # the CRC-32 "check" value of b"123456789"


@pytest.mark.parametrize("backend", sorted(_crc.crc32_backends()))
def test_crc32_backends_known_vector(backend):
    function = _crc.crc32_backends()[backend]
    assert function(b"123456789") == CRC32_CHECK
    assert function(b"") == 0


@pytest.mark.parametrize("backend", sorted(_crc.crc32_backends()))
def test_crc32_backends_match_zlib_including_a_running_value(backend, rng):
    function = _crc.crc32_backends()[backend]
    for size in (1, 7, 8, 63, 64, 1000, 65537):
        data = rng.randbytes(size)
        assert function(data) == zlib.crc32(data)
        head, tail = data[: size // 3], data[size // 3 :]
        assert function(tail, function(head)) == zlib.crc32(data)
        assert function(memoryview(data)) == zlib.crc32(data)


def test_the_fast_crc32_backend_is_chosen_when_available():
    expected = "isal" if "isal" in _crc.crc32_backends() else "zlib"
    assert expected == _crc.CRC32_BACKEND
    assert _crc.crc32 is _crc.crc32_backends()[expected]


@pytest.mark.parametrize("backend", sorted(_crc.crc32_backends()))
def test_ffrecord_files_are_the_same_with_every_backend(backend, tmp_path, monkeypatch, rng):
    records = [rng.randbytes(n) for n in (0, 1, 100, 5000)]
    with rk.open(tmp_path / "zlib.ffr", "w") as writer:
        monkeypatch.setattr(_crc, "crc32", zlib.crc32)
        writer.write_many(records)
    monkeypatch.setattr(_crc, "crc32", _crc.crc32_backends()[backend])
    with rk.open(tmp_path / "other.ffr", "w") as writer:
        writer.write_many(records)
    assert (tmp_path / "zlib.ffr").read_bytes() == (tmp_path / "other.ffr").read_bytes()
    with rk.open(tmp_path / "zlib.ffr") as reader:
        assert list(reader) == records
        assert reader.read([3, 0]) == [records[3], records[0]]
