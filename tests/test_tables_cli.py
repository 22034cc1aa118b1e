"""``recordkit convert`` to and from Parquet, with pyarrow.parquet reading and writing the tables."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _cli import run_cli

import recordkit as rk

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def source_table():
    return pa.table(
        {
            "id": pa.array([1, 2, 3, -4], pa.int64()),
            "score": pa.array([0.5, 1.25, -2.0, float("nan")], pa.float32()),
            "raw": pa.array([b"a", b"", b"\xff\x00", b"z" * 200], pa.binary()),
            "tokens": pa.array([[1, 2], [], [3, 4, 5], [6, 7]], pa.list_(pa.int64())),
            "emb": pa.array([[0.5, 1.5], [2.0, 3.0], [], [4.0, 5.0]], pa.list_(pa.float32())),
            "tags": pa.array([[b"x", b"y"], [b"z", b""], [], [b"w", b"v"]], pa.list_(pa.binary())),
        }
    )


def read_records(path, **options):
    with rk.open(path, **options) as reader:
        return list(reader)


def test_parquet_to_tfrecord_writes_encode_examples_of_the_rows(capsys, tmp_path) -> None:
    table = source_table()
    pq.write_table(table, tmp_path / "data.parquet", row_group_size=3)
    result = run_cli(capsys, "convert", tmp_path / "data.parquet", tmp_path / "out.tfrecord")
    assert result.code == 0, result.err
    assert result.out.strip() == f"wrote 4 records to {tmp_path / 'out.tfrecord'}"
    records = read_records(tmp_path / "out.tfrecord")
    assert records == rk.encode_examples(table)
    assert rk.decode_example(records[2])["tokens"].tolist() == [3, 4, 5]


def test_tfrecord_to_parquet_to_tfrecord_round_trips(capsys, tmp_path) -> None:
    table = source_table()
    pq.write_table(table, tmp_path / "a.parquet")
    assert run_cli(capsys, "convert", tmp_path / "a.parquet", tmp_path / "a.tfrecord").code == 0
    result = run_cli(capsys, "convert", tmp_path / "a.tfrecord", tmp_path / "b.parquet")
    assert result.code == 0, result.err
    assert result.out.strip() == f"wrote 4 rows to {tmp_path / 'b.parquet'}"
    back = pq.read_table(tmp_path / "b.parquet")
    # Features come out in name order, each with the type it went in with (Parquet names list items
    # "element", which the cast undoes).
    expected = table.select(sorted(table.column_names))
    assert back.schema == expected.schema
    back = back.cast(expected.schema)
    np.testing.assert_array_equal(back["score"].to_numpy(), expected["score"].to_numpy())  # NaN too
    assert back.drop_columns(["score"]).equals(expected.drop_columns(["score"]))
    assert run_cli(capsys, "convert", tmp_path / "b.parquet", tmp_path / "c.tfrecord").code == 0
    assert read_records(tmp_path / "c.tfrecord") == rk.encode_examples(back)


def test_records_to_parquet_types_and_missing_features(capsys, tmp_path) -> None:
    records = [
        rk.encode_example({"label": 1, "name": "a", "v": [1.0, 2.0], "maybe": 7}),
        rk.encode_example({"label": 2, "name": "b", "v": [3.0]}),
        rk.encode_example({"label": 3, "name": "c", "v": np.zeros(0, np.float32), "maybe": 9}),
    ]
    with rk.open(tmp_path / "in.tfrecord", "w") as writer:
        for record in records:
            writer.write(record)
    assert run_cli(capsys, "convert", tmp_path / "in.tfrecord", tmp_path / "out.parquet").code == 0
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema == pa.schema(
        [
            ("label", pa.int64()),
            ("maybe", pa.int64()),
            ("name", pa.binary()),
            ("v", pa.list_(pa.float32())),
        ]
    )
    assert table.to_pydict() == {
        "label": [1, 2, 3],
        "maybe": [7, None, 9],
        "name": [b"a", b"b", b"c"],
        "v": [[1.0, 2.0], [3.0], []],
    }


def test_ofrecords_to_parquet_and_parquet_to_ofrecord_shards(capsys, tmp_path) -> None:
    table = pa.table({"x": pa.array([0.1, 0.2, 0.3]), "n": pa.array([1, 2, 3], pa.int32())})
    pq.write_table(table, tmp_path / "t.parquet")
    result = run_cli(
        capsys,
        "convert",
        tmp_path / "t.parquet",
        tmp_path / "shards",
        "--to",
        "ofrecord",
        "--shards",
        "2",
    )
    assert result.code == 0, result.err
    records = read_records(tmp_path / "shards")
    assert records == rk.encode_ofrecords(table)
    assert rk.decode_ofrecord(records[0])["x"].dtype == np.float64
    assert run_cli(capsys, "convert", tmp_path / "shards", tmp_path / "back.parquet").code == 0
    back = pq.read_table(tmp_path / "back.parquet")
    assert back.schema == pa.schema([("n", pa.int32()), ("x", pa.float64())])
    assert back.equals(table.select(["n", "x"]))


def test_float64_needs_lossy_for_an_example(capsys, tmp_path) -> None:
    pq.write_table(pa.table({"x": [0.5, 0.1]}), tmp_path / "f.parquet")
    result = run_cli(capsys, "convert", tmp_path / "f.parquet", tmp_path / "f.tfrecord")
    assert result.code == 2
    assert "column 'x'" in result.err
    assert "--lossy" in result.err
    assert not os.path.exists(tmp_path / "f.tfrecord")
    result = run_cli(capsys, "convert", tmp_path / "f.parquet", tmp_path / "f.tfrecord", "--lossy")
    assert result.code == 0, result.err
    values = [rk.decode_example(r)["x"][0] for r in read_records(tmp_path / "f.tfrecord")]
    assert values == [np.float32(0.5), np.float32(0.1)]
    # Exactly representable float64 values need no --lossy.
    pq.write_table(pa.table({"x": [0.5, -2.0]}), tmp_path / "g.parquet")
    assert run_cli(capsys, "convert", tmp_path / "g.parquet", tmp_path / "g.tfrecord").code == 0


def test_raw_payloads_become_one_binary_column(capsys, tmp_path) -> None:
    records = [b"\xff\xfe not a message", b"\x00\x01\x02", b"\x80"]
    with rk.open(tmp_path / "raw.tfrecord", "w") as writer:
        for record in records:
            writer.write(record)
    assert run_cli(capsys, "convert", tmp_path / "raw.tfrecord", tmp_path / "raw.parquet").code == 0
    assert pq.read_table(tmp_path / "raw.parquet").to_pydict() == {"record": records}


def test_unsupported_columns_and_options_leave_no_output(capsys, tmp_path) -> None:
    pq.write_table(pa.table({"when": pa.array([1, 2], pa.timestamp("s"))}), tmp_path / "t.parquet")
    result = run_cli(capsys, "convert", tmp_path / "t.parquet", tmp_path / "t.tfrecord")
    assert result.code == 2
    assert "column 'when'" in result.err
    assert not os.path.exists(tmp_path / "t.tfrecord")
    pq.write_table(source_table(), tmp_path / "s.parquet")
    assert run_cli(capsys, "convert", tmp_path / "s.parquet", tmp_path / "s.tfrecord").code == 0
    result = run_cli(
        capsys, "convert", tmp_path / "s.tfrecord", tmp_path / "p.parquet", "--shards", "2"
    )
    assert result.code == 2
    assert "one file" in result.err
    assert run_cli(capsys, "convert", tmp_path / "s.tfrecord", tmp_path / "p.parquet").code == 0
    result = run_cli(capsys, "convert", tmp_path / "s.tfrecord", tmp_path / "p.parquet")
    assert result.code == 2
    assert "--force" in result.err
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_mixed_list_types_are_refused(capsys, tmp_path) -> None:
    with rk.open(tmp_path / "m.tfrecord", "w") as writer:
        writer.write(rk.encode_example({"x": 1}))
        writer.write(rk.encode_example({"x": 1.5}))
    result = run_cli(capsys, "convert", tmp_path / "m.tfrecord", tmp_path / "m.parquet")
    assert result.code == 2
    assert "feature 'x' holds float_list and int64_list" in result.err
    assert not os.path.exists(tmp_path / "m.parquet")


@pytest.mark.parametrize("dst", ["out.parquet", "out.tfrecord"])
def test_parquet_and_record_inputs_are_not_mixed(capsys, tmp_path, dst) -> None:
    pq.write_table(source_table(), tmp_path / "a.parquet")
    rk.open(tmp_path / "b.tfrecord", "w").close()
    result = run_cli(
        capsys, "convert", tmp_path / "a.parquet", tmp_path / "b.tfrecord", tmp_path / dst
    )
    assert result.code == 2
    assert "cannot be mixed" in result.err
    assert not (tmp_path / dst).exists()


def test_parquet_to_parquet_is_refused(capsys, tmp_path) -> None:
    pq.write_table(source_table(), tmp_path / "a.parquet")
    result = run_cli(capsys, "convert", tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert result.code == 2
    assert "Parquet already" in result.err
