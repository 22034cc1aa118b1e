"""A format registered with register_format() works wherever a built-in one does.

The format is defined here: each record is ``b"LR"``, a 4-byte little-endian length, the payload and the
payload's CRC-32. It builds on the public frame-reader machinery, declares its capabilities and a resync
hook, and nothing else in recordkit is told about it.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest
from _cli import run_cli
from _markdown import python_blocks

import recordkit as rk
from recordkit import formats, recover
from recordkit.data import Dataset
from recordkit.errors import ChecksumError, CorruptRecordError, DataLossWarning, RecordKitWarning
from recordkit.formats.base import (
    Capabilities,
    FrameWriter,
    Offsets,
    RecordFormat,
    Source,
)
from recordkit.formats.resync import Resync
from recordkit.formats.sequential import SequentialFrameReader
from recordkit.testing import FormatConformance

MAGIC = b"LR"
_HEADER = struct.Struct("<2sI")
_CRC = struct.Struct("<I")


def frame(payload: bytes) -> bytes:
    """One framed record."""
    return _HEADER.pack(MAGIC, len(payload)) + payload + _CRC.pack(zlib.crc32(payload))


class LRecReader(SequentialFrameReader):
    HEADER: ClassVar[int] = 6
    TRAILER: ClassVar[int] = 4

    def parse_header(self, header: bytes, index: int, offset: int) -> int:
        magic, length = _HEADER.unpack(header)
        if magic != MAGIC:
            raise CorruptRecordError("no record magic", path=self.path, index=index, offset=offset)
        return int(length)

    def check_payload(self, data: bytes, trailer: bytes, index: int, offset: int) -> None:
        stored, actual = _CRC.unpack(trailer)[0], zlib.crc32(data)
        if stored != actual:
            raise ChecksumError(
                "payload checksum mismatch",
                path=self.path,
                index=index,
                offset=offset,
                expected=stored,
                actual=actual,
            )


class LRecWriter(FrameWriter):
    def write(self, data: bytes) -> None:
        self.fileobj.write(frame(data))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class LRecResync(Resync):
    def frame(self, pos: int) -> tuple[int, int, int] | None:
        buffer, size = self.buffer, self.size
        if size - pos < 10 or buffer[pos : pos + 2] != MAGIC:
            return None
        length = _HEADER.unpack_from(buffer, pos)[1]
        end = pos + 10 + length
        if end > size or _CRC.unpack_from(buffer, end - 4)[0] != zlib.crc32(
            buffer[pos + 6 : end - 4]
        ):
            return None
        return pos + 6, end - 4, end

    def next_start(self, pos: int) -> int:
        while True:
            pos = self.buffer.find(MAGIC, pos)
            if pos < 0:
                return self.size
            if self.frame(pos) is not None:
                return pos
            pos += 1


class LRecFormat(RecordFormat):
    name: ClassVar[str] = "lrec"
    extensions: ClassVar[tuple[str, ...]] = (".lrec",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        random_access=True, checksums=True, empty_records=True, sidecar_index=True
    )
    overhead: ClassVar[int] = 10

    def sniff(self, head: bytes, size: int | None) -> bool | int:
        if len(head) < 6 or head[:2] != MAGIC:
            return False
        return size is None or 10 + _HEADER.unpack_from(head)[1] <= size

    def reader(
        self,
        source: Source,
        *,
        check_crc: bool = True,
        lenient: bool = False,
        compression: str = "",
        offsets: Offsets | None = None,
    ) -> LRecReader:
        return LRecReader(source, check_crc=check_crc, lenient=lenient, offsets=offsets)

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> LRecWriter:
        return LRecWriter(fileobj)

    def resync(self, buffer: Any, size: int) -> Resync:
        return LRecResync(buffer, size)


@pytest.fixture(autouse=True)
def lrec() -> Iterator[RecordFormat]:
    """Register the format for one test and restore the registry afterwards."""
    saved = dict(formats._REGISTRY)
    formats.register_format(LRecFormat)
    try:
        yield formats.get_format("lrec")
    finally:
        formats._REGISTRY.clear()
        formats._REGISTRY.update(saved)


RECORDS = [rk.encode_example({"i": [i], "name": [f"r{i}".encode()]}) for i in range(10)]


def _write(path: Any, records: list[bytes] = RECORDS, **options: Any) -> None:
    with rk.open(path, "w", **options) as writer:
        writer.write_many(records)


def test_the_registry_is_restored():
    assert "lrec" in formats.available_formats()
    assert formats.format_for_path("x.lrec")[0].name == "lrec"


def test_open_by_suffix_and_by_sniffing(tmp_path):
    path = tmp_path / "data.lrec"
    _write(path)
    assert path.read_bytes() == b"".join(frame(r) for r in RECORDS)
    with rk.open(path) as reader:
        assert reader.format == "lrec"
        assert list(reader) == RECORDS
        assert len(reader) == len(RECORDS)
        assert reader[7] == RECORDS[7]
    unnamed = tmp_path / "data.bin"
    unnamed.write_bytes(path.read_bytes())
    assert formats.detect_format(unnamed.read_bytes()[:64], unnamed.stat().st_size) == "lrec"
    with rk.open(unnamed) as reader:
        assert reader.format == "lrec"
        assert reader.read([9, 0]) == [RECORDS[9], RECORDS[0]]
    _write(tmp_path / "other.bin", format="lrec")
    assert (tmp_path / "other.bin").read_bytes() == path.read_bytes()


def test_dataset_reads_it(tmp_path):
    _write(tmp_path / "a.lrec", RECORDS[:4])
    _write(tmp_path / "b.lrec", RECORDS[4:])
    ds = Dataset(sorted(str(p) for p in tmp_path.glob("*.lrec")))
    assert list(ds) == RECORDS
    assert sorted(Dataset(str(tmp_path)).shuffle(8)) == sorted(RECORDS)


def test_shard_writer_and_its_manifest(tmp_path):
    out = tmp_path / "out"
    with rk.ShardWriter(
        out / "part-{shard:02d}.lrec", max_bytes=3 * (len(RECORDS[0]) + 10)
    ) as writer:
        writer.write_many(RECORDS)
    manifest = writer.manifest
    assert manifest is not None
    assert manifest.format == "lrec"
    # max_bytes counts the framing the format declares: three records of this size per shard.
    assert [shard.records for shard in manifest.shards] == [3, 3, 3, 1]
    # A format with a sidecar index gets one per shard, checked when read.
    assert all(shard.index is not None for shard in manifest.shards)
    with rk.open(out) as reader:
        assert list(reader) == RECORDS
        assert reader[5] == RECORDS[5]


def test_cli_convert_to_and_from_it_then_verify_and_info(capsys, tmp_path):
    source = tmp_path / "source.tfrecord"
    _write(source)
    assert run_cli(capsys, "convert", source, tmp_path / "copy.lrec").code == 0
    with rk.open(tmp_path / "copy.lrec") as reader:
        assert list(reader) == RECORDS
    sharded = tmp_path / "sharded"
    assert run_cli(capsys, "convert", source, sharded, "--to", "lrec", "--shards", "2").code == 0
    names = sorted(p.name for p in sharded.iterdir() if p.suffix == ".lrec")
    assert names == ["part-00000-of-00002.lrec", "part-00001-of-00002.lrec"]
    with rk.open(sharded) as reader:
        assert list(reader) == RECORDS
    assert run_cli(capsys, "convert", tmp_path / "copy.lrec", tmp_path / "back.tfrecord").code == 0
    with rk.open(tmp_path / "back.tfrecord") as reader:
        assert list(reader) == RECORDS
    result = run_cli(capsys, "verify", tmp_path / "copy.lrec")
    assert result.code == 0, result.err
    result = run_cli(capsys, "info", tmp_path / "copy.lrec")
    assert result.code == 0, result.err
    assert "lrec" in result.out
    assert "10" in result.out
    result = run_cli(capsys, "index", tmp_path / "copy.lrec")
    assert result.code == 0, result.err
    damaged = bytearray((tmp_path / "copy.lrec").read_bytes())
    damaged[20] ^= 0xFF
    (tmp_path / "damaged.lrec").write_bytes(bytes(damaged))
    assert run_cli(capsys, "verify", tmp_path / "damaged.lrec").code != 0


def test_salvage_of_a_damaged_file(tmp_path):
    data = bytearray(b"".join(frame(r) for r in RECORDS))
    second = len(frame(RECORDS[0]))
    data[second + 8] ^= 0x01  # inside the payload of record 1
    src = tmp_path / "damaged.lrec"
    src.write_bytes(bytes(data))
    with pytest.raises(ChecksumError):
        list(rk.open(src))
    with pytest.warns(DataLossWarning):
        report = recover.salvage(src, tmp_path / "fixed.lrec")
    assert report.format == "lrec"
    assert report.records == len(RECORDS) - 1
    (skipped,) = report.skipped
    assert (skipped.start, skipped.end, skipped.index) == (second, 2 * second, 1)
    with rk.open(tmp_path / "fixed.lrec") as reader:
        assert list(reader) == RECORDS[:1] + RECORDS[2:]


class MinimalWriter(FrameWriter):
    """A writer with only the documented abstract methods: it never touches ``count``."""

    def write(self, data: bytes) -> None:
        self.fileobj.write(frame(data))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class MinimalFormat(LRecFormat):
    name: ClassVar[str] = "lrecmin"
    extensions: ClassVar[tuple[str, ...]] = (".lrm",)
    sniff_priority: ClassVar[int] = -1  # the same bytes as lrec: lrec wins a sniff

    def writer(
        self,
        fileobj: IO[bytes],
        *,
        compression: str = "",
        level: int | None = None,
        n: int | None = None,
    ) -> MinimalWriter:  # type: ignore[override]
        return MinimalWriter(fileobj)


@pytest.fixture
def minimal() -> None:
    """Also register the format whose writer never counts (the autouse fixture restores the registry)."""
    formats.register_format(MinimalFormat)


def test_a_writer_that_does_not_count_is_counted(tmp_path, minimal):
    """What a writer implementing only write/flush/close writes is counted: shards rotate at
    max_records, the manifest holds the true counts, and the directory reads back whole."""
    with rk.open(tmp_path / "one.lrm", "w") as single:
        single.write_many(RECORDS[:3])
        single.write(RECORDS[3])
        assert single.count == 4
    out = tmp_path / "out"
    with rk.ShardWriter(out / "part-{shard:02d}.lrm", max_records=4) as writer:
        writer.write_many(RECORDS)
    manifest = writer.manifest
    assert manifest is not None
    assert [shard.records for shard in manifest.shards] == [4, 4, 2]
    assert manifest.records == len(RECORDS)
    with rk.open(out) as reader:
        assert len(reader) == len(RECORDS)
        assert list(reader) == RECORDS
    assert list(Dataset(str(out))) == RECORDS


def test_frame_writer_count_is_kept_by_the_base_class(minimal):
    """A writer cannot set ``count``; the base class counts every record that ``write`` or
    ``write_many`` accepted, once, however the two call each other."""
    buffer = io.BytesIO()
    writer = MinimalWriter(buffer)
    writer.write(b"a")
    assert writer.write_many([b"b", b"c"]) == 2
    assert writer.count == 3
    with pytest.raises(AttributeError):
        writer.count = 7  # type: ignore[misc]

    class Batching(MinimalWriter):
        def write(self, data: bytes) -> None:
            self.write_many([data])

        def write_many(self, records: Iterable[bytes]) -> int:
            n = 0
            for record in records:
                self.fileobj.write(frame(record))
                n += 1
            return n

    batching = Batching(io.BytesIO())
    batching.write(b"a")
    batching.write_many([b"b", b"c", b"d"])
    assert batching.count == 4

    class Refusing(MinimalWriter):
        def write(self, data: bytes) -> None:
            if not data:
                raise ValueError("empty")
            super().write(data)

    refusing = Refusing(io.BytesIO())
    with pytest.raises(ValueError):
        refusing.write(b"")
    refusing.write(b"x")
    assert refusing.count == 1


class TestConformance(FormatConformance):
    format_name = "lrec"
    suffix = ".lrec"

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        damaged = bytearray(data)
        pos = 0
        for record in records:
            end = pos + 10 + len(record)
            damaged[end - 4 : end] = bytes(b ^ 0xFF for b in damaged[end - 4 : end])
            pos = end
        return bytes(damaged)


class TestMinimalWriterConformance(FormatConformance):
    """The suite on a writer that implements only write, flush and close."""

    format_name = "lrecmin"
    suffix = ".lrm"

    @pytest.fixture(autouse=True)
    def _registered(self, minimal: None) -> None:
        """Register the format for each test of the suite."""

    def damage_checksums(self, data: bytes, records: list[bytes]) -> bytes:
        return TestConformance.damage_checksums(self, data, records)  # type: ignore[arg-type]


PLUGINS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "formats" / "plugins.md"


def _install_fake_distribution(
    site: Path, name: str, entry_points: str, modules: dict[str, str]
) -> None:
    """Lay out an installed distribution in ``site``, as pip would: its modules and a dist-info folder
    with METADATA and entry_points.txt."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    for module, code in modules.items():
        (site / f"{module}.py").write_text(code, encoding="utf-8")


