"""recordkit.datasets.plan_reads / read_range: the read plan of distributed engines (Ray, Dask).

The plan names each file's format and compression as ``recordkit.open`` finds them (suffix, else content),
refuses sources that mix kinds as ``recordkit.open`` does, and knows each file's record count, so that a
part of a file tells its share of the file's bytes.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

import recordkit as rk
from recordkit.datasets import ReadRange, plan_reads, read_range


def _write(path: Path, records: list[bytes], **options: object) -> Path:
    with rk.open(path, "w", **options) as writer:
        for record in records:
            writer.write(record)
    return path


def _examples(n: int, base: int = 0) -> list[bytes]:
    return [rk.encode_example({"id": base + i}) for i in range(n)]


def _ofrecords(n: int, base: int = 0) -> list[bytes]:
    return [rk.encode_ofrecord({"id": base + i}) for i in range(n)]


def test_sources_mixing_formats_are_refused_as_open_refuses_them(tmp_path: Path) -> None:
    tf = _write(tmp_path / "a.tfrecord", _examples(3))
    of = _write(tmp_path / "b.ofrecord", _ofrecords(3))
    with pytest.raises(rk.UnknownFormatError, match="mix formats") as opened:
        rk.open([str(tf), str(of)])
    with pytest.raises(type(opened.value), match="mix formats"):
        plan_reads([str(tf), str(of)])
    with pytest.raises(type(opened.value), match="mix formats"):
        plan_reads(str(tmp_path))  # a directory holding both


def test_sources_mixing_compressions_are_refused_as_open_refuses_them(tmp_path: Path) -> None:
    plain = _write(tmp_path / "a.tfrecord", _examples(3))
    packed = _write(tmp_path / "b.tfrecord.gz", _examples(3))
    with pytest.raises(rk.UnknownFormatError):
        rk.open([str(plain), str(packed)])
    with pytest.raises(rk.UnknownFormatError, match="mix formats or compressions"):
        plan_reads([str(plain), str(packed)])


def test_the_plan_names_the_format_and_compression_open_finds(tmp_path: Path) -> None:
    gz = _write(tmp_path / "a.tfrecord.gz", _examples(4))
    (item,) = plan_reads(str(gz))
    with rk.open(gz) as reader:
        assert (
            (item.format, item.compression)
            == (reader.format, reader.compression)
            == (
                "tfrecord",
                "gzip",
            )
        )
    # OneFlow's part files have no suffix: their content tells.
    parts = [
        _write(tmp_path / f"part-{k}", _ofrecords(5, 5 * k), format="ofrecord") for k in (0, 1)
    ]
    planned = plan_reads([str(p) for p in parts])
    assert [(r.format, r.compression) for r in planned] == [("ofrecord", "")] * 2
    assert [rec for r in planned for chunk in read_range(r) for rec in chunk] == _ofrecords(10)


def test_a_suffixless_ffrecord_file_is_counted_and_split(tmp_path: Path) -> None:
    records = [bytes([i]) * (i + 1) for i in range(25)]
    path = _write(tmp_path / "shard", records, format="ffrecord")
    planned = plan_reads(str(path), records_per_range=10)
    assert [(r.format, r.start, r.stop) for r in planned] == [
        ("ffrecord", 0, 10),
        ("ffrecord", 10, 20),
        ("ffrecord", 20, 25),
    ]
    assert [rec for r in planned for chunk in read_range(r) for rec in chunk] == records


def test_a_range_knows_its_share_of_its_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.ffr", _examples(100))
    first, second = plan_reads(str(path), records_per_range=25)[:2]
    assert first.file_records == second.file_records == 100
    assert first.share() == second.share() == 0.25
    whole = plan_reads(str(path))
    assert len(whole) == 1
    assert whole[0].share() == 1.0
    assert ReadRange(str(path), start=0, stop=10).share() is None  # the file's count is not known


def test_ray_estimates_the_first_part_of_a_file_at_its_share(tmp_path: Path) -> None:
    pytest.importorskip("ray.data")
    pytest.importorskip("pyarrow")
    rkray = importlib.import_module("recordkit.integrations.ray")
    path = _write(tmp_path / "a.ffr", _examples(100))
    size = os.path.getsize(path)
    planned = plan_reads(str(path), records_per_range=25)
    estimates = [rkray._range_bytes(item) for item in planned]
    assert len(estimates) == 4
    assert all(e is not None and abs(e - size / 4) <= 1 for e in estimates), estimates
    assert rkray._range_bytes(plan_reads(str(path))[0]) == size


def test_ray_and_dask_blocks_take_the_payload_from_the_opened_file_and_never_mix_kinds(
    tmp_path: Path,
) -> None:
    from recordkit.integrations._reading import blocks as read_blocks

    oneflow = _write(tmp_path / "part-0", _ofrecords(3), format="ofrecord")  # no suffix
    tf = _write(tmp_path / "b.tfrecord", _examples(2))
    ranges = [ReadRange(str(oneflow)), ReadRange(str(tf)), ReadRange(str(oneflow))]
    blocks = list(read_blocks(ranges, check_crc=True))
    assert blocks == [
        ("ofrecord", _ofrecords(3)),
        ("example", _examples(2)),
        ("ofrecord", _ofrecords(3)),
    ]
    pytest.importorskip("ray.data")
    pytest.importorskip("pyarrow")
    rkray = importlib.import_module("recordkit.integrations.ray")
    spec = {"id": rk.FixedLen((), "int64")}
    table = rkray._parsed_table(blocks[0][1], spec, blocks[0][0])
    assert table.column("id").to_pylist() == [0, 1, 2]
