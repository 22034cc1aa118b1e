"""A conformance test suite for record formats, shipped with recordkit.

Every format (built in or third party) should pass the same behavioural tests. Subclass
:class:`FormatConformance` in a pytest module, set :attr:`~FormatConformance.format_name` and
:attr:`~FormatConformance.suffix`, and implement :meth:`~FormatConformance.damage_checksums` if the format
has checksums::

    from recordkit.testing import FormatConformance

    class TestMyFormat(FormatConformance):
        format_name = "myformat"
        suffix = ".myf"

Tests that need an ability the format lacks (random access, checksums, empty records) are skipped, as
:attr:`recordkit.formats.base.RecordFormat.capabilities` declares.

The suite runs under pytest, so this module needs it: importing it where pytest is not installed raises an
``ImportError`` that says so (``pip install pytest``, or recordkit's ``test`` extra).
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any, ClassVar

try:
    import pytest
except ImportError as exc:
    raise ImportError(
        "recordkit.testing is a pytest conformance suite and needs pytest: pip install pytest",
        name="pytest",
    ) from exc

import recordkit as rk
from recordkit.errors import CorruptRecordError, RecordKitError, UnsupportedOperationError
from recordkit.formats import get_format
from recordkit.formats.base import Capabilities

__all__ = ["FormatConformance", "NoSeekBytesIO"]


class NoSeekBytesIO(io.BytesIO):
    """A ``BytesIO`` that behaves like a pipe: ``seek`` and ``tell`` fail, ``seekable()`` is false."""

    def seek(self, offset: int, whence: int = 0) -> int:
        """Fail, like a pipe."""
        raise io.UnsupportedOperation("seek")

    def tell(self) -> int:
        """Fail, like a pipe."""
        raise io.UnsupportedOperation("tell")

    def seekable(self) -> bool:
        """Return ``False``."""
        return False


def _read_everything(data: bytes, format_name: str, **options: Any) -> list[bytes]:
    """Read ``data`` by iteration and, if possible, by random access; check that both agree."""
    with rk.open(io.BytesIO(data), format=format_name, **options) as reader:
        records = list(reader)
        if reader.supports_random_access:
            assert len(reader) == len(records)
            assert [reader[i] for i in range(len(records))] == records
            assert reader.read(range(len(records) - 1, -1, -1)) == records[::-1]
    return records


class FormatConformance:
    """Behavioural tests every record format must pass.

    Attributes
    ----------
    format_name
        The registered name of the format under test.
    suffix
        A file suffix that selects the format.
    sequential
        Whether the format is a plain sequence of frames, so that a file cut exactly between two records
        reads as a shorter valid file. Formats with a header or an index are not.
    truncation_error
        The error class a cut file raises (when the cut is not on a record boundary).
    options
        Extra options for writing and reading (e.g. ``{"compression": "gzip"}``).
    flips_always_detected
        Whether every single-bit flip must raise (true for checksummed formats). When false, a flip that
        raises nothing must leave the records read unchanged (e.g. GZIP header fields and padding bits).
    """

    format_name: ClassVar[str]
    suffix: ClassVar[str]
    sequential: ClassVar[bool] = True
    truncation_error: ClassVar[type[CorruptRecordError]] = rk.TruncatedRecordError
    options: ClassVar[dict[str, Any]] = {}
    flips_always_detected: ClassVar[bool] = True
    small_records: ClassVar[list[bytes]] = [b"\x0a\x03abc", b"\x0a\x01z", b"\x0a\x05hello"]

    # hooks ---------------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """The capabilities the format declares."""
        return get_format(self.format_name).capabilities

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        """Return ``data`` (a file holding ``records``) with every stored checksum changed."""
        raise NotImplementedError

    def encode(self, records: list[bytes]) -> bytes:
        """Return the bytes of a file holding ``records``."""
        buffer = io.BytesIO()
        with rk.open(buffer, "w", format=self.format_name, **self.options) as writer:
            writer.write_many(records)
        return buffer.getvalue()

    def record_boundaries(self, records: list[bytes]) -> set[int]:
        """Return the file sizes at which a sequential file ends exactly after a record."""
        return {len(self.encode(records[:k])) for k in range(len(records) + 1)}

    def sample_records(self, count: int, seed: int = 0) -> list[bytes]:
        """Return ``count`` records of random content and length (empty ones if the format allows)."""
        rng = random.Random(seed)
        low = 0 if self.capabilities.empty_records else 1
        return [rng.randbytes(rng.choice([low, 1, 7, 100, 3000])) or b"" for _ in range(count)]

    # round trips ---------------------------------------------------------------------------------

    @pytest.mark.parametrize("count", [0, 1, 1000])
    def test_round_trip(self, tmp_path: Path, count: int) -> None:
        """Records written are read back identically, by iteration and by random access."""
        records = self.sample_records(count)
        path = tmp_path / f"data{self.suffix}"
        with rk.open(path, "w") as writer:
            assert writer.write_many(records) == count
        with rk.open(path) as reader:
            assert reader.format == self.format_name
            assert list(reader) == records
            if reader.supports_random_access:
                assert len(reader) == count
                assert [reader[i] for i in range(count)] == records
                order = list(range(count))
                random.Random(1).shuffle(order)
                assert reader.read(order) == [records[i] for i in order]

    def test_empty_record(self, tmp_path: Path) -> None:
        """An empty record survives a round trip, or is refused at write time with a ValueError."""
        path = tmp_path / f"empty{self.suffix}"
        if not self.capabilities.empty_records:
            with pytest.raises(ValueError, match="empty"), rk.open(path, "w") as writer:
                writer.write(b"")
            assert not path.exists()
            return
        records = [b"", b"x", b""]
        with rk.open(path, "w") as writer:
            writer.write_many(records)
        with rk.open(path) as reader:
            assert list(reader) == records
            if reader.supports_random_access:
                assert reader[-1] == b""

    def test_record_over_16_mib(self, tmp_path: Path) -> None:
        """A record larger than 16 MiB round trips."""
        big = random.Random(2).randbytes((16 << 20) + 3)
        records = [b"\x0a\x01a", big, b"\x0a\x01b"]
        path = tmp_path / f"big{self.suffix}"
        with rk.open(path, "w") as writer:
            writer.write_many(records)
        with rk.open(path) as reader:
            assert [len(r) for r in reader] == [len(r) for r in records]
            if reader.supports_random_access:
                assert reader[1] == big
            else:
                assert list(reader)[1] == big

    def test_what_is_written_is_counted(self, tmp_path: Path) -> None:
        """A writer counts every record, one by one and in batches; a dataset of shards of the format
        rotates at ``max_records``, its manifest holds the true counts, and it reads back whole through
        ``recordkit.open(directory)`` and ``recordkit.data.Dataset(directory)``."""
        from recordkit.data import Dataset

        records = self.sample_records(10, seed=3)
        path = tmp_path / f"counted{self.suffix}"
        with rk.open(path, "w", **self.options) as writer:
            writer.write(records[0])
            assert writer.count == 1
            assert writer.write_many(records[1:]) == len(records) - 1
            assert writer.count == len(records)
        out = tmp_path / "dataset"
        with rk.ShardWriter(
            str(out / f"part-{{shard:05d}}{self.suffix}"), max_records=4, **self.options
        ) as shards:
            assert shards.write_many(records) == len(records)
            assert shards.count == len(records)
        manifest = shards.manifest
        assert manifest is not None
        assert manifest.format == self.format_name
        assert [shard.records for shard in manifest.shards] == [4, 4, 2]
        with rk.open(out) as reader:
            assert list(reader) == records
            if reader.supports_random_access:
                assert len(reader) == len(records)
        assert list(Dataset(str(out))) == records

    # damaged input -------------------------------------------------------------------------------

    def test_every_bit_flip(self) -> None:
        """A flipped bit raises a recordkit error (for checksummed formats: always) and nothing else."""
        data = self.encode(self.small_records)
        for position in range(len(data)):
            for bit in range(8):
                damaged = bytearray(data)
                damaged[position] ^= 1 << bit
                try:
                    records = _read_everything(bytes(damaged), self.format_name, **self.options)
                except RecordKitError:
                    continue
                if not self.capabilities.checksums:
                    continue
                if self.flips_always_detected or records != self.small_records:
                    pytest.fail(f"flipping bit {bit} of byte {position} went unnoticed")

    def test_every_cut_point(self) -> None:
        """A file cut short raises a CorruptRecordError, or ends cleanly on a record boundary."""
        data = self.encode(self.small_records)
        boundaries = self.record_boundaries(self.small_records) if self.sequential else set()
        for cut in range(len(data)):
            if cut in boundaries:
                records = _read_everything(data[:cut], self.format_name, **self.options)
                assert records == self.small_records[: len(records)]
                continue
            with pytest.raises(CorruptRecordError) as caught:
                _read_everything(data[:cut], self.format_name, **self.options)
            assert isinstance(caught.value, self.truncation_error), (cut, caught.value)

    def test_check_crc_false_verifies_nothing(self) -> None:
        """With check_crc=False damaged checksums are ignored; with the default they are not."""
        if not self.capabilities.checksums:
            pytest.skip(f"{self.format_name} has no checksums")
        data = self.damage_checksums(self.encode(self.small_records), self.small_records)
        options = self.options
        assert (
            _read_everything(data, self.format_name, check_crc=False, **options)
            == self.small_records
        )
        with pytest.raises(rk.ChecksumError):
            _read_everything(data, self.format_name, **options)

    # sources -------------------------------------------------------------------------------------

    def test_non_seekable_stream(self) -> None:
        """A stream that cannot seek is read in order; random access says why it cannot."""
        records = self.sample_records(50)
        stream = NoSeekBytesIO(self.encode(records))
        with rk.open(stream, format=self.format_name, **self.options) as reader:
            assert not reader.supports_random_access
            with pytest.raises(UnsupportedOperationError):
                len(reader)
            with pytest.raises(UnsupportedOperationError):
                reader[0]
            assert list(reader) == records

    def test_closing_leaves_a_callers_file_open(self, tmp_path: Path) -> None:
        """Closing a reader closes what recordkit opened and leaves the caller's file open."""
        path = tmp_path / f"data{self.suffix}"
        with rk.open(path, "w") as writer:
            writer.write_many(self.small_records)
        with open(path, "rb") as file:
            with rk.open(file, format=self.format_name) as reader:
                assert list(reader) == self.small_records
            assert not file.closed
        fd_dir = "/proc/self/fd"
        if not os.path.isdir(fd_dir):
            return
        before = len(os.listdir(fd_dir))
        reader = rk.open(path)
        assert list(reader) == self.small_records
        reader.close()
        assert len(os.listdir(fd_dir)) == before