def _recordkit_command(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "recordkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_installed_plugin_is_found_through_its_entry_point(tmp_path):
    """The plugin of docs/formats/plugins.md, installed as a distribution declaring the entry point,
    is loaded by the recordkit command: info, convert (both ways) and verify work on its files; a broken
    plugin beside it is named in a warning and left out."""
    site = tmp_path / "site"
    plugin = python_blocks(PLUGINS_PAGE)[0]
    _install_fake_distribution(
        site,
        "fake_plugin",
        "[recordkit.formats]\nlrec = lrec_plugin:LRecFormat\n",
        {"lrec_plugin": plugin},
    )
    _install_fake_distribution(
        site,
        "broken_plugin",
        "[recordkit.formats]\nbroken = broken_plugin:Missing\n",
        {"broken_plugin": "raise RuntimeError('this plugin is broken')\n"},
    )
    data = tmp_path / "data.lrec"
    _write(data)  # the test's own registration of the same framing
    result = _recordkit_command(site, tmp_path, "info", "data.lrec")
    assert result.returncode == 0, result.stderr
    assert "lrec" in result.stdout
    assert "10" in result.stdout
    assert "'broken'" in result.stderr
    assert "this plugin is broken" in result.stderr
    result = _recordkit_command(site, tmp_path, "verify", "data.lrec")
    assert result.returncode == 0, result.stderr
    result = _recordkit_command(site, tmp_path, "convert", "data.lrec", "copy.tfrecord")
    assert result.returncode == 0, result.stderr
    with rk.open(tmp_path / "copy.tfrecord") as reader:
        assert list(reader) == RECORDS
    result = _recordkit_command(site, tmp_path, "convert", "copy.tfrecord", "back.lrec")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "back.lrec").read_bytes() == data.read_bytes()
    # By content alone: a name no format claims.
    (tmp_path / "unnamed.bin").write_bytes(data.read_bytes())
    result = _recordkit_command(site, tmp_path, "info", "unnamed.bin")
    assert result.returncode == 0, result.stderr
    assert "lrec" in result.stdout
    # Without the distribution on the path, the command does not know the format.
    result = _recordkit_command(tmp_path / "nowhere", tmp_path, "info", "data.lrec")
    assert result.returncode != 0


def test_entry_points_are_loaded_lazily_and_a_broken_one_warns(monkeypatch):
    """The registry loads the group once, on a name it does not know; a broken entry point warns."""
    from importlib.metadata import EntryPoint

    loaded: list[str] = []

    class Fake(EntryPoint):
        def load(self) -> Any:
            loaded.append(self.name)
            return super().load()

    fakes = [
        Fake("lrec2", f"{__name__}:MinimalFormat", formats.ENTRY_POINT_GROUP),
        Fake("nothing", "builtins:len", formats.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(formats, "_plugins_loaded", False)
    monkeypatch.setattr(
        "importlib.metadata.entry_points",
        lambda group: fakes if group == formats.ENTRY_POINT_GROUP else [],
    )
    assert formats.get_format("tfrecord").name == "tfrecord"
    assert loaded == []  # a known name loads nothing
    with pytest.warns(RecordKitWarning, match="'nothing'") as caught:
        assert formats.get_format("lrecmin").name == "lrecmin"
    assert loaded == ["lrec2", "nothing"]
    assert caught[0].filename == __file__
    assert "lrecmin" in formats.available_formats()
    assert loaded == ["lrec2", "nothing"]  # once


def test_sniffers_that_need_more_bytes_are_asked_again_by_priority(tmp_path):
    """A sniffer's request for more bytes is answered in sniff_priority order, as its first try was."""
    wanted = 1 << 17  # more than the first bytes recordkit reads to sniff

    def needs_more(self: Any, head: bytes, size: int | None) -> bool | int:
        if not head.startswith(b"BIGHEAD"):
            return False
        return True if len(head) >= wanted else wanted

    ranked = {
        name: type(
            f"Big{name}",
            (LRecFormat,),
            {
                "name": name,
                "extensions": (f".{name}",),
                "sniff_priority": priority,
                "sniff": needs_more,
            },
        )
        for name, priority in (("aaa", -1), ("zzz", 5))
    }
    for cls in ranked.values():
        formats.register_format(cls)
    path = tmp_path / "unnamed"
    path.write_bytes(b"BIGHEAD" + bytes(wanted))
    head = path.read_bytes()[:100]
    assert formats.detect_format(head, path.stat().st_size) is None  # no way to ask for more
    data = path.read_bytes()
    assert formats.detect_format(head, len(data), more=lambda n: data[:n]) == "zzz"
    assert formats.detect_format(head, len(data), more=lambda n: data[:n], limit=wanted - 1) is None
    opened = rk.io.sources.open_source(path)
    try:
        assert rk.io.reading_format(opened.source) == ("zzz", "")
    finally:
        opened.close()


def test_shard_patterns_use_the_shard_writer_fields():
    """Every format names its shards with ShardWriter's fields, {shard} and {num_shards}."""
    for name in formats.available_formats():
        pattern = formats.get_format(name).shard_pattern
        assert pattern.format(shard=3, num_shards=7) != pattern.format(shard=4, num_shards=7), name
    assert formats.get_format("lrec").shard_pattern == "part-{shard:05d}-of-{num_shards:05d}.lrec"
